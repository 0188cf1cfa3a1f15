/*
 * cmd-bench.c - `jev bench`: the benchmark of the three decision paths
 * (spec/benchmark.md) through common/bench/runner.h, then a medians table read
 * back from the record it wrote.
 *
 * The model: --model DIR; by default .models/Qwen3.5-0.8B-4bit when it is
 * there, else a synthetic model with the real 0.8B shapes
 * (configs/qwen3.5-0.8b.json, mlx4, seed 1), generated on first use into
 * .models/synth-0.8b-mlx4 - its timings are representative, its answers
 * meaningless, and the record says so.
 * A progress line goes to stderr when it is a terminal.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/bench/runner.h" // defines: jev_bench_run
#include "common/cli-args.h"     // defines: cli_parse_long
#include "common/cli-setup.h"    // defines: cli_setup_arg
#include "commands.h"            // defines: cmd_bench
#include "common/synth/synth.h"  // defines: jev_synth_write

#define REAL_DIR ".models/Qwen3.5-0.8B-4bit"
#define SYNTH_DIR ".models/synth-0.8b-mlx4"
#define SYNTH_CONFIG "configs/qwen3.5-0.8b.json"

static void usage(FILE *f) {
    fprintf(f, "usage: jev bench [--model DIR] [--counts N ...] [--repeats N] [--batch N|all] [--output FILE]\n"
               "                 [--threads N] [--backend cpu|cuda] [--precision exact|fast] [--workload F]\n"
               "                 [--paths LIST] [--step-tokens N] [--dump-inputs DIR]\n\n"
               "  --model DIR        the model (default " REAL_DIR " when present, else a synthetic\n"
               "                     full-size model generated into " SYNTH_DIR ")\n"
               "  --counts N ...     decision counts, increasing (default 1 4 16 64)\n"
               "  --repeats N        measured samples per count and path (default 3)\n"
               "  --batch N|all      shared-path suffixes per forward (default 4)\n"
               "  --paths LIST       measure only these, comma-separated: shared, independent, generate_json\n"
               "                     (default all three; the engine is sized for them alone)\n"
               "  --step-tokens N    tokens per forward slice, the engine's (default: the backend's, 512 on the\n"
               "                     CPU, 1024 on CUDA)\n"
               "  --output FILE      the raw record (default artifacts/benchmark.json)\n"
               "  --threads N        worker threads (default: all cores)\n"
               "  --backend B        cpu (default), cuda or cuda:N (a CUDA build: make CUDA=1)\n"
               "  --precision M      exact (default) or fast; fast also runs exact references in the same run and\n"
               "                     records fast's max probability delta and argmax agreement against them\n"
               "  -v                 the engine's sizes, and the engines the command made, on stderr\n"
               "  --workload F       the workload (default bench/dog-workload.json)\n"
               "  --dump-inputs DIR  write the peers' inputs (docs/bench-inputs.md) and run nothing\n"
               "  --synthetic yes|no say whether --model has seeded random weights (recorded)\n"
               "  --model-id S       the model's name in the record\n"
               "  --git-commit SHA   the commit to record (default: read from .git here; for copies without it)\n"
               "Quick check: jev bench --counts 1 4 --repeats 1 --output artifacts/quick.json\n");
}

static bool exists(const char *path) {
    struct stat sb;
    return stat(path, &sb) == 0;
}

static void progress(void *user, int32_t done, int32_t total, const char *line) {
    (void)user;
    fprintf(stderr, "\r\033[K[%d/%d] %s", done, total, line);
    fflush(stderr);
}

/* ---- the summary ---- */

static int cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of key over the samples (NAN when none is recorded). */
static double median(json_t *samples, const char *key) {
    double v[1000];
    size_t n = 0, i;
    json_t *s;
    json_array_foreach(samples, i, s) {
        json_t *x = json_object_get(s, key);
        if (json_is_number(x) && n < 1000)
            v[n++] = json_number_value(x);
    }
    if (n == 0)
        return NAN;
    qsort(v, n, sizeof v[0], cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

static void summary(const char *path) {
    json_t *rec = NULL;
    struct jev_error err = {0};
    if (jev_bench_load_file(path, &rec, &err) != JEV_OK) {
        fprintf(stderr, "jev bench: reading back %s: %s\n", path, err.msg);
        return;
    }
    printf("%9s  %-13s %10s %10s %10s %10s %5s %5s %9s %8s %6s\n", "decisions", "path", "total ms", "vision", "prefill",
           "scoring", "LM", "vis", "peak MiB", "req/s", "valid");
    size_t i;
    json_t *run;
    json_array_foreach(json_object_get(rec, "runs"), i, run) {
        json_t *s = json_object_get(run, "samples");
        size_t k, valid = 0;
        json_t *x;
        json_array_foreach(s, k, x) valid += json_is_true(json_object_get(x, "valid"));
        printf("%9lld  %-13s %10.1f %10.1f %10.1f %10.1f %5.0f %5.0f %9.1f %8.2f %3zu/%zu\n",
               (long long)json_integer_value(json_object_get(run, "decisions")),
               json_string_value(json_object_get(run, "path")), median(s, "total_ms"), median(s, "vision_ms"),
               median(s, "prefill_ms"), median(s, "scoring_ms"), median(s, "lm_forwards"), median(s, "vision_forwards"),
               median(s, "peak_bytes") / 1048576.0, median(s, "requested_decisions_per_s"), valid, json_array_size(s));
    }
    json_t *a;
    json_array_foreach(json_object_get(rec, "agreement"), i, a) {
        json_t *g = json_object_get(a, "generated_shared_agreement");
        printf("%lld decisions: direct/shared max probability delta %.3g, argmax agreement %.1f%%, generated/shared "
               "agreement %s\n",
               (long long)json_integer_value(json_object_get(a, "decisions")),
               json_number_value(json_object_get(a, "direct_shared_max_prob_delta")),
               100.0 * json_number_value(json_object_get(a, "argmax_agreement")),
               json_is_number(g) ? "set" : "null (no generated output met the schema)");
        json_t *fx = json_object_get(a, "fast_vs_exact"); /* a fast record's: per path, against exact */
        const char *p;
        json_t *e;
        json_object_foreach(fx, p, e) {
            json_t *d = json_object_get(e, "max_prob_delta"), *m = json_object_get(e, "argmax_agreement");
            char delta[32] = "n/a", agree[32] = "n/a"; /* null: nothing to compare (no output met the schema) */
            if (json_is_number(d))
                snprintf(delta, sizeof delta, "%.3g", json_number_value(d));
            if (json_is_number(m))
                snprintf(agree, sizeof agree, "%.1f%%", 100.0 * json_number_value(m));
            printf("  fast vs exact, %s: max probability delta %s, argmax agreement %s\n", p, delta, agree);
        }
    }
    json_decref(rec);
}

/* ---- the command ---- */

/* "shared,independent" -> JEV_BENCH_ONLY_* bits; 1 for an unknown or repeated name or an empty item. */
static int parse_paths(const char *list, unsigned *bits) {
    static const struct {
        const char *name;
        unsigned bit;
    } known[] = {{"generate_json", JEV_BENCH_ONLY_GENERATE},
                 {"independent", JEV_BENCH_ONLY_INDEPENDENT},
                 {"shared", JEV_BENCH_ONLY_SHARED}};
    *bits = 0;
    for (const char *at = list;;) {
        size_t len = strcspn(at, ",");
        unsigned bit = 0;
        for (size_t k = 0; k < sizeof known / sizeof known[0]; k++)
            if (len == strlen(known[k].name) && !strncmp(at, known[k].name, len))
                bit = known[k].bit;
        if (!bit || (*bits & bit)) {
            fprintf(stderr, "jev bench: --paths: '%.*s' is not shared, independent or generate_json (or comes twice)\n",
                    (int)len, at);
            return 1;
        }
        *bits |= bit;
        if (!at[len])
            return 0;
        at += len + 1;
    }
}

int cmd_bench(int argc, char **argv) {
    struct jev_bench_opts o = jev_bench_default_opts();
    bool counts_given = false;
    long v = 0;
    /* --model, --threads, --backend and -v as every command takes them; the runner opens the model */
    struct cli_setup cs;
    cli_setup_init(&cs, "bench");
    cs.backend = o.backend;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *val = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, got = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((got = cli_setup_arg(&cs, a, val)) == CLI_ARG_FLAG) {
            continue;
        } else if (got != CLI_ARG_NOT_MINE) {
            bad = got == CLI_ARG_MISSING ? 2 : got == CLI_ARG_BAD ? 1 : 0;
        } else if (!val) {
            bad = 2;
        } else if (!strcmp(a, "--counts")) {
            o.n_counts = 0;
            counts_given = true;
            while (i + 1 < argc && strncmp(argv[i + 1], "--", 2) != 0) {
                if (o.n_counts >= JEV_BENCH_MAX_COUNTS || cli_parse_long(argv[i + 1], 1, 4096, &v)) {
                    fprintf(stderr, "jev bench: bad decision count '%s' (1..4096, at most %d counts)\n", argv[i + 1],
                            JEV_BENCH_MAX_COUNTS);
                    return 2;
                }
                o.counts[o.n_counts++] = (int32_t)v;
                i++;
            }
            if (o.n_counts == 0)
                bad = 1;
            continue;
        } else if (!strcmp(a, "--repeats")) {
            bad = cli_parse_long(val, 1, JEV_BENCH_MAX_REPEATS, &v);
            o.repeats = (int32_t)v;
        } else if (!strcmp(a, "--batch")) {
            if (!strcmp(val, "all"))
                o.batch = 0;
            else if (!(bad = cli_parse_long(val, 1, 4096, &v)))
                o.batch = (int32_t)v;
        } else if (!strcmp(a, "--paths")) {
            bad = parse_paths(val, &o.paths);
        } else if (!strcmp(a, "--output")) {
            o.output = val;
        } else if (!strcmp(a, "--workload")) {
            o.workload = val;
        } else if (!strcmp(a, "--dump-inputs")) {
            o.dump_inputs = val;
        } else if (!strcmp(a, "--model-id")) {
            o.model_id = val;
        } else if (!strcmp(a, "--git-commit")) {
            /* 40 hex digits, as git prints a sha-1 commit */
            bad = strlen(val) != 40 || strspn(val, "0123456789abcdef") != 40;
            o.git_commit = val;
        } else if (!strcmp(a, "--synthetic")) {
            if (!strcmp(val, "yes"))
                o.model_synthetic = 1;
            else if (!strcmp(val, "no"))
                o.model_synthetic = 0;
            else
                bad = 1;
        } else {
            bad = 2;
        }
        if (bad) {
            if (bad == 2)
                fprintf(stderr, "jev bench: unknown or incomplete option '%s'\n\n", a);
            else
                fprintf(stderr, "jev bench: bad value '%s' for %s\n\n", val ? val : "", a);
            usage(stderr);
            return 2;
        }
        i++;
    }
    for (int32_t i = 1; i < o.n_counts; i++)
        if (o.counts[i] <= o.counts[i - 1]) {
            fprintf(stderr, "jev bench: --counts must be strictly increasing\n");
            return 2;
        }
    (void)counts_given;
    const char *dir = cs.dir;
    o.threads = cs.threads;
    o.backend = cs.backend;
    o.precision = cs.ep.precision;
    o.step_tokens = cs.ep.prefill_chunk;
    o.verbose = cs.verbose;

    /* the model */
    if (!dir && exists(REAL_DIR "/config.json")) {
        dir = REAL_DIR;
        o.model_id = o.model_id ? o.model_id : "Qwen3.5-0.8B-4bit";
        o.model_synthetic = 0;
    } else if (!dir) {
        dir = SYNTH_DIR;
        o.model_id = o.model_id ? o.model_id : "synthetic Qwen3.5-0.8B (seed 1, mlx4)";
        o.model_synthetic = 1;
        fprintf(stderr, "jev bench: no real model at " REAL_DIR "; using a SYNTHETIC model with the real 0.8B shapes "
                        "and seeded random weights (" SYNTH_DIR "). Its timings are representative; its answers "
                        "are meaningless.\n");
        if (!exists(SYNTH_DIR "/config.json")) {
            fprintf(stderr, "jev bench: generating " SYNTH_DIR " (" SYNTH_CONFIG ", mlx4, seed 1) ...\n");
            mkdir(".models", 0755);
            struct jev_synth_params sp = jev_synth_default_params();
            sp.config_path = SYNTH_CONFIG;
            sp.seed = 1;
            sp.layout = JEV_SYNTH_MLX4;
            sp.out_dir = SYNTH_DIR;
            struct jev_synth_report rep;
            struct jev_error err = {0};
            if (jev_synth_write(&sp, &rep, &err) != JEV_OK) {
                fprintf(stderr, "jev bench: synth: %s\n", err.msg);
                return 1;
            }
            fprintf(stderr, "jev bench: wrote %lld bytes in %.1f s\n", (long long)rep.bytes, rep.seconds);
        }
    }
    o.model_dir = dir;
    bool tty = isatty(2);
    if (tty) {
        o.progress = progress;
        o.progress_user = NULL;
    }
    struct jev_bench_outcome out;
    struct jev_error err = {0};
    enum jev_status s = jev_bench_run(&o, &out, &err);
    if (tty)
        fprintf(stderr, "\r\033[K");
    if (s != JEV_OK) {
        fprintf(stderr, "jev bench: %s\n", err.msg);
        return 1;
    }
    if (out.dumped) {
        printf("jev bench: wrote the peers' inputs to %s (manifest.json, pixel_values.f32)\n", o.dump_inputs);
        return 0;
    }
    printf("jev bench: %d samples in %.1f s -> %s\n\n", out.n_samples, out.seconds, o.output);
    summary(o.output);
    return 0;
}

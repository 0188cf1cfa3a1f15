/*
 * runner.c - `jev bench`'s measurement (runner.h): set-up, warm-up, the
 * rotated repetitions, one jev-bench/2 sample per measured request, the
 * agreement per count, the environment, and the atomic write.
 *
 * Order of the measured runs: for each decision count, for each repeat r,
 * the three paths in the order (generate_json, independent, shared) rotated
 * left by r, so every path is first, second and third once in three
 * repeats (benchmark.md: "rotating the path order across repetitions").
 * Each sample is one jev_decide_run on the request of that count; its
 * total_ms, phases, forward counts and peak memory are the pipeline's own
 * counters (src/decide/pipeline.h).
 */
#include "common/bench/runner-int.h" // defines: struct br_bench

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "backend/registry.h"  // defines: jev_backend_parse
#include "base/timing.h"       // defines: jev_now_ms
#include "common/bench/peak.h" // defines: jev_peak_f32
#include "model/vision.h"      // defines: jev_vision_flops
#include "wire/request.h"      // defines: jev_request_load_workload_file

static const char *const PATHS[3] = {JEV_BENCH_PATH_GENERATE, JEV_BENCH_PATH_INDEPENDENT, JEV_BENCH_PATH_SHARED};
static const enum jev_decide_path PATH_IDS[3] = {JEV_DECIDE_GENERATE, JEV_DECIDE_INDEPENDENT, JEV_DECIDE_SHARED};

struct jev_bench_opts jev_bench_default_opts(void) {
    struct jev_bench_opts o = {0};
    o.model_synthetic = JEV_BENCH_NONE;
    o.workload = "bench/dog-workload.json";
    o.n_counts = 4;
    o.counts[0] = 1;
    o.counts[1] = 4;
    o.counts[2] = 16;
    o.counts[3] = 64;
    o.repeats = 3;
    o.batch = 4;
    o.backend = "cpu";
    o.output = "artifacts/benchmark.json";
    return o;
}

const char *br_layout_name(const struct br_bench *b) { return b->model->layout == JEV_LAYOUT_MLX ? "mlx4" : "hf"; }

int32_t br_step_tokens(const struct br_bench *b) {
    if (b->engine)
        return b->engine->params.prefill_chunk;
    if (b->o.step_tokens > 0)
        return b->o.step_tokens;
    const struct jev_backend_reg *reg = NULL;
    int32_t device = 0;
    struct jev_error ignored = {0}; /* the model load already checked the name */
    if (jev_backend_parse(b->o.backend, &reg, &device, &ignored) == JEV_OK && reg->ops->step_tokens > 0)
        return reg->ops->step_tokens;
    return 512;
}

/* ---- git ---- */

/*
 * The commit is read from the files, not from `git`: the record must name
 * the build's commit on machines without git (CI images, the GPU host), and
 * the formats involved are tiny and stable: HEAD is "ref: <name>" or a sha;
 * a ref is a loose file or a line of packed-refs; a worktree's .git is a
 * "gitdir: <path>" file whose folder names the shared one in "commondir".
 * No dirty-tree detection (that needs the index): the record says the
 * commit, not that the tree was clean.
 */

/* Reads a small text file's first line into out (trailing whitespace cut); false when unreadable. */
static bool read_line(const char *path, char *out, size_t cap) {
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool ok = fgets(out, (int)cap, f) != NULL;
    fclose(f);
    size_t n = ok ? strlen(out) : 0;
    while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == '\r' || out[n - 1] == ' '))
        out[--n] = '\0';
    return ok;
}

static bool is_hex40(const char *s) {
    for (int i = 0; i < 40; i++)
        if (!((s[i] >= '0' && s[i] <= '9') || (s[i] >= 'a' && s[i] <= 'f')))
            return false;
    return s[40] == '\0' || s[40] == ' ' || s[40] == '\n';
}

#define GIT_PATH 4096

/* out = a "/" b; false when it does not fit (a path that long names no repository we can read). */
static bool join(char out[GIT_PATH], const char *a, const char *b) {
    int n = snprintf(out, GIT_PATH, "%s/%s", a, b);
    return n >= 0 && n < GIT_PATH;
}

/* The commit of ref `ref` in git folder `gd` (loose ref, then packed-refs). */
static bool resolve_ref(const char *gd, const char *ref, char out[41]) {
    char path[GIT_PATH], line[512];
    if (join(path, gd, ref) && read_line(path, line, sizeof line) && is_hex40(line)) {
        memcpy(out, line, 40);
        out[40] = '\0';
        return true;
    }
    if (!join(path, gd, "packed-refs"))
        return false;
    FILE *f = fopen(path, "r");
    if (!f)
        return false;
    bool found = false;
    while (!found && fgets(line, sizeof line, f)) {
        size_t n = strlen(line);
        while (n > 0 && (line[n - 1] == '\n' || line[n - 1] == '\r'))
            line[--n] = '\0';
        if (n > 41 && is_hex40(line) && !strcmp(line + 41, ref)) {
            memcpy(out, line, 40);
            out[40] = '\0';
            found = true;
        }
    }
    fclose(f);
    return found;
}

bool jev_bench_git_commit(const char *dir, char out[41]) {
    char base[GIT_PATH], gd[GIT_PATH], line[GIT_PATH], tmp[GIT_PATH];
    out[0] = '\0';
    if (snprintf(base, sizeof base, "%s", dir ? dir : ".") >= (int)sizeof base)
        return false;
    /* find .git in dir or a parent (a folder, or a worktree's "gitdir: ..." file) */
    for (int up = 0;; up++) {
        struct stat sb;
        if (up == 16 || !join(gd, base, ".git"))
            return false;
        if (stat(gd, &sb) == 0) {
            if (S_ISREG(sb.st_mode)) {
                if (!read_line(gd, line, sizeof line) || strncmp(line, "gitdir: ", 8) != 0)
                    return false;
                if (line[8] == '/') {
                    if (snprintf(gd, sizeof gd, "%s", line + 8) >= (int)sizeof gd)
                        return false;
                } else if (!join(gd, base, line + 8)) { /* relative to the .git file's folder */
                    return false;
                }
            }
            break;
        }
        if (!join(tmp, base, ".."))
            return false;
        memcpy(base, tmp, sizeof base);
    }
    if (!join(tmp, gd, "HEAD") || !read_line(tmp, line, sizeof line))
        return false;
    if (is_hex40(line)) {
        memcpy(out, line, 40);
        out[40] = '\0';
        return true;
    }
    if (strncmp(line, "ref: ", 5) != 0 || strlen(line + 5) >= 512)
        return false;
    char ref[512];
    memcpy(ref, line + 5, strlen(line + 5) + 1);
    if (resolve_ref(gd, ref, out))
        return true;
    /* a worktree keeps its refs in the common folder */
    if (!join(tmp, gd, "commondir") || !read_line(tmp, line, sizeof line))
        return false;
    if (line[0] == '/')
        return resolve_ref(line, ref, out);
    return join(tmp, gd, line) && resolve_ref(tmp, ref, out);
}

/* ---- set-up ---- */

/* The photo's path: as written in the workload when it exists from here (the repository root, where the
 * workload's paths are relative to), else relative to the workload's folder's parent. */
static void resolve_image(struct br_bench *b, const char *written) {
    struct stat sb;
    if (written[0] == '/' || stat(written, &sb) == 0) {
        snprintf(b->image_path, sizeof b->image_path, "%s", written);
        return;
    }
    const char *slash = strrchr(b->o.workload, '/');
    int n = slash ? (int)(slash - b->o.workload) : 0;
    snprintf(b->image_path, sizeof b->image_path, "%.*s%s../%s", n, b->o.workload, n ? "/" : "", written);
}

/* The workload file's image_max_side (768 when absent). */
static int32_t workload_max_side(const char *path) {
    json_error_t je;
    json_t *w = json_load_file(path, 0, &je);
    json_t *v = w ? json_object_get(w, "image_max_side") : NULL;
    int32_t side = json_is_integer(v) && json_integer_value(v) > 0 && json_integer_value(v) <= 16384
                       ? (int32_t)json_integer_value(v)
                       : 768;
    json_decref(w);
    return side;
}

static struct jev_decide_params params_for(const struct br_bench *b, enum jev_decide_path path) {
    struct jev_decide_params p = jev_decide_default_params();
    p.path = path;
    p.scoring = JEV_SCORING_LABEL;
    p.batch = b->o.batch;
    p.prefill_chunk = 0;    /* the engine's slice (--step-tokens, else the backend's) */
    p.reuse_prefix = false; /* every sample decodes, encodes and prefills (benchmark.md); the images are paths anyway */
    return p;
}

/* The environment facts: weight files and hashes, the photo's hash and sizes, the commit. Hashing reads
 * every weight byte (half a GiB for the 0.8B model): it happens once, before the warm-up, never inside a
 * measured request. */
static enum jev_status environment(struct br_bench *b, struct jev_error *err) {
    const struct jev_st_set *ts = &b->model->tensors;
    for (int32_t i = 0; i < ts->n_files && b->n_weights < BR_MAX_WEIGHTS; i++) {
        struct br_weight *w = &b->weights[b->n_weights++];
        const char *path = ts->files[i].path, *base = strrchr(path, '/');
        snprintf(w->file, sizeof w->file, "%s", base ? base + 1 : path);
        struct stat sb;
        w->bytes = stat(path, &sb) == 0 ? (int64_t)sb.st_size : JEV_BENCH_NONE;
        JEV_TRY(jev_sha256_file(path, w->sha256, err));
    }
    JEV_TRY(jev_sha256_file(b->image_path, b->image_sha256, err));
    struct jev_image img;
    JEV_TRY(jev_image_load(b->image_path, NULL, &img, err));
    b->image_w = img.width;
    b->image_h = img.height;
    jev_image_free(&img);
    JEV_TRY(jev_decide_image_input(b->d, &b->reqs[0], &b->vin, err));
    b->resized_w = b->vin.size.width;
    b->resized_h = b->vin.size.height;
    b->vision_flops = b->vin.size.n_patches > 0 ? jev_vision_flops(&b->model->config.vision, b->vin.size.n_patches) : 0;
    if (b->o.git_commit)
        snprintf(b->git, sizeof b->git, "%.40s", b->o.git_commit);
    else if (!jev_bench_git_commit(".", b->git))
        b->git[0] = '\0';
    return JEV_OK;
}

/*
 * One request per decision count, parsed once (outside the measured time,
 * like the server's parsing of a body), with the photo path resolved; one
 * engine, built once and sized by jev_decide_plan for the largest request of
 * every path (common/cli-setup.h: the model's tokenizer plans before the
 * engine exists), so no measured run can fail for want of sequences or
 * tokens. Writing the peers' inputs needs no engine: the planner answers.
 */
static enum jev_status setup(struct br_bench *b, struct jev_error *err) {
    struct cli_setup *cs = &b->setup;
    cli_setup_init(cs, "bench");
    cs->dir = b->o.model_dir;
    cs->threads = b->o.threads;
    cs->backend = b->o.backend;
    cs->verbose = b->o.verbose;
    cs->ep.precision = b->o.precision;
    cs->ep.prefill_chunk = b->o.step_tokens; /* 0: the backend's */
    b->image_max_side = workload_max_side(b->o.workload);
    cs->dp.image_max_side = b->image_max_side;
    JEV_TRY(cli_setup_load(cs, err));
    b->model = cs->model;
    if (!b->model->config.has_vision)
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "bench: %s has no vision tower; the workload has a photo",
                        b->o.model_dir);
    b->reqs = calloc((size_t)b->o.n_counts, sizeof *b->reqs);
    if (!b->reqs)
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory");
    for (int32_t i = 0; i < b->o.n_counts; i++) {
        struct jev_request_error re = {0};
        if (jev_request_load_workload_file(b->o.workload, b->o.counts[i], &b->reqs[i], &re) != JEV_OK)
            return jev_fail(err, JEV_ERR_FORMAT, "bench: %s: %s", b->o.workload, re.message);
        if (i == 0)
            resolve_image(b, b->reqs[0].image.path ? b->reqs[0].image.path : "assets/dog.jpg");
        b->reqs[i].has_image = true;
        b->reqs[i].image.path = b->image_path;
    }
    for (int32_t i = 0; i < b->o.n_counts; i++)
        for (int k = 0; k < b->n_paths; k++) {
            struct jev_decide_params p = params_for(b, b->path_ids[k]);
            JEV_TRY(cli_setup_plan(cs, &b->reqs[i], &p, err));
        }
    if (b->o.dump_inputs) {
        b->d = cs->planner;
    } else {
        JEV_TRY(cli_setup_open(cs, true, err));
        b->engine = cs->engine;
        b->d = cs->decider;
    }
    return environment(b, err);
}

static void teardown(struct br_bench *b) {
    for (int32_t i = 0; b->reqs && i < b->o.n_counts; i++)
        jev_request_free(&b->reqs[i]);
    free(b->reqs);
    jev_vision_input_free(&b->vin);
    cli_setup_free(&b->setup);
}

/* ---- one sample ---- */

/* The decisions of one result of request r as the record states them (ids, options, the choice, the
 * probabilities): *dec[r->n_questions] and the option keys they point into, both malloc'd (free both). */
static enum jev_status result_decisions(const struct jev_request *r, const struct jev_decide_result *res,
                                        struct jev_bench_decision **dec_out, const char ***keys_out,
                                        struct jev_error *err) {
    int32_t n = r->n_questions;
    struct jev_bench_decision *dec = calloc((size_t)n, sizeof *dec);
    const char **keys = calloc((size_t)r->n_options_total + (size_t)n * JEV_DECIDE_MAX_OPTIONS, sizeof *keys);
    if (!dec || !keys) {
        free(dec);
        free(keys);
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for a sample");
    }
    const char **kp = keys;
    for (int32_t i = 0; i < n; i++) {
        const struct jev_question *q = &r->questions[i];
        dec[i].id = q->id;
        dec[i].n_options = q->n_options;
        dec[i].options = kp;
        for (int32_t o = 0; o < q->n_options; o++)
            kp[o] = q->options[o].key;
        kp += q->n_options;
        if (res->generated) {
            int32_t c = res->gen.choice ? res->gen.choice[i] : -1;
            dec[i].choice = c >= 0 ? q->options[c].key : NULL;
            dec[i].probs = NULL;
        } else {
            dec[i].choice = q->options[res->answers.items[i].winner].key;
            dec[i].probs = res->answers.items[i].probs;
        }
    }
    *dec_out = dec;
    *keys_out = keys;
    return JEV_OK;
}

/* The sample of one measured request, added to rec (plus the generated ids and pipeline extras; gflop:
 * the dense work the request did, language model and vision tower, in 10^9 flops). */
static enum jev_status add_sample(struct br_bench *b, struct jev_bench_record *rec, int32_t ci, int k, int32_t rep,
                                  int32_t order, const struct jev_decide_result *res, double gflop,
                                  struct jev_error *err) {
    const struct jev_request *r = &b->reqs[ci];
    const struct jev_decide_stats *st = &res->stats;
    struct jev_bench_sample s = jev_bench_sample_default();
    s.repeat = rep;
    s.order = order;
    s.total_ms = st->total_ms > JEV_BENCH_MIN_MS ? st->total_ms : JEV_BENCH_MIN_MS;
    s.vision_ms = st->vision_ms;
    s.prefill_ms = st->prefill_ms;
    s.scoring_ms = st->scoring_ms;
    s.lm_forwards = st->lm_forwards;
    s.vision_forwards = st->vision_forwards;
    s.peak_bytes = st->peak_bytes;
    s.peak_where = st->peak_where ? st->peak_where : "cpu";
    s.valid = res->valid;
    s.output = res->generated ? (res->gen.raw ? res->gen.raw : "") : NULL;
    struct jev_bench_decision *dec = NULL;
    const char **keys = NULL;
    JEV_TRY(result_decisions(r, res, &dec, &keys, err));
    s.n_decisions = r->n_questions;
    s.decisions = dec;
    enum jev_status rc = jev_bench_record_add_sample(rec, b->o.counts[ci], b->paths[k], &s, err);
    free(dec);
    free(keys);
    JEV_TRY(rc);
    /* extras the schema has no field for: the generated ids (peers compare ids), token counts, image time */
    json_t *runs = json_object_get(jev_bench_record_json(rec), "runs");
    size_t i;
    json_t *run;
    json_array_foreach(runs, i, run) {
        if (json_integer_value(json_object_get(run, "decisions")) != b->o.counts[ci] ||
            strcmp(json_string_value(json_object_get(run, "path")), b->paths[k]) != 0)
            continue;
        json_t *smp =
            json_array_get(json_object_get(run, "samples"), json_array_size(json_object_get(run, "samples")) - 1);
        json_t *ex =
            json_pack("{s:f, s:I, s:i, s:i, s:i, s:i, s:f}", "image_ms", st->image_ms, "lm_tokens",
                      (json_int_t)st->lm_tokens, "prefix_tokens", st->prefix_tokens, "image_tokens", st->image_tokens,
                      "output_tokens", st->output_tokens, "forks", st->forks, "gflop", gflop);
        if (ex && res->generated) {
            json_t *ids = json_array();
            for (int32_t g = 0; ids && g < res->n_gen_ids; g++)
                json_array_append_new(ids, json_integer(res->gen_ids[g]));
            json_object_set_new(ex, "generated_ids", ids);
            json_object_set_new(ex, "invalid_reason", json_string(res->valid ? "" : res->gen.reason));
        }
        if (!ex || json_object_set_new(smp, "extra", ex) != 0)
            return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for a sample's extras");
        break;
    }
    return JEV_OK;
}

/* ---- fast against exact ---- */

/*
 * Fast's cost in accuracy, measured in the same run: each path once more on the count's request
 * with the engine switched to exact (outside the samples: not timed, not recorded as one; the
 * weights mirror serves both modes, so no second engine), the engine back in fast after each, then
 * every fast sample of that (count, path) against it (jev_bench_vs_exact_compute). a's entries
 * follow the settings' path order, which is b->paths.
 */
static enum jev_status vs_exact(struct br_bench *b, const struct jev_bench_record *rec, int32_t ci, int32_t done,
                                int32_t total, struct jev_bench_agreement *a, struct jev_error *err) {
    const struct jev_request *r = &b->reqs[ci];
    a->has_vs_exact = true;
    for (int k = 0; k < b->n_paths; k++) {
        if (b->o.progress) {
            char line[128];
            snprintf(line, sizeof line, "exact reference: %d decisions, %s", b->o.counts[ci], b->paths[k]);
            b->o.progress(b->o.progress_user, done, total, line);
        }
        JEV_TRY(jev_engine_set_precision(b->engine, JEV_PRECISION_EXACT, err));
        struct jev_decide_params p = params_for(b, b->path_ids[k]);
        struct jev_decide_result res;
        enum jev_status s = jev_decide_run(b->d, r, &p, &res, err);
        /* back to the measured mode whatever happened: a later sample must never run in exact */
        enum jev_status back = jev_engine_set_precision(b->engine, b->o.precision, err);
        if (s != JEV_OK)
            return s;
        struct jev_bench_decision *dec = NULL;
        const char **keys = NULL;
        if (back == JEV_OK)
            s = result_decisions(r, &res, &dec, &keys, err);
        if (back == JEV_OK && s == JEV_OK)
            s = jev_bench_vs_exact_compute(rec, b->o.counts[ci], b->paths[k], dec, r->n_questions, &a->vs_exact[k],
                                           err);
        free(dec);
        free(keys);
        jev_decide_result_free(&res);
        JEV_TRY(back);
        JEV_TRY(s);
    }
    return JEV_OK;
}

/* ---- the run ---- */

/* The record's environment.extra, made when it has none; NULL when out of memory. */
static json_t *env_extra(struct jev_bench_record *rec) {
    json_t *env = json_object_get(jev_bench_record_json(rec), "environment");
    json_t *ex = json_object_get(env, "extra");
    if (!ex && (!(ex = json_object()) || json_object_set_new(env, "extra", ex) != 0))
        return NULL;
    return ex;
}

/*
 * The record's environment and settings first (the builder copies them),
 * then the warm-up (each path once on one decision: first-touch page
 * faults of the weights and the K/V pool, thread start-up), then every
 * measured run, adding its sample as soon as it finished; the agreement of
 * a count is computed from its samples by the schema's own definition.
 */
/* The CPU backend's f32 FMA peak on the engine's threads, measured right after the samples (the same
 * clocks and load), into environment.extra: fma_peak_gflops and the vectors it used (peak.h). A device
 * backend's record has none: the host's FMA peak is no yardstick for it. */
static enum jev_status add_peak(struct br_bench *b, struct jev_bench_record *rec, struct jev_error *err) {
    if (strcmp(b->engine->ops->name, "cpu") != 0)
        return JEV_OK;
    struct jev_peak pk = jev_peak_f32(b->engine->pool, 1.0);
    if (!pk.isa)
        return JEV_OK; /* no figure rather than a wrong one */
    json_t *ex = env_extra(rec);
    if (!ex)
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the environment's extras");
    if (json_object_set_new(ex, "fma_peak_gflops", json_real(pk.gflops)) != 0 ||
        json_object_set_new(ex, "fma_peak_isa", json_string(pk.isa)) != 0 ||
        json_object_set_new(ex, "fma_peak_threads", json_integer(pk.threads)) != 0)
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the environment's extras");
    return JEV_OK;
}

/* The environment variables that change what a backend computes or how (the products, the pinning, the
 * kernels, OpenBLAS's kernel set), those set, into environment.extra.knobs: a record made with
 * JEV_CUDA_EXACT_GEMM=bf16x6 says so beside its "exact". */
static enum jev_status add_knobs(struct jev_bench_record *rec, struct jev_error *err) {
    static const char *const names[] = {"JEV_CUDA_EXACT_GEMM", "JEV_CUDA_PIN",      "JEV_CUDA_ATTN_TILES",
                                        "JEV_CUDA_SYNC",       "JEV_CPU_BF16",      "JEV_CPU_GEMM",
                                        "JEV_PROFILE",         "OPENBLAS_CORETYPE", "OPENBLAS_NUM_THREADS"};
    json_t *knobs = json_object();
    if (!knobs)
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the environment's knobs");
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        const char *v = getenv(names[i]);
        if (v && *v && json_object_set_new(knobs, names[i], json_string(v)) != 0) {
            json_decref(knobs);
            return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the environment's knobs");
        }
    }
    json_t *ex = env_extra(rec);
    if (!ex) {
        json_decref(knobs);
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the environment's extras");
    }
    if (json_object_set_new(ex, "knobs", knobs) != 0)
        return jev_fail(err, JEV_ERR_NOMEM, "bench: out of memory for the environment's knobs");
    return JEV_OK;
}

static enum jev_status measure(struct br_bench *b, struct jev_bench_outcome *out, struct jev_error *err) {
    const struct jev_bench_opts *o = &b->o;
    struct jev_bench_env env = {0};
    struct jev_bench_host host;
    struct jev_bench_weight w[BR_MAX_WEIGHTS];
    for (int32_t i = 0; i < b->n_weights; i++)
        w[i] = (struct jev_bench_weight){b->weights[i].file, b->weights[i].bytes, b->weights[i].sha256};
    const char *base = strrchr(o->model_dir, '/');
    env.model_id = o->model_id ? o->model_id : (base && base[1] ? base + 1 : o->model_dir);
    env.model_dir = o->model_dir;
    env.model_synthetic = o->model_synthetic;
    env.n_weights = b->n_weights;
    env.weights = w;
    env.git_commit = b->git[0] ? b->git : NULL;
    env.image_path = b->image_path;
    env.image_sha256 = b->image_sha256;
    env.image_width = b->image_w;
    env.image_height = b->image_h;
    env.resized_width = b->resized_w;
    env.resized_height = b->resized_h;
    env.threads = jev_pool_size(b->engine->pool);
    env.backend = b->engine->ops->name;
    env.gpu_memory_bytes = JEV_BENCH_NONE;
    struct jev_backend_info info; /* a device backend's name, memory, driver and libraries (registry.h) */
    jev_engine_describe(b->engine, &info);
    if (info.device[0]) {
        env.gpu_name = info.device;
        env.gpu_memory_bytes = info.memory_bytes;
    }
    env.cpu_cores = JEV_BENCH_NONE;
    jev_bench_env_detect(&env, &host); /* the kernel module's driver version, when there is one */
    if (env.gpu_name != NULL) {
        if (env.gpu_driver == NULL && info.driver[0])
            env.gpu_driver = info.driver;
        const int32_t room = (int32_t)(sizeof host.lib_names / sizeof host.lib_names[0]);
        for (int32_t i = 0; i < info.n_libs && host.n_libs < room; i++) {
            host.lib_names[host.n_libs] = info.lib_names[i];
            host.lib_versions[host.n_libs++] = info.lib_versions[i];
        }
        env.n_libraries = host.n_libs;
    }
    struct jev_bench_settings set = {.n_counts = o->n_counts,
                                     .counts = o->counts,
                                     .repeats = o->repeats,
                                     .warmup = 1,
                                     .batch = o->batch,
                                     .n_paths = b->n_paths,
                                     .paths = b->paths,
                                     .scoring = "label",
                                     .image_max_side = b->image_max_side,
                                     .prefill_chunk = br_step_tokens(b),
                                     .max_new_tokens_min = 128,
                                     .max_new_tokens_per_decision = 24,
                                     .order = "rotated",
                                     .workload = o->workload,
                                     .precision = jev_precision_name(b->engine->params.precision)};
    struct jev_bench_record *rec = NULL;
    JEV_TRY(jev_bench_record_init(&rec, &env, &set, err));
    if (o->model_synthetic == 1)
        jev_bench_record_set_note(rec,
                                  "synthetic model: the real Qwen3.5 shapes with seeded random weights (jev synth); "
                                  "timings are representative, answers and agreement with generation are "
                                  "meaningless",
                                  err);
    enum jev_status s = JEV_OK;
    char line[256];
    /* warm-up: each path once on one decision (the smallest request), outside the samples */
    const int32_t np = b->n_paths;
    for (int k = 0; s == JEV_OK && k < np; k++) {
        if (o->progress) {
            snprintf(line, sizeof line, "warm-up: %s, %d decision%s", b->paths[k], o->counts[0],
                     o->counts[0] == 1 ? "" : "s");
            o->progress(o->progress_user, 0, o->n_counts * o->repeats * np, line);
        }
        struct jev_decide_params p = params_for(b, b->path_ids[k]);
        struct jev_request warm;
        struct jev_request_error re = {0};
        s = jev_request_load_workload_file(o->workload, 1, &warm, &re) == JEV_OK
                ? JEV_OK
                : jev_fail(err, JEV_ERR_FORMAT, "bench: %s", re.message);
        if (s != JEV_OK)
            break;
        warm.has_image = true;
        warm.image.path = b->image_path;
        struct jev_decide_result res;
        s = jev_decide_run(b->d, &warm, &p, &res, err);
        if (s == JEV_OK)
            jev_decide_result_free(&res);
        jev_request_free(&warm);
    }
    /* the measured runs */
    int32_t total = o->n_counts * o->repeats * np, done = 0;
    double t0 = jev_now_ms();
    for (int32_t ci = 0; s == JEV_OK && ci < o->n_counts; ci++) {
        for (int32_t rep = 0; s == JEV_OK && rep < o->repeats; rep++) {
            for (int32_t pos = 0; s == JEV_OK && pos < np; pos++) {
                int k = (int)((pos + rep) % np); /* rotated left by the repeat */
                if (o->progress) {
                    snprintf(line, sizeof line, "%d decisions, %s, repeat %d/%d", o->counts[ci], b->paths[k], rep + 1,
                             o->repeats);
                    o->progress(o->progress_user, done, total, line);
                }
                struct jev_decide_params p = params_for(b, b->path_ids[k]);
                struct jev_decide_result res;
                double lm_flops0 = b->engine->lm.flops;
                s = jev_decide_run(b->d, &b->reqs[ci], &p, &res, err);
                if (s != JEV_OK)
                    break;
                double flops = b->engine->lm.flops - lm_flops0 + (double)res.stats.vision_forwards * b->vision_flops;
                s = add_sample(b, rec, ci, k, rep, pos, &res, flops / 1e9, err);
                jev_decide_result_free(&res);
                done++;
            }
        }
        if (s == JEV_OK) {
            struct jev_bench_agreement a;
            s = jev_bench_agreement_compute(rec, o->counts[ci], &a, err);
            if (s == JEV_OK && o->precision != JEV_PRECISION_EXACT)
                s = vs_exact(b, rec, ci, done, total, &a, err);
            if (s == JEV_OK)
                s = jev_bench_record_add_agreement(rec, &a, err);
        }
    }
    out->seconds = (jev_now_ms() - t0) / 1e3;
    out->n_samples = done;
    if (s == JEV_OK)
        s = add_peak(b, rec, err);
    if (s == JEV_OK)
        s = add_knobs(rec, err);
    if (o->progress)
        o->progress(o->progress_user, done, total, s == JEV_OK ? "writing the record" : "failed");
    if (s == JEV_OK)
        s = jev_bench_record_write(rec, o->output, err);
    jev_bench_record_free(rec);
    return s;
}

enum jev_status jev_bench_run(const struct jev_bench_opts *opts, struct jev_bench_outcome *out, struct jev_error *err) {
    memset(out, 0, sizeof *out);
    struct br_bench b;
    memset(&b, 0, sizeof b);
    b.o = *opts;
    if (!b.o.workload)
        b.o.workload = "bench/dog-workload.json";
    if (!b.o.output)
        b.o.output = "artifacts/benchmark.json";
    if (b.o.repeats <= 0)
        b.o.repeats = 3;
    for (int k = 0; k < 3; k++)
        if (!b.o.paths || (b.o.paths & (1u << k))) { /* JEV_BENCH_ONLY_* follow PATHS' order */
            b.paths[b.n_paths] = PATHS[k];
            b.path_ids[b.n_paths++] = PATH_IDS[k];
        }
    if (!b.o.model_dir)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "bench: no model directory");
    if (b.o.n_counts < 1 || b.o.n_counts > JEV_BENCH_MAX_COUNTS)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "bench: %d decision counts (1..%d)", b.o.n_counts,
                        JEV_BENCH_MAX_COUNTS);
    for (int32_t i = 0; i < b.o.n_counts; i++)
        if (b.o.counts[i] < 1 || b.o.counts[i] > JEV_DECIDE_MAX_QUESTIONS ||
            (i > 0 && b.o.counts[i] <= b.o.counts[i - 1]))
            return jev_fail(err, JEV_ERR_INVALID_ARG,
                            "bench: decision counts must be strictly increasing, each 1..%d (count %d is %d)",
                            JEV_DECIDE_MAX_QUESTIONS, i, b.o.counts[i]);
    enum jev_status s = setup(&b, err);
    if (s == JEV_OK && b.o.dump_inputs) {
        s = br_dump_inputs(&b, err);
        out->dumped = s == JEV_OK;
    } else if (s == JEV_OK) {
        s = measure(&b, out, err);
    }
    teardown(&b);
    return s;
}

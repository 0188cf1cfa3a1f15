/*
 * cmd-verify.c - `jev verify`: the engine's multi-token candidate scoring
 * (candidate trie, forked suffixes, full-vocabulary log-softmax at the
 * query positions) against plain full forwards of prompt + candidate, token
 * by token (common/verify.h). Writes the record (default
 * artifacts/scoring-verification.json) atomically and prints a summary;
 * exits 1 when the check fails.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/bench/schema.h" // defines: jev_bench_file_write
#include "common/cli-args.h"     // defines: cli_parse_long
#include "commands.h"            // defines: cmd_verify
#include "common/verify.h"       // defines: jev_verify_run

static void usage(FILE *f) {
    fprintf(f, "usage: jev verify --model DIR [--output FILE] [--image F] [--norm sum|mean] [--threads N]\n"
               "                  [--backend cpu|cuda|cuda:N]\n\n"
               "  --model DIR      a model directory (HF bf16 or MLX 4-bit layout)\n"
               "  --output FILE    the record (default artifacts/scoring-verification.json)\n"
               "  --image F        put an image into every case's prompt (default: text only)\n"
               "  --norm N         candidate normalisation: sum (default) or mean\n"
               "  --tolerance X    largest accepted |engine - reference| log-probability (default 1e-4)\n"
               "  --threads N      worker threads (default: all cores)\n");
}

int cmd_verify(int argc, char **argv) {
    const char *dir = NULL, *output = "artifacts/scoring-verification.json", *image = NULL;
    const char *backend = NULL;
    long threads = 0;
    struct jev_verify_opts o = {.norm = JEV_TRIE_SUM};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!v) {
            fprintf(stderr, "jev verify: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (!strcmp(a, "--model")) {
            dir = v;
        } else if (!strcmp(a, "--output")) {
            output = v;
        } else if (!strcmp(a, "--image")) {
            image = v;
        } else if (!strcmp(a, "--norm") && (!strcmp(v, "sum") || !strcmp(v, "mean"))) {
            o.norm = !strcmp(v, "mean") ? JEV_TRIE_MEAN : JEV_TRIE_SUM;
        } else if (!strcmp(a, "--tolerance") && (o.tolerance = strtod(v, &end), end && !*end && o.tolerance > 0)) {
        } else if (!strcmp(a, "--threads") && cli_parse_long(v, 0, 1024, &threads) == 0) {
        } else if (!strcmp(a, "--backend")) {
            backend = v;
        } else {
            fprintf(stderr, "jev verify: bad option or value '%s %s'\n\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (!dir) {
        fprintf(stderr, "jev verify: --model DIR is required\n\n");
        usage(stderr);
        return 2;
    }
    o.image = image;
    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = (int32_t)threads;
    mp.backend = backend;
    mp.no_vision = image == NULL;
    struct jev_model *m = NULL;
    struct jev_engine *e = NULL;
    struct jev_decider *d = NULL;
    struct jev_error err = {0};
    json_t *rec = NULL;
    int rc = 1;
    if (jev_model_open(dir, &mp, &m, &err) != JEV_OK) {
        fprintf(stderr, "jev verify: %s\n", err.msg);
        goto done;
    }
    struct jev_engine_params ep = jev_engine_default_params();
    ep.max_batch = 16;
    if (jev_engine_init(m, &ep, &e) != JEV_OK) {
        fprintf(stderr, "jev verify: %s\n", jev_engine_last_error(e));
        goto done;
    }
    if (jev_decider_init(m, e, NULL, &d, &err) != JEV_OK) {
        fprintf(stderr, "jev verify: %s\n", err.msg);
        goto done;
    }
    struct jev_verify_summary sum;
    if (jev_verify_run(d, &o, &rec, &sum, &err) != JEV_OK) {
        fprintf(stderr, "jev verify: %s\n", err.msg);
        goto done;
    }
    char *text = json_dumps(rec, JSON_INDENT(2) | JSON_REAL_PRECISION(17));
    if (!text || jev_bench_file_write(output, text, strlen(text), &err) != JEV_OK) {
        fprintf(stderr, "jev verify: %s\n", text ? err.msg : "out of memory");
        free(text);
        goto done;
    }
    free(text);
    printf("jev verify: %d cases, %d candidate tokens: max |engine - reference| log-prob %.3g, argmax agreement "
           "%.0f%% -> %s (%s)\n",
           sum.n_cases, sum.n_tokens, sum.max_abs_diff, 100.0 * sum.argmax_agreement, sum.pass ? "PASS" : "FAIL",
           output);
    rc = sum.pass ? 0 : 1;
done:
    json_decref(rec);
    jev_decider_free(d);
    jev_engine_free(e);
    jev_model_free(m);
    return rc;
}

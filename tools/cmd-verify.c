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
#include "common/cli-setup.h"    // defines: struct cli_setup, cli_setup_open
#include "commands.h"            // defines: cmd_verify
#include "common/verify.h"       // defines: jev_verify_run

static void usage(FILE *f) {
    fprintf(f, "usage: jev verify --model DIR [--output FILE] [--image F] [--norm sum|mean] [--threads N]\n"
               "                  [--backend cpu|cuda|cuda:N] [--precision exact|fast]\n\n"
               "  --model DIR      a model directory (HF bf16 or MLX 4-bit layout)\n"
               "  --output FILE    the record (default artifacts/scoring-verification.json)\n"
               "  --image F        put an image into every case's prompt (default: text only)\n"
               "  --norm N         candidate normalisation: sum (default) or mean\n"
               "  --tolerance X    largest accepted |engine - reference| log-probability (default 1e-4)\n"
               "  --threads N      worker threads (default: all cores)\n"
               "  --backend B      cpu (default), cuda or cuda:N (a CUDA build: make CUDA=1)\n"
               "  --precision M    exact (default) or fast: the engine's mode for both sides of the comparison\n"
               "  -v               the engine's sizes, and the engines the command made, on stderr\n");
}

int cmd_verify(int argc, char **argv) {
    const char *output = "artifacts/scoring-verification.json", *image = NULL;
    struct jev_verify_opts o = {.norm = JEV_TRIE_SUM};
    struct cli_setup cs;
    cli_setup_init(&cs, "verify");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        int got = CLI_ARG_NOT_MINE;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if ((got = cli_setup_arg(&cs, a, v)) == CLI_ARG_FLAG) {
            continue;
        } else if (!v || got == CLI_ARG_MISSING) {
            fprintf(stderr, "jev verify: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        } else if (got == CLI_ARG_VALUE) {
        } else if (!strcmp(a, "--output")) {
            output = v;
        } else if (!strcmp(a, "--image")) {
            image = v;
        } else if (!strcmp(a, "--norm") && (!strcmp(v, "sum") || !strcmp(v, "mean"))) {
            o.norm = !strcmp(v, "mean") ? JEV_TRIE_MEAN : JEV_TRIE_SUM;
        } else if (!strcmp(a, "--tolerance") && (o.tolerance = strtod(v, &end), end && !*end && o.tolerance > 0)) {
        } else {
            fprintf(stderr, "jev verify: bad option or value '%s %s'\n\n", a, v);
            usage(stderr);
            return 2;
        }
        i++;
    }
    if (!cs.dir) {
        fprintf(stderr, "jev verify: --model DIR is required\n\n");
        usage(stderr);
        return 2;
    }
    o.image = image;
    struct jev_error err = {0};
    json_t *rec = NULL;
    int rc = 1;
    /* text-only cases unless --image; 16 sequences per forward, as verify has always sized its engine */
    cs.no_vision = image == NULL;
    cs.ep.max_batch = 16;
    if (cli_setup_load(&cs, &err) != JEV_OK || cli_setup_open(&cs, true, &err) != JEV_OK) {
        fprintf(stderr, "jev verify: %s\n", err.msg);
        goto done;
    }
    struct jev_verify_summary sum;
    if (jev_verify_run(cs.decider, &o, &rec, &sum, &err) != JEV_OK) {
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
    printf("jev verify (%s): %d cases, %d candidate tokens: max |engine - reference| log-prob %.3g, argmax "
           "agreement %.0f%% -> %s (%s)\n",
           jev_precision_name(cs.engine->params.precision), sum.n_cases, sum.n_tokens, sum.max_abs_diff,
           100.0 * sum.argmax_agreement, sum.pass ? "PASS" : "FAIL", output);
    rc = sum.pass ? 0 : 1;
done:
    json_decref(rec);
    cli_setup_free(&cs);
    return rc;
}

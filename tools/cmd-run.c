/*
 * cmd-run.c - `jev run`: token ids through the language model: prefill,
 * the top-K next tokens, N greedy decode steps, and calm's one-line summary
 * (prefill tok/s, decode tok/s, ms/tok, GB/s of weights streamed, a hash of
 * every logit produced).
 *
 * What it is not: text prompts (they come with the tokenizer), sampling,
 * images. Timings cover the forwards only: the model load and a warm-up
 * (the prompt in the same chunks, then 1, 2 and 4 tokens, on a scratch
 * sequence) are outside.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/sha256.h"       // defines: jev_sha256_hex
#include "common/bench/peak.h" // defines: jev_peak_f32
#include "base/timing.h"       // defines: jev_now_ms
#include "common/cli-args.h"   // defines: cli_parse_long
#include "common/cli-setup.h"  // defines: struct cli_setup, cli_setup_load, cli_setup_open
#include "commands.h"          // defines: cmd_run
#include "model/engine.h"      // defines: struct jev_engine
#include "model/lm.h"          // defines: jev_lm_forward

#define RUN_MAX_IDS 262144

static void usage(FILE *f) {
    fprintf(f,
            "usage: jev run --model DIR [--ids 1,2,3 | --random-tokens N] [--chunk N] [--decode N]\n"
            "               [--threads N] [--backend B] [--precision M] [--top K] [--seed S] [--peak]\n"
            "               [--forks N [--suffix L]]\n\n"
            "  --model DIR          a model directory (HF bf16 or MLX 4-bit layout)\n"
            "  --ids LIST           prompt token ids, comma separated\n"
            "  --random-tokens N    a seeded random prompt of N ids instead (default 16)\n"
            "  --seed S             seed of the random prompt (default 1)\n"
            "  --chunk N            prefill chunk: tokens per forward, the engine's slice (default 512;\n"
            "                       --step-tokens N sets the same)\n"
            "  --decode N           greedy decode steps after the prefill (default 8)\n"
            "  --threads N          worker threads (default: all cores)\n"
            "  --backend B          cpu (default), cuda or cuda:N (a CUDA build: make CUDA=1)\n"
            "  --precision M        exact (default: f32 math) or fast (bf16 matrix products: CUDA, AVX512-BF16 CPUs)\n"
            "  -v                   the engine's sizes, and the engines the command made, on stderr\n"
            "  --top K              next tokens to print after the prefill (default 5)\n"
            "  --peak               also measure the f32 FMA peak and print the prefill's share of it\n"
            "  --forks N            after the prefill, fork the sequence N times (at most 64) and run one\n"
            "                       batch of N suffixes of --suffix tokens (default 16), logits at each last token\n");
}

static int parse_ids(const char *s, int32_t *ids, int32_t *n) {
    *n = 0;
    const char *p = s;
    while (*p) {
        char *end = NULL;
        errno = 0;
        long v = strtol(p, &end, 10);
        if (errno || end == p || v < 0 || v > INT32_MAX || *n >= RUN_MAX_IDS)
            return -1;
        ids[(*n)++] = (int32_t)v;
        if (*end == ',')
            end++;
        else if (*end)
            return -1;
        p = end;
    }
    return *n > 0 ? 0 : -1;
}

static int32_t argmax(const float *x, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = i;
    return best;
}

/* The k largest entries of x (ties: lower id first), ids into top[k]. */
static void top_k(const float *x, int32_t n, int32_t k, int32_t *top) {
    for (int32_t j = 0; j < k; j++) {
        int32_t best = -1;
        for (int32_t i = 0; i < n; i++) {
            int taken = 0;
            for (int32_t q = 0; q < j; q++)
                taken |= top[q] == i;
            if (!taken && (best < 0 || x[i] > x[best]))
                best = i;
        }
        top[j] = best;
    }
}

/* One forward of n tokens of seq; the logits of its last token into logits (or none). */
static enum jev_status forward(struct jev_engine *e, struct jev_seq *seq, const int32_t *ids, int32_t n, int32_t *pos,
                               float *logits) {
    jev_lm_text_positions(seq, n, pos);
    int32_t last = n - 1;
    struct jev_lm_batch b = {.n_tokens = n,
                             .ids = ids,
                             .pos = pos,
                             .n_runs = 1,
                             .seqs = &seq,
                             .seq_len = &n,
                             .n_out = logits ? 1 : 0,
                             .out_idx = &last,
                             .logits = logits};
    struct jev_error err = {0};
    if (jev_lm_forward(&e->lm, &b, &err) != JEV_OK)
        return jev_engine_set_error(e, &err);
    return JEV_OK;
}

int cmd_run(int argc, char **argv) {
    const char *ids_arg = NULL;
    long n_random = 16, seed = 1, chunk = 0, n_decode = 8, top = 5, n_forks = 0, suffix = 16;
    int peak = 0;
    struct cli_setup cs;
    cli_setup_init(&cs, "run");
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        const char *v = i + 1 < argc ? argv[i + 1] : NULL;
        int bad = 0, got = 0;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--peak")) {
            peak = 1;
            continue;
        } else if ((got = cli_setup_arg(&cs, a, v)) == CLI_ARG_FLAG) {
            continue;
        } else if (got == CLI_ARG_BAD) {
            bad = 1;
        } else if (got == CLI_ARG_VALUE) {
        } else if (!strcmp(a, "--ids") && v) {
            ids_arg = v;
        } else if (!strcmp(a, "--random-tokens") && v) {
            bad = cli_parse_long(v, 1, RUN_MAX_IDS, &n_random);
        } else if (!strcmp(a, "--seed") && v) {
            bad = cli_parse_long(v, 0, INT32_MAX, &seed);
        } else if (!strcmp(a, "--chunk") && v) { /* the engine's slice, as --step-tokens (cli-setup) sets it */
            if (!(bad = cli_parse_long(v, 1, 65536, &chunk)))
                cs.ep.prefill_chunk = (int32_t)chunk;
        } else if (!strcmp(a, "--decode") && v) {
            bad = cli_parse_long(v, 0, 100000, &n_decode);
        } else if (!strcmp(a, "--forks") && v) {
            bad = cli_parse_long(v, 0, 64, &n_forks);
        } else if (!strcmp(a, "--suffix") && v) {
            bad = cli_parse_long(v, 1, 512, &suffix);
        } else if (!strcmp(a, "--top") && v) {
            bad = cli_parse_long(v, 0, 100, &top);
        } else {
            fprintf(stderr, "jev run: unknown or incomplete option '%s'\n\n", a);
            usage(stderr);
            return 2;
        }
        if (bad) {
            fprintf(stderr, "jev run: bad value '%s' for %s\n", v, a);
            return 2;
        }
        i++;
    }
    if (!cs.dir) {
        fprintf(stderr, "jev run: --model DIR is required\n\n");
        usage(stderr);
        return 2;
    }

    int32_t *ids = malloc((size_t)(RUN_MAX_IDS + n_decode + 1) * sizeof(int32_t));
    if (!ids)
        return 1;
    int32_t n = 0;
    if (ids_arg && parse_ids(ids_arg, ids, &n) != 0) {
        fprintf(stderr, "jev run: --ids wants non-negative integers separated by commas (at most %d)\n", RUN_MAX_IDS);
        free(ids);
        return 2;
    }

    if (peak && cs.backend && strcmp(cs.backend, "cpu") != 0) {
        fprintf(stderr, "jev run: --peak measures the CPU's FMA peak; it says nothing about --backend %s\n",
                cs.backend);
        free(ids);
        return 2;
    }
    cs.no_vision = true;
    struct jev_error err = {0};
    if (cli_setup_load(&cs, &err) != JEV_OK) {
        fprintf(stderr, "jev run: %s\n", err.msg);
        free(ids);
        cli_setup_free(&cs);
        return 1;
    }
    struct jev_model *model = cs.model;
    const char *dir = cs.dir;
    const struct jev_text_config *t = &model->config.text;
    if (!ids_arg) {
        uint64_t s = (uint64_t)seed;
        for (long i = 0; i < n_random; i++) {
            uint64_t z = (s += 0x9e3779b97f4a7c15ull);
            z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
            z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
            ids[n++] = (int32_t)((z ^ (z >> 31)) % (uint64_t)t->vocab_size);
        }
    }

    /* the engine's sizes follow from the arguments: the prompt, the decode steps and the forks */
    cs.ep.max_batch = n_forks > 0 ? (int32_t)n_forks + 1 : 1;
    chunk = cs.ep.prefill_chunk > 0 ? cs.ep.prefill_chunk : 512; /* --chunk or --step-tokens, the last given */
    cs.ep.prefill_chunk = (int32_t)chunk;
    /* the timed sequence and the warm-up's (the prompt again, plus 7 tokens) */
    int32_t need = 2 * n + (int32_t)(n_decode + suffix) + 8;
    cs.ep.max_tokens = need > 8192 ? need : 8192;
    int rc = 1;
    float *logits = NULL;
    int32_t *pos = NULL;
    struct jev_seq *seq = NULL;
    if (cli_setup_open(&cs, false, &err) != JEV_OK) {
        fprintf(stderr, "jev run: %s\n", err.msg);
        goto done;
    }
    struct jev_engine *e = cs.engine;
    int32_t V = model->weights.text.lm_head.rows;
    logits = malloc((size_t)V * sizeof(float));
    pos = malloc((size_t)(chunk > n ? chunk : n) * 3 * sizeof(int32_t));
    if (!logits || !pos || jev_seq_new(&e->state, &seq, &err) != JEV_OK) {
        fprintf(stderr, "jev run: %s\n", err.msg[0] ? err.msg : "out of memory");
        goto done;
    }
    printf("model %s: %s layout, D %d, %d layers (%d attention), vocab %d; %d threads\n", dir,
           model->layout == JEV_LAYOUT_MLX ? "mlx" : "hf", t->hidden, t->n_layers, t->n_full_layers, t->vocab_size,
           jev_pool_size(e->pool));

    /* prefill in chunks; logits only after the last */
    unsigned char *hash_in = NULL;
    size_t hash_len = (size_t)(n_decode + 1) * (size_t)V * sizeof(float);
    hash_in = malloc(hash_len);
    if (!hash_in)
        goto done;
    /* warm-up on a scratch sequence: the prompt in the same chunks, then 1, 2 and 4 tokens. It touches
     * every weight page (the model is mmapped) and the kernels' buffers, and it runs every shape timed
     * below once: a GPU library loads a kernel at its first call (cuBLAS lazily, ~140 ms over a
     * 532-token prefill on the H200), which is not the steady state a benchmark reports. */
    {
        struct jev_seq *warm = NULL;
        if (jev_seq_new(&e->state, &warm, &err) == JEV_OK) {
            for (int32_t at = 0; at < n; at += (int32_t)chunk) {
                int32_t m = n - at < chunk ? n - at : (int32_t)chunk;
                forward(e, warm, ids + at, m, pos, at + m == n ? logits : NULL);
            }
            forward(e, warm, ids, 1, pos, logits);
            int32_t two[2] = {ids[0], ids[n > 1 ? 1 : 0]};
            forward(e, warm, two, 2, pos, logits);
            int32_t four[4] = {ids[0], ids[0], ids[0], ids[0]};
            forward(e, warm, four, 4, pos, logits);
            jev_seq_free(warm);
        }
    }
    int64_t forwards0 = e->lm.n_forwards;
    struct jev_peak pk = {0};
    if (peak)
        pk = jev_peak_f32(e->pool, 0.5);
    double flops0 = e->lm.flops;
    double t0 = jev_now_ms();
    for (int32_t at = 0; at < n; at += (int32_t)chunk) {
        int32_t m = n - at < chunk ? n - at : (int32_t)chunk;
        if (forward(e, seq, ids + at, m, pos, at + m == n ? logits : NULL) != JEV_OK) {
            fprintf(stderr, "jev run: %s\n", jev_engine_last_error(e));
            free(hash_in);
            goto done;
        }
    }
    double t_prefill = jev_now_ms() - t0;
    double prefill_gflops = (e->lm.flops - flops0) / (t_prefill * 1e-3) / 1e9;
    memcpy(hash_in, logits, (size_t)V * sizeof(float));
    printf("prefill: %d tokens in chunks of %ld, %.1f GFLOP/s", n, chunk, prefill_gflops);
    if (peak)
        printf(" of a measured f32 FMA peak (%s) of %.1f GFLOP/s on %d threads (%.0f%%)", pk.isa ? pk.isa : "none",
               pk.gflops, pk.threads, 100.0 * prefill_gflops / pk.gflops);
    printf("\n");
    if (top > 0) {
        int32_t tk[100];
        top_k(logits, V, (int32_t)top, tk);
        printf("top %ld next tokens:", top);
        for (long i = 0; i < top; i++)
            printf(" %d (%.4f)", tk[i], (double)logits[tk[i]]);
        printf("\n");
    }

    /* forked suffixes: N children of the prefilled sequence, one batch */
    double t_fork = 0, t_suffix = 0;
    if (n_forks > 0) {
        struct jev_seq *kids[64];
        int32_t lens[64], n_sfx = (int32_t)(n_forks * suffix), rows[64];
        int32_t *sfx = malloc((size_t)n_sfx * sizeof(int32_t)), *spos = malloc((size_t)n_sfx * 3 * sizeof(int32_t));
        float *sl = malloc((size_t)n_forks * (size_t)V * sizeof(float));
        double tf = jev_now_ms();
        int ok = sfx && spos && sl;
        long made = 0;
        while (ok && made < n_forks && jev_seq_fork(seq, &kids[made], &err) == JEV_OK)
            made++;
        ok = ok && made == n_forks;
        t_fork = jev_now_ms() - tf;
        for (int32_t i = 0; ok && i < n_sfx; i++)
            sfx[i] = ids[(i * 7 + 3) % n];
        for (long k = 0; ok && k < n_forks; k++) {
            lens[k] = (int32_t)suffix;
            rows[k] = (int32_t)((k + 1) * suffix - 1);
            jev_lm_text_positions(kids[k], (int32_t)suffix, spos + k * suffix * 3);
        }
        struct jev_lm_batch fb = {.n_tokens = n_sfx,
                                  .ids = sfx,
                                  .pos = spos,
                                  .n_runs = (int32_t)n_forks,
                                  .seqs = kids,
                                  .seq_len = lens,
                                  .n_out = (int32_t)n_forks,
                                  .out_idx = rows,
                                  .logits = sl};
        double ts = jev_now_ms();
        if (ok && jev_lm_forward(&e->lm, &fb, &err) != JEV_OK)
            ok = 0;
        t_suffix = jev_now_ms() - ts;
        if (!ok)
            fprintf(stderr, "jev run: forks: %s\n", err.msg[0] ? err.msg : "out of memory");
        else
            printf("forks: %ld forks of %d tokens in %.2f ms; one batch of %ld x %ld suffix tokens in %.1f ms "
                   "(%.1f tok/s)\n",
                   n_forks, seq->n_tokens, t_fork, n_forks, suffix, t_suffix, n_sfx / (t_suffix * 1e-3));
        for (long k = 0; k < made; k++)
            jev_seq_free(kids[k]);
        free(sfx);
        free(spos);
        free(sl);
        if (!ok) {
            free(hash_in);
            goto done;
        }
    }

    /* greedy decode */
    double bytes0 = e->lm.bytes_streamed;
    double t1 = jev_now_ms();
    if (n_decode > 0)
        printf("decode:");
    for (long i = 0; i < n_decode; i++) {
        int32_t next = argmax(logits, V);
        ids[n + i] = next;
        printf(" %d", next);
        fflush(stdout);
        if (forward(e, seq, &ids[n + i], 1, pos, logits) != JEV_OK) {
            fprintf(stderr, "\njev run: %s\n", jev_engine_last_error(e));
            free(hash_in);
            goto done;
        }
        memcpy(hash_in + (size_t)(i + 1) * (size_t)V * sizeof(float), logits, (size_t)V * sizeof(float));
    }
    if (n_decode > 0)
        printf("\n");
    double t_decode = jev_now_ms() - t1;
    double bytes = e->lm.bytes_streamed - bytes0;
    char hex[JEV_SHA256_HEX];
    jev_sha256_hex(hash_in, hash_len, hex);
    free(hash_in);
    hex[16] = '\0';
    printf("jev run: prefill %d tok %.1f ms (%.1f tok/s) | decode %ld tok %.1f tok/s %.2f ms/tok | %.2f GB/s "
           "weights | logits %s\n",
           n, t_prefill, n / (t_prefill * 1e-3), n_decode, n_decode > 0 ? n_decode / (t_decode * 1e-3) : 0.0,
           n_decode > 0 ? t_decode / (double)n_decode : 0.0, t_decode > 0 ? bytes / (t_decode * 1e-3) / 1e9 : 0.0, hex);
    printf("forwards: %lld timed (+%lld warm-up)\n", (long long)(e->lm.n_forwards - forwards0),
           (long long)((n + chunk - 1) / chunk + 3));
    rc = 0;
done:
    jev_seq_free(seq);
    cli_setup_free(&cs);
    free(logits);
    free(pos);
    free(ids);
    return rc;
}

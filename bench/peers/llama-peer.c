/*
 * bench/peers/llama-peer.c - the benchmark's scoring paths in llama.cpp, over libllama's public API.
 *
 * What it is: the decision-level llama.cpp peer (docs/bench-peers.md). It reads the token ids of
 * jev's inputs dump, flattened by bench/peers/llamacpp.py into a plain list of numbers, loads a
 * GGUF of the same weights and runs the benchmark's two scoring paths the way a llama.cpp user
 * builds them:
 *   independent  per decision, one full evaluation of its prompt (the memory cleared before
 *                each), the label logits read at its last token;
 *   shared       one evaluation of the shared prefix in sequence 0, then per batch of suffixes
 *                llama_memory_seq_cp forks of sequence 0 (the attention cache and the Gated
 *                DeltaNet state), every suffix of the batch in one llama_decode, the label logits
 *                at each suffix's last token, the forks removed again.
 * It prints one line per measured sample and one per decision's label distribution; the wrapper
 * turns them into a jev-bench/2 record (one definition of the schema: bench/peers/jevbench.py,
 * checked against jev's own validator).
 *
 * What it is not: a vision peer. The prompts' image placeholder ids are evaluated as text tokens
 * (their embedding rows), with text positions, and no vision tower runs: the time is the language
 * model's on the same token counts, and the distributions are not the image-conditioned ones jev
 * computes. generate_json is not run. It is built by scripts/device/llama-peer.sh against the
 * llama.cpp release that scripts/device/llama-carry.sh packs, never by jev's Makefile.
 *
 * Usage: llama-peer MODEL.gguf INPUTS.txt [--repeats N] [--warmup N] [--threads N] [--ngl N]
 */
#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llama.h" // defines: llama_model_load_from_file, llama_decode, llama_memory_seq_cp, ...

enum { MAX_RUNS = 64, PATH_INDEPENDENT = 0, PATH_SHARED = 1 };

struct ids {
    int32_t n;
    llama_token *v;
};

/* one decision count of the dump: what both paths evaluate */
struct run {
    int32_t n;     /* decisions */
    int32_t batch; /* shared-path suffixes per llama_decode */
    struct ids prefix;
    struct ids *suffix, *prompt, *labels; /* [n] each */
};

struct peer {
    struct llama_context *ctx;
    const struct llama_vocab *vocab;
    struct llama_batch batch;
    int32_t batch_cap;
    int32_t n_vocab;
    long lm_forwards;
};

static double now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static int fail(const char *what) {
    fprintf(stderr, "llama-peer: error: %s\n", what);
    return 1;
}

/* ---- the flat inputs: "jev-llama-inputs 1", then per run "run N BATCH", "prefix L ids",
 * N x "suffix L ids", N x "prompt L ids", N x "labels K ids" ---- */

static int read_word(FILE *f, const char *want) {
    char w[32];
    if (fscanf(f, "%31s", w) != 1 || strcmp(w, want) != 0) {
        fprintf(stderr, "llama-peer: error: inputs: expected '%s'\n", want);
        return 1;
    }
    return 0;
}

static int read_ids(FILE *f, const char *tag, struct ids *out, int32_t n_vocab) {
    if (read_word(f, tag))
        return 1;
    if (fscanf(f, "%d", &out->n) != 1 || out->n < 1 || out->n > 1 << 20) {
        fprintf(stderr, "llama-peer: error: inputs: %s: bad length\n", tag);
        return 1;
    }
    out->v = malloc((size_t)out->n * sizeof *out->v);
    if (!out->v)
        return fail("out of memory");
    for (int32_t i = 0; i < out->n; i++) {
        if (fscanf(f, "%d", &out->v[i]) != 1 || out->v[i] < 0 || out->v[i] >= n_vocab) {
            fprintf(stderr, "llama-peer: error: inputs: %s[%d]: not a token id below %d\n", tag, i, n_vocab);
            return 1;
        }
    }
    return 0;
}

static int read_inputs(const char *path, struct run *runs, int *n_runs, int32_t n_vocab) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "llama-peer: error: %s: %s\n", path, strerror(errno));
        return 1;
    }
    int version = 0, rc = 1;
    *n_runs = 0;
    if (read_word(f, "jev-llama-inputs") || fscanf(f, "%d", &version) != 1 || version != 1) {
        fprintf(stderr, "llama-peer: error: %s: not jev-llama-inputs 1\n", path);
        goto done;
    }
    char w[32];
    while (fscanf(f, "%31s", w) == 1) {
        if (strcmp(w, "run") != 0 || *n_runs == MAX_RUNS) {
            fprintf(stderr, "llama-peer: error: %s: expected 'run' (at most %d)\n", path, MAX_RUNS);
            goto done;
        }
        struct run *r = &runs[(*n_runs)++];
        if (fscanf(f, "%d %d", &r->n, &r->batch) != 2 || r->n < 1 || r->n > 65536 || r->batch < 1) {
            fprintf(stderr, "llama-peer: error: %s: run %d: bad decisions or batch\n", path, *n_runs - 1);
            goto done;
        }
        r->suffix = calloc((size_t)r->n, sizeof *r->suffix);
        r->prompt = calloc((size_t)r->n, sizeof *r->prompt);
        r->labels = calloc((size_t)r->n, sizeof *r->labels);
        if (!r->suffix || !r->prompt || !r->labels) {
            fail("out of memory");
            goto done;
        }
        if (read_ids(f, "prefix", &r->prefix, n_vocab))
            goto done;
        for (int32_t i = 0; i < r->n; i++)
            if (read_ids(f, "suffix", &r->suffix[i], n_vocab))
                goto done;
        for (int32_t i = 0; i < r->n; i++)
            if (read_ids(f, "prompt", &r->prompt[i], n_vocab))
                goto done;
        for (int32_t i = 0; i < r->n; i++)
            if (read_ids(f, "labels", &r->labels[i], n_vocab))
                goto done;
    }
    rc = *n_runs > 0 ? 0 : fail("inputs: no run");
done:
    fclose(f);
    return rc;
}

/* ---- evaluation ---- */

static void batch_add(struct llama_batch *b, llama_token id, llama_pos pos, llama_seq_id seq, int8_t out) {
    int32_t k = b->n_tokens++;
    b->token[k] = id;
    b->pos[k] = pos;
    b->n_seq_id[k] = 1;
    b->seq_id[k][0] = seq;
    b->logits[k] = out;
}

static int decode(struct peer *p) {
    int32_t rc = llama_decode(p->ctx, p->batch);
    p->lm_forwards++;
    if (rc != 0) {
        fprintf(stderr, "llama-peer: error: llama_decode of %d tokens returned %d\n", p->batch.n_tokens, rc);
        return 1;
    }
    return 0;
}

/* the softmax over the label logits, in double, as jev and the transformers peer compute it */
static void label_probs(const float *logits, const struct ids *labels, double *probs) {
    double mx = -INFINITY, sum = 0.0;
    for (int32_t k = 0; k < labels->n; k++)
        mx = fmax(mx, (double)logits[labels->v[k]]);
    for (int32_t k = 0; k < labels->n; k++)
        sum += probs[k] = exp((double)logits[labels->v[k]] - mx);
    for (int32_t k = 0; k < labels->n; k++)
        probs[k] /= sum;
}

/* times of one request, ms */
struct sample {
    double total, prefill, scoring;
    long forwards;
};

/* probs: [n][max labels] */
static int run_independent(struct peer *p, const struct run *r, double *probs, int32_t stride, struct sample *s) {
    llama_memory_t mem = llama_get_memory(p->ctx);
    long f0 = p->lm_forwards;
    double t0 = now_ms();
    for (int32_t i = 0; i < r->n; i++) {
        llama_memory_clear(mem, false);
        p->batch.n_tokens = 0;
        for (int32_t t = 0; t < r->prompt[i].n; t++)
            batch_add(&p->batch, r->prompt[i].v[t], t, 0, t == r->prompt[i].n - 1);
        if (decode(p))
            return 1;
        label_probs(llama_get_logits_ith(p->ctx, -1), &r->labels[i], probs + (size_t)i * (size_t)stride);
    }
    s->total = s->prefill = now_ms() - t0;
    s->scoring = 0.0;
    s->forwards = p->lm_forwards - f0;
    return 0;
}

static int run_shared(struct peer *p, const struct run *r, double *probs, int32_t stride, struct sample *s) {
    llama_memory_t mem = llama_get_memory(p->ctx);
    long f0 = p->lm_forwards;
    double t0 = now_ms();
    llama_memory_clear(mem, false);
    p->batch.n_tokens = 0;
    for (int32_t t = 0; t < r->prefix.n; t++)
        batch_add(&p->batch, r->prefix.v[t], t, 0, 0);
    if (decode(p))
        return 1;
    llama_synchronize(p->ctx);
    double t1 = now_ms();
    int32_t at[256]; /* each suffix's last index in the batch */
    for (int32_t b0 = 0; b0 < r->n; b0 += r->batch) {
        int32_t nb = r->n - b0 < r->batch ? r->n - b0 : r->batch;
        p->batch.n_tokens = 0;
        for (int32_t j = 0; j < nb; j++) {
            const struct ids *suf = &r->suffix[b0 + j];
            llama_memory_seq_cp(mem, 0, 1 + j, -1, -1);
            for (int32_t t = 0; t < suf->n; t++)
                batch_add(&p->batch, suf->v[t], r->prefix.n + t, 1 + j, t == suf->n - 1);
            at[j] = p->batch.n_tokens - 1;
        }
        if (decode(p))
            return 1;
        for (int32_t j = 0; j < nb; j++)
            label_probs(llama_get_logits_ith(p->ctx, at[j]), &r->labels[b0 + j],
                        probs + (size_t)(b0 + j) * (size_t)stride);
        for (int32_t j = 0; j < nb; j++)
            llama_memory_seq_rm(mem, 1 + j, -1, -1);
    }
    double t2 = now_ms();
    s->total = t2 - t0;
    s->prefill = t1 - t0;
    s->scoring = t2 - t1;
    s->forwards = p->lm_forwards - f0;
    return 0;
}

static const char *const PATH_NAMES[2] = {"independent", "shared"};

static int run_path(struct peer *p, int path, const struct run *r, double *probs, int32_t stride, struct sample *s) {
    return path == PATH_SHARED ? run_shared(p, r, probs, stride, s) : run_independent(p, r, probs, stride, s);
}

static void print_sample(int path, const struct run *r, int repeat, int order, const struct sample *s,
                         const double *probs, int32_t stride) {
    printf("sample %d %s %d %d %.6f %.6f %.6f %ld\n", r->n, PATH_NAMES[path], repeat, order, s->total, s->prefill,
           s->scoring, s->forwards);
    for (int32_t i = 0; i < r->n; i++) {
        printf("probs %d %s %d %d %d", r->n, PATH_NAMES[path], repeat, i, r->labels[i].n);
        for (int32_t k = 0; k < r->labels[i].n; k++)
            printf(" %.17g", probs[(size_t)i * (size_t)stride + (size_t)k]);
        printf("\n");
    }
}

static void quiet_log(enum ggml_log_level level, const char *text, void *user) {
    if (level == GGML_LOG_LEVEL_ERROR || level == GGML_LOG_LEVEL_WARN)
        fputs(text, stderr);
}

static int parse_int(const char *s, int lo, int hi, int *out) {
    char *end;
    long v = strtol(s, &end, 10);
    if (*s == '\0' || *end != '\0' || v < lo || v > hi)
        return 1;
    *out = (int)v;
    return 0;
}

int main(int argc, char **argv) {
    int repeats = 3, warmup = 1, threads = 0, ngl = 99;
    if (argc < 3) {
        fprintf(stderr, "usage: llama-peer MODEL.gguf INPUTS.txt [--repeats N] [--warmup N] [--threads N] [--ngl N]\n");
        return 2;
    }
    for (int i = 3; i < argc; i++) {
        int *dst = !strcmp(argv[i], "--repeats")   ? &repeats
                   : !strcmp(argv[i], "--warmup")  ? &warmup
                   : !strcmp(argv[i], "--threads") ? &threads
                   : !strcmp(argv[i], "--ngl")     ? &ngl
                                                   : NULL;
        if (!dst || i + 1 == argc || parse_int(argv[i + 1], dst == &repeats ? 1 : 0, 1000, dst)) {
            fprintf(stderr, "llama-peer: error: %s: unknown option or bad value\n", argv[i]);
            return 2;
        }
        i++;
    }
    llama_log_set(quiet_log, NULL);
    llama_backend_init();
    struct llama_model_params mp = llama_model_default_params();
    mp.n_gpu_layers = ngl;
    struct llama_model *model = llama_model_load_from_file(argv[1], mp);
    if (!model)
        return fail("cannot load the model (see above)");
    struct peer p = {0};
    p.vocab = llama_model_get_vocab(model);
    p.n_vocab = llama_vocab_n_tokens(p.vocab);

    static struct run runs[MAX_RUNS];
    int n_runs = 0;
    if (read_inputs(argv[2], runs, &n_runs, p.n_vocab))
        return 1;

    /* sizes: the longest single evaluation, the largest context and fork count any run needs */
    int32_t need_batch = 1, need_ctx = 1, need_seq = 1, stride = 1;
    for (int k = 0; k < n_runs; k++) {
        const struct run *r = &runs[k];
        if (r->batch > 255)
            return fail("inputs: a shared batch above 255 forks");
        int32_t suffix_sum = 0, in_batch = 0;
        for (int32_t i = 0; i < r->n; i++) {
            need_batch = r->prompt[i].n > need_batch ? r->prompt[i].n : need_batch;
            stride = r->labels[i].n > stride ? r->labels[i].n : stride;
            in_batch += r->suffix[i].n;
            suffix_sum = in_batch > suffix_sum ? in_batch : suffix_sum;
            if ((i + 1) % r->batch == 0)
                in_batch = 0;
        }
        need_batch = r->prefix.n > need_batch ? r->prefix.n : need_batch;
        need_batch = suffix_sum > need_batch ? suffix_sum : need_batch;
        need_ctx = r->prefix.n + suffix_sum > need_ctx ? r->prefix.n + suffix_sum : need_ctx;
        need_seq = r->batch + 1 > need_seq ? r->batch + 1 : need_seq;
    }
    need_ctx = need_batch > need_ctx ? need_batch : need_ctx;

    struct llama_context_params cp = llama_context_default_params();
    cp.n_ctx = (uint32_t)((need_ctx + 255) / 256 * 256);
    cp.n_batch = (uint32_t)need_batch; /* each evaluation is one llama_decode (split into n_ubatch inside) */
    cp.n_seq_max = (uint32_t)need_seq;
    cp.kv_unified = true; /* the forks share the prefix's cells */
    if (threads > 0)
        cp.n_threads = cp.n_threads_batch = threads;
    p.ctx = llama_init_from_model(model, cp);
    if (!p.ctx)
        return fail("cannot make a context (see above)");
    p.batch_cap = need_batch;
    p.batch = llama_batch_init(need_batch, 0, 1);
    fprintf(stderr, "llama-peer: %d runs, n_ctx %u, n_batch %u, n_ubatch %u, n_seq_max %u, threads %d\n", n_runs,
            llama_n_ctx(p.ctx), cp.n_batch, cp.n_ubatch, llama_n_seq_max(p.ctx), cp.n_threads);
    printf("system %s\n", llama_print_system_info());

    int rc = 0;
    for (int k = 0; k < n_runs && rc == 0; k++) {
        const struct run *r = &runs[k];
        double *probs = malloc((size_t)r->n * (size_t)stride * sizeof *probs);
        if (!probs)
            return fail("out of memory");
        struct sample s;
        for (int w = 0; w < warmup && rc == 0; w++)
            for (int path = 0; path < 2 && rc == 0; path++)
                rc = run_path(&p, path, r, probs, stride, &s);
        /* the path order rotates per repeat, as jev bench's */
        for (int rep = 0; rep < repeats && rc == 0; rep++) {
            for (int o = 0; o < 2 && rc == 0; o++) {
                int path = (o + rep) % 2;
                rc = run_path(&p, path, r, probs, stride, &s);
                if (rc == 0)
                    print_sample(path, r, rep, o, &s, probs, stride);
            }
        }
        fflush(stdout);
        free(probs);
    }
    llama_batch_free(p.batch);
    llama_free(p.ctx);
    llama_model_free(model);
    llama_backend_free();
    return rc;
}

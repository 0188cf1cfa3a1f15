/*
 * fuzz-lm-batch.c - arbitrary batch descriptors through jev_lm_forward on
 * the in-memory fixture model (tests/lm-fixture.h): run counts and lengths,
 * token ids, positions, repeated sequences, forks and frozen parents,
 * logit rows and candidate vocabulary rows all come from the input bytes.
 * The forward must either run or return an error, never crash, read out of
 * bounds or leave a sequence half advanced; the state pool must stay
 * consistent (every page back after the sequences are freed).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "../tests/lm-fixture.h" // defines: fx_build (the fixture model)
#include "backend/ops.h"         // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"           // defines: jev_pool_init
#include "model/lm.h"            // defines: jev_lm_forward

#define MAX_TOK 96

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static struct fx_model g_model;
static struct jev_backend *g_be;
static struct jev_state g_st;
static struct jev_lm g_lm;

static int setup(void) {
    static int done;
    if (done)
        return 0;
    struct jev_error err = {0};
    fx_build(&g_model, 3);
    struct jev_pool *pool = NULL; /* NULL pool: everything on the calling thread */
    g_be = jev_cpu_backend_new(pool);
    struct jev_state_params sp = {.max_tokens = 200, .max_seqs = 6, .kv_tokens = 256};
    if (!g_be || jev_state_init(&g_st, &g_model.cfg, &sp, &err) != JEV_OK)
        abort();
    struct jev_lm_params lp = {.max_batch_tokens = 40, .max_runs = 4, .max_tokens = 200,
                               .max_spans = jev_seq_max_spans(&g_st)};
    if (jev_lm_init(&g_lm, &g_model.cfg, &g_model.w, &jev_cpu_ops, g_be, &lp, &err) != JEV_OK)
        abort();
    done = 1;
    return 0;
}

struct reader {
    const uint8_t *p;
    size_t n;
};

static uint32_t take(struct reader *r) {
    uint32_t v = 0;
    for (int i = 0; i < 2 && r->n > 0; i++, r->p++, r->n--)
        v = v << 8 | *r->p;
    return v;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    setup();
    struct reader r = {data, size};
    struct jev_error err = {0};
    struct jev_seq *pool[4] = {0};
    int n_pool = 0;
    /* a parent with a prefix, sometimes forked (then frozen) */
    uint32_t mode = take(&r);
    if (jev_seq_new(&g_st, &pool[n_pool], &err) == JEV_OK) {
        int32_t pre = (int32_t)(mode % 50) + 1, ids[50], pos[150];
        for (int32_t i = 0; i < pre; i++)
            ids[i] = (int32_t)(i * 7 % g_model.cfg.text.vocab_size);
        jev_lm_text_positions(pool[n_pool], pre, pos);
        struct jev_lm_batch b = {.n_tokens = pre, .ids = ids, .pos = pos, .n_runs = 1, .seqs = &pool[n_pool],
                                 .seq_len = &pre};
        jev_lm_forward(&g_lm, &b, &err);
        jev_error_clear(&err);
        n_pool++;
        if (mode & 0x100)
            for (int k = 0; k < 2 && n_pool < 4; k++)
                if (jev_seq_fork(pool[0], &pool[n_pool], &err) == JEV_OK)
                    n_pool++;
        jev_error_clear(&err);
    }
    while (n_pool < 4 && jev_seq_new(&g_st, &pool[n_pool], &err) == JEV_OK)
        n_pool++;
    jev_error_clear(&err);

    /* the batch */
    int32_t n_runs = (int32_t)(take(&r) % 6); /* up to 5: over max_runs sometimes */
    struct jev_seq *seqs[8];
    int32_t lens[8], total = 0;
    for (int32_t i = 0; i < n_runs; i++) {
        uint32_t v = take(&r);
        seqs[i] = n_pool > 0 ? pool[v % (uint32_t)n_pool] : NULL; /* repeats are possible */
        lens[i] = (int32_t)((v >> 4) % 40) - 1;                  /* -1..38 */
        total += lens[i] > 0 ? lens[i] : 0;
    }
    if (total > MAX_TOK)
        total = MAX_TOK;
    int32_t n_tokens = (int32_t)(take(&r) % 3) == 0 ? total + 1 : total; /* sometimes inconsistent */
    int32_t ids[MAX_TOK + 1], pos[(MAX_TOK + 1) * 3], out[8], vocab_rows[4];
    for (int32_t i = 0; i < n_tokens && i <= MAX_TOK; i++) {
        ids[i] = (int32_t)take(&r) - 1000;
        pos[i * 3] = pos[i * 3 + 1] = pos[i * 3 + 2] = (int32_t)take(&r);
    }
    int32_t n_out = (int32_t)(take(&r) % 9) - 1;
    for (int32_t i = 0; i < 8; i++)
        out[i] = (int32_t)(take(&r) % (uint32_t)(MAX_TOK + 2)) - 1;
    int32_t n_vocab = (int32_t)(take(&r) % 5);
    for (int32_t i = 0; i < 4; i++)
        vocab_rows[i] = (int32_t)take(&r) - 100;
    float *logits = malloc(8 * (size_t)g_model.cfg.text.vocab_size * sizeof(float));
    int32_t before[4];
    for (int i = 0; i < n_pool; i++)
        before[i] = pool[i]->n_tokens;
    struct jev_lm_batch b = {.n_tokens = n_tokens, .ids = ids, .pos = pos, .n_runs = n_runs, .seqs = seqs,
                             .seq_len = lens, .n_out = n_out, .out_idx = out, .n_vocab_rows = n_vocab,
                             .vocab_rows = vocab_rows, .logits = logits};
    enum jev_status s = jev_lm_forward(&g_lm, &b, &err);
    if (s != JEV_OK)
        for (int i = 0; i < n_pool; i++)
            if (pool[i]->n_tokens != before[i])
                abort(); /* a failed batch changed a sequence */
    free(logits);
    for (int i = n_pool - 1; i >= 0; i--)
        jev_seq_free(pool[i]);
    if (g_st.n_live != 0 || g_st.n_free != g_st.n_pages)
        abort(); /* storage leaked from the pool */
    return 0;
}

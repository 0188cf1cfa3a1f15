/*
 * lm.h - the Qwen3.5 hybrid language model forward over a batch of tokens
 * drawn from several sequences.
 *
 * One function, jev_lm_forward, runs every case: prefill in chunks of any
 * size, single-token decode, and a batch of forked suffixes. A batch is a
 * list of runs; run i appends seq_len[i] tokens to sequence seqs[i]; the
 * runs' tokens are contiguous and in run order in ids/pos. Every token comes
 * with its own 3-axis M-RoPE position (t, h, w), supplied by the caller
 * (jev_lm_text_positions fills text positions p + rope_delta), and may have
 * its input embedding replaced by a caller row (image embeddings at the
 * image-pad tokens).
 *
 * Logits come only where asked: at batch rows out_idx[] (strictly
 * increasing) and over vocabulary rows vocab_rows[] (candidate labels) or the
 * full vocabulary. A debug hook sees the embeddings, every layer's output and
 * the final norm.
 *
 * What it is not: tokenization, sampling, vision. It never allocates after
 * jev_lm_init: activations live in one arena sized from the params, and a
 * batch larger than max_batch_tokens is processed in consecutive slices
 * (which, like HF's chunked prefill through the cache, only changes where
 * DeltaNet chunks start).
 */
#ifndef JEV_MODEL_LM_H
#define JEV_MODEL_LM_H

#include <stdint.h>

#include "backend/ops.h"   // defines: struct jev_ops, struct jev_backend
#include "base/arena.h"    // defines: struct jev_arena
#include "model/rope.h"    // defines: struct jev_rope
#include "model/state.h"   // defines: struct jev_seq, struct jev_state
#include "model/weights.h" // defines: struct jev_weights

/* Called after each step with the slice's rows (row0 = first batch row of the slice). */
typedef void (*jev_lm_hook_fn)(void *user, const char *name, int32_t layer, const float *x, int64_t row0, int64_t rows,
                               int64_t cols);

struct jev_lm_params {
    int32_t max_batch_tokens; /* tokens per internal slice (activation sizing); 0 = 512 */
    int32_t max_runs;         /* sequences in one batch; 0 = 64 */
    int32_t max_tokens;       /* longest sequence (attention scratch); 0 = 8192 */
    int32_t max_spans;        /* K/V spans one sequence may have (jev_seq_max_spans) */
    int32_t max_light;        /* light forks (state.h) in one slice, each a layer's DeltaNet state of scratch: a
                                 slice ends early at this many; 0 = no light forks */
};

struct jev_lm_batch {
    int32_t n_tokens;   /* tokens in the batch */
    const int32_t *ids; /* [n_tokens] token ids */
    const int32_t *pos; /* [n_tokens][3] M-RoPE positions (t, h, w) */
    const float *const
        *embd_rows; /* [n_tokens] replacement input rows of D floats, NULL entries = embed ids; may be NULL */
    int32_t n_runs; /* sequences */
    struct jev_seq *const *seqs; /* [n_runs] distinct sequences, appended in place */
    const int32_t *seq_len;      /* [n_runs] tokens per run (>= 1), summing to n_tokens */
    int32_t n_out;               /* batch rows with logits (0 = none) */
    const int32_t *out_idx;      /* [n_out] strictly increasing batch rows */
    int32_t n_vocab_rows;        /* candidate vocabulary rows; 0 = the full vocabulary */
    const int32_t *vocab_rows;   /* [n_vocab_rows] token ids whose logits are computed */
    float *logits;               /* [n_out][n_vocab_rows or vocab_size] out */
};

struct jev_lm {
    const struct jev_config *cfg; /* model hyperparameters (not owned) */
    const struct jev_weights *w;  /* weights (not owned, read-only) */
    const struct jev_ops *ops;    /* backend op table */
    struct jev_backend *be;       /* backend instance (not owned) */
    struct jev_rope rope;         /* inverse frequencies and axes */
    struct jev_lm_params p;       /* sizes, defaults filled */
    struct jev_arena arena;       /* the activation buffers below, in backend memory (ops->alloc) */
    struct jev_arena host_arena;  /* run descriptors and, for a device backend, host staging */
    void *arena_block;            /* arena's block, from ops->alloc */
    /* activations of one slice of up to T = max_batch_tokens tokens */
    float *x;                       /* [T][D] residual stream */
    float *h;                       /* [T][D] normed input of a sub-layer */
    float *out;                     /* [T][D] sub-layer output */
    float *big_a;                   /* [T][max(conv_dim, 2*Hq*dh, F)] qkv / q-gate / MLP gate */
    float *big_b;                   /* [T][max(conv_dim, Hq*dh, F)] conv out / q / MLP up */
    float *mid_c;                   /* [T][max(value_dim, Hq*dh)] z / attention gate */
    float *mid_d;                   /* [T][max(value_dim, Hq*dh)] delta-rule / attention output */
    float *kbuf;                    /* [T][kv_dim] new keys */
    float *vbuf;                    /* [T][kv_dim] new values */
    float *ga;                      /* [T][Hv] a projections */
    float *gb;                      /* [T][Hv] b projections */
    float *gg;                      /* [T][Hv] log decay g */
    float *gbeta;                   /* [T][Hv] beta */
    float *cos;                     /* [T][n_freq] */
    float *sin;                     /* [T][n_freq] */
    float *xo;                      /* [T][D] final-normed rows at logit positions */
    float *light_lin;               /* [max_light][(K-1)*conv_dim + Hv*dk*dv] one layer's state per light run */
    struct jev_kv_span *spans;      /* [max_runs][max_spans] */
    struct jev_attn_run *attn_runs; /* [max_runs] (a slice may split a run: max_runs + 1) */
    struct jev_gdn_run *gdn_runs;   /* [max_runs + 1] */
    struct jev_seq **slice_seq;     /* [max_runs + 1] sequence of each slice run */
    int32_t *slice_len;             /* [max_runs + 1] tokens of each slice run */
    /* staging for a device backend (NULL when backend memory is host memory) */
    float *host_cos, *host_sin; /* [T][n_freq] tables computed on the host, then uploaded */
    float *host_rows;           /* [T][D] a hook's view of an activation */
    float *logit_stage;         /* [logit_stage_rows][vocab] backend memory, downloaded into the caller's */
    int32_t logit_stage_rows;
    /* debug hook */
    jev_lm_hook_fn hook; /* NULL = none */
    void *hook_user;     /* passed to hook */
    /* counters */
    int64_t n_forwards;    /* jev_lm_forward calls that ran */
    int64_t n_slices;      /* internal slices run */
    int64_t n_tokens;      /* tokens processed */
    int64_t n_logit_rows;  /* rows of logits computed */
    double bytes_streamed; /* weight bytes read by matmuls (each slice streams every layer once) */
    double flops;          /* dense flops: 2 x multiply-adds of the matmuls, attention scores and sums */
    size_t layer_bytes;    /* weight bytes of all decoder layers */
    double layer_macs;     /* multiply-adds per token of all decoder-layer matrices */
};

/* Sizes and allocates the activations; cfg and w must outlive lm. */
enum jev_status jev_lm_init(struct jev_lm *lm, const struct jev_config *cfg, const struct jev_weights *w,
                            const struct jev_ops *ops, struct jev_backend *be, const struct jev_lm_params *p,
                            struct jev_error *err);
void jev_lm_free(struct jev_lm *lm);

/* Bytes of activations jev_lm_init allocates for these params. */
size_t jev_lm_bytes(const struct jev_config *cfg, const struct jev_lm_params *p);

/*
 * Runs the batch. On success every sequence advanced by its run length and
 * logits are written. On failure (bad argument, a sequence full or frozen by
 * forks) nothing changed.
 */
enum jev_status jev_lm_forward(struct jev_lm *lm, const struct jev_lm_batch *b, struct jev_error *err);

/* Text positions for n tokens appended to seq: p = seq->n_tokens + i + rope_delta on all three axes. */
void jev_lm_text_positions(const struct jev_seq *seq, int32_t n, int32_t *pos);

/* Bytes of a weight matrix as stored (codes + scales + biases for QAFFINE). */
size_t jev_matrix_bytes(const struct jev_matrix *m);

#endif

/*
 * state.h - the language model's per-sequence state and its fork.
 *
 * A sequence (struct jev_seq) is everything the model remembers about the
 * tokens it has seen:
 * - per FULL (gated attention) layer: K (after k_norm and RoPE) and V of every
 *   token, [Hkv*dh] floats each, in pages of JEV_KV_PAGE tokens taken from one
 *   pool shared by all sequences of the engine;
 * - per LINEAR (Gated DeltaNet) layer: the conv window (the last K-1 pre-conv
 *   inputs, oldest first, [K-1][conv_dim]) and the recurrent matrix
 *   [Hv][dk][dv] f32 (HF's layout [B, H, K, V]);
 * - the token count and rope_delta (decode positions are count + rope_delta).
 *
 * Fork (jev_seq_fork): the child refers to the parent's K/V as a read-only
 * prefix and copies only the fixed-size linear state, so a fork costs the
 * same at any context length.
 *
 * Light fork (jev_seq_fork_light): a child with K/V pages of its own and no
 * linear state at all. Its one forward reads the parent's conv windows and
 * recurrent matrices and writes the updated ones to the forward's scratch
 * (model/lm.c), so nothing of them outlives the forward: what scoring a
 * label needs (the logits at the suffix's last token), for no slot storage
 * and no copy. A light slot costs a page table; a full slot one linear state
 * (about 20 MB for the 0.8B model, device memory on CUDA), which is what
 * bounds how many forks fit. Rules:
 * - A sequence with live children is frozen: appending to it fails with
 *   JEV_ERR_INVALID_ARG (its K/V are someone's prefix; its linear state is
 *   still its own, but advancing it would desynchronise the two halves).
 * - Children are independent of each other and may be forked again (the
 *   prefix is then a chain of ancestors). A light fork may not: it is
 *   forked from a full sequence, appended to once (one forward, never split
 *   across the forward's slices: lm.c) and then only read or freed.
 * - jev_seq_free releases the caller's reference; the storage of a parent
 *   returns to the pool only when its last child is freed too.
 *
 * Memory: all sizes come from struct jev_state_params; jev_state_init
 * allocates once (the K/V pool, the linear-state slots, the bookkeeping) and
 * nothing is allocated afterwards: append takes pages from a free list, fork
 * takes a free slot. Nothing here is thread-safe: one engine, one thread.
 */
#ifndef JEV_MODEL_STATE_H
#define JEV_MODEL_STATE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/ops.h"  // defines: struct jev_kv_span
#include "base/error.h"   // defines: struct jev_error
#include "model/config.h" // defines: struct jev_config

#define JEV_KV_PAGE 64 /* tokens per K/V page */

/* The K/V pages `tokens` tokens take. */
static inline int32_t jev_kv_pages(int64_t tokens) { return (int32_t)((tokens + JEV_KV_PAGE - 1) / JEV_KV_PAGE); }

struct jev_state_params {
    int32_t max_tokens; /* longest sequence, prefix included */
    int32_t max_seqs;   /* full sequences alive at once (forks and released parents included) */
    int32_t max_light;  /* light forks alive at once (jev_seq_fork_light); 0 = none */
    int32_t kv_tokens;  /* own tokens of all live sequences together; 0 = 2 * max_tokens */
    /* Where the K/V pool and the linear states live: the backend's memory (device memory for
     * CUDA), so that the ops read them in place. NULL: the CPU's (host memory, calloc'ed). */
    const struct jev_ops *ops;
    struct jev_backend *be;
};

struct jev_state;

struct jev_seq {
    struct jev_state *st;   /* the pool it lives in */
    int32_t slot;           /* index of its linear-state slot and page table */
    bool live;              /* slot in use */
    bool light;             /* a light slot: no linear state (conv and ssm NULL), K/V pages only */
    bool released;          /* the caller freed it; kept while children use its K/V */
    int32_t refs;           /* the caller's reference (until released) + one per live child */
    int32_t n_children;     /* live direct children (append is refused while > 0) */
    int32_t n_tokens;       /* tokens seen, prefix included */
    int32_t rope_delta;     /* M-RoPE offset: next text position = n_tokens + rope_delta */
    struct jev_seq *parent; /* the sequence whose first n_prefix tokens are ours; NULL = none */
    int32_t n_prefix;       /* tokens held by ancestors (own K/V start at this index) */
    int32_t n_pages;        /* own K/V pages in use */
    int32_t *pages;         /* [max_pages] page ids into the pool, in token order */
    float *conv;            /* [n_linear][K-1][conv_dim] conv windows, oldest input first; NULL when light */
    float *ssm;             /* [n_linear][Hv][dk][dv] recurrent matrices; NULL when light */
};

struct jev_state {
    /* sizes */
    int32_t n_layers;                   /* decoder layers */
    int32_t n_full;                     /* FULL layers */
    int32_t n_linear;                   /* LINEAR layers */
    int32_t layer_slot[JEV_MAX_LAYERS]; /* index among layers of the same kind */
    int32_t kv_dim;                     /* Hkv * dh */
    int32_t conv_dim;                   /* 2 * key_dim + value_dim */
    int32_t conv_keep;                  /* K - 1 */
    int64_t ssm_floats;                 /* Hv * dk * dv per layer */
    int32_t max_tokens;                 /* per-sequence limit */
    int32_t max_seqs;                   /* full slots (with a linear state): seqs[0, max_seqs) */
    int32_t max_light;                  /* light slots: seqs[max_seqs, max_seqs + max_light) */
    int32_t max_pages;                  /* pages one sequence may own */
    int32_t n_pages;                    /* pages in the pool */
    /* storage (allocated once) */
    const struct jev_ops *ops; /* the backend owning kv and lin (jev_cpu_ops when none was named) */
    struct jev_backend *be;
    float *kv;            /* [n_pages][n_full][2][JEV_KV_PAGE][kv_dim] */
    float *lin;           /* [max_seqs][n_linear * ((K-1)*conv_dim + ssm_floats)] */
    struct jev_seq *seqs; /* [max_seqs + max_light] */
    int32_t *page_table;  /* [max_seqs + max_light][max_pages] */
    int32_t *free_pages;  /* [n_pages] stack of free page ids */
    int32_t n_free;       /* entries of free_pages */
    /* statistics */
    int32_t n_live;     /* live full slots */
    int32_t n_light;    /* live light slots */
    int32_t peak_pages; /* most pages in use at once */
    int64_t n_forks;    /* forks made */
    size_t bytes;       /* bytes allocated at init */
};

/* Sizes and allocates the pool. */
enum jev_status jev_state_init(struct jev_state *st, const struct jev_config *cfg, const struct jev_state_params *p,
                               struct jev_error *err);
void jev_state_free(struct jev_state *st);

/* Floats of one DeltaNet layer's state, its conv window then its recurrent matrix: a slot holds one per
 * LINEAR layer; the LM's scratch for a light fork (lm.c) one. */
int64_t jev_state_layer_floats(const struct jev_text_config *t);

/* Bytes jev_state_init would allocate for these parameters (for planning). */
size_t jev_state_bytes(const struct jev_config *cfg, const struct jev_state_params *p);

/* A fresh empty sequence (zero conv windows and recurrent matrices). */
enum jev_status jev_seq_new(struct jev_state *st, struct jev_seq **out, struct jev_error *err);

/* A child sharing parent's K/V as a read-only prefix; copies the linear state. */
enum jev_status jev_seq_fork(struct jev_seq *parent, struct jev_seq **out, struct jev_error *err);

/* A light child of a full parent (the rules above): no copy; a light slot. */
enum jev_status jev_seq_fork_light(struct jev_seq *parent, struct jev_seq **out, struct jev_error *err);

/* Releases the caller's reference (NULL is a no-op). */
void jev_seq_free(struct jev_seq *seq);

/*
 * Makes room for n more tokens: checks the per-sequence limit and the
 * no-children rule and takes pages from the pool. Does not change n_tokens;
 * the forward advances it after the tokens are written. On failure nothing
 * changed.
 */
enum jev_status jev_seq_reserve(struct jev_seq *seq, int32_t n, struct jev_error *err);

/* Returns the pages reserved beyond n_tokens to the pool (after a failed batch). */
void jev_seq_unreserve(struct jev_seq *seq);

/* K and V row pointers of own token `index` (>= n_prefix, reserved) of FULL layer `full`. */
float *jev_seq_k_row(struct jev_seq *seq, int32_t full, int32_t index);
float *jev_seq_v_row(struct jev_seq *seq, int32_t full, int32_t index);

/*
 * The K/V of tokens [0, n) of FULL layer `full` as spans in token order
 * (ancestors' pages first). Returns the span count; spans must hold
 * jev_seq_max_spans() entries.
 */
int32_t jev_seq_spans(const struct jev_seq *seq, int32_t full, int32_t n, struct jev_kv_span *spans);
int32_t jev_seq_max_spans(const struct jev_state *st);

/* The conv window and recurrent matrix of LINEAR layer `lin` (of a full sequence). */
float *jev_seq_conv(struct jev_seq *seq, int32_t lin);
float *jev_seq_ssm(struct jev_seq *seq, int32_t lin);

#endif

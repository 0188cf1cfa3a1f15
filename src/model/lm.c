/*
 * lm.c - the Qwen3.5 hybrid language model forward (lm.h), written once
 * against the backend op table.
 *
 * Per slice of the batch (at most max_batch_tokens tokens, runs of several
 * sequences):
 *   x = embed(ids), with caller rows at image-pad tokens
 *   for each layer:
 *     h = RMSNorm(x) * (1 + w)                   input_layernorm
 *     h = GatedDeltaNet(h) or GatedAttention(h)   token mixer, per sequence state
 *     x = x + h
 *     h = RMSNorm(x) * (1 + w)                   post_attention_layernorm
 *     x = x + down(silu(gate(h)) * up(h))        SwiGLU MLP
 *   x = RMSNorm(x) * (1 + w)                     final norm
 *   logits = x[out rows] . head[vocab rows]^T     LM head, only where asked
 * The norm multipliers arrive pre-formed (weights.h), so "(1 + w)" is just w.
 *
 * HF references (modeling_qwen3_5.py): Qwen3_5DecoderLayer,
 * Qwen3_5GatedDeltaNet.forward, Qwen3_5Attention.forward, Qwen3_5MLP.
 * Where HF switches between its chunked and recurrent delta rule (a cached
 * layer and one new token -> recurrent) we do the same per sequence.
 */
#include "model/lm.h" // defines: struct jev_lm, jev_lm_forward

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "model/tensors.h" // defines: jev_tensor_table, jev_tensor_in_layer

/* ---- sizes ---- */

/* The largest of three sizes (buffers shared by the DeltaNet, attention and MLP steps). */
static int64_t max3(int64_t a, int64_t b, int64_t c) { return a > b ? (a > c ? a : c) : (b > c ? b : c); }

/* Zero fields take the documented defaults; max_spans follows from the other two. */
static void fill_defaults(struct jev_lm_params *p) {
    if (p->max_batch_tokens <= 0)
        p->max_batch_tokens = 512;
    if (p->max_runs <= 0)
        p->max_runs = 64;
    if (p->max_tokens <= 0)
        p->max_tokens = 8192;
    if (p->max_spans <= 0)
        p->max_spans = jev_kv_pages(p->max_tokens) + p->max_runs + 1;
    if (p->max_light < 0)
        p->max_light = 0;
}

/* A light run's scratch: one DeltaNet layer's state (state.h), none without DeltaNet layers. */
static size_t light_floats(const struct jev_text_config *t) {
    return t->n_linear_layers > 0 ? (size_t)jev_state_layer_floats(t) : 0;
}

/*
 * Floats per token of each buffer, in the order jev_lm_init points them.
 * big_a / big_b / mid hold whichever sub-layer runs: the DeltaNet's
 * projections and conv output, the attention's q/gate, or the MLP's gate
 * and up, so their widths are the maxima over the three.
 */
struct lm_sizes {
    int64_t d, big_a, big_b, mid, kv, hv, nf;
};

static struct lm_sizes sizes_of(const struct jev_text_config *t) {
    struct lm_sizes s;
    s.d = t->hidden;
    s.big_a = max3(t->conv_dim, t->q_proj_out, t->intermediate);
    s.big_b = max3(t->conv_dim, t->attn_out, t->intermediate);
    s.mid = t->lin_value_dim > t->attn_out ? t->lin_value_dim : t->attn_out;
    s.kv = t->kv_dim > 0 ? t->kv_dim : 1;
    s.hv = t->lin_v_heads > 0 ? t->lin_v_heads : 1;
    s.nf = t->rotary_dim > 0 ? t->rotary_dim / 2 : 1;
    return s;
}

/* Rows of logits a device backend computes per download (the LM head's staging buffer). */
#define LOGIT_STAGE_ROWS 16

/* Must stay in step with the ALLOC list of jev_lm_init: the backend arena is exactly this big
 * (64-byte alignment padding of each of its ~17 slices included). */
static size_t device_bytes(const struct jev_config *cfg, const struct jev_lm_params *p) {
    struct lm_sizes s = sizes_of(&cfg->text);
    size_t T = (size_t)p->max_batch_tokens;
    size_t floats = T * (size_t)(4 * s.d + s.big_a + s.big_b + 2 * s.mid + 2 * s.kv + 4 * s.hv + 2 * s.nf);
    floats += (size_t)p->max_light * light_floats(&cfg->text);
    return floats * sizeof(float) + 24 * 64;
}

/* The host arena: run descriptors, plus the staging of a device backend (host_memory false). */
static size_t host_bytes(const struct jev_config *cfg, const struct jev_lm_params *p, bool staging) {
    struct lm_sizes s = sizes_of(&cfg->text);
    size_t T = (size_t)p->max_batch_tokens;
    size_t runs = (size_t)p->max_runs + 1;
    size_t other = runs * (size_t)p->max_spans * sizeof(struct jev_kv_span) +
                   runs * (sizeof(struct jev_attn_run) + sizeof(struct jev_gdn_run) + sizeof(void *) + sizeof(int32_t));
    if (staging)
        other += T * (size_t)(2 * s.nf + s.d) * sizeof(float);
    return other + 16 * 64;
}

size_t jev_lm_bytes(const struct jev_config *cfg, const struct jev_lm_params *params) {
    struct jev_lm_params p = *params;
    fill_defaults(&p);
    return device_bytes(cfg, &p) + host_bytes(cfg, &p, false);
}

/* Stored bytes, the figure behind the GB/s of `jev run` (what a matmul has to stream). */
size_t jev_matrix_bytes(const struct jev_matrix *m) {
    size_t n = (size_t)m->rows * (size_t)m->cols;
    switch (m->type) {
    case JEV_MTYPE_F32: return n * 4;
    case JEV_MTYPE_BF16:
    case JEV_MTYPE_F16: return n * 2;
    case JEV_MTYPE_QAFFINE: {
        size_t groups = (size_t)m->rows * (size_t)(m->cols / m->group);
        size_t sbytes = m->stype == JEV_STYPE_F32 ? 4 : 2;
        return n * (size_t)m->bits / 8 + 2 * groups * sbytes;
    }
    }
    return 0;
}

/*
 * Multiply-adds per token of one matrix, and of one layer's matrices (for
 * the GFLOP/s figure): the matrices of the layer's kind in the tensor table.
 */
static double macs(const struct jev_matrix *m) { return (double)m->rows * (double)m->cols; }

static double layer_macs(const struct jev_layer_weights *L) {
    double b = 0.0;
    for (int32_t i = 0; i < jev_tensor_count; i++) {
        const struct jev_tensor_kind *k = &jev_tensor_table[i];
        if (k->form == JEV_TFORM_MATRIX && jev_tensor_in_layer(k, L->kind))
            b += macs(jev_tensor_field(k, L));
    }
    return b;
}

/* Weight bytes a token streams through one layer's matrices (the same walk over the table). */
static size_t layer_bytes(const struct jev_layer_weights *L) {
    size_t b = 0;
    for (int32_t i = 0; i < jev_tensor_count; i++) {
        const struct jev_tensor_kind *k = &jev_tensor_table[i];
        if (k->form == JEV_TFORM_MATRIX && jev_tensor_in_layer(k, L->kind))
            b += jev_matrix_bytes(jev_tensor_field(k, L));
    }
    return b;
}

/* ---- lifetime ---- */

/*
 * Size first, allocate once: every activation buffer is a slice of one
 * arena sized by jev_lm_bytes, so the forward never allocates.
 */
enum jev_status jev_lm_init(struct jev_lm *lm, const struct jev_config *cfg, const struct jev_weights *w,
                            const struct jev_ops *ops, struct jev_backend *be, const struct jev_lm_params *params,
                            struct jev_error *err) {
    memset(lm, 0, sizeof *lm);
    lm->cfg = cfg;
    lm->w = w;
    lm->ops = ops;
    lm->be = be;
    lm->p = *params;
    fill_defaults(&lm->p);
    const struct jev_text_config *t = &cfg->text;
    /* the widest matrix input the CPU kernels take (a row and a few rows of scratch) */
    const int64_t widest = 65536;
    if (t->hidden > widest || t->intermediate > widest || t->lin_value_dim > widest || t->attn_out > widest)
        return jev_fail(err, JEV_ERR_UNSUPPORTED,
                        "lm: matrix widths (hidden %d, intermediate %d, value %d, attention %d) above %lld", t->hidden,
                        t->intermediate, t->lin_value_dim, t->attn_out, (long long)widest);
    if (t->n_full_layers > 0)
        JEV_TRY(jev_rope_init(&lm->rope, t, err));
    /* activations in backend memory (device memory for CUDA); descriptors and staging on the host */
    bool staging = !ops->host_memory;
    size_t dev_cap = device_bytes(cfg, &lm->p);
    lm->arena_block = ops->alloc(be, dev_cap);
    if (!lm->arena_block)
        return jev_fail(err, JEV_ERR_NOMEM, "lm: cannot allocate %zu bytes of %s activations", dev_cap, ops->name);
    jev_arena_init_over(&lm->arena, lm->arena_block, dev_cap);
    enum jev_status hs = jev_arena_init(&lm->host_arena, host_bytes(cfg, &lm->p, staging), err);
    if (hs != JEV_OK) {
        jev_lm_free(lm);
        return hs;
    }

    struct lm_sizes s = sizes_of(t);
    size_t T = (size_t)lm->p.max_batch_tokens;
    size_t runs = (size_t)lm->p.max_runs + 1;
    struct jev_arena *a = &lm->arena;
#define ALLOC(field, n, type)                                                                                          \
    do {                                                                                                               \
        lm->field = jev_arena_alloc_array(a, (size_t)(n), sizeof(type), err);                                          \
        if (!lm->field) {                                                                                              \
            jev_lm_free(lm);                                                                                           \
            return err ? err->status : JEV_ERR_NOMEM;                                                                  \
        }                                                                                                              \
    } while (0)
    ALLOC(x, T * (size_t)s.d, float);
    ALLOC(h, T * (size_t)s.d, float);
    ALLOC(out, T * (size_t)s.d, float);
    ALLOC(xo, T * (size_t)s.d, float);
    ALLOC(big_a, T * (size_t)s.big_a, float);
    ALLOC(big_b, T * (size_t)s.big_b, float);
    ALLOC(mid_c, T * (size_t)s.mid, float);
    ALLOC(mid_d, T * (size_t)s.mid, float);
    ALLOC(kbuf, T * (size_t)s.kv, float);
    ALLOC(vbuf, T * (size_t)s.kv, float);
    ALLOC(ga, T * (size_t)s.hv, float);
    ALLOC(gb, T * (size_t)s.hv, float);
    ALLOC(gg, T * (size_t)s.hv, float);
    ALLOC(gbeta, T * (size_t)s.hv, float);
    ALLOC(cos, T * (size_t)s.nf, float);
    ALLOC(sin, T * (size_t)s.nf, float);
    if (lm->p.max_light > 0 && light_floats(t) > 0)
        ALLOC(light_lin, (size_t)lm->p.max_light * light_floats(t), float);
    a = &lm->host_arena;
    ALLOC(spans, runs * (size_t)lm->p.max_spans, struct jev_kv_span);
    ALLOC(attn_runs, runs, struct jev_attn_run);
    ALLOC(gdn_runs, runs, struct jev_gdn_run);
    ALLOC(slice_seq, runs, struct jev_seq *);
    ALLOC(slice_len, runs, int32_t);
    if (staging) {
        ALLOC(host_cos, T * (size_t)s.nf, float);
        ALLOC(host_sin, T * (size_t)s.nf, float);
        ALLOC(host_rows, T * (size_t)s.d, float);
        lm->logit_stage_rows = LOGIT_STAGE_ROWS;
        size_t bytes = (size_t)LOGIT_STAGE_ROWS * (size_t)w->text.lm_head.rows * sizeof(float);
        lm->logit_stage = ops->alloc(be, bytes);
        if (!lm->logit_stage) {
            jev_lm_free(lm);
            return jev_fail(err, JEV_ERR_NOMEM, "lm: cannot allocate %zu bytes of %s logit staging", bytes, ops->name);
        }
    }
#undef ALLOC
    for (int32_t l = 0; l < t->n_layers; l++) {
        lm->layer_bytes += layer_bytes(&w->text.layers[l]);
        lm->layer_macs += layer_macs(&w->text.layers[l]);
    }
    return JEV_OK;
}

void jev_lm_free(struct jev_lm *lm) {
    jev_arena_free(&lm->arena);
    jev_arena_free(&lm->host_arena);
    if (lm->ops) {
        lm->ops->free(lm->be, lm->arena_block);
        lm->ops->free(lm->be, lm->logit_stage);
    }
    lm->arena_block = NULL;
    lm->logit_stage = NULL;
    lm->x = NULL;
}

void jev_lm_text_positions(const struct jev_seq *seq, int32_t n, int32_t *pos) {
    jev_rope_text_positions(seq->n_tokens, seq->rope_delta, n, pos);
}

/* ---- argument checks ---- */

/*
 * Everything about the batch that can be wrong is checked here, before any
 * state moves: counts, lengths, duplicate sequences, token ids, positions
 * (below 2^24, where f32 still holds integers exactly), logit rows and
 * candidate rows. The cost is linear in the batch.
 */
static enum jev_status check_batch(const struct jev_lm *lm, const struct jev_lm_batch *b, struct jev_error *err) {
    const struct jev_text_config *t = &lm->cfg->text;
    if (b->n_tokens <= 0 || b->n_runs <= 0 || !b->ids || !b->pos || !b->seqs || !b->seq_len)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: a batch needs tokens, positions and at least one sequence");
    if (b->n_runs > lm->p.max_runs)
        return jev_fail(err, JEV_ERR_CONTEXT_FULL, "lm: %d sequences in one batch exceed the engine's max_batch %d",
                        b->n_runs, lm->p.max_runs);
    int64_t total = 0;
    for (int32_t r = 0; r < b->n_runs; r++) {
        if (!b->seqs[r] || b->seq_len[r] <= 0)
            return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: run %d has no sequence or a length %d < 1", r,
                            b->seq_len[r]);
        if (b->seqs[r]->light) {
            /* its state lives in one slice's scratch (gated_deltanet), so the run must fit one slice */
            if (b->seq_len[r] > lm->p.max_batch_tokens)
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "lm: run %d is a light fork of %d tokens, longer than one slice of %d tokens; fork it "
                                "in full",
                                r, b->seq_len[r], lm->p.max_batch_tokens);
            if (lm->p.max_light == 0)
                return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: run %d is a light fork; this lm has no room for one", r);
        }
        for (int32_t q = 0; q < r; q++)
            if (b->seqs[q] == b->seqs[r])
                return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: runs %d and %d name the same sequence", q, r);
        total += b->seq_len[r];
    }
    if (total != b->n_tokens)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: run lengths sum to %lld, the batch has %d tokens",
                        (long long)total, b->n_tokens);
    for (int32_t i = 0; i < b->n_tokens; i++) {
        if (b->ids[i] < 0 || b->ids[i] >= t->vocab_size)
            return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: token %d has id %d outside the vocabulary [0, %d)", i,
                            b->ids[i], t->vocab_size);
        for (int a = 0; a < 3; a++)
            if (b->pos[i * 3 + a] < 0 || b->pos[i * 3 + a] >= (1 << 24))
                return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: token %d has position %d outside [0, 2^24)", i,
                                b->pos[i * 3 + a]);
    }
    if (b->n_out < 0 || (b->n_out > 0 && (!b->out_idx || !b->logits)))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: logits requested without out_idx or an output buffer");
    for (int32_t i = 0; i < b->n_out; i++) {
        if (b->out_idx[i] < 0 || b->out_idx[i] >= b->n_tokens || (i > 0 && b->out_idx[i] <= b->out_idx[i - 1]))
            return jev_fail(err, JEV_ERR_INVALID_ARG,
                            "lm: out_idx[%d] = %d must be a batch row in [0, %d), strictly increasing", i,
                            b->out_idx[i], b->n_tokens);
    }
    if (b->n_vocab_rows > lm->w->text.lm_head.rows)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: %d vocab_rows exceed the vocabulary's %d", b->n_vocab_rows,
                        lm->w->text.lm_head.rows);
    if (b->n_vocab_rows < 0 || (b->n_vocab_rows > 0 && !b->vocab_rows))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: n_vocab_rows %d without vocab_rows", b->n_vocab_rows);
    for (int32_t i = 0; i < b->n_vocab_rows; i++)
        if (b->vocab_rows[i] < 0 || b->vocab_rows[i] >= lm->w->text.lm_head.rows)
            return jev_fail(err, JEV_ERR_INVALID_ARG, "lm: vocab_rows[%d] = %d outside [0, %d)", i, b->vocab_rows[i],
                            lm->w->text.lm_head.rows);
    return JEV_OK;
}

/* ---- token mixers ---- */

/* The debug hook, when one is set (tests, dumps): it reads host memory, so a device
 * backend's activation is downloaded first (rows <= T, cols <= D: host_rows holds it). */
static void hook(struct jev_lm *lm, const char *name, int32_t layer, const float *x, int64_t row0, int64_t rows,
                 int64_t cols) {
    if (!lm->hook)
        return;
    if (lm->host_rows) {
        lm->ops->download(lm->be, lm->host_rows, x, (size_t)(rows * cols) * sizeof(float));
        x = lm->host_rows;
    }
    lm->hook(lm->hook_user, name, layer, x, row0, rows, cols);
}

/*
 * Gated DeltaNet (HF Qwen3_5GatedDeltaNet.forward): projections, causal conv
 * with each sequence's window, gates, delta rule from each sequence's state,
 * gated RMSNorm per head, out_proj. h[T][D] -> lm->out[T][D].
 */
static void gated_deltanet(struct jev_lm *lm, int32_t layer, int32_t n_runs, int64_t T) {
    const struct jev_ops *ops = lm->ops;
    const struct jev_text_config *t = &lm->cfg->text;
    const struct jev_linear_attn_weights *W = &lm->w->text.layers[layer].lin;
    int32_t lin = lm->slice_seq[0]->st->layer_slot[layer];
    float *mixed = lm->big_a; /* [T][conv_dim] = [q | k | v] before the conv */
    float *u = lm->big_b;     /* [T][conv_dim] after conv + SiLU */
    float *z = lm->mid_c;     /* [T][value_dim] output gate */
    float *o = lm->mid_d;     /* [T][value_dim] delta-rule output, then gated-normed */

    /* the four input projections (HF: in_proj_qkv, in_proj_z, in_proj_b, in_proj_a) */
    ops->matmul(lm->be, &W->in_qkv, lm->h, T, mixed);
    ops->matmul(lm->be, &W->in_z, lm->h, T, z);
    ops->matmul(lm->be, &W->in_b, lm->h, T, lm->gb);
    ops->matmul(lm->be, &W->in_a, lm->h, T, lm->ga);

    int64_t row = 0;
    int32_t light = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        struct jev_seq *seq = lm->slice_seq[r];
        struct jev_gdn_run *g = &lm->gdn_runs[r];
        g->row0 = row;
        g->n = lm->slice_len[r];
        /* HF: a layer with cached state and one new token takes the recurrent path */
        g->recurrent = g->n == 1 && seq->n_tokens > 0;
        if (seq->light) { /* from the parent's state into this slice's scratch, which the next layer reuses */
            float *scratch = lm->light_lin + (size_t)light++ * light_floats(t);
            g->conv_in = jev_seq_conv(seq->parent, lin);
            g->ssm_in = jev_seq_ssm(seq->parent, lin);
            g->conv = scratch;
            g->ssm = scratch + (size_t)seq->st->conv_keep * (size_t)seq->st->conv_dim; /* the slot's layout */
        } else {
            g->conv_in = NULL;
            g->ssm_in = NULL;
            g->conv = jev_seq_conv(seq, lin);
            g->ssm = jev_seq_ssm(seq, lin);
        }
        row += g->n;
    }
    /* conv + SiLU per sequence, gates, then the delta rule from each sequence's recurrent state */
    ops->gdn_conv(lm->be, mixed, W->conv, t->conv_dim, t->conv_kernel, lm->gdn_runs, n_runs, u);
    ops->gdn_gates(lm->be, lm->ga, lm->gb, W->a_log, W->dt_bias, T, t->lin_v_heads, lm->gg, lm->gbeta);
    struct jev_gdn_shape shape = {t->lin_k_heads, t->lin_v_heads, t->lin_k_dim, t->lin_v_dim, 64};
    ops->gdn_rule(lm->be, &shape, u, lm->gg, lm->gbeta, lm->gdn_runs, n_runs, o);
    /* per value head over dv, weight shared by the heads */
    ops->gated_rmsnorm(lm->be, o, z, W->norm, T * t->lin_v_heads, t->lin_v_dim, t->rms_eps, o);
    ops->matmul(lm->be, &W->out, o, T, lm->out);
}

/*
 * Copies rows [row, row + n) of kbuf / vbuf into seq's cache at its next n positions, one copy per
 * stretch of rows that are adjacent in the cache (a K/V page holds JEV_KV_PAGE consecutive rows of
 * a layer): a few copies per run instead of two per token, which a device backend launches each.
 */
static void store_kv(struct jev_lm *lm, struct jev_seq *seq, int32_t full, int64_t row, int32_t n) {
    const int64_t kv = lm->cfg->text.kv_dim;
    const int32_t p0 = seq->n_tokens;
    for (int32_t i = 0; i < n;) {
        float *k0 = jev_seq_k_row(seq, full, p0 + i), *v0 = jev_seq_v_row(seq, full, p0 + i);
        int32_t len = 1;
        while (i + len < n && jev_seq_k_row(seq, full, p0 + i + len) == k0 + len * kv &&
               jev_seq_v_row(seq, full, p0 + i + len) == v0 + len * kv)
            len++;
        lm->ops->copy(lm->be, k0, lm->kbuf + (row + i) * kv, len * kv);
        lm->ops->copy(lm->be, v0, lm->vbuf + (row + i) * kv, len * kv);
        i += len;
    }
}

/*
 * Gated attention (HF Qwen3_5Attention.forward): per-head [query | gate]
 * projection, q_norm / k_norm per head, partial M-RoPE, new K/V into each
 * sequence's cache, causal softmax over prefix + own K/V, o * sigmoid(gate),
 * o_proj. h[T][D] -> lm->out[T][D].
 */
static void gated_attention(struct jev_lm *lm, int32_t layer, int32_t n_runs, int64_t T) {
    const struct jev_ops *ops = lm->ops;
    const struct jev_text_config *t = &lm->cfg->text;
    const struct jev_full_attn_weights *W = &lm->w->text.layers[layer].full;
    int32_t full = lm->slice_seq[0]->st->layer_slot[layer];
    int32_t hq = t->n_heads, hkv = t->n_kv_heads, dh = t->head_dim;
    float *qg = lm->big_a;   /* [T][Hq][2*dh] */
    float *q = lm->big_b;    /* [T][Hq][dh] */
    float *gate = lm->mid_c; /* [T][Hq*dh] */
    float *o = lm->mid_d;    /* [T][Hq*dh] */

    /* projections, then per-head norms (1 + w multipliers) and RoPE on q and k */
    ops->matmul(lm->be, &W->q, lm->h, T, qg);
    ops->split_qgate(lm->be, qg, T, hq, dh, q, gate);
    ops->matmul(lm->be, &W->k, lm->h, T, lm->kbuf);
    ops->matmul(lm->be, &W->v, lm->h, T, lm->vbuf);
    ops->rmsnorm(lm->be, q, W->q_norm, T * hq, dh, t->rms_eps, q);
    ops->rmsnorm(lm->be, lm->kbuf, W->k_norm, T * hkv, dh, t->rms_eps, lm->kbuf);
    ops->rope(lm->be, q, T, hq, dh, lm->rope.n_freq, lm->cos, lm->sin);
    ops->rope(lm->be, lm->kbuf, T, hkv, dh, lm->rope.n_freq, lm->cos, lm->sin);

    int64_t row = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        struct jev_seq *seq = lm->slice_seq[r];
        int32_t n = lm->slice_len[r];
        /* the run's K/V join the cache before attention: query i sees keys 0..n_past+i */
        store_kv(lm, seq, full, row, n);
        struct jev_attn_run *a = &lm->attn_runs[r];
        struct jev_kv_span *spans = lm->spans + (size_t)r * (size_t)lm->p.max_spans;
        a->row0 = row;
        a->n = n;
        a->n_past = seq->n_tokens;
        a->n_spans = jev_seq_spans(seq, full, seq->n_tokens + n, spans);
        a->spans = spans;
        row += n;
        /* scores and weighted sums: 2 x 2 x Hq x dh per visible key */
        lm->flops += 4.0 * hq * dh * ((double)n * seq->n_tokens + (double)n * (n + 1) / 2);
    }
    struct jev_attn_shape shape = {hq, hkv, dh, (float)(1.0 / sqrt((double)dh))};
    /* causal softmax attention, the output gate, o_proj */
    ops->attention(lm->be, &shape, q, lm->attn_runs, n_runs, o);
    ops->sigmoid_mul(lm->be, o, gate, T * hq * dh);
    ops->matmul(lm->be, &W->o, o, T, lm->out);
}

/* SwiGLU MLP: h[T][D] -> lm->out[T][D]. */
static void mlp(struct jev_lm *lm, int32_t layer, int64_t T) {
    const struct jev_layer_weights *L = &lm->w->text.layers[layer];
    int64_t F = lm->cfg->text.intermediate;
    lm->ops->matmul(lm->be, &L->gate, lm->h, T, lm->big_a);
    lm->ops->matmul(lm->be, &L->up, lm->h, T, lm->big_b);
    lm->ops->swiglu(lm->be, lm->big_a, lm->big_b, T * F, lm->big_a);
    lm->ops->matmul(lm->be, &L->down, lm->big_a, T, lm->out);
}

/* ---- one slice ---- */

/*
 * Runs tokens [row0, row0 + T) of the batch, split into n_runs runs
 * (lm->slice_seq / slice_len), then advances each sequence.
 */
static void forward_slice(struct jev_lm *lm, const struct jev_lm_batch *b, int64_t row0, int64_t T, int32_t n_runs) {
    const struct jev_ops *ops = lm->ops;
    const struct jev_text_config *t = &lm->cfg->text;
    const struct jev_text_weights *W = &lm->w->text;
    int64_t D = t->hidden;

    /* embeddings, with caller rows where given (HF: masked_scatter of the image features) */
    ops->embed(lm->be, &W->embed, b->ids + row0, T, lm->x);
    /* caller rows are host memory (the vision output): one upload per stretch of rows adjacent there */
    if (b->embd_rows)
        for (int64_t i = 0; i < T;) {
            const float *src = b->embd_rows[row0 + i];
            if (!src) {
                i++;
                continue;
            }
            int64_t len = 1;
            while (i + len < T && b->embd_rows[row0 + i + len] == src + len * D)
                len++;
            ops->upload(lm->be, lm->x + i * D, src, (size_t)(len * D) * sizeof(float));
            i += len;
        }
    hook(lm, "embed", -1, lm->x, row0, T, D);

    /* rotary tables once for every attention layer of the slice: they depend on positions only */
    if (t->n_full_layers > 0) {
        if (lm->host_cos) { /* device backend: computed here, one upload each */
            size_t bytes = (size_t)T * (size_t)lm->rope.n_freq * sizeof(float);
            jev_rope_cos_sin(&lm->rope, b->pos + row0 * 3, T, lm->host_cos, lm->host_sin);
            ops->upload(lm->be, lm->cos, lm->host_cos, bytes);
            ops->upload(lm->be, lm->sin, lm->host_sin, bytes);
        } else {
            jev_rope_cos_sin(&lm->rope, b->pos + row0 * 3, T, lm->cos, lm->sin);
        }
    }

    /* each residual add is fused with the norm that reads its result: the post-attention norm, the next
     * layer's input norm, the final norm (add_rmsnorm: the same bits as the two ops) */
    const float *first = t->n_layers > 0 ? W->layers[0].in_norm : W->final_norm;
    ops->rmsnorm(lm->be, lm->x, first, T, (int32_t)D, t->rms_eps, lm->h);
    for (int32_t l = 0; l < t->n_layers; l++) {
        const struct jev_layer_weights *L = &W->layers[l];
        if (L->kind == JEV_LAYER_LINEAR)
            gated_deltanet(lm, l, n_runs, T);
        else
            gated_attention(lm, l, n_runs, T);
        ops->add_rmsnorm(lm->be, lm->x, lm->out, L->post_norm, T, (int32_t)D, t->rms_eps, lm->h);
        mlp(lm, l, T);
        const float *next = l + 1 < t->n_layers ? W->layers[l + 1].in_norm : W->final_norm;
        ops->add_rmsnorm(lm->be, lm->x, lm->out, next, T, (int32_t)D, t->rms_eps, lm->h);
        hook(lm, "layer", l, lm->x, row0, T, D);
    }
    hook(lm, "norm", -1, lm->h, row0, T, D);

    /* LM head at the requested rows of this slice (out_idx is increasing) */
    int32_t o0 = 0;
    while (o0 < b->n_out && b->out_idx[o0] < row0)
        o0++;
    int32_t o1 = o0;
    while (o1 < b->n_out && b->out_idx[o1] < row0 + T)
        o1++;
    if (o1 > o0) {
        for (int32_t i = o0; i < o1; i++)
            ops->copy(lm->be, lm->xo + (int64_t)(i - o0) * D, lm->h + (b->out_idx[i] - row0) * D, D);
        int64_t cols = b->n_vocab_rows > 0 ? b->n_vocab_rows : W->lm_head.rows;
        /* host memory: straight into the caller's buffer; a device: a few rows at a time, downloaded */
        int64_t step = lm->logit_stage ? lm->logit_stage_rows : o1 - o0;
        for (int64_t r = o0; r < o1; r += step) {
            int64_t rows = o1 - r < step ? o1 - r : step;
            float *dst = lm->logit_stage ? lm->logit_stage : b->logits + r * cols;
            const float *src = lm->xo + (r - o0) * D;
            if (b->n_vocab_rows > 0)
                ops->matmul_rows(lm->be, &W->lm_head, b->vocab_rows, b->n_vocab_rows, src, rows, dst);
            else
                ops->matmul(lm->be, &W->lm_head, src, rows, dst);
            if (lm->logit_stage)
                ops->download(lm->be, b->logits + r * cols, dst, (size_t)(rows * cols) * sizeof(float));
        }
        lm->n_logit_rows += o1 - o0;
        lm->flops += 2.0 * (double)(o1 - o0) * (double)cols * (double)D;
        lm->bytes_streamed += (double)jev_matrix_bytes(&W->lm_head) * (double)cols / (double)W->lm_head.rows;
    }

    /* the tokens are in every layer's state now: advance the sequences */
    for (int32_t r = 0; r < n_runs; r++)
        lm->slice_seq[r]->n_tokens += lm->slice_len[r];
    lm->n_slices++;
    lm->n_tokens += T;
    lm->bytes_streamed += (double)lm->layer_bytes;
    lm->flops += 2.0 * lm->layer_macs * (double)T;
}

/* ---- the batch ---- */

/*
 * Checks, reserves, then runs the batch slice by slice. Once the first
 * slice runs nothing can fail any more (the ops do not fail), which is what
 * makes "on failure nothing changed" hold.
 */
enum jev_status jev_lm_forward(struct jev_lm *lm, const struct jev_lm_batch *b, struct jev_error *err) {
    JEV_TRY(check_batch(lm, b, err));
    /* Reserve every sequence's room first, so a failure changes nothing. */
    for (int32_t r = 0; r < b->n_runs; r++) {
        enum jev_status s = JEV_OK;
        if (b->seqs[r]->st->max_tokens > lm->p.max_tokens)
            s = jev_fail(err, JEV_ERR_INVALID_ARG, "lm: the state holds %d tokens per sequence, lm was sized for %d",
                         b->seqs[r]->st->max_tokens, lm->p.max_tokens);
        else
            s = jev_seq_reserve(b->seqs[r], b->seq_len[r], err);
        if (s != JEV_OK) {
            for (int32_t q = 0; q < r; q++)
                jev_seq_unreserve(b->seqs[q]);
            return s;
        }
    }

    /* Slices of at most max_batch_tokens; a run that does not fit continues in the next, except a light
     * fork's, which starts the next slice (check_batch: it fits one), as it does when the slice holds
     * max_light light runs already (their scratch). */
    int64_t cap = lm->p.max_batch_tokens;
    int64_t row0 = 0, fill = 0;
    int32_t n_runs = 0, n_light = 0;
    for (int32_t r = 0; r < b->n_runs; r++) {
        int32_t left = b->seq_len[r];
        if (b->seqs[r]->light && (fill + left > cap || n_light == lm->p.max_light)) {
            forward_slice(lm, b, row0, fill, n_runs);
            row0 += fill;
            fill = 0;
            n_runs = 0;
            n_light = 0;
        }
        n_light += b->seqs[r]->light;
        while (left > 0) {
            int32_t take = (int32_t)(cap - fill < left ? cap - fill : left);
            lm->slice_seq[n_runs] = b->seqs[r];
            lm->slice_len[n_runs] = take;
            n_runs++;
            fill += take;
            left -= take;
            if (fill == cap) {
                forward_slice(lm, b, row0, fill, n_runs);
                row0 += fill;
                fill = 0;
                n_runs = 0;
                n_light = 0;
            }
        }
    }
    if (fill > 0)
        forward_slice(lm, b, row0, fill, n_runs);
    lm->n_forwards++;
    /* a device backend's queued ops report their faults here (ops.h: status) */
    if (lm->ops->status)
        return lm->ops->status(lm->be, err);
    return JEV_OK;
}

/*
 * vision.c - the vision tower forward (see vision.h for the math), written
 * once against the backend op table.
 *
 * Host-side set-up per image is only index math: the bilinear taps of the
 * learned position grid and the rotary cos/sin tables, both computed with
 * torch's f32 operation order (transformers vision_utils.py
 * _interpolation_axis_taps_weights, Qwen3_5VisionRotaryEmbedding). The rest
 * is ops: matmul (+ add_bias) for every linear, layernorm, gelu, add, and
 * the vision ops (rotary, attention, position add).
 *
 * Constraints: every activation comes from the arena sized in
 * jev_vision_init; nothing is allocated per forward.
 */
#include "model/vision.h" // defines: struct jev_vision, jev_vision_forward

#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "base/timing.h"   // defines: jev_now_ms
#include "model/tensors.h" // defines: jev_tensor_table, jev_tensor_dim

/* ---- sizes ---- */

/* The widths of the buffers, from the config (see the struct fields). */
struct vision_dims {
    int64_t d, qkv, mlp, hd; /* Dv, 3Dv, max(I, Dv, merge_in * merge_in / ...), head dim */
};

static struct vision_dims dims_of(const struct jev_vision_config *c) {
    struct vision_dims v;
    v.d = c->hidden;
    v.qkv = 3 * (int64_t)c->hidden;
    /* the MLP hidden [N][I]; the merger hidden is [N/4][merge_in] = N * merge_in / merge^2 floats */
    int64_t mm = (int64_t)c->merge * c->merge;
    int64_t merger = (int64_t)c->merge_in / mm + ((int64_t)c->merge_in % mm != 0);
    v.mlp = c->intermediate > merger ? c->intermediate : merger;
    if (v.mlp < c->hidden)
        v.mlp = c->hidden;
    /* a device backend stages the pixels in mlp and the merger output in h (jev_vision_forward) */
    if (v.mlp < c->patch_dim)
        v.mlp = c->patch_dim;
    int64_t out_per_patch = (int64_t)c->out_hidden / mm + ((int64_t)c->out_hidden % mm != 0);
    if (v.d < out_per_patch)
        v.d = out_per_patch;
    v.hd = c->head_dim;
    return v;
}

static size_t device_bytes(const struct vision_dims *d, size_t n) {
    size_t f = sizeof(float);
    return jev_align64(n * (size_t)d->d * f) * 3 + jev_align64(n * (size_t)d->qkv * f) +
           jev_align64(n * (size_t)d->mlp * f) + jev_align64(n * (size_t)d->hd * f) * 2;
}

static size_t host_bytes(const struct vision_dims *d, size_t n, bool staging) {
    size_t b = jev_align64(n * 4 * 4) * 2;
    if (staging)
        b += jev_align64(n * (size_t)d->hd * sizeof(float)) * 2 + jev_align64(n * (size_t)d->d * sizeof(float));
    return b;
}

size_t jev_vision_arena_bytes(const struct jev_vision_config *cfg, int32_t max_patches) {
    struct vision_dims d = dims_of(cfg);
    return device_bytes(&d, (size_t)max_patches) + host_bytes(&d, (size_t)max_patches, false);
}

/*
 * Every multiplied matrix of the tensor table's vision parts (the patch
 * embedding too; the position table is looked up): 2 flops per weight and
 * row, the blocks' and the patch embedding's rows being the n patches, the
 * merger's the n / merge^2 merged tokens. Attention adds QK^T and PV per
 * block, 4 n^2 Dv, which no tensor holds. Every term is an integer far
 * below 2^53, so the sum is exact in any order.
 */
double jev_vision_flops(const struct jev_vision_config *c, int64_t n) {
    double N = (double)n, f = (double)c->depth * 4 * N * N * c->hidden;
    for (int32_t i = 0; i < jev_tensor_count; i++) {
        const struct jev_tensor_kind *k = &jev_tensor_table[i];
        bool vision = k->part == JEV_PART_VISION_IN || k->part == JEV_PART_BLOCK || k->part == JEV_PART_VISION_OUT;
        bool applied = k->form == JEV_TFORM_MATRIX || k->form == JEV_TFORM_PATCH;
        if (!vision || !applied || (k->flags & JEV_TENSOR_LOOKUP))
            continue;
        double w = (double)jev_tensor_dim(k->rows, NULL, c) * (double)jev_tensor_dim(k->cols, NULL, c);
        if (k->part == JEV_PART_VISION_IN)
            f += 2 * N * w;
        else if (k->part == JEV_PART_BLOCK)
            f += (double)c->depth * 2 * N * w;
        else
            f += 2 * (N / (c->merge * c->merge)) * w; /* the merger runs on merged tokens */
    }
    return f;
}

int32_t jev_vision_inv_freq(int32_t head_dim, double theta, float *out) {
    /* torch: spatial = head_dim // 2; inv = 1.0 / (base ** (arange(0, spatial, 2, float32) / spatial)), all
     * f32: the exponent 2i/spatial is an f32 quotient, the power is formed in double here and rounded once to
     * f32 (torch's f32 pow is within 1 ulp; tests/test-vision.c compares with torch's dump), then an f32
     * reciprocal. */
    int32_t spatial = head_dim / 2, n = 0;
    for (int32_t i = 0; i < spatial; i += 2) {
        float e = (float)i / (float)spatial;
        float p = (float)pow(theta, (double)e);
        out[n++] = 1.0f / p;
    }
    return n;
}

/* ---- lifetime ---- */

enum jev_status jev_vision_init(struct jev_vision *v, const struct jev_vision_config *cfg,
                                const struct jev_vision_weights *w, const struct jev_ops *ops, struct jev_backend *be,
                                int32_t max_patches, struct jev_error *err) {
    memset(v, 0, sizeof *v);
    int32_t mm = cfg->merge * cfg->merge;
    if (max_patches < mm || max_patches % mm != 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "vision: capacity %d patches is not a positive multiple of %d",
                        max_patches, mm);
    if (cfg->head_dim > JEV_VISION_MAX_HEAD_DIM || cfg->head_dim % 4 != 0)
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "vision: head dim %d (at most %d, a multiple of 4)", cfg->head_dim,
                        JEV_VISION_MAX_HEAD_DIM);
    if (!w->patch_w || !w->blocks || !ops->vision_attention)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "vision: the model has no vision weights or the backend no vision ops");
    if (w->pos_embed.rows != cfg->n_pos_embed || w->pos_embed.cols != cfg->hidden)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "vision: pos_embed is [%d, %d], expected [%d, %d]", w->pos_embed.rows,
                        w->pos_embed.cols, cfg->n_pos_embed, cfg->hidden);
    struct vision_dims d = dims_of(cfg);
    size_t n = (size_t)max_patches;
    bool staging = !ops->host_memory;
    /* activations in backend memory; the per-image index tables (and a device's staging) on the host */
    v->ops = ops;
    v->be = be;
    v->arena_block = ops->alloc(be, device_bytes(&d, n));
    if (!v->arena_block)
        return jev_fail(err, JEV_ERR_NOMEM, "vision: cannot allocate %zu bytes of %s activations for %d patches",
                        device_bytes(&d, n), ops->name, max_patches);
    jev_arena_init_over(&v->arena, v->arena_block, device_bytes(&d, n));
    if (jev_arena_init(&v->host_arena, host_bytes(&d, n, staging), err) != JEV_OK) {
        jev_vision_free(v);
        return err->status;
    }
    v->x = jev_arena_alloc_array(&v->arena, n * (size_t)d.d, sizeof(float), err);
    v->h = jev_arena_alloc_array(&v->arena, n * (size_t)d.d, sizeof(float), err);
    v->att = jev_arena_alloc_array(&v->arena, n * (size_t)d.d, sizeof(float), err);
    v->qkv = jev_arena_alloc_array(&v->arena, n * (size_t)d.qkv, sizeof(float), err);
    v->mlp = jev_arena_alloc_array(&v->arena, n * (size_t)d.mlp, sizeof(float), err);
    v->cos = jev_arena_alloc_array(&v->arena, n * (size_t)d.hd, sizeof(float), err);
    v->sin = jev_arena_alloc_array(&v->arena, n * (size_t)d.hd, sizeof(float), err);
    v->pos_idx = jev_arena_alloc_array(&v->host_arena, n * 4, sizeof(int32_t), err);
    v->pos_w = jev_arena_alloc_array(&v->host_arena, n * 4, sizeof(float), err);
    bool ok = v->sin && v->pos_w;
    if (ok && staging) {
        v->host_cos = jev_arena_alloc_array(&v->host_arena, n * (size_t)d.hd, sizeof(float), err);
        v->host_sin = jev_arena_alloc_array(&v->host_arena, n * (size_t)d.hd, sizeof(float), err);
        v->host_rows = jev_arena_alloc_array(&v->host_arena, n * (size_t)d.d, sizeof(float), err);
        ok = v->host_rows != NULL;
    }
    if (!ok) { /* the arenas were sized for exactly these; a failure is a sizing bug reported in err */
        jev_vision_free(v);
        return err->status;
    }
    v->cfg = cfg;
    v->w = w;
    v->max_patches = max_patches;
    v->n_freq = jev_vision_inv_freq(cfg->head_dim, JEV_VISION_ROPE_THETA, v->inv_freq);
    return JEV_OK;
}

void jev_vision_free(struct jev_vision *v) {
    if (!v)
        return;
    jev_arena_free(&v->arena);
    jev_arena_free(&v->host_arena);
    if (v->ops)
        v->ops->free(v->be, v->arena_block);
    memset(v, 0, sizeof *v);
}

/* ---- per-image tables ---- */

/* One axis of the bilinear taps (align_corners = True, border padding), in torch's f32 order:
 * src = index * (side - 1) / max(size - 1, 1); taps floor, floor + 1 clamped; w = max(1 - |src - floor - o|, 0). */
static void axis_taps(int32_t index, int32_t size, int32_t side, int32_t tap[2], float wt[2]) {
    float src = ((float)index * (float)(side - 1)) / (float)(size - 1 > 1 ? size - 1 : 1);
    float fl = floorf(src);
    for (int o = 0; o < 2; o++) {
        int32_t t = (int32_t)fl + o;
        tap[o] = t < 0 ? 0 : t > side - 1 ? side - 1 : t;
        float dist = fabsf((src - fl) - (float)o);
        float w = 1.0f - dist;
        wt[o] = w > 0.0f ? w : 0.0f;
    }
}

/* The (row, col) of patch p in the processor's block-major order. */
static void patch_rc(int32_t p, int32_t gw, int32_t m, int32_t *row, int32_t *col) {
    int32_t ic = p % m, ir = (p / m) % m, bc = (p / (m * m)) % (gw / m), br = p / (m * m * (gw / m));
    *row = br * m + ir;
    *col = bc * m + ic;
}

static void build_tables(struct jev_vision *v, int32_t gh, int32_t gw) {
    const struct jev_vision_config *c = v->cfg;
    const int32_t n = gh * gw, S = c->pos_side, hd = c->head_dim, nf = v->n_freq;
    for (int32_t p = 0; p < n; p++) {
        int32_t row, col, ht[2], wtap[2];
        float hw[2], ww[2];
        patch_rc(p, gw, c->merge, &row, &col);
        axis_taps(row, gh, S, ht, hw);
        axis_taps(col, gw, S, wtap, ww);
        for (int a = 0; a < 2; a++)
            for (int b = 0; b < 2; b++) { /* (h0 w0, h0 w1, h1 w0, h1 w1): the outer product, flattened */
                v->pos_idx[p * 4 + a * 2 + b] = ht[a] * S + wtap[b];
                v->pos_w[p * 4 + a * 2 + b] = hw[a] * ww[b];
            }
        /* rotary: [row freqs | col freqs] twice over the head dim (recomposition_frequencies) */
        float *cr = (v->host_cos ? v->host_cos : v->cos) + (int64_t)p * hd;
        float *sr = (v->host_sin ? v->host_sin : v->sin) + (int64_t)p * hd;
        for (int32_t e = 0; e < nf; e++) {
            float fr = (float)row * v->inv_freq[e], fc = (float)col * v->inv_freq[e];
            cr[e] = cr[e + 2 * nf] = cosf(fr);
            sr[e] = sr[e + 2 * nf] = sinf(fr);
            cr[e + nf] = cr[e + 3 * nf] = cosf(fc);
            sr[e + nf] = sr[e + 3 * nf] = sinf(fc);
        }
    }
}

/* ---- forward ---- */

/* The debug hook reads host memory: a device backend's tensor is downloaded first (rows x cols <= N x Dv). */
static void dbg(struct jev_vision *v, const char *name, int layer, const float *t, int64_t rows, int64_t cols) {
    if (!v->hook)
        return;
    if (v->host_rows) {
        v->ops->download(v->be, v->host_rows, t, (size_t)(rows * cols) * sizeof(float));
        t = v->host_rows;
    }
    v->hook(v->hook_arg, name, layer, t, rows, cols);
}

enum jev_status jev_vision_forward(struct jev_vision *v, const float *pixels, int32_t grid_h, int32_t grid_w,
                                   float *out, struct jev_error *err) {
    const struct jev_vision_config *c = v->cfg;
    const struct jev_vision_weights *w = v->w;
    const struct jev_ops *ops = v->ops;
    struct jev_backend *be = v->be;
    const int32_t m = c->merge, D = c->hidden, I = c->intermediate, H = c->n_heads, hd = c->head_dim;
    if (grid_h < m || grid_w < m || grid_h % m || grid_w % m)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "vision: grid %dx%d is not a multiple of the merge size %d", grid_h,
                        grid_w, m);
    if ((int64_t)grid_h * grid_w > v->max_patches)
        return jev_fail(err, JEV_ERR_CONTEXT_FULL, "vision: grid %dx%d = %lld patches exceeds the capacity of %d",
                        grid_h, grid_w, (long long)grid_h * grid_w, v->max_patches);
    const int64_t N = (int64_t)grid_h * grid_w, NM = N / (m * m);
    const float scale = (float)pow((double)hd, -0.5); /* head_dim ** -0.5 */
    double t0 = jev_now_ms();

    build_tables(v, grid_h, grid_w);
    /* a device backend: tables and pixels go over once (pixels into mlp, free until the first MLP) */
    const float *pix = pixels;
    if (v->host_cos) {
        size_t tb = (size_t)N * (size_t)hd * sizeof(float);
        ops->upload(be, v->cos, v->host_cos, tb);
        ops->upload(be, v->sin, v->host_sin, tb);
        ops->upload(be, v->mlp, pixels, (size_t)N * (size_t)c->patch_dim * sizeof(float));
        pix = v->mlp;
    }

    /* patch embedding: Conv3d with kernel = stride = (T, P, P) is x = pix . W^T + b over the (c, t, y, x) vector */
    struct jev_matrix pe = {
        .type = JEV_MTYPE_F32, .rows = D, .cols = c->patch_dim, .data = w->patch_w, .name = "patch_embed.proj.weight"};
    ops->matmul(be, &pe, pix, N, v->x);
    ops->add_bias(be, v->x, w->patch_b, N, D);
    dbg(v, "patch_embed", -1, v->x, N, D);
    /* x += bilinear(pos_embed) */
    ops->vision_pos_add(be, &w->pos_embed, v->pos_idx, v->pos_w, N, v->x);
    dbg(v, "pos_embed", -1, v->x, N, D);

    for (int32_t l = 0; l < c->depth; l++) {
        const struct jev_vision_block_weights *b = &w->blocks[l];
        /* attention: x = x + proj(attn(rope(qkv(norm1(x))))) */
        ops->layernorm(be, v->x, b->norm1_w, b->norm1_b, N, D, 1e-6f,
                       v->h); /* nn.LayerNorm(eps=1e-6), fixed in the model code */
        ops->matmul(be, &b->qkv, v->h, N, v->qkv);
        ops->add_bias(be, v->qkv, b->qkv_b, N, 3 * D);
        ops->vision_rope(be, v->qkv, v->cos, v->sin, N, H, hd);
        ops->vision_attention(be, v->qkv, N, H, hd, scale, v->att);
        ops->matmul(be, &b->proj, v->att, N, v->h);
        ops->add_bias(be, v->h, b->proj_b, N, D);
        ops->add(be, v->x, v->h, N * D);
        /* MLP: x = x + fc2(gelu(fc1(norm2(x)))) */
        ops->layernorm(be, v->x, b->norm2_w, b->norm2_b, N, D, 1e-6f, v->h);
        ops->matmul(be, &b->fc1, v->h, N, v->mlp);
        ops->add_bias(be, v->mlp, b->fc1_b, N, I);
        ops->gelu(be, v->mlp, N * I, c->gelu_tanh);
        ops->matmul(be, &b->fc2, v->mlp, N, v->h);
        ops->add_bias(be, v->h, b->fc2_b, N, D);
        ops->add(be, v->x, v->h, N * D);
        dbg(v, "block", l, v->x, N, D);
    }

    /* merger: LayerNorm over Dv per patch, the 2x2 block's 4 patches side by side (consecutive rows), MLP with
     * exact (erf) GELU */
    ops->layernorm(be, v->x, w->merger_norm_w, w->merger_norm_b, N, D, 1e-6f, v->h);
    ops->matmul(be, &w->merger_fc1, v->h, NM, v->mlp);
    ops->add_bias(be, v->mlp, w->merger_fc1_b, NM, c->merge_in);
    ops->gelu(be, v->mlp, NM * c->merge_in, false);
    /* a device backend writes the merger output into h (free again) and downloads it into out */
    float *dst = v->host_cos ? v->h : out;
    ops->matmul(be, &w->merger_fc2, v->mlp, NM, dst);
    ops->add_bias(be, dst, w->merger_fc2_b, NM, c->out_hidden);
    dbg(v, "merger", -1, dst, NM, c->out_hidden);
    if (dst != out)
        ops->download(be, out, dst, (size_t)NM * (size_t)c->out_hidden * sizeof(float));
    if (ops->status)
        JEV_TRY(ops->status(be, err));

    v->n_forwards++;
    v->forward_ms += jev_now_ms() - t0;
    return JEV_OK;
}

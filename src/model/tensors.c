/*
 * tensors.c - the tensor table of tensors.h, its check, and the walk.
 *
 * One line per tensor kind, in HF state-dict order. The few macros below
 * only abbreviate what most entries share: a matrix is drawn N(0, 0.02) and
 * stored bf16 by synth (quantized in mlx4 where its width allows), a
 * zero-centred norm is drawn on synth's 2^-7 grid, a bias N(0, 0.02), a
 * plain multiplier 1 + N(0, 0.02). Everything else (the conv taps, A_log,
 * the gated norm's f32, the patch embedding) is written out in its entry.
 *
 * Not here: what the loader does with a form (model-dir.c), synth's
 * numbers (common/synth), or the FLOP formulas' non-tensor terms.
 */
#include "model/tensors.h" // defines: jev_tensor_table, jev_tensor_walk_next

#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* ---- layouts ---- */

/* The short names jev info prints and synth's --layout mirrors (mlx4 = mlx with 4-bit codes). */
const char *jev_layout_name(enum jev_layout l) { return l == JEV_LAYOUT_MLX ? "mlx" : "hf"; }

/*
 * The renames of mlx-vlm's sanitize (spec section 10.2): the text model moves
 * from model.language_model.* to language_model.model.*, the vision tower
 * from model.visual.* to vision_tower.*, the head to language_model.lm_head.
 */
struct jev_layout_names jev_layout_names(enum jev_layout l) {
    if (l == JEV_LAYOUT_MLX)
        return (struct jev_layout_names){"language_model.model.", "language_model.", "vision_tower.", "mtp."};
    return (struct jev_layout_names){"model.language_model.", "", "model.visual.", "mtp."};
}

/* ---- the table ---- */

#define TEXT(m) .dest = (int32_t)offsetof(struct jev_text_weights, m)
#define LAYER(m) .dest = (int32_t)offsetof(struct jev_layer_weights, m)
#define VISION(m) .dest = (int32_t)offsetof(struct jev_vision_weights, m)
#define BLOCK(m) .dest = (int32_t)offsetof(struct jev_vision_block_weights, m)
#define NO_DEST .dest = JEV_TENSOR_NO_DEST

#define BF16 .hf_dtype = JEV_DTYPE_BF16, .mlx_dtype = JEV_DTYPE_BF16
/* a Linear / Embedding [r, c] */
#define MAT(r, c)                                                                                                      \
    .form = JEV_TFORM_MATRIX, .rows = JEV_DIM_##r, .cols = JEV_DIM_##c, .gen = JEV_GEN_NORMAL, .p0 = 0.02, BF16
/* a zero-centred RMSNorm [n] (1 + w) */
#define NORM(n)                                                                                                        \
    .form = JEV_TFORM_NORM1P, .rows = JEV_DIM_ONE, .cols = JEV_DIM_##n, .gen = JEV_GEN_NORM_OFFSET, .p0 = 0.02, BF16
/* a bias [n] */
#define BIAS(n)                                                                                                        \
    .form = JEV_TFORM_VECTOR, .rows = JEV_DIM_ONE, .cols = JEV_DIM_##n, .gen = JEV_GEN_NORMAL, .p0 = 0.02, BF16
/* a plain multiplier near 1 [n] (LayerNorm weights, dt_bias) */
#define GAIN(n)                                                                                                        \
    .form = JEV_TFORM_VECTOR, .rows = JEV_DIM_ONE, .cols = JEV_DIM_##n, .gen = JEV_GEN_ONE_NOISE, .p0 = 0.02, BF16

#define TI .part = JEV_PART_TEXT_IN
#define LY .part = JEV_PART_LAYER
#define LL .part = JEV_PART_LAYER_LINEAR
#define LF .part = JEV_PART_LAYER_FULL
#define TO .part = JEV_PART_TEXT_OUT
#define VI .part = JEV_PART_VISION_IN
#define VB .part = JEV_PART_BLOCK
#define VO .part = JEV_PART_VISION_OUT
#define MI .part = JEV_PART_MTP_IN
#define MO .part = JEV_PART_MTP_OUT

const struct jev_tensor_kind jev_tensor_table[] = {
    /* the text model */
    {"embed_tokens", TI, MAT(VOCAB, HIDDEN), .flags = JEV_TENSOR_LOOKUP, TEXT(embed)},
    /* a decoder layer: its module lists input_layernorm, the token mixer, post_attention_layernorm, mlp */
    {"input_layernorm.weight", LY, NORM(HIDDEN), LAYER(in_norm)},
    {"linear_attn.in_proj_qkv", LL, MAT(CONV, HIDDEN), LAYER(lin.in_qkv)},
    {"linear_attn.in_proj_z", LL, MAT(LIN_VALUE, HIDDEN), LAYER(lin.in_z)},
    {"linear_attn.in_proj_b", LL, MAT(LIN_HEADS, HIDDEN), LAYER(lin.in_b)},
    {"linear_attn.in_proj_a", LL, MAT(LIN_HEADS, HIDDEN), LAYER(lin.in_a)},
    /* U(-0.5, 0.5): the scale of PyTorch's default conv init for fan-in K = 4 */
    {"linear_attn.conv1d.weight", LL, .form = JEV_TFORM_CONV, .rows = JEV_DIM_CONV, .cols = JEV_DIM_KERNEL,
     .gen = JEV_GEN_UNIFORM, .p0 = -0.5, .p1 = 0.5, BF16, LAYER(lin.conv)},
    {"linear_attn.dt_bias", LL, GAIN(LIN_HEADS), LAYER(lin.dt_bias)},
    /* f32 in both layouts (mlx's cast predicate keeps it) */
    {"linear_attn.A_log", LL, .form = JEV_TFORM_VECTOR, .rows = JEV_DIM_ONE, .cols = JEV_DIM_LIN_HEADS,
     .gen = JEV_GEN_A_LOG, .hf_dtype = JEV_DTYPE_F32, .mlx_dtype = JEV_DTYPE_F32, LAYER(lin.a_log)},
    /* the gated norm: a plain multiplier in both layouts (never shifted), f32 in the official checkpoint */
    {"linear_attn.norm.weight", LL, .form = JEV_TFORM_VECTOR, .rows = JEV_DIM_ONE, .cols = JEV_DIM_LIN_VDIM,
     .gen = JEV_GEN_ONE_NOISE, .p0 = 0.02, .hf_dtype = JEV_DTYPE_F32, .mlx_dtype = JEV_DTYPE_BF16, LAYER(lin.norm)},
    {"linear_attn.out_proj", LL, MAT(HIDDEN, LIN_VALUE), LAYER(lin.out)},
    {"self_attn.q_proj", LF, MAT(QPROJ, HIDDEN), LAYER(full.q)},
    {"self_attn.k_proj", LF, MAT(KV, HIDDEN), LAYER(full.k)},
    {"self_attn.v_proj", LF, MAT(KV, HIDDEN), LAYER(full.v)},
    {"self_attn.o_proj", LF, MAT(HIDDEN, ATTN), LAYER(full.o)},
    {"self_attn.q_norm.weight", LF, NORM(HEAD), LAYER(full.q_norm)},
    {"self_attn.k_norm.weight", LF, NORM(HEAD), LAYER(full.k_norm)},
    {"post_attention_layernorm.weight", LY, NORM(HIDDEN), LAYER(post_norm)},
    {"mlp.gate_proj", LY, MAT(FFN, HIDDEN), LAYER(gate)},
    {"mlp.up_proj", LY, MAT(FFN, HIDDEN), LAYER(up)},
    {"mlp.down_proj", LY, MAT(HIDDEN, FFN), LAYER(down)},
    {"norm.weight", TO, NORM(HIDDEN), TEXT(final_norm)},
    {"lm_head", TO, MAT(VOCAB, HIDDEN), .flags = JEV_TENSOR_UNTIED | JEV_TENSOR_TOP, TEXT(lm_head)},
    /* the vision tower: LayerNorm weights are plain multipliers in both layouts */
    {"patch_embed.proj.weight", VI, .form = JEV_TFORM_PATCH, .rows = JEV_DIM_V_HIDDEN, .cols = JEV_DIM_V_PATCH,
     .gen = JEV_GEN_NORMAL, .p0 = 0.02, BF16, VISION(patch_w)},
    {"patch_embed.proj.bias", VI, BIAS(V_HIDDEN), VISION(patch_b)},
    {"pos_embed", VI, MAT(V_POS, V_HIDDEN), .flags = JEV_TENSOR_LOOKUP, VISION(pos_embed)},
    {"norm1.weight", VB, GAIN(V_HIDDEN), BLOCK(norm1_w)},
    {"norm1.bias", VB, BIAS(V_HIDDEN), BLOCK(norm1_b)},
    {"norm2.weight", VB, GAIN(V_HIDDEN), BLOCK(norm2_w)},
    {"norm2.bias", VB, BIAS(V_HIDDEN), BLOCK(norm2_b)},
    {"attn.qkv", VB, MAT(V_QKV, V_HIDDEN), BLOCK(qkv)},
    {"attn.qkv.bias", VB, BIAS(V_QKV), BLOCK(qkv_b)},
    {"attn.proj", VB, MAT(V_HIDDEN, V_HIDDEN), BLOCK(proj)},
    {"attn.proj.bias", VB, BIAS(V_HIDDEN), BLOCK(proj_b)},
    {"mlp.linear_fc1", VB, MAT(V_FFN, V_HIDDEN), BLOCK(fc1)},
    {"mlp.linear_fc1.bias", VB, BIAS(V_FFN), BLOCK(fc1_b)},
    {"mlp.linear_fc2", VB, MAT(V_HIDDEN, V_FFN), BLOCK(fc2)},
    {"mlp.linear_fc2.bias", VB, BIAS(V_HIDDEN), BLOCK(fc2_b)},
    {"merger.norm.weight", VO, GAIN(V_HIDDEN), VISION(merger_norm_w)},
    {"merger.norm.bias", VO, BIAS(V_HIDDEN), VISION(merger_norm_b)},
    {"merger.linear_fc1", VO, MAT(V_MERGE_IN, V_MERGE_IN), VISION(merger_fc1)},
    {"merger.linear_fc1.bias", VO, BIAS(V_MERGE_IN), VISION(merger_fc1_b)},
    {"merger.linear_fc2", VO, MAT(V_OUT, V_MERGE_IN), VISION(merger_fc2)},
    {"merger.linear_fc2.bias", VO, BIAS(V_OUT), VISION(merger_fc2_b)},
    /* the multi-token-prediction head (its layers are the gated-attention layer's entries) */
    {"fc", MI, MAT(HIDDEN, HIDDEN2), NO_DEST},
    {"pre_fc_norm_embedding.weight", MI, NORM(HIDDEN), NO_DEST},
    {"pre_fc_norm_hidden.weight", MI, NORM(HIDDEN), NO_DEST},
    {"norm.weight", MO, NORM(HIDDEN), NO_DEST},
};

const int32_t jev_tensor_count = (int32_t)(sizeof jev_tensor_table / sizeof jev_tensor_table[0]);

/* ---- sizes ---- */

int64_t jev_tensor_dim(enum jev_tensor_dim d, const struct jev_text_config *t, const struct jev_vision_config *v) {
    if (d == JEV_DIM_NONE || d == JEV_DIM_ONE)
        return d == JEV_DIM_ONE;
    if (d < JEV_DIM_V_HIDDEN) {
        JEV_ASSERT(t != NULL);
        switch (d) {
        case JEV_DIM_VOCAB: return t->vocab_size;
        case JEV_DIM_HIDDEN: return t->hidden;
        case JEV_DIM_HIDDEN2: return 2 * (int64_t)t->hidden;
        case JEV_DIM_FFN: return t->intermediate;
        case JEV_DIM_QPROJ: return t->q_proj_out;
        case JEV_DIM_KV: return t->kv_dim;
        case JEV_DIM_ATTN: return t->attn_out;
        case JEV_DIM_HEAD: return t->head_dim;
        case JEV_DIM_CONV: return t->conv_dim;
        case JEV_DIM_KERNEL: return t->conv_kernel;
        case JEV_DIM_LIN_VALUE: return t->lin_value_dim;
        case JEV_DIM_LIN_HEADS: return t->lin_v_heads;
        case JEV_DIM_LIN_VDIM: return t->lin_v_dim;
        default: return 0;
        }
    }
    JEV_ASSERT(v != NULL);
    switch (d) {
    case JEV_DIM_V_HIDDEN: return v->hidden;
    case JEV_DIM_V_QKV: return 3 * (int64_t)v->hidden;
    case JEV_DIM_V_FFN: return v->intermediate;
    case JEV_DIM_V_PATCH: return v->patch_dim;
    case JEV_DIM_V_POS: return v->n_pos_embed;
    case JEV_DIM_V_MERGE_IN: return v->merge_in;
    case JEV_DIM_V_OUT: return v->out_hidden;
    default: return 0;
    }
}

bool jev_tensor_in_layer(const struct jev_tensor_kind *k, enum jev_layer_kind kind) {
    return k->part == JEV_PART_LAYER || (k->part == JEV_PART_LAYER_LINEAR && kind == JEV_LAYER_LINEAR) ||
           (k->part == JEV_PART_LAYER_FULL && kind == JEV_LAYER_FULL);
}

const void *jev_tensor_field(const struct jev_tensor_kind *k, const void *base) { return (const char *)base + k->dest; }

/* ---- the check ---- */

/*
 * The structs the entries land in. Each has at most one member that is not
 * a tensor slot (the layer's kind, the layer and block tables); every other
 * byte belongs to exactly one entry's slot (the slots are pointers and
 * struct jev_matrix, both 8-aligned, so there is no padding between them).
 */
struct host {
    const char *name;        /* for messages */
    size_t size;             /* sizeof the struct */
    size_t other, other_len; /* the non-tensor member (and the padding after it) */
};

#define HOST_MAX 1024 /* bytes of the largest host struct, checked below */
enum { H_TEXT, H_LAYER, H_VISION, H_BLOCK, H_COUNT, H_MTP = H_COUNT };

static const struct host hosts[H_COUNT] = {
    {"struct jev_text_weights", sizeof(struct jev_text_weights), offsetof(struct jev_text_weights, layers),
     sizeof(struct jev_layer_weights *)},
    {"struct jev_layer_weights", sizeof(struct jev_layer_weights), 0, offsetof(struct jev_layer_weights, in_norm)},
    {"struct jev_vision_weights", sizeof(struct jev_vision_weights), offsetof(struct jev_vision_weights, blocks),
     sizeof(struct jev_vision_block_weights *)},
    {"struct jev_vision_block_weights", sizeof(struct jev_vision_block_weights), 0, 0},
};

_Static_assert(sizeof(struct jev_layer_weights) <= HOST_MAX && sizeof(struct jev_text_weights) <= HOST_MAX &&
                   sizeof(struct jev_vision_weights) <= HOST_MAX && sizeof(struct jev_vision_block_weights) <= HOST_MAX,
               "a weights struct outgrew the table check's map");

/* The struct a part's entries land in (H_MTP: none). */
static int host_of(enum jev_tensor_part p) {
    switch (p) {
    case JEV_PART_TEXT_IN:
    case JEV_PART_TEXT_OUT: return H_TEXT;
    case JEV_PART_LAYER:
    case JEV_PART_LAYER_LINEAR:
    case JEV_PART_LAYER_FULL: return H_LAYER;
    case JEV_PART_VISION_IN:
    case JEV_PART_VISION_OUT: return H_VISION;
    case JEV_PART_BLOCK: return H_BLOCK;
    default: return H_MTP;
    }
}

static size_t slot_size(const struct jev_tensor_kind *k) {
    return k->form == JEV_TFORM_MATRIX ? sizeof(struct jev_matrix) : sizeof(float *);
}

/* One entry on its own: everything but its relation to the others. */
static enum jev_status check_entry(const struct jev_tensor_kind *k, int32_t i, struct jev_error *err) {
    if (!k->name || !k->name[0])
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: entry %d has no name", i);
    if ((unsigned)k->part >= JEV_PART_COUNT || (unsigned)k->form >= JEV_TFORM_COUNT ||
        (unsigned)k->gen >= JEV_GEN_COUNT || (unsigned)k->rows >= JEV_DIM_COUNT || (unsigned)k->cols >= JEV_DIM_COUNT)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s': part, form, generator or dimension out of range",
                        k->name);
    if (k->rows == JEV_DIM_NONE || k->cols == JEV_DIM_NONE || k->cols == JEV_DIM_ONE)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s' has no shape (rows and cols are config sizes)",
                        k->name);
    bool vector = k->form == JEV_TFORM_VECTOR || k->form == JEV_TFORM_NORM1P;
    if (vector != (k->rows == JEV_DIM_ONE))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s': rows must be JEV_DIM_ONE exactly for a vector",
                        k->name);
    for (int d = 0; d < 2; d++) {
        enum jev_dtype t = d ? k->mlx_dtype : k->hf_dtype;
        if (t != JEV_DTYPE_F32 && t != JEV_DTYPE_BF16)
            return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s': synth's %s dtype %s is not F32 or BF16",
                            k->name, d ? "mlx4" : "hf", jev_dtype_name(t));
    }
    int h = host_of(k->part);
    if (h == H_MTP)
        return k->dest == JEV_TENSOR_NO_DEST
                   ? JEV_OK
                   : jev_fail(err, JEV_ERR_INVALID_ARG,
                              "tensor table: '%s' (MTP head) has a destination, but the loader keeps no MTP tensor",
                              k->name);
    if (k->dest < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s' has no destination in %s", k->name,
                        hosts[h].name);
    if ((size_t)k->dest % sizeof(void *) != 0 || (size_t)k->dest + slot_size(k) > hosts[h].size)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s': offset %d is not a %s slot of %s", k->name,
                        k->dest, k->form == JEV_TFORM_MATRIX ? "struct jev_matrix" : "float *", hosts[h].name);
    return JEV_OK;
}

enum jev_status jev_tensor_table_check(const struct jev_tensor_kind *t, int32_t n, struct jev_error *err) {
    int16_t owner[H_COUNT][HOST_MAX]; /* entry index + 1 per byte; -1 a non-tensor member; 0 unclaimed */
    memset(owner, 0, sizeof owner);
    for (int h = 0; h < H_COUNT; h++)
        for (size_t b = hosts[h].other; b < hosts[h].other + hosts[h].other_len; b++)
            owner[h][b] = -1;
    for (int32_t i = 0; i < n; i++) {
        const struct jev_tensor_kind *k = &t[i];
        JEV_TRY(check_entry(k, i, err));
        int h = host_of(k->part);
        for (int32_t j = 0; j < i; j++)
            if (host_of(t[j].part) == h && strcmp(t[j].name, k->name) == 0)
                return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s' is listed twice for %s", k->name,
                                h == H_MTP ? "the MTP head" : hosts[h].name);
        if (h == H_MTP)
            continue;
        for (size_t b = (size_t)k->dest; b < (size_t)k->dest + slot_size(k); b++) {
            if (owner[h][b] == -1)
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "tensor table: '%s' lands on byte %zu of %s, which is not a tensor slot", k->name, b,
                                hosts[h].name);
            if (owner[h][b] > 0)
                return jev_fail(err, JEV_ERR_INVALID_ARG, "tensor table: '%s' and '%s' land on the same slot of %s",
                                t[owner[h][b] - 1].name, k->name, hosts[h].name);
            owner[h][b] = (int16_t)(i + 1);
        }
    }
    for (int h = 0; h < H_COUNT; h++)
        for (size_t b = 0; b < hosts[h].size; b++)
            if (owner[h][b] == 0) {
                size_t e = b;
                while (e < hosts[h].size && owner[h][e] == 0)
                    e++;
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "tensor table: bytes %zu..%zu of %s are a slot that no entry fills", b, e - 1,
                                hosts[h].name);
            }
    return JEV_OK;
}

/* ---- the walk ---- */

enum stage {
    S_TEXT_IN,
    S_LAYERS,
    S_TEXT_OUT,
    S_VISION_IN,
    S_BLOCKS,
    S_VISION_OUT,
    S_MTP_IN,
    S_MTP_LAYERS,
    S_MTP_OUT,
    S_END
};

void jev_tensor_walk_init(struct jev_tensor_walk *w, const struct jev_config *c, bool vision, int32_t n_mtp) {
    *w = (struct jev_tensor_walk){.c = c, .vision = vision, .n_mtp = n_mtp};
}

/* How many times a stage runs: once, per layer or block, or not at all. */
static int32_t repeats(const struct jev_tensor_walk *w, int stage) {
    switch (stage) {
    case S_TEXT_IN:
    case S_TEXT_OUT: return 1;
    case S_LAYERS: return w->c->text.n_layers;
    case S_VISION_IN:
    case S_VISION_OUT: return w->vision ? 1 : 0;
    case S_BLOCKS: return w->vision ? w->c->vision.depth : 0;
    case S_MTP_IN:
    case S_MTP_OUT: return w->n_mtp > 0 ? 1 : 0;
    case S_MTP_LAYERS: return w->n_mtp;
    default: return 0;
    }
}

/* Whether entry k is a tensor of the walk's current stage (and layer). */
static bool in_stage(const struct jev_tensor_walk *w, const struct jev_tensor_kind *k) {
    switch (w->stage) {
    case S_TEXT_IN: return k->part == JEV_PART_TEXT_IN;
    case S_LAYERS: return jev_tensor_in_layer(k, (enum jev_layer_kind)w->c->text.layer_kind[w->index]);
    case S_TEXT_OUT:
        return k->part == JEV_PART_TEXT_OUT && !((k->flags & JEV_TENSOR_UNTIED) && w->c->text.tie_embeddings);
    case S_VISION_IN: return k->part == JEV_PART_VISION_IN;
    case S_BLOCKS: return k->part == JEV_PART_BLOCK;
    case S_VISION_OUT: return k->part == JEV_PART_VISION_OUT;
    case S_MTP_IN: return k->part == JEV_PART_MTP_IN;
    case S_MTP_LAYERS: return jev_tensor_in_layer(k, JEV_LAYER_FULL); /* the MTP layers are gated attention */
    case S_MTP_OUT: return k->part == JEV_PART_MTP_OUT;
    default: return false;
    }
}

bool jev_tensor_walk_next(struct jev_tensor_walk *w, struct jev_tensor_at *at) {
    while (w->stage < S_END) {
        if (w->index >= repeats(w, w->stage)) {
            w->stage++;
            w->index = 0;
            w->next = 0;
            continue;
        }
        while (w->next < jev_tensor_count) {
            const struct jev_tensor_kind *k = &jev_tensor_table[w->next++];
            if (!in_stage(w, k))
                continue;
            bool repeated = w->stage == S_LAYERS || w->stage == S_BLOCKS || w->stage == S_MTP_LAYERS;
            *at = (struct jev_tensor_at){
                .k = k,
                .index = repeated ? w->index : -1,
                .mtp = w->stage == S_MTP_LAYERS,
                .rows = jev_tensor_dim(k->rows, &w->c->text, &w->c->vision),
                .cols = jev_tensor_dim(k->cols, &w->c->text, &w->c->vision),
            };
            return true;
        }
        w->index++;
        w->next = 0;
    }
    return false;
}

/*
 * Prefix + "layers.i." / "blocks.i." for the repeated parts + the entry's
 * name. Every name fits: the longest real one is about 60 bytes and layer
 * and block indices have at most 3 digits.
 */
const char *jev_tensor_name(const struct jev_tensor_at *at, enum jev_layout l, char *buf) {
    const struct jev_layout_names n = jev_layout_names(l);
    const struct jev_tensor_kind *k = at->k;
    switch (host_of(k->part)) {
    case H_TEXT: snprintf(buf, JEV_TENSOR_NAME_MAX, "%s%s", k->flags & JEV_TENSOR_TOP ? n.top : n.text, k->name); break;
    case H_LAYER:
        snprintf(buf, JEV_TENSOR_NAME_MAX, "%slayers.%d.%s", at->mtp ? n.mtp : n.text, at->index, k->name);
        break;
    case H_VISION: snprintf(buf, JEV_TENSOR_NAME_MAX, "%s%s", n.vision, k->name); break;
    case H_BLOCK: snprintf(buf, JEV_TENSOR_NAME_MAX, "%sblocks.%d.%s", n.vision, at->index, k->name); break;
    default: snprintf(buf, JEV_TENSOR_NAME_MAX, "%s%s", n.mtp, k->name); break;
    }
    return buf;
}

int32_t jev_tensor_file_shape(const struct jev_tensor_at *at, const struct jev_config *c, enum jev_layout l,
                              int64_t shape[5]) {
    bool hf = l == JEV_LAYOUT_HF;
    switch (at->k->form) {
    case JEV_TFORM_MATRIX:
        shape[0] = at->rows;
        shape[1] = at->cols;
        return 2;
    case JEV_TFORM_CONV: /* HF's middle dimension is the one input channel per group, MLX's last */
        shape[0] = at->rows;
        shape[1] = hf ? 1 : at->cols;
        shape[2] = hf ? at->cols : 1;
        return 3;
    case JEV_TFORM_PATCH: {
        const struct jev_vision_config *v = &c->vision;
        int64_t hfs[5] = {v->hidden, v->in_channels, v->temporal_patch, v->patch, v->patch};
        int64_t mlx[5] = {v->hidden, v->temporal_patch, v->patch, v->patch, v->in_channels};
        memcpy(shape, hf ? hfs : mlx, sizeof hfs);
        return 5;
    }
    default: shape[0] = at->cols; return 1;
    }
}

void *jev_tensor_slot(const struct jev_tensor_at *at, struct jev_weights *w) {
    if (at->k->dest < 0 || at->mtp)
        return NULL;
    void *base = NULL;
    switch (host_of(at->k->part)) {
    case H_TEXT: base = &w->text; break;
    case H_LAYER: base = &w->text.layers[at->index]; break;
    case H_VISION: base = &w->vision; break;
    case H_BLOCK: base = &w->vision.blocks[at->index]; break;
    default: return NULL;
    }
    return (char *)base + at->k->dest;
}

const void *jev_tensor_slot_const(const struct jev_tensor_at *at, const struct jev_weights *w) {
    /* one address computation for both; nothing is written through w here (strchr's idiom) */
    return jev_tensor_slot(at, (struct jev_weights *)(uintptr_t)w);
}

int64_t jev_tensor_patch_mlx_index(int64_t i, int64_t channels, int64_t frames, int64_t side) {
    int64_t x = i % side, y = i / side % side, t = i / (side * side) % frames, c = i / (side * side * frames);
    return ((t * side + y) * side + x) * channels + c;
}

/*
 * tensors.h - the one table of Qwen3.5's tensors, and the walk over it.
 *
 * Every tensor kind of the checkpoint is one entry of jev_tensor_table: its
 * HF name below its part's prefix, the part of the model it belongs to, its
 * shape in config dimensions, its form (matrix, plain vector, (1 + w) norm,
 * conv taps, patch embedding), whether it is optional, where it lands in
 * struct jev_weights, and how jev synth draws and stores it. The loader
 * (model-dir.c), synth (common/synth), the backend's weights mirror and the
 * FLOP counts all walk this table; none of them lists tensors of its own.
 *
 * The table is in HF state-dict order (the order jev synth shards in, as
 * save_pretrained does): the text model (embed_tokens, the layers, norm,
 * lm_head), the vision tower (patch embedding, positions, the blocks, the
 * merger), then the MTP head (which only synth writes: HF and jev ignore it).
 * The MLX names come from the layout's prefixes (jev_layout_names), exactly
 * as mlx-vlm's sanitize renames them.
 *
 * What it is not: the loading itself (the checks and messages stay in
 * model-dir.c), synth's generator or quantizer, or any forward math.
 */
#ifndef JEV_MODEL_TENSORS_H
#define JEV_MODEL_TENSORS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"     // defines: struct jev_error
#include "io/safetensors.h" // defines: enum jev_dtype
#include "model/config.h"   // defines: struct jev_config
#include "model/weights.h"  // defines: struct jev_weights

/* ---- layouts ---- */

enum jev_layout {
    JEV_LAYOUT_HF = 0,  /* official Hugging Face names and layouts */
    JEV_LAYOUT_MLX = 1, /* mlx-vlm conversion */
};

/* "hf" or "mlx". */
const char *jev_layout_name(enum jev_layout l);

/* The tensor-name prefixes of a layout: every name is one of these + a table entry's name. */
struct jev_layout_names {
    const char *text;   /* "model.language_model." / "language_model.model." */
    const char *top;    /* "" / "language_model." (the untied lm_head) */
    const char *vision; /* "model.visual." / "vision_tower." */
    const char *mtp;    /* "mtp." in both (mlx-vlm drops the MTP head; only hf synth writes it) */
};
struct jev_layout_names jev_layout_names(enum jev_layout l);

/* ---- the table ---- */

/* Where an entry sits; the walk visits the parts in this order. */
enum jev_tensor_part {
    JEV_PART_TEXT_IN,      /* the text model before its layers (struct jev_text_weights) */
    JEV_PART_LAYER,        /* every decoder layer, any kind (struct jev_layer_weights) */
    JEV_PART_LAYER_LINEAR, /* Gated DeltaNet layers only */
    JEV_PART_LAYER_FULL,   /* gated attention layers only (also every MTP layer) */
    JEV_PART_TEXT_OUT,     /* the text model after its layers */
    JEV_PART_VISION_IN,    /* the vision tower before its blocks (struct jev_vision_weights) */
    JEV_PART_BLOCK,        /* every vision block (struct jev_vision_block_weights) */
    JEV_PART_VISION_OUT,   /* the merger */
    JEV_PART_MTP_IN,       /* the MTP head before its layers (synth only; no destination) */
    JEV_PART_MTP_OUT,      /* the MTP head after its layers */
    JEV_PART_COUNT,
};

/*
 * What the tensor is and how its file form maps to struct jev_weights.
 * Only JEV_TFORM_MATRIX may be affine-quantized (MLX: weight U32 + scales +
 * biases); every other form is a float tensor converted to f32 at load.
 */
enum jev_tensor_form {
    JEV_TFORM_MATRIX, /* a Linear / Embedding `name`.weight [rows, cols]: struct jev_matrix, in place */
    JEV_TFORM_VECTOR, /* a float vector [cols] used as stored (biases, LayerNorms, gated norm, dt_bias, A_log) */
    JEV_TFORM_NORM1P, /* a zero-centred RMSNorm [cols]: HF stores w (1 + w formed in f32 at load), MLX 1 + w */
    JEV_TFORM_CONV,   /* depthwise conv taps [rows][cols]: HF [C, 1, K], MLX [C, K, 1], same flat order */
    JEV_TFORM_PATCH,  /* the Conv3d patch embedding [Dv][c, t, y, x]: HF [Dv, c, t, y, x], MLX [Dv, t, y, x, c] */
    JEV_TFORM_COUNT,
};

/* A size from the config; JEV_DIM_NONE (0) marks an entry whose shape was left out. */
enum jev_tensor_dim {
    JEV_DIM_NONE = 0,
    JEV_DIM_ONE,        /* 1: the rows of a vector */
    JEV_DIM_VOCAB,      /* text.vocab_size */
    JEV_DIM_HIDDEN,     /* text.hidden D */
    JEV_DIM_HIDDEN2,    /* 2 * D (the MTP head's fc input) */
    JEV_DIM_FFN,        /* text.intermediate F */
    JEV_DIM_QPROJ,      /* text.q_proj_out: 2 * Hq * dh, [query | gate] per head */
    JEV_DIM_KV,         /* text.kv_dim: Hkv * dh */
    JEV_DIM_ATTN,       /* text.attn_out: Hq * dh */
    JEV_DIM_HEAD,       /* text.head_dim dh */
    JEV_DIM_CONV,       /* text.conv_dim: 2 * key_dim + value_dim */
    JEV_DIM_KERNEL,     /* text.conv_kernel K */
    JEV_DIM_LIN_VALUE,  /* text.lin_value_dim: Hv * dv */
    JEV_DIM_LIN_HEADS,  /* text.lin_v_heads Hv */
    JEV_DIM_LIN_VDIM,   /* text.lin_v_dim dv */
    JEV_DIM_V_HIDDEN,   /* vision.hidden Dv */
    JEV_DIM_V_QKV,      /* 3 * Dv */
    JEV_DIM_V_FFN,      /* vision.intermediate */
    JEV_DIM_V_PATCH,    /* vision.patch_dim: c * t * p * p */
    JEV_DIM_V_POS,      /* vision.n_pos_embed */
    JEV_DIM_V_MERGE_IN, /* vision.merge_in: Dv * merge^2 */
    JEV_DIM_V_OUT,      /* vision.out_hidden */
    JEV_DIM_COUNT,
};

/* How jev synth draws an entry's values (common/synth/synth-plan.c). */
enum jev_tensor_gen {
    JEV_GEN_NORMAL,      /* bf16(p0 * N(0,1)): matrices, embeddings, biases */
    JEV_GEN_NORM_OFFSET, /* zero-centred RMSNorm offsets on a 2^-7 grid, so 1 + w is exact in bf16 */
    JEV_GEN_ONE_NOISE,   /* bf16(1 + p0 * N(0,1)): plain-multiplier norms, dt_bias, LayerNorm weights */
    JEV_GEN_UNIFORM,     /* bf16(U(p0, p1)): conv taps */
    JEV_GEN_A_LOG,       /* f32(log(U(1, 16))) */
    JEV_GEN_COUNT,
};

enum {
    JEV_TENSOR_UNTIED = 1u << 0, /* only when the embeddings are untied (lm_head); tied, the head is embed */
    JEV_TENSOR_TOP = 1u << 1,    /* named below the layout's top prefix, not the text model's */
    JEV_TENSOR_LOOKUP = 1u << 2, /* an embedding table: rows are looked up, not multiplied (no FLOPs) */
};

#define JEV_TENSOR_NO_DEST (-1) /* dest of an entry the loader does not keep (the MTP head) */
#define JEV_TENSOR_NAME_MAX 256 /* bytes of any tensor name built from the table, with its suffix */

struct jev_tensor_kind {
    const char *name;               /* HF name below the part's prefix: a matrix's module path (the file
                                       adds .weight, or .weight/.scales/.biases), else the tensor name */
    enum jev_tensor_part part;      /* where it sits */
    enum jev_tensor_form form;      /* what it is */
    enum jev_tensor_dim rows, cols; /* logical [rows][cols]; rows JEV_DIM_ONE for a vector */
    uint32_t flags;                 /* JEV_TENSOR_* */
    int32_t dest;                   /* offsetof its slot in the part's struct, or JEV_TENSOR_NO_DEST */
    enum jev_tensor_gen gen;        /* synth: how its values are drawn */
    double p0, p1;                  /* synth: generator parameters */
    enum jev_dtype hf_dtype;        /* synth: stored dtype in the hf layout (F32 or BF16) */
    enum jev_dtype mlx_dtype;       /* synth: in the mlx4 layout, when not quantized */
};

extern const struct jev_tensor_kind jev_tensor_table[];
extern const int32_t jev_tensor_count;

/*
 * Checks a table (the real one, or a test's edited copy): every entry has a
 * name, a shape, a known form, part and generator, synth dtypes F32/BF16,
 * and a destination exactly when its part is loaded; no two entries of one
 * struct share a name or a byte; and every tensor slot of struct
 * jev_layer_weights, jev_text_weights, jev_vision_weights and
 * jev_vision_block_weights is claimed by an entry. The message names the
 * entry or the unclaimed bytes.
 */
enum jev_status jev_tensor_table_check(const struct jev_tensor_kind *t, int32_t n, struct jev_error *err);

/* A size of the config (0 for JEV_DIM_NONE); t or v may be NULL when no dimension of theirs is asked for. */
int64_t jev_tensor_dim(enum jev_tensor_dim d, const struct jev_text_config *t, const struct jev_vision_config *v);

/* Whether entry k belongs to a decoder layer of kind `kind`. */
bool jev_tensor_in_layer(const struct jev_tensor_kind *k, enum jev_layer_kind kind);

/* Entry k's slot in the struct of its part at `base` (a float * or a struct jev_matrix). */
const void *jev_tensor_field(const struct jev_tensor_kind *k, const void *base);

/* ---- the walk ---- */

/* One tensor of a model: an entry, at a layer or block when its part repeats. */
struct jev_tensor_at {
    const struct jev_tensor_kind *k; /* the table entry */
    int32_t index;                   /* layer or block number; -1 outside layers and blocks */
    bool mtp;                        /* a layer of the MTP head (mtp.layers.i.*) */
    int64_t rows, cols;              /* logical [rows][cols] from the config */
};

struct jev_tensor_walk {
    const struct jev_config *c; /* sizes, layer kinds, tied or not */
    bool vision;                /* walk the vision tower */
    int32_t n_mtp;              /* MTP layers to walk (synth's hf layout); 0 skips the MTP head */
    int32_t stage, index, next; /* position */
};

/*
 * Every tensor of config c in table order: the text model, then (when
 * `vision`) the vision tower, then (when n_mtp > 0) the MTP head. Untied-only
 * entries are skipped for a tied model.
 */
void jev_tensor_walk_init(struct jev_tensor_walk *w, const struct jev_config *c, bool vision, int32_t n_mtp);
bool jev_tensor_walk_next(struct jev_tensor_walk *w, struct jev_tensor_at *at);

/* The tensor's name in layout l (a matrix: its module path, without .weight) into buf[JEV_TENSOR_NAME_MAX]. */
const char *jev_tensor_name(const struct jev_tensor_at *at, enum jev_layout l, char *buf);

/* The float file shape in layout l (a matrix: [rows, cols] unquantized); returns ndim. */
int32_t jev_tensor_file_shape(const struct jev_tensor_at *at, const struct jev_config *c, enum jev_layout l,
                              int64_t shape[5]);

/* The tensor's slot in w (NULL for the MTP head, which the loader does not keep). */
void *jev_tensor_slot(const struct jev_tensor_at *at, struct jev_weights *w);
const void *jev_tensor_slot_const(const struct jev_tensor_at *at, const struct jev_weights *w);

/*
 * The patch embedding's permutation: element i of a row in HF's (c, t, y, x)
 * order sits at the returned index of MLX's channels-last (t, y, x, c) row.
 */
int64_t jev_tensor_patch_mlx_index(int64_t i, int64_t channels, int64_t frames, int64_t side);

#endif

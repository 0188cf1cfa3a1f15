/*
 * weights.h - the model's weight tables, layout-independent.
 *
 * The loader (src/model/model-dir.c) maps both checkpoint layouts (official HF
 * bf16, MLX 4-bit) onto these structs, so the forward pass never knows which
 * file it came from:
 * - Matrices ([out, in], y = W x) stay where the file has them (mmapped) and
 *   are described by struct jev_matrix (backend/matrix.h): f32, bf16, f16, or
 *   affine-quantized (MLX: packed u32 codes + per-group scale and bias).
 * - Small vectors (norm gammas, biases, conv taps, A_log, dt_bias) are
 *   converted once to f32 and owned by the model. RMSNorm gammas are stored
 *   as the plain multiplier: 1 + w for HF's zero-centred norms (formed in f32),
 *   as-is for MLX, whose converter already shifted them.
 * - conv1d taps are [conv_dim][K] f32 whatever the file layout.
 * - The vision patch embedding is [hidden][patch_dim] f32 in HF's (c, t, y, x)
 *   order, also for MLX's channels-last file layout.
 */
#ifndef JEV_MODEL_WEIGHTS_H
#define JEV_MODEL_WEIGHTS_H

#include <stdint.h>

#include "backend/matrix.h" // defines: struct jev_matrix
#include "model/config.h"   // defines: struct jev_config

struct jev_linear_attn_weights {
    struct jev_matrix in_qkv; /* [conv_dim, D] -> [q | k | v] channels */
    struct jev_matrix in_z;   /* [value_dim, D] output gate */
    struct jev_matrix in_b;   /* [Hv, D] -> beta = sigmoid(b) */
    struct jev_matrix in_a;   /* [Hv, D] -> decay */
    struct jev_matrix out;    /* [D, value_dim] */
    float *conv;              /* [conv_dim][K] depthwise taps; tap K-1 hits the current token */
    float *dt_bias;           /* [Hv] */
    float *a_log;             /* [Hv] */
    float *norm;              /* [dv] gated RMSNorm weight (plain w) */
};

struct jev_full_attn_weights {
    struct jev_matrix q; /* [Hq*dh*2, D] per head [query dh | gate dh] */
    struct jev_matrix k; /* [Hkv*dh, D] */
    struct jev_matrix v; /* [Hkv*dh, D] */
    struct jev_matrix o; /* [D, Hq*dh] */
    float *q_norm;       /* [dh] multiplier (1 + w) */
    float *k_norm;       /* [dh] multiplier (1 + w) */
};

struct jev_layer_weights {
    enum jev_layer_kind kind;           /* which of lin / full is set */
    float *in_norm;                     /* [D] multiplier (1 + w) */
    float *post_norm;                   /* [D] multiplier (1 + w) */
    struct jev_linear_attn_weights lin; /* kind == LINEAR */
    struct jev_full_attn_weights full;  /* kind == FULL */
    struct jev_matrix gate;             /* [F, D] */
    struct jev_matrix up;               /* [F, D] */
    struct jev_matrix down;             /* [D, F] */
};

struct jev_text_weights {
    struct jev_matrix embed;          /* [vocab, D] embed_tokens */
    struct jev_matrix lm_head;        /* [vocab, D]; equals embed when tied */
    float *final_norm;                /* [D] multiplier (1 + w) */
    struct jev_layer_weights *layers; /* [n_layers] */
};

struct jev_vision_block_weights {
    float *norm1_w, *norm1_b; /* [Dv] LayerNorm */
    float *norm2_w, *norm2_b; /* [Dv] LayerNorm */
    struct jev_matrix qkv;    /* [3*Dv, Dv] -> [q | k | v] */
    float *qkv_b;             /* [3*Dv] */
    struct jev_matrix proj;   /* [Dv, Dv] */
    float *proj_b;            /* [Dv] */
    struct jev_matrix fc1;    /* [I, Dv] */
    float *fc1_b;             /* [I] */
    struct jev_matrix fc2;    /* [Dv, I] */
    float *fc2_b;             /* [Dv] */
};

struct jev_vision_weights {
    float *patch_w;                          /* [Dv][patch_dim], (c, t, y, x) order */
    float *patch_b;                          /* [Dv] */
    struct jev_matrix pos_embed;             /* [n_pos_embed, Dv] (may be quantized) */
    struct jev_vision_block_weights *blocks; /* [depth] */
    float *merger_norm_w, *merger_norm_b;    /* [Dv] LayerNorm before the 2x2 concat */
    struct jev_matrix merger_fc1;            /* [merge_in, merge_in] */
    float *merger_fc1_b;                     /* [merge_in] */
    struct jev_matrix merger_fc2;            /* [out_hidden, merge_in] */
    float *merger_fc2_b;                     /* [out_hidden] */
};

struct jev_weights {
    struct jev_text_weights text;
    struct jev_vision_weights vision; /* valid when config.has_vision */
};

#endif

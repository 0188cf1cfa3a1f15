/*
 * config.h - the model's hyperparameters, as read from config.json.
 *
 * Everything about sizes, token ids and layer kinds comes from the model
 * directory (src/model/model-dir.c fills this); nothing here is Qwen3.5-0.8B
 * specific. Derived sizes are computed once by jev_config_derive().
 */
#ifndef JEV_MODEL_CONFIG_H
#define JEV_MODEL_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

#define JEV_MAX_LAYERS 256
#define JEV_MAX_EOS 8

enum jev_layer_kind {
    JEV_LAYER_LINEAR = 0, /* Gated DeltaNet ("linear_attention") */
    JEV_LAYER_FULL = 1,   /* gated softmax attention ("full_attention") */
};

struct jev_text_config {
    int32_t vocab_size;                 /* rows of embed_tokens (padded vocabulary) */
    int32_t hidden;                     /* D */
    int32_t intermediate;               /* MLP width F */
    int32_t n_layers;                   /* decoder layers */
    uint8_t layer_kind[JEV_MAX_LAYERS]; /* enum jev_layer_kind per layer */
    /* gated attention */
    int32_t n_heads;          /* query heads Hq */
    int32_t n_kv_heads;       /* key/value heads Hkv */
    int32_t head_dim;         /* dh */
    int32_t rotary_dim;       /* rotated dims per head = head_dim * partial_rotary_factor */
    int32_t mrope_section[3]; /* frequency pairs per axis (t, h, w); sums to rotary_dim / 2 */
    bool mrope_interleaved;   /* THWTHW... assignment (Qwen3.5) instead of sectioned */
    double rope_theta;        /* base of the inverse frequencies */
    /* Gated DeltaNet */
    int32_t lin_k_heads; /* Hk */
    int32_t lin_v_heads; /* Hv (a multiple of Hk) */
    int32_t lin_k_dim;   /* dk */
    int32_t lin_v_dim;   /* dv */
    int32_t conv_kernel; /* K of the causal depthwise conv */
    /* misc */
    float rms_eps;         /* RMSNorm epsilon */
    bool tie_embeddings;   /* LM head = embed_tokens */
    int32_t max_positions; /* max_position_embeddings */
    /* derived by jev_config_derive */
    int32_t q_proj_out;      /* Hq * dh * 2 (query and gate per head) */
    int32_t kv_dim;          /* Hkv * dh */
    int32_t attn_out;        /* Hq * dh */
    int32_t lin_key_dim;     /* Hk * dk */
    int32_t lin_value_dim;   /* Hv * dv */
    int32_t conv_dim;        /* 2 * key_dim + value_dim */
    int32_t n_full_layers;   /* layers of kind FULL */
    int32_t n_linear_layers; /* layers of kind LINEAR */
};

struct jev_vision_config {
    int32_t depth;          /* blocks */
    int32_t hidden;         /* Dv */
    int32_t n_heads;        /* attention heads */
    int32_t intermediate;   /* block MLP width */
    int32_t in_channels;    /* 3 */
    int32_t patch;          /* patch side in pixels (16) */
    int32_t temporal_patch; /* frames per patch (2) */
    int32_t merge;          /* spatial merge (2) */
    int32_t out_hidden;     /* merger output = text hidden */
    int32_t n_pos_embed;    /* learned positions, a square grid */
    bool gelu_tanh;         /* block MLP uses gelu_pytorch_tanh (else erf GELU) */
    float eps;              /* LayerNorm epsilon (1e-6) */
    /* derived */
    int32_t head_dim;  /* hidden / n_heads */
    int32_t patch_dim; /* in_channels * temporal_patch * patch * patch */
    int32_t pos_side;  /* sqrt(n_pos_embed) */
    int32_t merge_in;  /* hidden * merge * merge */
};

struct jev_token_ids {
    int32_t image_pad;        /* image_token_id */
    int32_t video_pad;        /* video_token_id */
    int32_t vision_start;     /* vision_start_token_id */
    int32_t vision_end;       /* vision_end_token_id */
    int32_t eos[JEV_MAX_EOS]; /* stop tokens (config + generation_config) */
    int32_t n_eos;            /* entries of eos */
};

struct jev_quant_config {
    bool present;       /* config.json has "quantization" */
    int32_t bits;       /* default bits (4) */
    int32_t group_size; /* default group size (64) */
};

struct jev_config {
    struct jev_text_config text;
    struct jev_vision_config vision;
    bool has_vision; /* vision_config present and loaded */
    struct jev_token_ids ids;
    struct jev_quant_config quant;
};

/* Fills the derived fields and checks consistency (divisibility, ranges). */
enum jev_status jev_config_derive(struct jev_config *c, struct jev_error *err);

#endif

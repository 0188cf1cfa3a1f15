/*
 * synth.h - writes a synthetic model directory: the real Qwen3.5 file layout
 * (names, shapes, dtypes, conv and patch layouts, norm conventions,
 * quantized format) with seeded random weights, for any config.
 *
 * Two layouts from the SAME underlying float weights for a given seed:
 *   hf    the official checkpoint: bf16 (A_log and linear_attn.norm f32),
 *         zero-centred RMSNorm offsets, conv1d [C, 1, K], patch embedding
 *         [Dv, c, t, y, x], no lm_head when tied, mtp.* when the config has
 *         mtp_num_hidden_layers > 0 (the loader ignores them).
 *   mlx4  the mlx-vlm conversion: renamed, norms stored shifted (1 + w),
 *         conv1d [C, K, 1], channels-last patch embedding, A_log f32, every
 *         Linear / Embedding whose input width is a multiple of the group
 *         size affine-quantized (u32 codes, bf16 scales and biases).
 * Weights are a pure function of (seed, HF tensor name, element index): a
 * counter-based generator and only correctly rounded IEEE operations, so the
 * files are byte-identical on every machine.
 *
 * What it is not: a converter of real checkpoints, or a loader.
 */
#ifndef JEV_COMMON_SYNTH_H
#define JEV_COMMON_SYNTH_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"  // defines: struct jev_error
#include "base/sha256.h" // defines: JEV_SHA256_HEX

enum jev_synth_layout {
    JEV_SYNTH_HF = 0,   /* official Hugging Face bf16 layout */
    JEV_SYNTH_MLX4 = 1, /* mlx-vlm layout, affine-quantized */
};

struct jev_synth_params {
    const char *config_path;      /* input config.json (required) */
    uint64_t seed;                /* weight seed */
    enum jev_synth_layout layout; /* hf or mlx4 */
    const char *out_dir;          /* the model directory to create (required) */
    const char *tokenizer_dir;    /* tokenizer.json + tokenizer_config.json; NULL = ".cache/tokenizer-qwen3" */
    const char *assets_dir;       /* preprocessor_config.json + chat_template.jinja; NULL = "configs" */
    int64_t shard_bytes;          /* > 0: shards of at most this size + index.json; 0 = one file */
    int32_t bits;                 /* mlx4 code bits; 0 = 4 */
    int32_t group;                /* mlx4 group size; 0 = 64 */
    bool force;                   /* replace out_dir when it exists (else an error) */
};

struct jev_synth_report {
    int32_t n_tensors;           /* tensors written */
    int32_t n_shards;            /* 1 when not sharded */
    int64_t n_params;            /* logical weight elements (before quantization) */
    int64_t bytes;               /* bytes of all safetensors files */
    char sha256[JEV_SHA256_HEX]; /* of model.safetensors; for shards, of the index file */
    double seconds;              /* wall time */
};

/* Defaults filled in (NULL / 0 fields as documented above). */
struct jev_synth_params jev_synth_default_params(void);

/*
 * Writes the directory into a temporary sibling and renames it into place,
 * so out_dir is either absent, the old one (on failure) or complete.
 */
enum jev_status jev_synth_write(const struct jev_synth_params *p, struct jev_synth_report *r, struct jev_error *err);

/* ---- the pieces, exposed for tests ---- */

/* The underlying N(0, 1) draw of element i of the tensor keyed (seed, name). */
double jev_synth_normal(uint64_t seed, const char *name, uint64_t i);
/* The deterministic natural log used by the generator (basic IEEE ops only), x > 0. */
double jev_synth_log(double x);

/*
 * MLX-style affine quantization of n = k*group floats: per group
 * scale = (max - min) / (2^bits - 1), bias = min, both rounded to bf16, then
 * code = round((w - bias) / scale) against the ROUNDED scale and bias, clamped
 * to [0, 2^bits - 1]; codes packed little-endian into n*bits/32 words.
 * Dequantized value: bf16(scale) * code + bf16(bias) in f32.
 */
void jev_synth_quantize(const float *w, int64_t n, int32_t bits, int32_t group, uint32_t *codes, uint16_t *scales,
                        uint16_t *biases);

#endif

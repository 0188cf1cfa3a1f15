/*
 * model-dir.h - a model directory's files mapped onto struct jev_config and
 * struct jev_weights, for both checkpoint layouts.
 *
 * Layouts (spec qwen35.md section 10), told apart by name prefixes only:
 *   HF   (Qwen/Qwen3.5-0.8B):  model.language_model.*, model.visual.*,
 *        lm_head.weight (optional, untied only), mtp.* (ignored);
 *        zero-centred RMSNorm weights (the multiplier is 1 + w), conv1d
 *        [C, 1, K], patch embedding [Dv, c, t, y, x].
 *   MLX  (mlx-community/Qwen3.5-0.8B-4bit): language_model.model.*,
 *        vision_tower.*, language_model.lm_head.*; norms stored already
 *        shifted (used as is), conv1d [C, K, 1], channels-last patch
 *        embedding [Dv, t, y, x, c], Linears/Embeddings optionally affine-
 *        quantized (u32 codes + scales + biases).
 * The gated DeltaNet norm (linear_attn.norm) is a plain multiplier in both.
 *
 * What it is not: the model object (model/model.c owns the memory and the
 * public API) or any forward math.
 */
#ifndef JEV_MODEL_MODEL_DIR_H
#define JEV_MODEL_MODEL_DIR_H

#include <stddef.h>

#include "base/arena.h"        // defines: struct jev_arena
#include "base/error.h"        // defines: struct jev_error
#include "model/config-json.h" // defines: struct jev_quant_overrides
#include "io/safetensors.h"    // defines: struct jev_st_set
#include "model/config.h"      // defines: struct jev_config
#include "model/tensors.h"     // defines: enum jev_layout, jev_layout_names
#include "model/weights.h"     // defines: struct jev_weights

/*
 * Reads DIR/config.json and, when present, DIR/generation_config.json (its
 * eos ids are added), then derives. q receives the per-module quantization
 * overrides (free with jev_quant_overrides_free, also after a failure).
 */
enum jev_status jev_model_dir_read_config(const char *dir, struct jev_config *c, struct jev_quant_overrides *q,
                                          struct jev_error *err);

/* The layout of a tensor set from its names; mixed or unknown prefixes fail. */
enum jev_status jev_layout_detect(const struct jev_st_set *s, enum jev_layout *out, struct jev_error *err);

/* Bytes of arena that jev_weights_map needs for config c (vectors and per-layer tables). */
size_t jev_weights_arena_bytes(const struct jev_config *c);

/*
 * Fills w from the tensor set: matrices point into the mapping, vectors are
 * converted to f32 into arena a (sized with jev_weights_arena_bytes). Every
 * expected tensor is checked for presence, dtype class and exact shape;
 * quantized tensors' bits and group size (derived from their shapes) must
 * match config.json's quantization (or the module's override). Vision
 * weights are read only when c->has_vision.
 */
enum jev_status jev_weights_map(const struct jev_st_set *s, enum jev_layout layout, const struct jev_config *c,
                                const struct jev_quant_overrides *q, struct jev_arena *a, struct jev_weights *w,
                                struct jev_error *err);

#endif

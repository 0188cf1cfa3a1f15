/*
 * config-json.h - config.json (and generation_config.json) into struct
 * jev_config.
 *
 * Accepted: a Qwen3_5ForConditionalGeneration config (model_type "qwen3_5",
 * with text_config and optionally vision_config), or a bare text config
 * (model_type "qwen3_5_text", fields at the top level, no vision). Layer
 * kinds come from layer_types, or from full_attention_interval when
 * layer_types is absent. RoPE from text_config.rope_parameters, or the legacy
 * rope_theta / rope_scaling / partial_rotary_factor keys. Quantization from
 * "quantization" (MLX) or "quantization_config", including per-module
 * overrides keyed by module path.
 *
 * Not here: weights (model-dir.c), the tokenizer files. Missing or wrongly
 * typed required fields fail with a message naming the field
 * ("config.json: text_config.hidden_size: missing").
 */
#ifndef JEV_MODEL_CONFIG_JSON_H
#define JEV_MODEL_CONFIG_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"   // defines: struct jev_error
#include "model/config.h" // defines: struct jev_config

#define JEV_CONFIG_MAX_BYTES ((size_t)16 << 20) /* config.json size limit */

/* One per-module entry of config.json's "quantization" object. */
struct jev_quant_override {
    char *path;     /* module path, e.g. "language_model.model.layers.0.mlp.down_proj" (owned) */
    bool quantized; /* false when the entry is `false` (module left in float) */
    int32_t bits;   /* bits of this module when quantized */
    int32_t group;  /* group size of this module when quantized */
};

struct jev_quant_overrides {
    struct jev_quant_override *items; /* [n] sorted by path */
    int32_t n;                        /* entries */
};

/*
 * Parses config.json bytes (label names the file in messages) into c, then
 * runs jev_config_derive. q (may be NULL) receives the per-module
 * quantization overrides; free it with jev_quant_overrides_free, also after
 * a failure.
 */
enum jev_status jev_config_parse(const char *json, size_t size, const char *label, struct jev_config *c,
                                 struct jev_quant_overrides *q, struct jev_error *err);

/* Adds generation_config.json's eos_token_id (an id or a list) to c->ids.eos, without duplicates. */
enum jev_status jev_config_add_generation(const char *json, size_t size, const char *label, struct jev_config *c,
                                          struct jev_error *err);

/* The override for module `path`, or NULL. */
const struct jev_quant_override *jev_quant_overrides_find(const struct jev_quant_overrides *q, const char *path);
void jev_quant_overrides_free(struct jev_quant_overrides *q);

#endif

/*
 * model.h - struct jev_model: one loaded model directory, immutable after
 * jev_model_load and shared by every engine.
 *
 * It owns the mapped tensor files, the config, the weight tables (matrices
 * point into the mapping, vectors into `vectors`) and the layout it was read
 * in. Nothing in it changes after load, so any number of threads may read it
 * without locks. The tokenizer is attached at the TOKENIZER-HOOK (model.c).
 *
 * What it is not: per-request state (that is struct jev_engine).
 */
#ifndef JEV_MODEL_MODEL_H
#define JEV_MODEL_MODEL_H

#include "backend/registry.h" // defines: struct jev_backend_reg
#include "base/arena.h"       // defines: struct jev_arena
#include "base/error.h"       // defines: struct jev_error
#include "base/sha256.h"      // defines: JEV_SHA256_HEX
#include "model/model-dir.h"  // defines: enum jev_layout
#include "io/safetensors.h"   // defines: struct jev_st_set
#include "jev.h"              // defines: struct jev_model_params
#include "model/config.h"     // defines: struct jev_config
#include "model/weights.h"    // defines: struct jev_weights

struct jev_model {
    char *dir;                             /* the model directory as given (owned) */
    struct jev_model_params params;        /* as passed to load (backend string not kept: NULL) */
    const struct jev_backend_reg *backend; /* the registry's entry for params.backend (jev_backend_parse) */
    int32_t device;                        /* its device ordinal ("cuda:N"; 0 for "cuda" and "cpu") */
    enum jev_layout layout;                /* HF or MLX names, detected from the tensor names */
    struct jev_config config;              /* hyperparameters from config.json (+ generation_config.json) */
    struct jev_weights weights;            /* layout-independent weight tables */
    struct jev_st_set tensors;             /* the mapped safetensors file(s) */
    struct jev_arena vectors;              /* owned f32 vectors and per-layer tables, sized before loading */
    /* TOKENIZER-HOOK: the tokenizer (src/text/tokenizer.c) gets its field here. */
};

/* jev_model_load with a struct jev_error (the library-internal form). */
enum jev_status jev_model_open(const char *dir, const struct jev_model_params *params, struct jev_model **out,
                               struct jev_error *err);

/*
 * The sha256 of the weights, computed on demand (reads every byte): of
 * model.safetensors, or for a sharded model of the text
 * "<shard name> <shard sha256>\n" over the shards in name order.
 */
enum jev_status jev_model_weights_sha256(const struct jev_model *m, char out[JEV_SHA256_HEX], struct jev_error *err);

#endif

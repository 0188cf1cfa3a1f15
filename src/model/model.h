/*
 * model.h - struct jev_model: one loaded model directory, immutable after
 * jev_model_load and shared by every engine.
 *
 * It owns the mapped tensor files, the config, the weight tables (matrices
 * point into the mapping, vectors into `vectors`) and the layout it was read
 * in. Nothing in it changes after load, so any number of threads may read it
 * without locks. It owns the tokenizer too (DIR/tokenizer.json, immutable and
 * thread-safe like the rest once loaded): every engine's decider borrows it,
 * and the CLI tokenizes and plans a request with it before it builds an
 * engine. It is loaded on first use (jev_model_tokenizer), not at load: the
 * 11 MiB file costs about a second and 90 MiB, which a run of token ids,
 * `jev info` and the layer tests never need.
 *
 * What it is not: per-request state (that is struct jev_engine).
 */
#ifndef JEV_MODEL_MODEL_H
#define JEV_MODEL_MODEL_H

#include <pthread.h>

#include "backend/registry.h" // defines: struct jev_backend_reg
#include "base/arena.h"       // defines: struct jev_arena
#include "base/error.h"       // defines: struct jev_error
#include "base/sha256.h"      // defines: JEV_SHA256_HEX
#include "model/model-dir.h"  // defines: enum jev_layout
#include "io/safetensors.h"   // defines: struct jev_st_set
#include "jev.h"              // defines: struct jev_model_params
#include "model/config.h"     // defines: struct jev_config
#include "model/weights.h"    // defines: struct jev_weights
#include "text/tokenizer.h"   // defines: struct jev_tokenizer

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
    pthread_mutex_t tokenizer_lock;        /* guards the first load of tokenizer (jev_model_tokenizer) */
    struct jev_tokenizer *tokenizer;       /* DIR/tokenizer.json (owned) once jev_model_tokenizer loaded it; NULL
                                            * before: read it through jev_model_tokenizer */
};

/* jev_model_load with a struct jev_error (the library-internal form). */
enum jev_status jev_model_open(const char *dir, const struct jev_model_params *params, struct jev_model **out,
                               struct jev_error *err);

/*
 * The model's tokenizer, DIR/tokenizer.json: loaded by the first call (from
 * any thread; the others wait for it), then the same object for every caller
 * - every engine's decider, the CLI's planner - until jev_model_free. A
 * missing or broken file fails naming it, and the next call tries again.
 */
enum jev_status jev_model_tokenizer(struct jev_model *m, const struct jev_tokenizer **out, struct jev_error *err);

/*
 * The sha256 of the weights, computed on demand (reads every byte): of
 * model.safetensors, or for a sharded model of the text
 * "<shard name> <shard sha256>\n" over the shards in name order.
 */
enum jev_status jev_model_weights_sha256(const struct jev_model *m, char out[JEV_SHA256_HEX], struct jev_error *err);

#endif

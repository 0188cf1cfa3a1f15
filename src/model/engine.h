/*
 * engine.h - struct jev_engine: one worker over a shared, immutable model.
 *
 * An engine owns everything a request stream mutates: the thread pool and
 * backend instance (made by the registry entry the model names,
 * backend/registry.h), its op profile when JEV_PROFILE is set, the
 * sequence-state pool (K/V pages, DeltaNet states), the language model's
 * activation arena and the last error text. Sizes come from struct
 * jev_engine_params and everything is allocated in jev_engine_init; nothing
 * is allocated per token afterwards. The weights mirror is the one big
 * allocation an engine adds to the model (a device copy of every weight on
 * CUDA), so a tool builds one engine per command, sized before it is built.
 *
 * The public half (jev_engine_init / jev_engine_free /
 * jev_engine_last_error) is declared in include/jev.h; this header gives the
 * library's own callers (the CLI, the decision paths) the struct.
 * Use an engine from one thread at a time.
 *
 * Failure of jev_engine_init: it returns the status and still sets *out to
 * the half-built engine (unless the engine struct itself could not be
 * allocated, then *out is NULL), so that jev_engine_last_error() can say what
 * was wrong; free it with jev_engine_free.
 */
#ifndef JEV_MODEL_ENGINE_H
#define JEV_MODEL_ENGINE_H

#include "backend/ops.h"          // defines: struct jev_ops, struct jev_backend
#include "backend/profile.h"      // defines: struct jev_profile
#include "backend/registry.h"     // defines: struct jev_backend_reg, struct jev_backend_info
#include "base/error.h"           // defines: struct jev_error
#include "base/pool.h"            // defines: struct jev_pool
#include "jev.h"                  // defines: struct jev_engine_params
#include "model/lm.h"             // defines: struct jev_lm
#include "model/model.h"          // defines: struct jev_model
#include "model/state.h"          // defines: struct jev_state
#include "model/weights-mirror.h" // defines: struct jev_weights_mirror

#define JEV_ENGINE_MAX_TOKENS (1 << 18)    /* attention scratch bound of the CPU backend */
#define JEV_ENGINE_MAX_BATCH 4000          /* sequences in one batched forward */
#define JEV_ENGINE_MAX_KV_TOKENS (1 << 26) /* K/V room over all sequences */

struct jev_engine {
    const struct jev_model *model;     /* shared, immutable (not owned) */
    struct jev_engine_params params;   /* as used, defaults filled */
    struct jev_pool *pool;             /* worker threads */
    const struct jev_backend_reg *reg; /* the registry entry that made backend; NULL: the caller's (init_on) */
    struct jev_backend *backend;       /* the backend instance over pool */
    struct jev_profile *profile;       /* JEV_PROFILE: the timer in front of backend (owned); else NULL */
    struct jev_backend *be;            /* what the forwards pass to ops: backend, or the profiler's instance */
    const struct jev_ops *ops;         /* the table for be: the backend's, or the profiler's */
    struct jev_weights_mirror weights; /* the backend's view of the model's weights (weights.w) */
    struct jev_state state;            /* sequences: K/V page pool + linear states */
    struct jev_lm lm;                  /* language model forward and its activations */
    struct jev_error err;              /* last failure (jev_engine_last_error) */
    bool be_borrowed;                  /* be belongs to the caller (jev_engine_init_on) */
};

/* jev_engine_init over the caller's backend instance and op table (neither owned; be must
 * outlive the engine). For tests: tests/test-staging.c runs the device code paths (uploads,
 * downloads, the weights mirror) on the CPU ops behind separate "device" memory. */
enum jev_status jev_engine_init_on(struct jev_model *model, const struct jev_engine_params *params,
                                   const struct jev_ops *ops, struct jev_backend *be, struct jev_engine **out);

/* Records a failure from an internal call as the engine's last error; returns its status. */
enum jev_status jev_engine_set_error(struct jev_engine *e, const struct jev_error *err);

/* Bytes the engine allocated at init (state pool + activations). */
size_t jev_engine_bytes(const struct jev_engine *e);

/* Switches the engine's precision between forwards (ops.h, set_precision): e->params.precision
 * follows. A mode the backend cannot run is JEV_ERR_UNSUPPORTED naming what to use instead, and the
 * engine keeps its mode. jev_engine_init sets params.precision this way; the benchmark switches a
 * fast engine to exact for its reference runs and back. A decider's kept prefixes (reuse) hold
 * states computed in their request's mode: switch only between requests that do not reuse them
 * (the benchmark's never do). */
enum jev_status jev_engine_set_precision(struct jev_engine *e, enum jev_precision p, struct jev_error *err);

/* Asks the backend for products whose rows do not depend on their batch's other rows (ops.h,
 * set_batch_invariant): the batcher across requests turns it on; single-request paths leave it off. */
void jev_engine_set_batch_invariant(struct jev_engine *e, bool on);

/* The backend's device, driver, memory and libraries (backend/registry.h), for the benchmark record. */
void jev_engine_describe(const struct jev_engine *e, struct jev_backend_info *info);

/* Engines and weight mirrors this process has made so far (both count at jev_engine_init, failed
 * inits included once they got that far): what the CLI reports with -v and its tests check. */
void jev_engine_counts(int64_t *engines, int64_t *mirrors);

#endif

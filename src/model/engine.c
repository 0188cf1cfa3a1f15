/*
 * engine.c - jev_engine_init / jev_engine_free / jev_engine_last_error
 * (include/jev.h) and the engine's sizing.
 *
 * Sizing: the state pool holds max_states sequences with a DeltaNet state of
 * their own (default max_batch + 1: a prefix and its forks) and max_batch
 * light forks (state.h: label scoring's), of at most max_tokens tokens, with
 * K/V room for kv_tokens own tokens over all of them (default
 * 2 * max_tokens; the CLI sizes it from the plan); the LM processes
 * up to prefill_chunk tokens per internal slice (a larger batch runs in
 * consecutive slices) and holds one layer's DeltaNet state of scratch per
 * light fork of a batch.
 */
#include "model/engine.h" // defines: struct jev_engine

#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

/* Light forks in one forward slice: each holds one layer's DeltaNet state of scratch (1.07 MiB for the
 * 0.8B model: 3 x 6144 + 16 x 128 x 128 floats), so 64 cost 68.5 MiB; a slice of 1,024 tokens holds 28 of the
 * benchmark's 36-token suffixes, so the bound ends a slice early only for suffixes of under 16 tokens. */
#define LIGHT_PER_SLICE 64

/* What jev_engine_counts reports: engines and weight mirrors made by this process. */
static atomic_llong engines_made, mirrors_made;

/* The defaults of include/jev.h: 8192 tokens, 64 sequences per batch, 512-token prefill slices. */
struct jev_engine_params jev_engine_default_params(void) {
    struct jev_engine_params p = {0};
    p.max_tokens = 8192;
    p.max_batch = 64;
    p.prefill_chunk = 0; /* the backend's (ops->step_tokens), set once the backend exists */
    return p;
}

/* Internal calls fill a local struct jev_error; this makes it the engine's last error. */
enum jev_status jev_engine_set_error(struct jev_engine *e, const struct jev_error *err) {
    e->err = *err;
    return err->status;
}

size_t jev_engine_bytes(const struct jev_engine *e) {
    return e->state.bytes + e->lm.arena.cap + e->lm.host_arena.cap + e->weights.bytes;
}

/*
 * On failure the half-built engine is still handed out, so that the caller
 * can read jev_engine_last_error(); it must then be freed with
 * jev_engine_free and is good for nothing else.
 */
static enum jev_status engine_fail(struct jev_engine *e, struct jev_engine **out, enum jev_status s) {
    (void)s;
    *out = e;
    return e->err.status;
}

/* The model's backend (registry entry and device, jev_backend_parse) over the engine's pool. */
static enum jev_status backend_new(struct jev_engine *e) {
    e->reg = e->model->backend ? e->model->backend : &jev_backend_reg_cpu;
    e->ops = e->reg->ops;
    return e->reg->create(e->model->device, e->pool, &e->backend, &e->err);
}

/*
 * Order: pool, backend (+ its profiler), weights mirror, state, LM. Each step may fail; the engine
 * struct is calloc'ed first, so jev_engine_free can undo any prefix of the steps.
 */
static enum jev_status engine_init(struct jev_model *model, const struct jev_engine_params *params,
                                   const struct jev_ops *ops, struct jev_backend *be, struct jev_engine **out) {
    if (!out)
        return JEV_ERR_INVALID_ARG;
    *out = NULL;
    struct jev_engine *e = calloc(1, sizeof *e);
    if (!e)
        return JEV_ERR_NOMEM;
    atomic_fetch_add(&engines_made, 1);
    if (!model)
        return engine_fail(e, out, jev_fail(&e->err, JEV_ERR_INVALID_ARG, "jev_engine_init: model is NULL"));
    e->model = model;
    e->params = params ? *params : jev_engine_default_params();
    struct jev_engine_params *p = &e->params;
    if (p->max_tokens == 0)
        p->max_tokens = 8192;
    if (p->max_batch == 0)
        p->max_batch = 64;
    if (p->max_states == 0 && p->max_batch > 0 && p->max_batch <= JEV_ENGINE_MAX_BATCH)
        p->max_states = p->max_batch + 1;
    if (p->max_tokens < 0 || p->max_tokens > JEV_ENGINE_MAX_TOKENS || p->max_batch < 0 ||
        p->max_batch > JEV_ENGINE_MAX_BATCH || p->prefill_chunk < 0 || p->prefill_chunk > 65536 || p->max_states < 0 ||
        p->max_states > JEV_ENGINE_MAX_BATCH + 1 || p->kv_tokens < 0 || p->kv_tokens > JEV_ENGINE_MAX_KV_TOKENS)
        return engine_fail(e, out,
                           jev_fail(&e->err, JEV_ERR_INVALID_ARG,
                                    "jev_engine_init: max_tokens %d (1..%d), max_batch %d (1..%d), max_states %d "
                                    "(0..%d), kv_tokens %d (0..%d) or prefill_chunk %d (0 = the backend's, up to "
                                    "65536) out of range",
                                    p->max_tokens, JEV_ENGINE_MAX_TOKENS, p->max_batch, JEV_ENGINE_MAX_BATCH,
                                    p->max_states, JEV_ENGINE_MAX_BATCH + 1, p->kv_tokens, JEV_ENGINE_MAX_KV_TOKENS,
                                    p->prefill_chunk));
    if (p->precision != JEV_PRECISION_EXACT && p->precision != JEV_PRECISION_FAST)
        return engine_fail(e, out,
                           jev_fail(&e->err, JEV_ERR_INVALID_ARG,
                                    "jev_engine_init: precision %d is not a mode (JEV_PRECISION_EXACT or _FAST)",
                                    (int)p->precision));
    const struct jev_config *cfg = &model->config;
    if (JEV_OK != jev_pool_init(&e->pool, model->params.n_threads, &e->err))
        return engine_fail(e, out, e->err.status);
    if (ops) { /* the caller's backend (jev_engine_init_on) */
        e->ops = ops;
        e->backend = be;
        e->be_borrowed = true;
    } else if (JEV_OK != backend_new(e)) {
        return engine_fail(e, out, e->err.status);
    }
    e->be = e->backend;
    if (jev_profile_requested()) { /* JEV_PROFILE=1: this engine's ops timed (backend/profile.h) */
        if (JEV_OK != jev_profile_new(e->ops, e->backend, &e->profile, &e->err))
            return engine_fail(e, out, e->err.status);
        e->ops = jev_profile_ops(e->profile);
        e->be = jev_profile_backend(e->profile);
    }
    if (p->prefill_chunk == 0) /* the backend's slice: after the backend, before the activations it sizes */
        p->prefill_chunk = e->ops->step_tokens > 0 ? e->ops->step_tokens : 512;
    /* the mode before the mirror: a backend that cannot run it refuses here, before any device copy */
    if (JEV_OK != jev_engine_set_precision(e, p->precision, &e->err))
        return engine_fail(e, out, e->err.status);
    /* the backend's copy of the weights (the model's own for the CPU), before any activation */
    atomic_fetch_add(&mirrors_made, 1);
    if (JEV_OK != jev_weights_mirror_init(&e->weights, cfg, &model->weights, e->ops, e->be, &e->err))
        return engine_fail(e, out, e->err.status);
    struct jev_state_params sp = {.max_tokens = p->max_tokens,
                                  .max_seqs = p->max_states,
                                  .max_light = p->max_batch,
                                  .kv_tokens = p->kv_tokens, /* 0: 2 * max_tokens */
                                  .ops = e->ops,
                                  .be = e->be};
    if (JEV_OK != jev_state_init(&e->state, cfg, &sp, &e->err))
        return engine_fail(e, out, e->err.status);
    struct jev_lm_params lp = {.max_batch_tokens = p->prefill_chunk,
                               .max_runs = p->max_batch + 1,
                               .max_tokens = p->max_tokens,
                               .max_spans = jev_seq_max_spans(&e->state),
                               .max_light = p->max_batch < LIGHT_PER_SLICE ? p->max_batch : LIGHT_PER_SLICE};
    if (JEV_OK != jev_lm_init(&e->lm, cfg, e->weights.w, e->ops, e->be, &lp, &e->err))
        return engine_fail(e, out, e->err.status);
    *out = e;
    return JEV_OK;
}

enum jev_status jev_engine_init(struct jev_model *model, const struct jev_engine_params *params,
                                struct jev_engine **out) {
    return engine_init(model, params, NULL, NULL, out);
}

enum jev_status jev_engine_init_on(struct jev_model *model, const struct jev_engine_params *params,
                                   const struct jev_ops *ops, struct jev_backend *be, struct jev_engine **out) {
    if (!ops || !be) {
        if (out)
            *out = NULL;
        return JEV_ERR_INVALID_ARG;
    }
    return engine_init(model, params, ops, be, out);
}

/* Frees in reverse order; safe on a half-built engine and on NULL. The model is not touched. */
void jev_engine_free(struct jev_engine *e) {
    if (!e)
        return;
    if (e->profile)
        jev_profile_report(e->profile, stderr);
    jev_lm_free(&e->lm);
    jev_state_free(&e->state);
    jev_weights_mirror_free(&e->weights); /* through e->ops: the profiler passes it on, so it goes after */
    jev_profile_free(e->profile);
    if (!e->be_borrowed && e->reg)
        e->reg->destroy(e->backend);
    jev_pool_free(e->pool);
    free(e);
}

void jev_engine_set_batch_invariant(struct jev_engine *e, bool on) {
    if (e->ops->set_batch_invariant)
        e->ops->set_batch_invariant(e->be, on);
}

enum jev_status jev_engine_set_precision(struct jev_engine *e, enum jev_precision p, struct jev_error *err) {
    if (p != JEV_PRECISION_EXACT && !e->ops->set_precision)
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "precision \"%s\": the %s backend runs exact only; use exact",
                        jev_precision_name(p), e->ops->name);
    if (e->ops->set_precision)
        JEV_TRY(e->ops->set_precision(e->be, p, err));
    e->params.precision = p;
    return JEV_OK;
}

void jev_engine_describe(const struct jev_engine *e, struct jev_backend_info *info) {
    jev_backend_describe(e->reg, e->backend, info);
}

void jev_engine_counts(int64_t *engines, int64_t *mirrors) {
    if (engines)
        *engines = (int64_t)atomic_load(&engines_made);
    if (mirrors)
        *mirrors = (int64_t)atomic_load(&mirrors_made);
}

const char *jev_engine_last_error(const struct jev_engine *e) { return e ? e->err.msg : "no engine"; }

/*
 * engine.c - jev_engine_init / jev_engine_free / jev_engine_last_error
 * (include/jev.h) and the engine's sizing.
 *
 * Sizing: the state pool holds max_batch + 1 sequences (a prefix and its
 * forks) of at most max_tokens tokens, with K/V room for 2 * max_tokens own
 * tokens over all of them; the LM processes up to prefill_chunk tokens per
 * internal slice (a larger batch runs in consecutive slices).
 */
#include "model/engine.h" // defines: struct jev_engine

#include <stdlib.h>
#include <string.h>

#include "backend/profile.h" // defines: jev_profile_wrap, jev_profile_report

/* The defaults of include/jev.h: 8192 tokens, 64 sequences per batch, 512-token prefill slices. */
struct jev_engine_params jev_engine_default_params(void) {
    struct jev_engine_params p = {0};
    p.max_tokens = 8192;
    p.max_batch = 64;
    p.prefill_chunk = 512;
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

/* The model's backend choice (jev_backend_parse): CPU over the pool, or one CUDA device. */
static enum jev_status backend_new(struct jev_engine *e) {
#ifdef JEV_HAVE_CUDA
    if (e->model->backend == JEV_BACKEND_CUDA) {
        e->ops = &jev_cuda_ops;
        return jev_cuda_backend_new(e->model->device, &e->be, &e->err);
    }
#endif
    e->ops = &jev_cpu_ops;
    e->be = jev_cpu_backend_new(e->pool);
    if (!e->be)
        return jev_fail(&e->err, JEV_ERR_NOMEM, "jev_engine_init: cannot create the CPU backend");
    return JEV_OK;
}

static void backend_free(struct jev_engine *e) {
#ifdef JEV_HAVE_CUDA
    if (e->model && e->model->backend == JEV_BACKEND_CUDA) {
        jev_cuda_backend_free(e->be);
        return;
    }
#endif
    jev_cpu_backend_free(e->be);
}

/*
 * Order: pool, backend, weights mirror, state, LM. Each step may fail; the engine struct is
 * calloc'ed first, so jev_engine_free can undo any prefix of the steps.
 */
static enum jev_status engine_init(struct jev_model *model, const struct jev_engine_params *params,
                                   const struct jev_ops *ops, struct jev_backend *be, struct jev_engine **out) {
    if (!out)
        return JEV_ERR_INVALID_ARG;
    *out = NULL;
    struct jev_engine *e = calloc(1, sizeof *e);
    if (!e)
        return JEV_ERR_NOMEM;
    if (!model)
        return engine_fail(e, out, jev_fail(&e->err, JEV_ERR_INVALID_ARG, "jev_engine_init: model is NULL"));
    e->model = model;
    e->params = params ? *params : jev_engine_default_params();
    struct jev_engine_params *p = &e->params;
    if (p->max_tokens == 0)
        p->max_tokens = 8192;
    if (p->max_batch == 0)
        p->max_batch = 64;
    if (p->prefill_chunk == 0)
        p->prefill_chunk = 512;
    if (p->max_tokens < 0 || p->max_tokens > JEV_ENGINE_MAX_TOKENS || p->max_batch < 0 ||
        p->max_batch > JEV_ENGINE_MAX_BATCH || p->prefill_chunk < 0 || p->prefill_chunk > 65536)
        return engine_fail(e, out,
                           jev_fail(&e->err, JEV_ERR_INVALID_ARG,
                                    "jev_engine_init: max_tokens %d (1..%d), max_batch %d (1..%d) or "
                                    "prefill_chunk %d (1..65536) out of range",
                                    p->max_tokens, JEV_ENGINE_MAX_TOKENS, p->max_batch, JEV_ENGINE_MAX_BATCH,
                                    p->prefill_chunk));
    const struct jev_config *cfg = &model->config;
    if (JEV_OK != jev_pool_init(&e->pool, model->params.n_threads, &e->err))
        return engine_fail(e, out, e->err.status);
    if (ops) { /* the caller's backend (jev_engine_init_on) */
        e->ops = ops;
        e->be = be;
        e->be_borrowed = true;
    } else if (JEV_OK != backend_new(e)) {
        return engine_fail(e, out, e->err.status);
    }
    if (jev_profile_requested()) /* JEV_PROFILE=1: time every op (backend/profile.h) */
        e->ops = jev_profile_wrap(e->ops);
    /* the backend's copy of the weights (the model's own for the CPU), before any activation */
    if (JEV_OK != jev_weights_mirror_init(&e->weights, cfg, &model->weights, e->ops, e->be, &e->err))
        return engine_fail(e, out, e->err.status);
    struct jev_state_params sp = {
        .max_tokens = p->max_tokens, .max_seqs = p->max_batch + 1, .kv_tokens = 0, .ops = e->ops, .be = e->be};
    if (JEV_OK != jev_state_init(&e->state, cfg, &sp, &e->err))
        return engine_fail(e, out, e->err.status);
    struct jev_lm_params lp = {.max_batch_tokens = p->prefill_chunk,
                               .max_runs = p->max_batch + 1,
                               .max_tokens = p->max_tokens,
                               .max_spans = jev_seq_max_spans(&e->state)};
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
    if (jev_profile_is_wrapped(e->ops))
        jev_profile_report(stderr);
    jev_lm_free(&e->lm);
    jev_state_free(&e->state);
    jev_weights_mirror_free(&e->weights);
    if (!e->be_borrowed)
        backend_free(e);
    jev_pool_free(e->pool);
    free(e);
}

const char *jev_engine_last_error(const struct jev_engine *e) { return e ? e->err.msg : "no engine"; }

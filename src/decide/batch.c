/*
 * batch.c - the shared batch of batch.h, first form: slots in arrival order,
 * and each step runs the oldest unfinished request whole (jev_decide_run).
 * So the answers are exactly jev_decide_run's, one request at a time.
 *
 * What it is not: batching across requests (yet).
 */
#include "decide/batch.h" // defines: struct jev_batcher, jev_batcher_step

#include <stdlib.h>
#include <string.h>

#include "decide/pipeline-int.h" // defines: struct jev_decider (engine, vision)

struct slot {
    const struct jev_request *r;
    struct jev_decide_params p;
    void *user;
    bool used;
    bool done;
    bool cancelled;
    enum jev_status status;
    struct jev_decide_result res;
    struct jev_error err;
    uint64_t order; /* arrival: the oldest runs first and is taken first */
};

struct jev_batcher {
    struct jev_decider *d;
    struct jev_batch_params p;
    struct slot *slots; /* [max_running] */
    uint64_t clock;
};

enum jev_status jev_batcher_new(struct jev_decider *d, const struct jev_batch_params *p, struct jev_batcher **out,
                                struct jev_error *err) {
    *out = NULL;
    if (!d || !d->engine)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "batch: needs a decider over an engine");
    struct jev_batch_params bp = p ? *p : (struct jev_batch_params){0};
    if (bp.max_rows < 0 || bp.max_running < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "batch: max_rows %d or max_running %d is negative", bp.max_rows,
                        bp.max_running);
    if (bp.max_rows == 0)
        bp.max_rows = d->engine->params.max_batch;
    if (bp.max_running == 0)
        bp.max_running = 32;
    struct jev_batcher *b = calloc(1, sizeof *b);
    if (b)
        b->slots = calloc((size_t)bp.max_running, sizeof *b->slots);
    if (!b || !b->slots) {
        free(b);
        return jev_fail(err, JEV_ERR_NOMEM, "batch: out of memory for %d slots", bp.max_running);
    }
    b->d = d;
    b->p = bp;
    *out = b;
    return JEV_OK;
}

void jev_batcher_free(struct jev_batcher *b) {
    if (!b)
        return;
    for (int32_t i = 0; i < b->p.max_running; i++)
        if (b->slots[i].used)
            jev_decide_result_free(&b->slots[i].res);
    free(b->slots);
    free(b);
}

int32_t jev_batcher_count(const struct jev_batcher *b) {
    int32_t n = 0;
    for (int32_t i = 0; i < b->p.max_running; i++)
        n += b->slots[i].used;
    return n;
}

int32_t jev_batcher_room(const struct jev_batcher *b) { return b->p.max_running - jev_batcher_count(b); }

enum jev_status jev_batcher_add(struct jev_batcher *b, const struct jev_request *r, const struct jev_decide_params *p,
                                void *user, struct jev_error *err) {
    for (int32_t i = 0; i < b->p.max_running; i++) {
        struct slot *s = &b->slots[i];
        if (s->used)
            continue;
        memset(s, 0, sizeof *s);
        s->used = true;
        s->r = r;
        s->p = p ? *p : jev_decide_default_params();
        /* no forward holds more question suffixes than max_rows (batch 0: all questions at once) */
        if (s->p.batch <= 0 || s->p.batch > b->p.max_rows)
            s->p.batch = b->p.max_rows;
        s->user = user;
        s->order = ++b->clock;
        return JEV_OK;
    }
    return jev_fail(err, JEV_ERR_INVALID_ARG, "batch: no room (%d requests at once, max_running)", b->p.max_running);
}

void jev_batcher_cancel(struct jev_batcher *b, void *user) {
    for (int32_t i = 0; i < b->p.max_running; i++)
        if (b->slots[i].used && b->slots[i].user == user)
            b->slots[i].cancelled = true;
}

/* The oldest slot in use that is (done) finished or (!done) not. */
static struct slot *oldest(struct jev_batcher *b, bool done) {
    struct slot *o = NULL;
    for (int32_t i = 0; i < b->p.max_running; i++) {
        struct slot *s = &b->slots[i];
        if (s->used && s->done == done && (!o || s->order < o->order))
            o = s;
    }
    return o;
}

bool jev_batcher_step(struct jev_batcher *b, struct jev_batch_step *st) {
    struct jev_batch_step local;
    struct jev_batch_step *out = st ? st : &local;
    memset(out, 0, sizeof *out);
    struct slot *s = oldest(b, false);
    if (!s)
        return false;
    if (s->cancelled) {
        s->status = jev_fail(&s->err, JEV_ERR_ABORTED, "decide: the request was given up (its client went away)");
    } else {
        s->status = jev_decide_run(b->d, s->r, &s->p, &s->res, &s->err);
        out->forwards = (int32_t)s->res.stats.lm_forwards;
        /* the most suffixes one of its forwards scored: its batch (the shared path's groups) */
        out->rows = s->p.batch < s->r->n_questions ? s->p.batch : s->r->n_questions;
        out->requests = 1;
        out->tokens = s->res.stats.lm_tokens;
        out->images = (int32_t)s->res.stats.vision_forwards;
        out->reused = s->res.stats.prefix_reused;
    }
    s->done = true;
    const struct jev_engine *e = b->d->engine;
    out->memory_bytes = out->memory_peak = (int64_t)jev_engine_bytes(e);
    if (e->ops->memory) {
        e->ops->memory(e->be, &out->memory_bytes, &out->memory_peak, false);
    }
    return true;
}

bool jev_batcher_take(struct jev_batcher *b, void **user, enum jev_status *status, struct jev_decide_result *res,
                      struct jev_error *err) {
    struct slot *s = oldest(b, true);
    if (!s)
        return false;
    *user = s->user;
    *status = s->status;
    *res = s->res;
    *err = s->err;
    memset(s, 0, sizeof *s);
    return true;
}

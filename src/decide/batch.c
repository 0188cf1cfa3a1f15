/*
 * batch.c - the batch that several requests share (batch.h): its slots, one
 * per request, and the step that moves them all forward.
 *
 * A request on the shared path with label scoring (what the server asks
 * for) goes: prepared on one of the batch's preparing threads while the
 * engine's thread runs forwards (its image decoded and preprocessed, its
 * prompt tokenized: dc_begin_detached), then on the engine's thread (the
 * kept tower output of the same image bytes taken instead, the batch size
 * that fits the K/V pool: dc_begin_attach, dc_fit_batch), admitted
 * when the engine has the pages and sequences it may need at once beside the
 * others admitted (so no forward ever runs out of them), its prefix found
 * (the same key in use by another request or kept by the decider: forked
 * from, no vision, no prefill) or made (its image through the tower, its
 * prefix prefilled in chunks), then its questions scored a group per
 * forward. Each step runs the images that make enough prefill ready for the
 * next language-model forward (one vision forward each) and one language-model
 * forward packed from every admitted request's next piece (batch-step.c).
 * Any other path or scoring runs whole and alone (jev_decide_run) once the
 * admitted requests have finished.
 *
 * Exactness: a request's forwards are cut as jev_decide_run cuts them (the
 * prefix in chunks of the engine's slice, the questions in groups of the
 * batch size; a piece over the slice runs alone), so a request alone runs
 * exactly jev_decide_run's arithmetic and answers its bits. In company only
 * the matrix products see more rows; on the CPU that changes OpenBLAS's
 * blocking and so the last bits (measured: docs/server.md), never a piece's
 * own order of sums.
 *
 * What it is not: thread-safe, a queue (jev_batcher_room), the wire.
 */
#include "decide/batch-int.h" // defines: struct jev_batcher, struct slot, struct entry

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"   // defines: jev_pool_init, jev_pool_free
#include "base/timing.h" // defines: jev_now_ms

#include <unistd.h>

/* A preparing thread: slots from the queue through dc_begin_detached (what never changes after the
 * decider's init, and the slot's own memory, which the engine's thread leaves alone until PREP_DONE). */
static void *prep_main(void *arg) {
    struct jev_batcher *b = arg;
    for (;;) {
        pthread_mutex_lock(&b->prep_lock);
        while (!b->prep_stop && !b->prep_head)
            pthread_cond_wait(&b->prep_cond, &b->prep_lock);
        struct slot *s = b->prep_head;
        if (b->prep_stop || !s) {
            pthread_mutex_unlock(&b->prep_lock);
            return NULL;
        }
        b->prep_head = s->prep_next;
        if (!b->prep_head)
            b->prep_tail = NULL;
        atomic_store(&s->prep, PREP_RUNNING);
        pthread_mutex_unlock(&b->prep_lock);
        s->t_begin = jev_now_ms(); /* its run begins: the time limit counts from here, as jev_decide_run's */
        s->has_q = true;
        bool pooled = b->prep_pool && pthread_mutex_trylock(&b->prep_pool_lock) == 0;
        s->prep_status = dc_begin_detached(b->d, s->r, &s->p, &s->res, &s->err, &s->q, pooled ? b->prep_pool : NULL);
        if (pooled)
            pthread_mutex_unlock(&b->prep_pool_lock);
        atomic_store_explicit(&s->prep, PREP_DONE, memory_order_release);
        if (b->p.wake)
            b->p.wake(b->p.wake_ctx);
    }
}

static void prep_stop(struct jev_batcher *b) {
    pthread_mutex_lock(&b->prep_lock);
    b->prep_stop = true;
    pthread_cond_broadcast(&b->prep_cond);
    pthread_mutex_unlock(&b->prep_lock);
    for (int32_t i = 0; i < b->n_prep; i++)
        pthread_join(b->prep[i], NULL);
    b->n_prep = 0;
}

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
    if (bp.prep_threads <= 0) {
        long cpus = sysconf(_SC_NPROCESSORS_ONLN);
        bp.prep_threads = cpus > 1 ? (int32_t)(cpus / 2) : 1;
    }
    if (bp.prep_threads > 8)
        bp.prep_threads = 8;
    struct jev_batcher *b = calloc(1, sizeof *b);
    if (b) {
        b->slots = calloc((size_t)bp.max_running, sizeof *b->slots);
        b->entries = calloc((size_t)bp.max_running, sizeof *b->entries);
    }
    if (!b || !b->slots || !b->entries) {
        if (b) {
            free(b->slots);
            free(b->entries);
        }
        free(b);
        return jev_fail(err, JEV_ERR_NOMEM, "batch: out of memory for %d slots", bp.max_running);
    }
    b->d = d;
    b->p = bp;
    /* requests share forwards from here on: a request's answers must not depend on its company */
    jev_engine_set_batch_invariant(d->engine, true);
    pthread_mutex_init(&b->prep_lock, NULL);
    pthread_cond_init(&b->prep_cond, NULL);
    pthread_mutex_init(&b->prep_pool_lock, NULL);
    enum jev_status ps = jev_pool_init(&b->prep_pool, 0, err);
    if (ps != JEV_OK) {
        jev_batcher_free(b);
        return ps;
    }
    b->prep = calloc((size_t)bp.prep_threads, sizeof *b->prep);
    for (int32_t i = 0; b->prep && i < bp.prep_threads; i++) {
        if (pthread_create(&b->prep[i], NULL, prep_main, b) != 0)
            break;
        b->n_prep++;
    }
    if (b->n_prep == 0) {
        jev_batcher_free(b);
        return jev_fail(err, JEV_ERR_NOMEM, "batch: cannot start a preparing thread");
    }
    *out = b;
    return JEV_OK;
}

void jev_batcher_free(struct jev_batcher *b) {
    if (!b)
        return;
    prep_stop(b); /* a preparation under way finishes first */
    for (int32_t i = 0; i < b->p.max_running; i++) {
        struct slot *s = &b->slots[i];
        if (s->used && !s->done)
            bt_finish(b, s, jev_fail(&s->err, JEV_ERR_ABORTED, "batch: freed"), NULL);
        if (s->used)
            jev_decide_result_free(&s->res);
    }
    free(b->slots);
    free(b->entries);
    free(b->ids);
    free(b->pos);
    free(b->seq_len);
    free(b->out_idx);
    free(b->cols);
    free(b->embd);
    free(b->seqs);
    free(b->logits);
    free(b->prep);
    jev_pool_free(b->prep_pool);
    pthread_mutex_destroy(&b->prep_lock);
    pthread_cond_destroy(&b->prep_cond);
    pthread_mutex_destroy(&b->prep_pool_lock);
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
        s->entry = -1;
        s->ph = PH_NEW;
        s->t_begin = jev_now_ms();
        if (s->p.path != JEV_DECIDE_SHARED || s->p.scoring != JEV_SCORING_LABEL) {
            s->ph = PH_WHOLE; /* jev_decide_run prepares it itself */
            atomic_store(&s->prep, PREP_DONE);
            return JEV_OK;
        }
        atomic_store(&s->prep, PREP_QUEUED);
        pthread_mutex_lock(&b->prep_lock);
        s->prep_next = NULL;
        if (b->prep_tail)
            b->prep_tail->prep_next = s;
        else
            b->prep_head = s;
        b->prep_tail = s;
        pthread_cond_signal(&b->prep_cond);
        pthread_mutex_unlock(&b->prep_lock);
        return JEV_OK;
    }
    return jev_fail(err, JEV_ERR_INVALID_ARG, "batch: no room (%d requests at once, max_running)", b->p.max_running);
}

void jev_batcher_cancel(struct jev_batcher *b, void *user) {
    for (int32_t i = 0; i < b->p.max_running; i++)
        if (b->slots[i].used && b->slots[i].user == user)
            b->slots[i].cancelled = true;
}

/* The slots in use and not done, oldest first, into out (at most max_running); returns how many. */
static int32_t in_order(struct jev_batcher *b, struct slot **out) {
    int32_t n = 0;
    for (int32_t i = 0; i < b->p.max_running; i++)
        if (b->slots[i].used && !b->slots[i].done)
            out[n++] = &b->slots[i];
    for (int32_t i = 1; i < n; i++) /* insertion sort: a few dozen at most */
        for (int32_t j = i; j > 0 && out[j]->order < out[j - 1]->order; j--) {
            struct slot *t = out[j];
            out[j] = out[j - 1];
            out[j - 1] = t;
        }
    return n;
}

/* ---- the engine's room ---- */

/* Pages and sequences the batch may use: the pool less what anyone else holds (kept prefixes and the
 * batch's own prefixes are the batch's to use or give back). Between steps no fork is alive. */
static void room(const struct jev_batcher *b, int32_t *pages, int32_t *seqs) {
    const struct jev_state *st = &b->d->engine->state;
    int32_t mine_pages = 0, mine_seqs = 0;
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        if (b->d->kept[i].seq) {
            mine_pages += b->d->kept[i].seq->n_pages;
            mine_seqs++;
        }
    for (int32_t i = 0; i < b->p.max_running; i++)
        if (b->entries[i].used && b->entries[i].seq) {
            mine_pages += b->entries[i].seq->n_pages;
            mine_seqs++;
        }
    *pages = st->n_pages - (st->n_pages - st->n_free - mine_pages);
    *seqs = st->max_seqs - (st->n_live - mine_seqs);
}

/* ---- a slot's life ---- */

/* The end of a slot's use of its prefix: the last user of a prefilled prefix gives it to the decider
 * to keep (when it has a key) or frees it; an owner that failed before it was ready takes it down. */
static void leave_entry(struct jev_batcher *b, struct slot *s) {
    if (s->entry < 0)
        return;
    struct entry *e = &b->entries[s->entry];
    s->entry = -1;
    e->users--;
    if (e->owner == s && !e->ready) { /* unfinished: nobody can use it (its waiters look again) */
        if (e->seq)
            jev_seq_free(e->seq);
        memset(e, 0, sizeof *e);
        return;
    }
    if (e->users > 0)
        return;
    if (e->key[0])
        dc_kept_put(b->d, e->seq, e->key);
    else
        jev_seq_free(e->seq);
    memset(e, 0, sizeof *e);
}

void bt_finish(struct jev_batcher *b, struct slot *s, enum jev_status status, const struct jev_error *err) {
    if (err && err != &s->err)
        s->err = *err;
    leave_entry(b, s);
    s->active = false;
    s->done = true;
    s->status = status;
    struct jev_engine *e = b->d->engine;
    if (s->has_q && s->ph != PH_WHOLE) {
        struct dc_req *q = &s->q;
        struct jev_decide_stats *st = &s->res.stats;
        st->lm_forwards = s->forwards;
        st->lm_tokens = s->tokens;
        st->lm_logit_rows = s->rows;
        st->vision_forwards = s->vision_ran;
        st->prefix_tokens = (int32_t)q->prefix.n;
        st->image_tokens = q->has_image ? q->n_img_tok : 0;
        st->prompt_tokens = st->prefix_tokens + q->max_suffix;
        st->peak_seqs = q->peak_seqs;
        st->peak_bytes = (int64_t)e->lm.arena.cap + (q->has_image ? (int64_t)b->d->vision.arena.cap : 0) +
                         (int64_t)q->arena.peak + q->image_bytes + q->peak_dyn;
        st->peak_where = "cpu";
        if (e->ops->memory) {
            e->ops->memory(e->be, NULL, &st->peak_bytes, false);
            st->peak_where = e->ops->name;
        }
        s->res.valid = status == JEV_OK;
        /* the prefix counts whether it ran now or was kept: as jev_decide_run counts it */
        s->res.usage.input_tokens = s->tokens + (st->prefix_reused ? st->prefix_tokens : 0);
    }
    if (s->has_q)
        dc_req_free(&s->q);
    s->has_q = false;
    s->res.stats.total_ms = jev_now_ms() - s->t_begin;
    if (status != JEV_OK) {
        if (s->ph != PH_WHOLE)
            jev_engine_set_error(e, &s->err);
        if (status == JEV_ERR_DEVICE_LOST && !atomic_load(&b->d->lost)) { /* as jev_decide_run records it */
            snprintf(b->d->lost_msg, sizeof b->d->lost_msg, "%s", s->err.msg);
            atomic_store_explicit(&b->d->lost, true, memory_order_release);
        }
        if (!s->res.generated)
            jev_decide_result_free(&s->res);
    }
}

/* A slot its preparing thread has finished, on the engine's thread: the kept tower output of the same
 * image bytes replaces the decoded pixels (copied now: the decider may drop it before the prefill),
 * the batch size that fits the engine, and its reservation. */
static void prepare(struct jev_batcher *b, struct slot *s) {
    struct jev_decider *d = b->d;
    if (atomic_load_explicit(&d->lost, memory_order_acquire)) {
        bt_finish(b, s, jev_fail(&s->err, JEV_ERR_DEVICE_LOST, "%s (earlier; restart the engine)", d->lost_msg), NULL);
        return;
    }
    struct dc_req *q = &s->q;
    enum jev_status st = s->prep_status;
    if (st == JEV_OK) {
        dc_begin_attach(q);
        dc_track(q);
    }
    int32_t pages = 0, seqs = 0;
    room(b, &pages, &seqs);
    s->B = st == JEV_OK ? dc_batch_size(q) : 0;
    /* the questions' forks: light slots when every suffix may take one, else slots with a state too */
    bool all_light = true;
    for (int32_t i = 0; st == JEV_OK && i < s->r->n_questions; i++)
        all_light = all_light && dc_light_fork(q, i);
    int32_t fork_room = all_light ? d->engine->state.max_light : seqs - 1;
    if (st == JEV_OK && (seqs < 1 || fork_room < 1))
        st = jev_fail(&s->err, JEV_ERR_CONTEXT_FULL,
                      "decide: the engine holds %d sequences with a DeltaNet state (max_states) and %d forks "
                      "(max_batch); a prefix and one question need 1 and 1",
                      d->engine->state.max_seqs, d->engine->state.max_light);
    if (st == JEV_OK && s->B > fork_room)
        s->B = fork_room;
    if (st == JEV_OK)
        st = dc_fit_batch(q, &s->B, pages);
    if (st != JEV_OK) {
        bt_finish(b, s, st, NULL);
        return;
    }
    s->key[0] = '\0';
    if (dc_keyable(q))
        dc_prefix_key(q, s->key);
    s->res_pages = d->engine->state.n_full > 0 ? dc_batch_pages(q, s->B) : 0;
    /* sequences with a state it may hold at once: its prefix, and its forks unless they are light (light
     * forks live for one forward, and a forward takes no more than the engine's light slots) */
    s->res_seqs = 1 + (all_light ? 0 : s->B);
    s->ph = PH_READY;
}

static int32_t free_entry(struct jev_batcher *b) {
    for (int32_t i = 0; i < b->p.max_running; i++)
        if (!b->entries[i].used)
            return i;
    return -1; /* cannot happen: one entry per slot at most */
}

/* Finds or makes the prefix of an admitted slot. false when it must wait (another slot is prefilling
 * the same prefix) or failed. */
static bool join_prefix(struct jev_batcher *b, struct slot *s) {
    struct jev_decider *d = b->d;
    struct dc_req *q = &s->q;
    if (s->key[0]) {
        for (int32_t i = 0; i < b->p.max_running; i++) {
            struct entry *e = &b->entries[i];
            if (!e->used || strcmp(e->key, s->key))
                continue;
            if (!e->ready)
                return false; /* its owner is at it: the same state comes out, wait for it */
            e->users++;
            s->entry = i;
            s->res.stats.prefix_reused = true;
            s->ph = PH_SCORE;
            b->reused++;
            return true;
        }
        int32_t k = dc_kept_find(d, s->key);
        if (k >= 0) { /* the decider kept it: ours while we use it, kept again after */
            int32_t i = free_entry(b);
            struct entry *e = &b->entries[i];
            memset(e, 0, sizeof *e);
            e->used = true;
            memcpy(e->key, s->key, sizeof e->key);
            e->seq = dc_kept_take(d, k);
            e->ready = true;
            e->users = 1;
            s->entry = i;
            s->res.stats.prefix_reused = true;
            s->ph = PH_SCORE;
            b->reused++;
            return true;
        }
    }
    int32_t i = free_entry(b);
    struct entry *e = &b->entries[i];
    memset(e, 0, sizeof *e);
    e->used = true;
    memcpy(e->key, s->key, sizeof e->key);
    e->users = 1;
    e->owner = s;
    s->entry = i;
    /* the prefix sequence: a slot of the engine (a kept prefix gives its own back when it is short) */
    while (d->engine->state.n_live >= d->engine->state.max_seqs && dc_kept_evict(d, NULL))
        ;
    enum jev_status st = jev_seq_new(&d->engine->state, &e->seq, &s->err);
    if (st == JEV_OK)
        st = dc_mrope(q, q->prefix.ids, (int32_t)q->prefix.n, &s->delta);
    if (st != JEV_OK) {
        bt_finish(b, s, st, NULL);
        return false;
    }
    dc_track(q);
    s->ph = q->has_image && !q->image_deferred ? PH_VISION : PH_PREFILL;
    return true;
}

/* Admits ready slots in arrival order while the engine has room for what each may hold at once; the
 * first that does not fit stops the rest (so that a large request is not passed for ever). */
static void admit(struct jev_batcher *b, struct slot **order, int32_t n) {
    int32_t pages = 0, seqs = 0;
    room(b, &pages, &seqs);
    for (int32_t i = 0; i < n; i++)
        if (order[i]->active) {
            pages -= order[i]->res_pages;
            seqs -= order[i]->res_seqs;
        }
    for (int32_t i = 0; i < n; i++) {
        struct slot *s = order[i];
        if (s->ph == PH_WHOLE)
            return; /* it runs alone once those before it are done */
        if (s->ph != PH_READY || s->active)
            continue;
        if (s->res_pages > pages || s->res_seqs > seqs)
            return;
        if (!join_prefix(b, s)) {
            if (s->done)
                continue;
            continue; /* waits for the prefix another slot makes; admitted once it is ready */
        }
        s->active = true;
        pages -= s->res_pages;
        seqs -= s->res_seqs;
    }
}

/* Prefix tokens the admitted slots still have to prefill: the language model's work that vision has
 * made ready. */
static int64_t prefill_ready(struct slot **order, int32_t n) {
    int64_t t = 0;
    for (int32_t i = 0; i < n; i++)
        if (!order[i]->done && order[i]->ph == PH_PREFILL)
            t += (int64_t)order[i]->q.prefix.n - order[i]->prefill_at;
    return t;
}

/* Images through the tower, oldest slot first, one forward each (the tower takes one image a forward),
 * until the prefills they make ready fill the next language-model forward (the engine's slice): one
 * image a step starved a GPU's 2048-token forwards (a 532-token prefix an image), and more than a
 * forward's worth would only make the waiting requests later. At least one image when the language
 * model has less than a slice waiting. */
static bool vision(struct jev_batcher *b, struct slot **order, int32_t n, struct jev_batch_step *st) {
    const int64_t slice = b->d->engine->lm.p.max_batch_tokens;
    int64_t ready = prefill_ready(order, n);
    bool ran = false;
    for (int32_t i = 0; i < n && ready < slice; i++) {
        struct slot *s = order[i];
        if (s->done || s->ph != PH_VISION)
            continue;
        ran = true;
        enum jev_status r = dc_image_encode(&s->q);
        if (r != JEV_OK) {
            bt_finish(b, s, r, NULL);
            continue;
        }
        if (s->q.image_key[0])
            dc_image_keep(&s->q);
        dc_image_release(&s->q); /* the pixels: the embeddings are in place */
        s->vision_ran = true;
        s->ph = PH_PREFILL;
        st->images++;
        ready += (int64_t)s->q.prefix.n - s->prefill_at;
    }
    return ran;
}

bool jev_batcher_step(struct jev_batcher *b, struct jev_batch_step *st) {
    struct jev_batch_step local;
    struct jev_batch_step *out = st ? st : &local;
    memset(out, 0, sizeof *out);
    struct slot **order = calloc((size_t)b->p.max_running, sizeof *order);
    if (!order)
        return false; /* no memory for the step: nothing ran; the caller steps again */
    int32_t n = in_order(b, order);
    bool worked = false;
    double now = jev_now_ms();
    bool lost = atomic_load_explicit(&b->d->lost, memory_order_acquire);
    /* given up, past the time limit (as dc_forward says it), or the device lost by another's forward */
    for (int32_t i = 0; i < n; i++) {
        struct slot *s = order[i];
        if (atomic_load_explicit(&s->prep, memory_order_acquire) != PREP_DONE)
            continue; /* its preparing thread has it */
        double spent = now - s->t_begin;
        if (lost && s->ph != PH_NEW)
            bt_finish(b, s, jev_fail(&s->err, JEV_ERR_DEVICE_LOST, "%s (earlier; restart the engine)", b->d->lost_msg),
                      NULL);
        else if (s->cancelled)
            bt_finish(b, s, jev_fail(&s->err, JEV_ERR_ABORTED, "decide: the request was given up"), NULL);
        else if (s->p.timeout_ms > 0 && s->active && spent > s->p.timeout_ms)
            bt_finish(b, s,
                      jev_fail(&s->err, JEV_ERR_ABORTED,
                               "decide: the request ran %.0f ms, past its time limit of %.0f ms", spent,
                               s->p.timeout_ms),
                      NULL);
        worked |= s->done;
    }
    /* the requests their preparing threads have finished */
    for (int32_t i = 0; i < n; i++)
        if (!order[i]->done && order[i]->ph == PH_NEW &&
            atomic_load_explicit(&order[i]->prep, memory_order_acquire) == PREP_DONE) {
            prepare(b, order[i]);
            worked = true;
        }
    n = in_order(b, order);
    /* a whole run goes alone, once no admitted slot holds the engine */
    bool busy = false;
    for (int32_t i = 0; i < n; i++)
        busy |= order[i]->active;
    if (n > 0 && order[0]->ph == PH_WHOLE && !busy) {
        struct slot *s = order[0];
        enum jev_status r = jev_decide_run(b->d, s->r, &s->p, &s->res, &s->err);
        out->forwards = (int32_t)s->res.stats.lm_forwards;
        out->rows = s->r->n_questions;
        out->requests = 1;
        out->tokens = s->res.stats.lm_tokens;
        out->images = (int32_t)s->res.stats.vision_forwards;
        out->reused = s->res.stats.prefix_reused;
        bt_finish(b, s, r, NULL);
        worked = true;
    } else {
        b->reused = 0;
        admit(b, order, n);
        out->reused = b->reused;
        worked |= vision(b, order, n, out);
        worked |= bt_forward(b, out);
    }
    free(order);
    const struct jev_engine *e = b->d->engine;
    out->memory_bytes = out->memory_peak = (int64_t)jev_engine_bytes(e);
    if (e->ops->memory)
        e->ops->memory(e->be, &out->memory_bytes, &out->memory_peak, false);
    return worked;
}

bool jev_batcher_take(struct jev_batcher *b, void **user, enum jev_status *status, struct jev_decide_result *res,
                      struct jev_error *err) {
    struct slot *o = NULL;
    for (int32_t i = 0; i < b->p.max_running; i++) {
        struct slot *s = &b->slots[i];
        if (s->used && s->done && (!o || s->order < o->order))
            o = s;
    }
    if (!o)
        return false;
    *user = o->user;
    *status = o->status;
    *res = o->res;
    *err = o->err;
    memset(o, 0, sizeof *o);
    o->entry = -1;
    return true;
}

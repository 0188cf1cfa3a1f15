/*
 * batch-step.c - one forward of the shared batch: the next piece of every
 * admitted request, packed into one jev_lm_forward (the language model
 * takes runs of many sequences at once), and its answers read.
 *
 * A piece is what jev_decide_run would give one forward: a prefill chunk
 * (the prefix cut at the engine's slice, tokens [k*slice, (k+1)*slice)) or a
 * group of B questions (each suffix on its own fork of the prefix, the head
 * at each suffix's last token). Pieces are taken oldest request first,
 * question groups before prefill chunks (a request close to its answer
 * goes first), while their tokens fit one slice of the engine and their
 * suffixes fit max_rows; so no piece is ever cut differently than alone.
 * A piece longer than a slice (a group of long suffixes) runs alone, as it
 * would alone; so does one of fewer than the backend's min_batched_tokens (a
 * prefix tail of a few tokens): the matrix products take other kernels below
 * it (the CPU's fused decode kernels under 3 tokens, CUDA's rows read in place
 * under 5), and its sums would change with company. Above it the CPU's do not
 * (backend/cpu/cpu-matmul.c): on the CPU a request's answers are the same bits
 * alone and in company. The label head runs over the union of the pieces' label ids;
 * each request reads its own columns.
 *
 * What it is not: admission (batch.c reserves what each request may hold,
 * so the pages and sequences a forward needs are there, a kept prefix
 * given back when short), vision, text scoring.
 */
#include "decide/batch-int.h" // defines: struct jev_batcher, struct slot, bt_finish

#include <stdlib.h>
#include <string.h>

#include "base/timing.h"   // defines: jev_now_ms
#include "decide/answer.h" // defines: jev_answer_set_probs
#include "decide/labels.h" // defines: jev_labels_probs

/* A piece of one request in the forward. */
struct piece {
    struct slot *s;
    bool prefill;   /* a prefix chunk; else a group of questions */
    int32_t at, n;  /* prefill: tokens [at, at + n); group: questions [at, at + n) */
    int32_t tokens; /* tokens it feeds */
    int32_t row0;   /* its first batch row */
    int32_t run0;   /* its first run */
    int32_t out0;   /* group: its first logits row */
    int32_t *remap; /* group: the union column of each of its request's label columns */
};

/* Grows a buffer to hold n elements of size bytes; false when memory runs out. */
static bool grow(void **p, int32_t *cap, int32_t n, size_t size) {
    if (n <= *cap)
        return true;
    int32_t c = *cap ? *cap : 64;
    while (c < n)
        c *= 2;
    void *q = realloc(*p, (size_t)c * size);
    if (!q)
        return false;
    *p = q;
    *cap = c;
    return true;
}

/* The admitted slots with work for a forward, oldest first: question groups, then prefill chunks. */
static int32_t collect(struct jev_batcher *b, struct piece *out, int32_t slice) {
    int32_t n = 0;
    for (int pass = 0; pass < 2; pass++) {
        int32_t start = n;
        for (int32_t i = 0; i < b->p.max_running; i++) {
            struct slot *s = &b->slots[i];
            if (!s->used || s->done || !s->active)
                continue;
            double spent = jev_now_ms() - s->t_begin;
            if (s->p.timeout_ms > 0 && spent > s->p.timeout_ms) { /* checked before each forward, as dc_forward */
                bt_finish(b, s,
                          jev_fail(&s->err, JEV_ERR_ABORTED,
                                   "decide: the request ran %.0f ms, past its time limit of %.0f ms", spent,
                                   s->p.timeout_ms),
                          NULL);
                continue;
            }
            struct piece p = {.s = s, .run0 = -1};
            if (pass == 0 && s->ph == PH_SCORE) {
                p.at = s->next_q;
                p.n = s->r->n_questions - s->next_q < s->B ? s->r->n_questions - s->next_q : s->B;
                for (int32_t k = 0; k < p.n; k++)
                    p.tokens += (int32_t)s->q.qs[p.at + k].suffix.n;
            } else if (pass == 1 && s->ph == PH_PREFILL) {
                int32_t P = (int32_t)s->q.prefix.n;
                p.prefill = true;
                p.at = s->prefill_at;
                p.n = P - p.at < slice ? P - p.at : slice;
                p.tokens = p.n;
            } else {
                continue;
            }
            out[n++] = p;
        }
        for (int32_t i = start + 1; i < n; i++) /* oldest first within the pass */
            for (int32_t j = i; j > start && out[j].s->order < out[j - 1].s->order; j--) {
                struct piece t = out[j];
                out[j] = out[j - 1];
                out[j - 1] = t;
            }
    }
    return n;
}

/* K/V pages, full forks and light forks (model/state.h) a piece takes. */
static void needs(const struct jev_batcher *b, const struct piece *p, int32_t *pages, int32_t *forks, int32_t *light) {
    *forks = 0;
    *light = 0;
    if (p->prefill) {
        const struct jev_seq *seq = b->entries[p->s->entry].seq;
        *pages = jev_kv_pages((int64_t)seq->n_tokens + p->n - seq->n_prefix) - seq->n_pages;
    } else {
        *pages = 0;
        for (int32_t k = 0; k < p->n; k++) {
            *pages += jev_kv_pages(p->s->q.qs[p->at + k].suffix.n);
            if (dc_light_fork(&p->s->q, p->at + k))
                ++*light;
            else
                ++*forks;
        }
    }
    if (b->d->engine->state.n_full == 0)
        *pages = 0;
}

/* Whether a piece runs in a forward of its own (see the top). */
static bool alone(const struct piece *p, int32_t slice, int32_t min_tokens) {
    return p->tokens > slice || p->tokens < min_tokens;
}

/* Picks the pieces of this forward (moved to the front of ps); returns how many. A piece that runs
 * alone goes in the first forward with nothing before it, or the next one. */
static int32_t pack(struct jev_batcher *b, struct piece *ps, int32_t n, int32_t slice) {
    const struct jev_engine *e = b->d->engine;
    const int32_t min_tokens = e->ops->min_batched_tokens;
    if (b->big_next) {
        b->big_next = false;
        for (int32_t i = 0; i < n; i++)
            if (alone(&ps[i], slice, min_tokens)) {
                ps[0] = ps[i];
                return 1;
            }
    }
    int32_t tokens = 0, rows = 0, runs = 0, taken = 0;
    for (int32_t i = 0; i < n; i++) {
        struct piece p = ps[i];
        int32_t r = p.prefill ? 1 : p.n, w = p.prefill ? 0 : p.n;
        if (alone(&p, slice, min_tokens)) {
            if (taken == 0) {
                ps[0] = p;
                return 1;
            }
            b->big_next = true;
            continue;
        }
        if (tokens + p.tokens > slice || rows + w > b->p.max_rows || runs + r > e->lm.p.max_runs)
            continue;
        tokens += p.tokens;
        rows += w;
        runs += r;
        ps[taken++] = p;
    }
    return taken;
}

/* The label probabilities of a group's questions from their logits rows (union columns). */
static void read_group(struct jev_batcher *b, const struct piece *p, int32_t n_union) {
    struct slot *s = p->s;
    for (int32_t k = 0; k < p->n; k++) {
        int32_t qi = p->at + k;
        const struct dc_question *dq = &s->q.qs[qi];
        const float *row = b->logits + (int64_t)(p->out0 + k) * n_union;
        float vals[2 * JEV_DECIDE_MAX_OPTIONS];
        double probs[JEV_DECIDE_MAX_OPTIONS];
        for (int32_t j = 0; j < dq->n_ids; j++)
            vals[j] = row[p->remap[dq->cols[j]]];
        jev_labels_probs(s->r->questions[qi].n_options, dq->owner, vals, dq->n_ids, probs);
        jev_answer_set_probs(&s->res.answers.items[qi], probs);
    }
}

bool bt_forward(struct jev_batcher *b, struct jev_batch_step *st) {
    struct jev_decider *d = b->d;
    struct jev_engine *e = d->engine;
    struct jev_state *state = &e->state;
    int32_t slice = e->lm.p.max_batch_tokens;
    struct piece *ps = calloc((size_t)b->p.max_running, sizeof *ps);
    if (!ps)
        return false;
    int32_t n = pack(b, ps, collect(b, ps, slice), slice);
    /* what the pieces take; a kept prefix gives its pages and slot back when they are short */
    int32_t pages = 0, forks = 0, light = 0;
    for (int32_t i = 0; i < n; i++) {
        int32_t pg = 0, fk = 0, lt = 0;
        needs(b, &ps[i], &pg, &fk, &lt);
        pages += pg;
        forks += fk;
        light += lt;
    }
    while ((state->n_free < pages || state->max_seqs - state->n_live < forks) && dc_kept_evict(d, NULL))
        ;
    if (n == 0 || state->n_free < pages || state->max_seqs - state->n_live < forks ||
        state->max_light - state->n_light < light) {
        free(ps); /* nothing to run, or someone else holds what it needs: the next step tries again */
        return false;
    }
    /* sizes, then the batch */
    int32_t tokens = 0, runs = 0, rows = 0, cols = 0;
    for (int32_t i = 0; i < n; i++) {
        tokens += ps[i].tokens;
        runs += ps[i].prefill ? 1 : ps[i].n;
        rows += ps[i].prefill ? 0 : ps[i].n;
        cols += ps[i].prefill ? 0 : ps[i].s->q.n_cols;
    }
    int32_t *remaps = malloc((size_t)(cols > 0 ? cols : 1) * sizeof *remaps);
    bool ok = remaps && grow((void **)&b->ids, &b->cap_tokens, tokens, sizeof *b->ids);
    int32_t cap_t = b->cap_tokens; /* the buffers by token share one capacity */
    ok = ok && grow((void **)&b->pos, &b->cap_pos, cap_t * 3, sizeof *b->pos);
    ok = ok && grow((void **)&b->embd, &b->cap_embd, cap_t, sizeof *b->embd);
    ok = ok && grow((void **)&b->seqs, &b->cap_runs, runs, sizeof *b->seqs);
    ok = ok && grow((void **)&b->seq_len, &b->cap_seq_len, b->cap_runs, sizeof *b->seq_len);
    ok = ok && grow((void **)&b->out_idx, &b->cap_rows, rows > 0 ? rows : 1, sizeof *b->out_idx);
    ok = ok && grow((void **)&b->cols, &b->cap_cols, cols > 0 ? cols : 1, sizeof *b->cols);
    ok = ok &&
         grow((void **)&b->logits, &b->cap_logits, (rows > 0 ? rows : 1) * (cols > 0 ? cols : 1), sizeof *b->logits);
    if (!ok) {
        free(remaps);
        free(ps);
        return false; /* no memory for the forward now: the next step tries again */
    }
    int32_t row = 0, run = 0, out = 0, n_union = 0, remap_at = 0;
    bool images = false;
    for (int32_t i = 0; i < n; i++)
        images |= ps[i].prefill && ps[i].s->q.has_image;
    struct jev_error err = {0};
    enum jev_status status = JEV_OK;
    for (int32_t i = 0; i < n && status == JEV_OK; i++) {
        struct piece *p = &ps[i];
        struct dc_req *q = &p->s->q;
        struct jev_seq *prefix = b->entries[p->s->entry].seq;
        p->row0 = row;
        p->run0 = run;
        if (p->prefill) {
            int32_t P = (int32_t)q->prefix.n;
            memcpy(b->ids + row, q->prefix.ids + p->at, (size_t)p->n * sizeof *b->ids);
            dc_mrope_slice(q, P, p->at, p->n, b->pos + (int64_t)row * 3);
            for (int32_t k = 0; images && k < p->n; k++)
                b->embd[row + k] = q->has_image ? q->embd[p->at + k] : NULL;
            b->seqs[run] = prefix;
            b->seq_len[run++] = p->n;
            row += p->n;
            continue;
        }
        /* the group's label columns into the union (alone: the request's own, in its order) */
        p->remap = remaps + remap_at;
        remap_at += q->n_cols;
        for (int32_t c = 0; c < q->n_cols; c++) {
            int32_t u = 0;
            while (u < n_union && b->cols[u] != q->cols[c])
                u++;
            if (u == n_union)
                b->cols[n_union++] = q->cols[c];
            p->remap[c] = u;
        }
        p->out0 = out;
        for (int32_t k = 0; k < p->n; k++) {
            const struct jev_tokens *suf = &q->qs[p->at + k].suffix;
            int32_t len = (int32_t)suf->n;
            b->seqs[run] = NULL;
            status = dc_light_fork(q, p->at + k) ? jev_seq_fork_light(prefix, &b->seqs[run], &err)
                                                 : jev_seq_fork(prefix, &b->seqs[run], &err);
            if (status != JEV_OK)
                break; /* the forks made so far are released below */
            memcpy(b->ids + row, suf->ids, (size_t)len * sizeof *b->ids);
            jev_lm_text_positions(b->seqs[run], len, b->pos + (int64_t)row * 3);
            for (int32_t j = 0; images && j < len; j++)
                b->embd[row + j] = NULL;
            b->seq_len[run++] = len;
            row += len;
            b->out_idx[out++] = row - 1; /* the answer position: the cue's last token */
        }
    }
    double t0 = jev_now_ms();
    if (status == JEV_OK) {
        struct jev_lm_batch lb = {.n_tokens = row,
                                  .ids = b->ids,
                                  .pos = b->pos,
                                  .embd_rows = images ? b->embd : NULL,
                                  .n_runs = run,
                                  .seqs = b->seqs,
                                  .seq_len = b->seq_len,
                                  .n_out = out,
                                  .out_idx = out > 0 ? b->out_idx : NULL,
                                  .n_vocab_rows = n_union,
                                  .vocab_rows = n_union > 0 ? b->cols : NULL,
                                  .logits = out > 0 ? b->logits : NULL};
        status = jev_lm_forward(&e->lm, &lb, &err);
    }
    double dt = jev_now_ms() - t0;
    if (status != JEV_OK) {
        /* release exactly the forks made: every group piece before the failure, and the failing one's */
        for (int32_t r = 0; r < run; r++) {
            bool is_prefix = false;
            for (int32_t i = 0; i < n; i++)
                is_prefix |= ps[i].prefill && ps[i].run0 == r;
            if (!is_prefix && b->seqs[r])
                jev_seq_free(b->seqs[r]);
        }
        for (int32_t i = 0; i < n; i++)
            if (!ps[i].s->done)
                bt_finish(b, ps[i].s, status, &err);
        free(remaps);
        free(ps);
        return true;
    }
    st->forwards = 1;
    st->rows = out;
    st->tokens = row;
    for (int32_t i = 0; i < n; i++) {
        struct piece *p = &ps[i];
        struct slot *s = p->s;
        struct jev_decide_stats *rs = &s->res.stats;
        st->requests++;
        s->forwards++;
        s->tokens += p->tokens;
        dc_track(&s->q);
        if (p->prefill) {
            rs->prefill_ms += dt;
            s->prefill_at += p->n;
            if (s->prefill_at == (int32_t)s->q.prefix.n) { /* prefilled: forks may come from it now */
                struct entry *en = &b->entries[s->entry];
                en->seq->rope_delta = s->delta; /* text after the image: position = index + delta */
                en->ready = true;
                en->owner = NULL;
                s->ph = PH_SCORE;
            }
            continue;
        }
        rs->scoring_ms += dt;
        read_group(b, p, n_union);
        for (int32_t k = 0; k < p->n; k++)
            jev_seq_free(b->seqs[p->run0 + k]);
        rs->forks += p->n;
        s->rows += p->n;
        s->next_q += p->n;
        if (s->next_q == s->r->n_questions)
            bt_finish(b, s, JEV_OK, NULL);
    }
    free(remaps);
    free(ps);
    return true;
}

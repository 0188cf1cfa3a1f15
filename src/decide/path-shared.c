/*
 * path-shared.c - the shared path: one vision forward and one prefill of the
 * shared prefix, then the question suffixes in batches over forks of the
 * prefix sequence.
 *
 *   vision_ms   the tower on the image, and pointing the image pads' input
 *               rows at its output
 *   prefill_ms  the prefix forward (chat frame, image pads, state)
 *   scoring_ms  per batch: the suffix forward (one run per fork, logits at
 *               each run's last row), reading the answers, and in text mode
 *               the trie rounds
 * Forks (K/V shared read-only; light in label mode: the suffix's forward
 * reads the prefix's linear state, keeps none; text mode copies it) are
 * outside the phases, inside the total.
 *
 * No computation is shared between questions: each suffix runs on its own
 * fork even when two questions' texts are equal (benchmark.md).
 *
 * With reuse_prefix the decider keeps the prefix sequence after the request
 * (kept.c: the DC_KEPT_MAX most recent) and forks a later request from it
 * when that request's prefix ids and image bytes hash the same: no vision,
 * no prefill (prefix_reused). The forks see the very state a fresh prefill
 * would leave, so the answers are the same bits. Kept prefixes hold engine
 * slots and pages: the least recent go back when a request needs the room.
 */
#include "decide/pipeline-int.h" // defines: struct dc_req

#include "base/timing.h" // defines: jev_now_ms

#include <stdlib.h>
#include <string.h>

/* For groups of B questions: the most sequences with a DeltaNet state one group holds at once (the
 * prefix, full forks and their tries' forks) and the most light forks (label scoring's). */
static void slots_of(const struct dc_req *q, int32_t B, int32_t *most, int32_t *most_light) {
    *most = 1;
    *most_light = 0;
    for (int32_t b0 = 0; b0 < q->r->n_questions; b0 += B) {
        int32_t need = 1, light = 0; /* the prefix */
        for (int32_t i = b0; i < b0 + B && i < q->r->n_questions; i++) {
            if (dc_light_fork(q, i))
                light++;
            else
                need += 1 + q->qs[i].forks;
        }
        *most = need > *most ? need : *most;
        *most_light = light > *most_light ? light : *most_light;
    }
}

/* The largest batch, at most *B, whose groups each fit the engine's slots even with nothing kept
 * (max_states sequences with a DeltaNet state, max_batch light forks): a text-mode request whose
 * forks do not fit together runs in smaller groups, as one whose pages do not (dc_fit_batch); the
 * grouping moves no answer beyond the last bits of the few-token products (the server's company
 * rule, docs/server.md). Refused, naming the limit, when one question alone does not fit. *most: the
 * chosen groups' most sequences with a state at once. */
static enum jev_status fit_slots(struct dc_req *q, int32_t *B, int32_t *most) {
    const struct jev_state *st = &q->d->engine->state;
    int32_t light = 0;
    for (int32_t b = *B; b >= 1; b--) {
        slots_of(q, b, most, &light);
        if (*most <= st->max_seqs && light <= st->max_light) {
            *B = b;
            return JEV_OK;
        }
    }
    if (*most > st->max_seqs)
        return jev_fail(q->err, JEV_ERR_CONTEXT_FULL,
                        "decide: one question needs %d sequences with a DeltaNet state at once (its prefix, its "
                        "fork and its options' forks), the engine holds %d (max_states); use a larger engine",
                        *most, st->max_seqs);
    return jev_fail(q->err, JEV_ERR_CONTEXT_FULL,
                    "decide: one question needs %d forks at once, the engine holds %d (max_batch); use a larger "
                    "engine",
                    light, st->max_light);
}

/* ---- K/V pages: groups that fit ---- */

/* K/V pages question i's fork (and in text mode its trie's forks) take at most. */
static int32_t question_pages(const struct dc_req *q, int32_t i) {
    const struct dc_question *dq = &q->qs[i];
    if (!dq->has_trie)
        return jev_kv_pages(dq->suffix.n);
    int32_t depth = 0;
    for (int32_t n = 0; n < dq->trie.n_nodes; n++)
        depth = dq->trie.nodes[n].depth > depth ? dq->trie.nodes[n].depth : depth;
    return (1 + dq->forks) * jev_kv_pages((int64_t)dq->suffix.n + depth);
}

int32_t dc_batch_pages(const struct dc_req *q, int32_t B) {
    int32_t most = 0;
    for (int32_t b0 = 0; b0 < q->r->n_questions; b0 += B) {
        int32_t need = 0;
        for (int32_t i = b0; i < b0 + B && i < q->r->n_questions; i++)
            need += question_pages(q, i);
        most = need > most ? need : most;
    }
    return jev_kv_pages(q->prefix.n) + most;
}

/* The pages this request can have: the free ones and those of the kept prefixes (given back when
 * needed). Pages held by anyone else (another user of the engine) are not the request's to take. */
int32_t dc_page_budget(const struct dc_req *q) {
    const struct jev_state *st = &q->d->engine->state;
    int32_t budget = st->n_free;
    for (int32_t i = 0; i < DC_KEPT_MAX; i++)
        if (q->d->kept[i].seq)
            budget += q->d->kept[i].seq->n_pages;
    return budget;
}

/*
 * The batch size that fits budget pages: questions whose forks do not fit together run in smaller
 * batches; a request that does not fit one question at a time is refused with JEV_ERR_NOMEM (413),
 * naming its need and the budget.
 */
enum jev_status dc_fit_batch(struct dc_req *q, int32_t *B, int32_t budget) {
    const struct jev_state *st = &q->d->engine->state;
    if (st->n_full == 0)
        return JEV_OK;
    while (*B > 1 && dc_batch_pages(q, *B) > budget)
        (*B)--;
    int32_t need = dc_batch_pages(q, *B);
    if (need > budget)
        return jev_fail(q->err, JEV_ERR_NOMEM,
                        "decide: the request needs %d K/V tokens at once (its prefix of %d tokens and its largest "
                        "question), beyond the %d this engine can give it (%d free or kept pages of %d tokens)",
                        need * JEV_KV_PAGE, (int)q->prefix.n, budget * JEV_KV_PAGE, budget, JEV_KV_PAGE);
    return JEV_OK;
}

/* ---- the kept prefix (reuse_prefix) ---- */

/* The digest of everything the prefix's state depends on besides the model: its ids (the image
 * pads' count among them) and the image's bytes (the decider's resize bound is fixed). */
void dc_prefix_key(const struct dc_req *q, char out[JEV_SHA256_HEX]) {
    size_t n = q->prefix.n * sizeof(int32_t), m = n + JEV_SHA256_HEX + 1;
    unsigned char *buf = malloc(m);
    if (!buf) {
        out[0] = '\0'; /* unkeyed: never equal to a kept key */
        return;
    }
    memcpy(buf, q->prefix.ids, n);
    buf[n] = q->has_image;
    memcpy(buf + n + 1, q->has_image ? q->image_key : "", q->has_image ? JEV_SHA256_HEX : 1);
    jev_sha256_hex(buf, q->has_image ? m : n + 2, out);
    free(buf);
}

/* Whether this request may keep or reuse its prefix: asked for, and an image (if any) with bytes
 * that were digested (a path image is read by the decoder: nothing to compare). */
bool dc_keyable(const struct dc_req *q) { return q->p.reuse_prefix && (!q->has_image || q->image_key[0]); }

/* The prefix forward (image pads filled from the tower), into a new sequence. */
static enum jev_status prefill(struct dc_req *q, struct jev_seq **out) {
    struct jev_decide_stats *st = &q->res->stats;
    if (q->image_deferred) {
        dc_image_from_kept(q); /* the same image bytes as the last request: its embeddings */
    } else if (q->has_image) {
        JEV_TRY(dc_image_encode(q));
        if (q->image_key[0])
            dc_image_keep(q);
    }
    struct jev_seq *prefix = NULL;
    JEV_TRY(dc_seq_new(q, &prefix));
    int32_t P = (int32_t)q->prefix.n, delta = 0;
    double t0 = jev_now_ms();
    JEV_TRY(dc_mrope(q, q->prefix.ids, P, &delta));
    for (int32_t at = 0; at < P;) {
        /* at most cap_tokens per forward call (the LM slices it further) */
        int32_t m = P - at < q->cap_tokens ? P - at : q->cap_tokens;
        dc_mrope_slice(q, P, at, m, q->pos);
        struct jev_lm_batch b = {.n_tokens = m,
                                 .ids = q->prefix.ids + at,
                                 .pos = q->pos,
                                 .embd_rows = q->has_image ? q->embd + at : NULL,
                                 .n_runs = 1,
                                 .seqs = &prefix,
                                 .seq_len = &m};
        JEV_TRY(dc_forward(q, &b));
        at += m;
    }
    prefix->rope_delta = delta; /* text after the image: position = index + delta */
    st->prefill_ms += jev_now_ms() - t0;
    *out = prefix;
    return JEV_OK;
}

enum jev_status dc_path_shared(struct dc_req *q) {
    struct jev_decide_stats *st = &q->res->stats;
    struct jev_decider *d = q->d;
    int32_t B = dc_batch_size(q), most = 1;
    JEV_TRY(dc_fit_batch(q, &B, dc_page_budget(q)));
    JEV_TRY(fit_slots(q, &B, &most));

    /* the prefix, once: a kept one when it is this request's, else a prefill (then kept) */
    char key[JEV_SHA256_HEX] = "";
    if (dc_keyable(q))
        dc_prefix_key(q, key);
    int32_t hit = key[0] ? dc_kept_find(d, key) : -1;
    struct jev_seq *prefix = hit >= 0 ? d->kept[hit].seq : NULL;
    /* room for this request's sequences beside the other kept prefixes: the least recent go back */
    while (most + dc_kept_count(d) - (hit >= 0 ? 1 : 0) > d->engine->state.max_seqs && dc_kept_evict(d, prefix))
        ;
    bool held = hit >= 0; /* the decider holds the prefix */
    if (held) {
        st->prefix_reused = true;
    } else {
        JEV_TRY(prefill(q, &prefix)); /* out of pages with prefixes kept: jev_decide_run drops them, runs again */
        if (key[0]) {                 /* out of the request's table: the decider holds it from now on */
            dc_seq_detach(q, prefix);
            dc_kept_put(d, prefix, key);
            held = true;
        }
    }

    /* the suffixes, B at a time */
    for (int32_t b0 = 0; b0 < q->r->n_questions; b0 += B) {
        int32_t n = q->r->n_questions - b0 < B ? q->r->n_questions - b0 : B;
        for (int32_t k = 0; k < n; k++)
            JEV_TRY(dc_seq_fork_question(q, prefix, b0 + k, &q->seqs[k]));
        double t1 = jev_now_ms();
        int32_t row = 0;
        for (int32_t k = 0; k < n; k++) {
            const struct jev_tokens *suf = &q->qs[b0 + k].suffix;
            int32_t len = (int32_t)suf->n;
            for (int32_t j = 0; j < len; j++)
                q->ids[row + j] = suf->ids[j];
            jev_lm_text_positions(q->seqs[k], len, q->pos + (int64_t)row * 3);
            q->seq_len[k] = len;
            row += len;
            q->out_idx[k] = row - 1; /* the answer position: the cue's last token */
        }
        struct jev_lm_batch b = {
            .n_tokens = row, .ids = q->ids, .pos = q->pos, .n_runs = n, .seqs = q->seqs, .seq_len = q->seq_len};
        dc_score_head(q, n, &b);
        JEV_TRY(dc_forward(q, &b));
        JEV_TRY(dc_score_read(q, b0, n, q->seqs));
        st->scoring_ms += jev_now_ms() - t1;
    }
    if (!held)
        dc_seq_release(q, prefix);
    return JEV_OK;
}

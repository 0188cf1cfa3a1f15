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
 * Forks (K/V shared read-only, the linear state copied) are outside the
 * phases, inside the total.
 *
 * No computation is shared between questions: each suffix runs on its own
 * fork even when two questions' texts are equal (benchmark.md).
 */
#include "decide/pipeline-int.h" // defines: struct dc_req

#include "base/timing.h" // defines: jev_now_ms

/* Refuses a batch whose forks would not fit the engine's sequence slots. */
static enum jev_status check_slots(struct dc_req *q, int32_t B) {
    const struct jev_state *st = &q->d->engine->state;
    for (int32_t b0 = 0; b0 < q->r->n_questions; b0 += B) {
        int32_t need = 1; /* the prefix */
        for (int32_t i = b0; i < b0 + B && i < q->r->n_questions; i++)
            need += 1 + q->qs[i].forks;
        if (need > st->max_seqs)
            return jev_fail(q->err, JEV_ERR_CONTEXT_FULL,
                            "decide: a batch of %d questions needs %d sequences at once, the engine holds %d "
                            "(max_batch %d); use a smaller batch or a larger engine",
                            B, need, st->max_seqs, st->max_seqs - 1);
    }
    return JEV_OK;
}

enum jev_status dc_path_shared(struct dc_req *q) {
    struct jev_decide_stats *st = &q->res->stats;
    int32_t B = dc_batch_size(q);
    JEV_TRY(check_slots(q, B));
    if (q->has_image)
        JEV_TRY(dc_image_encode(q));

    /* the prefix, once */
    struct jev_seq *prefix = NULL;
    JEV_TRY(dc_seq_new(q, &prefix));
    int32_t P = (int32_t)q->prefix.n, delta = 0;
    double t0 = jev_now_ms();
    JEV_TRY(dc_mrope(q, q->prefix.ids, P, &delta));
    for (int32_t at = 0; at < P;) {
        /* at most cap_tokens per forward call (the LM slices it further) */
        int32_t m = P - at < q->cap_tokens ? P - at : q->cap_tokens;
        dc_mrope_slice(q, P, at, m, q->pos);
        struct jev_lm_batch b = {.n_tokens = m, .ids = q->prefix.ids + at, .pos = q->pos,
                                 .embd_rows = q->has_image ? q->embd + at : NULL, .n_runs = 1, .seqs = &prefix,
                                 .seq_len = &m};
        JEV_TRY(dc_forward(q, &b));
        at += m;
    }
    prefix->rope_delta = delta; /* text after the image: position = index + delta */
    st->prefill_ms += jev_now_ms() - t0;

    /* the suffixes, B at a time */
    for (int32_t b0 = 0; b0 < q->r->n_questions; b0 += B) {
        int32_t n = q->r->n_questions - b0 < B ? q->r->n_questions - b0 : B;
        for (int32_t k = 0; k < n; k++)
            JEV_TRY(dc_seq_fork(q, prefix, &q->seqs[k]));
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
        struct jev_lm_batch b = {.n_tokens = row, .ids = q->ids, .pos = q->pos, .n_runs = n, .seqs = q->seqs,
                                 .seq_len = q->seq_len};
        dc_score_head(q, n, &b);
        JEV_TRY(dc_forward(q, &b));
        JEV_TRY(dc_score_read(q, b0, n, q->seqs));
        st->scoring_ms += jev_now_ms() - t1;
    }
    dc_seq_release(q, prefix);
    return JEV_OK;
}

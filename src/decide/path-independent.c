/*
 * path-independent.c - the independent (direct) path: every question is a
 * request of its own, nothing shared between questions.
 *
 * Per question: the image is decoded and preprocessed again (the first
 * question uses the decode made while preparing, which sized the prompt),
 * the vision tower runs, and one full forward of prefix + suffix reads the
 * candidate logits at the last position. Text mode then runs the question's
 * trie rounds on that sequence.
 *
 *   vision_ms   every tower forward (+ placing the embeddings)
 *   prefill_ms  every full prompt forward
 *   scoring_ms  reading the answers, and in text mode the trie rounds
 * Token ids are the ones the shared path uses (prefix ids ++ suffix ids).
 */
#include "decide/pipeline-int.h" // defines: struct dc_req

#include <string.h>

#include "base/timing.h" // defines: jev_now_ms

enum jev_status dc_path_independent(struct dc_req *q) {
    struct jev_decide_stats *st = &q->res->stats;
    int32_t P = (int32_t)q->prefix.n;
    const struct jev_state *ss = &q->d->engine->state;
    for (int32_t qi = 0; qi < q->r->n_questions; qi++) {
        if (1 + q->qs[qi].forks > ss->max_seqs)
            return jev_fail(q->err, JEV_ERR_CONTEXT_FULL,
                            "decide: question %s needs %d sequences at once, the engine holds %d",
                            q->r->questions[qi].id, 1 + q->qs[qi].forks, ss->max_seqs);
    }
    for (int32_t qi = 0; qi < q->r->n_questions; qi++) {
        if (q->has_image) {
            if (qi > 0) {
                JEV_TRY(dc_image_load(q));
                if (q->vin.size.n_tokens != q->n_img_tok)
                    return jev_fail(q->err, JEV_ERR_FORMAT, "image: decoded to %d tokens, first %d",
                                    q->vin.size.n_tokens, q->n_img_tok);
            }
            JEV_TRY(dc_image_encode(q));
        }
        const struct jev_tokens *suf = &q->qs[qi].suffix;
        int32_t n = P + (int32_t)suf->n, delta = 0;
        memcpy(q->ids, q->prefix.ids, (size_t)P * sizeof(int32_t));
        memcpy(q->ids + P, suf->ids, suf->n * sizeof(int32_t));
        struct jev_seq *seq = NULL;
        JEV_TRY(dc_seq_new(q, &seq));
        double t0 = jev_now_ms();
        JEV_TRY(dc_mrope(q, q->ids, n, &delta));
        dc_mrope_slice(q, n, 0, n, q->pos);
        struct jev_lm_batch b = {.n_tokens = n,
                                 .ids = q->ids,
                                 .pos = q->pos,
                                 .embd_rows = q->has_image ? q->embd : NULL,
                                 .n_runs = 1,
                                 .seqs = &seq,
                                 .seq_len = &n};
        q->out_idx[0] = n - 1;
        dc_score_head(q, 1, &b);
        JEV_TRY(dc_forward(q, &b));
        seq->rope_delta = delta;
        double t1 = jev_now_ms();
        st->prefill_ms += t1 - t0;
        JEV_TRY(dc_score_read(q, qi, 1, &seq));
        st->scoring_ms += jev_now_ms() - t1;
    }
    return JEV_OK;
}

/*
 * path-generate.c - generate_json: the model writes one compact JSON object
 * mapping every question id to an option id, greedily, and the output is
 * checked strictly (decide/genjson.h). No grammar, no repair, no retries;
 * the raw text is kept whether it is valid or not.
 *
 *   vision_ms   the tower (+ placing the embeddings)
 *   prefill_ms  the prompt (prefix ++ genjson suffix) in chunks of
 *               p.prefill_chunk tokens, one forward each; the last gives
 *               the first new token's logits
 *   scoring_ms  the decode forwards (one token each, full-vocabulary
 *               logits, argmax), until an EOS id of the model or the budget
 *               max(128, 24 x questions) (or p.max_new_tokens)
 * The output text is the tokenizer's decode of the new ids (EOS excluded,
 * special tokens kept); an id the tokenizer has no token for (a synthetic
 * model's vocabulary is larger than the stand-in tokenizer's) is dropped, as
 * `tokenizers` drops it (docs/bench-inputs.md).
 */
#include "decide/pipeline-int.h" // defines: struct dc_req

#include <stdlib.h>
#include <string.h>

#include "base/timing.h" // defines: jev_now_ms

static int32_t argmax_row(const float *x, int64_t n) {
    int32_t best = 0;
    for (int64_t i = 1; i < n; i++)
        if (x[i] > x[best])
            best = (int32_t)i;
    return best;
}

static bool is_eos(const struct jev_config *c, int32_t id) {
    for (int32_t i = 0; i < c->ids.n_eos; i++)
        if (c->ids.eos[i] == id)
            return true;
    return false;
}

/*
 * The text of the generated ids: the tokenizer's decode (special tokens
 * kept, ill-formed UTF-8 as U+FFFD), dropping the ids it has no token for -
 * what `tokenizers` does, so a peer's raw output compares byte for byte.
 */
static enum jev_status render(const struct jev_tokenizer *tok, const int32_t *ids, int32_t n, char **text, size_t *len,
                              struct jev_error *err) {
    int32_t *known = malloc((size_t)(n > 0 ? n : 1) * sizeof(int32_t));
    if (!known)
        return jev_fail(err, JEV_ERR_NOMEM, "out of memory for the generated text");
    int32_t k = 0;
    for (int32_t i = 0; i < n; i++) {
        size_t l = 0;
        if (jev_tokenizer_piece(tok, ids[i], &l))
            known[k++] = ids[i];
    }
    enum jev_status s = jev_tokenizer_decode(tok, known, (size_t)k, 0, text, len, err);
    free(known);
    return s;
}

enum jev_status dc_path_generate(struct dc_req *q) {
    struct jev_decide_stats *st = &q->res->stats;
    const struct jev_config *cfg = &q->d->model->config;
    if (q->has_image)
        JEV_TRY(dc_image_encode(q));
    int32_t budget = q->p.max_new_tokens > 0 ? q->p.max_new_tokens : jev_genjson_max_tokens(q->r->n_questions);
    int32_t P = (int32_t)q->prefix.n, G = (int32_t)q->gen.n, n = P + G;
    if ((int64_t)n + budget > q->d->engine->params.max_tokens)
        return jev_fail(q->err, JEV_ERR_CONTEXT_FULL,
                        "decide: generate_json needs %d prompt + %d new tokens, the engine holds %d per sequence", n,
                        budget, q->d->engine->params.max_tokens);
    /* the whole prompt, and the generated ids, sized before any forward */
    int32_t *prompt = malloc((size_t)n * sizeof(int32_t));
    int32_t *out = malloc((size_t)budget * sizeof(int32_t));
    if (!prompt || !out) {
        free(prompt);
        free(out);
        return jev_fail(q->err, JEV_ERR_NOMEM, "out of memory for a %d-token prompt", n);
    }
    memcpy(prompt, q->prefix.ids, (size_t)P * sizeof(int32_t));
    memcpy(prompt + P, q->gen.ids, (size_t)G * sizeof(int32_t));
    enum jev_status s = JEV_OK;
    struct jev_seq *seq = NULL;
    int32_t delta = 0, n_out = 0;
    double t0 = jev_now_ms();
    s = dc_seq_new(q, &seq);
    if (s == JEV_OK)
        s = dc_mrope(q, prompt, n, &delta);
    /* prefill in chunks; logits of the last prompt token */
    for (int32_t at = 0; s == JEV_OK && at < n;) {
        int32_t m = n - at < q->p.prefill_chunk ? n - at : q->p.prefill_chunk;
        dc_mrope_slice(q, n, at, m, q->pos);
        bool last = at + m == n;
        q->out_idx[0] = m - 1;
        struct jev_lm_batch b = {.n_tokens = m,
                                 .ids = prompt + at,
                                 .pos = q->pos,
                                 .embd_rows = q->has_image ? q->embd + at : NULL,
                                 .n_runs = 1,
                                 .seqs = &seq,
                                 .seq_len = &m,
                                 .n_out = last ? 1 : 0,
                                 .out_idx = q->out_idx,
                                 .logits = q->logits};
        s = dc_forward(q, &b);
        at += m;
    }
    if (s == JEV_OK)
        seq->rope_delta = delta;
    double t1 = jev_now_ms();
    st->prefill_ms += t1 - t0;
    /* greedy decode: the argmax over the full vocabulary, until EOS or the budget */
    while (s == JEV_OK) {
        int32_t next = argmax_row(q->logits, q->n_vocab);
        if (is_eos(cfg, next))
            break;
        out[n_out++] = next;
        if (n_out == budget)
            break;
        int32_t one = 1;
        jev_lm_text_positions(seq, 1, q->pos);
        q->out_idx[0] = 0;
        struct jev_lm_batch b = {.n_tokens = 1,
                                 .ids = &out[n_out - 1],
                                 .pos = q->pos,
                                 .n_runs = 1,
                                 .seqs = &seq,
                                 .seq_len = &one,
                                 .n_out = 1,
                                 .out_idx = q->out_idx,
                                 .logits = q->logits};
        s = dc_forward(q, &b);
    }
    st->scoring_ms += jev_now_ms() - t1;
    st->output_tokens = n_out;
    st->prompt_tokens = n;
    dc_seq_release(q, seq);
    char *text = NULL;
    size_t len = 0;
    if (s == JEV_OK)
        s = render(q->d->tok, out, n_out, &text, &len, q->err);
    if (s == JEV_OK)
        s = jev_genjson_check(q->r, text, len, &q->res->gen, q->err);
    free(text);
    free(prompt);
    if (s == JEV_OK) {
        q->res->gen_ids = out; /* the result keeps the ids (peers compare ids, not text) */
        q->res->n_gen_ids = n_out;
    } else {
        free(out);
    }
    if (s != JEV_OK)
        return s;
    q->res->generated = true;
    q->res->valid = q->res->gen.valid;
    /* a valid output answers every question with certainty */
    if (q->res->valid)
        for (int32_t i = 0; i < q->r->n_questions; i++) {
            double probs[JEV_DECIDE_MAX_OPTIONS] = {0};
            probs[q->res->gen.choice[i]] = 1.0;
            jev_answer_set_probs(&q->res->answers.items[i], probs);
        }
    return JEV_OK;
}

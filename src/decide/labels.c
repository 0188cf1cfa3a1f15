/*
 * labels.c - building and checking the single-token label sets, and reading
 * option distributions from label logits (see labels.h).
 */
#include "decide/labels.h" // defines: struct jev_labels

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "decide/answer.h"     // defines: jev_softmax
#include "decide/labels-int.h" // defines: struct dc_label_ctx
#include "decide/qtype.h"      // defines: jev_qtype_get

/* ---- checking one label (labels-int.h) ---- */

/*
 * Two encodings must agree: the text alone is one token, and the cue
 * followed by the text is the cue's own tokens plus that same token (so no
 * merge crosses the cue's end and the model reads exactly this token at the
 * answer position).
 */
int32_t dc_label_token(const struct dc_label_ctx *c, const char *text) {
    int32_t ids[4];
    if (c->enc(c->enc_ctx, text, ids, 4) != 1)
        return -1;
    if (c->cue[0] == '\0')
        return ids[0];
    char joint[JEV_LABEL_CUE_MAX + JEV_LABEL_TEXT_MAX];
    snprintf(joint, sizeof joint, "%s%s", c->cue, text);
    int32_t jids[DC_CUE_TOKENS_MAX + 2];
    int nj = c->enc(c->enc_ctx, joint, jids, DC_CUE_TOKENS_MAX + 2);
    if (nj != c->n_cue + 1 || memcmp(jids, c->cue_ids, (size_t)c->n_cue * sizeof(int32_t)) != 0 ||
        jids[c->n_cue] != ids[0])
        return -1;
    return ids[0];
}

bool dc_label_id_used(const struct jev_label *set, int32_t n, int32_t id) {
    for (int32_t i = 0; i < n; i++)
        for (int32_t v = 0; v < set[i].n_ids; v++)
            if (set[i].ids[v] == id)
                return true;
    return false;
}

enum jev_status dc_label_must(struct jev_label *dst, const struct jev_label *set, int32_t n_set,
                              const struct dc_label_ctx *c, const char *text, const char *alias, const char *what,
                              struct jev_error *err) {
    int32_t id = dc_label_token(c, text);
    if (id < 0)
        return jev_fail(err, JEV_ERR_FORMAT, "labels: the %s label \"%s\" is not exactly one token after the cue", what,
                        text);
    if (dc_label_id_used(set, n_set, id))
        return jev_fail(err, JEV_ERR_FORMAT, "labels: the %s label \"%s\" shares its token %d with another label", what,
                        text, id);
    snprintf(dst->text, sizeof dst->text, "%s", text);
    dst->ids[0] = id;
    dst->n_ids = 1;
    if (alias) {
        int32_t aid = dc_label_token(c, alias);
        if (aid >= 0 && aid != id && !dc_label_id_used(set, n_set, aid))
            dst->ids[dst->n_ids++] = aid;
    }
    return JEV_OK;
}

/* ---- building the sets ---- */

/*
 * Each type builds its own set (its labels_build slot: qtype-*.c), in enum
 * order. The candidate orders are fixed and checked one by one, so the
 * result depends only on the tokenizer and the cue: the same model always
 * gives option i the same label, which keeps answers comparable across
 * requests.
 */
enum jev_status jev_labels_build(struct jev_labels *out, jev_encode_fn enc, void *ctx, const char *cue,
                                 struct jev_error *err) {
    memset(out, 0, sizeof *out);
    if (cue == NULL)
        cue = "";
    if (strlen(cue) >= JEV_LABEL_CUE_MAX)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "labels: the cue is %zu bytes (the limit is %d)", strlen(cue),
                        JEV_LABEL_CUE_MAX - 1);
    snprintf(out->cue, sizeof out->cue, "%s", cue);
    struct dc_label_ctx c = {.enc = enc, .enc_ctx = ctx, .cue = out->cue};
    if (cue[0]) {
        c.n_cue = enc(ctx, cue, c.cue_ids, DC_CUE_TOKENS_MAX);
        if (c.n_cue <= 0 || c.n_cue > DC_CUE_TOKENS_MAX)
            return jev_fail(err, JEV_ERR_FORMAT, "labels: the cue encodes to %d tokens (1 to %d)", c.n_cue,
                            DC_CUE_TOKENS_MAX);
    }
    for (int32_t t = 0; t < JEV_QTYPE_COUNT; t++)
        JEV_TRY(jev_qtype_get((enum jev_qtype)t)->labels_build(out, &c, err));
    return JEV_OK;
}

/* ---- using the sets ---- */

/* Only a set smaller than the option limit can run out (choice: the tokenizer's
 * single-token labels; noul's 2 and score's 10 are the parsers' limits too). */
enum jev_status jev_labels_check(const struct jev_labels *l, const struct jev_question *q, struct jev_error *err) {
    int32_t n;
    jev_qtype_get(q->type)->label_set(l, &n);
    if (q->n_options > n)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "questions.%s.criteria: %d options, but this tokenizer has only %d single-token labels "
                        "(the label-mode limit); use text-mode scoring",
                        q->id, q->n_options, n);
    return JEV_OK;
}

static const struct jev_label *label_of(const struct jev_labels *l, enum jev_qtype t, int32_t i) {
    int32_t n;
    const struct jev_label *set = jev_qtype_get(t)->label_set(l, &n);
    return i >= 0 && i < n ? &set[i] : NULL;
}

const char *jev_labels_text(const struct jev_labels *l, enum jev_qtype t, int32_t i) {
    const struct jev_label *x = label_of(l, t, i);
    return x ? x->text : NULL;
}

/* Variants stay next to their option so owner[] reads as runs. */
int32_t jev_labels_ids(const struct jev_labels *l, const struct jev_question *q, int32_t *ids, int32_t *owner,
                       int32_t cap) {
    if (q->n_options > 0 && label_of(l, q->type, q->n_options - 1) == NULL)
        return -1; /* more options than labels: nothing written */
    int32_t n = 0;
    for (int32_t i = 0; i < q->n_options; i++) {
        const struct jev_label *x = label_of(l, q->type, i);
        for (int32_t v = 0; v < x->n_ids; v++) {
            JEV_ASSERT(n < cap);
            ids[n] = x->ids[v];
            owner[n] = i;
            n++;
        }
    }
    return n;
}

void jev_labels_probs(int32_t n_options, const int32_t *owner, const float *logits, int32_t n_ids, double *probs) {
    /* per option: logsumexp over its variants, in double */
    for (int32_t i = 0; i < n_options; i++)
        probs[i] = -(double)INFINITY;
    for (int32_t k = 0; k < n_ids; k++) {
        double x = (double)logits[k], *acc = &probs[owner[k]];
        if (isnan(x) || x == -(double)INFINITY)
            continue;
        if (*acc == -(double)INFINITY)
            *acc = x;
        else {
            double hi = x > *acc ? x : *acc, lo = x > *acc ? *acc : x;
            *acc = hi + log1p(exp(lo - hi));
        }
    }
    jev_softmax(probs, n_options, probs);
}

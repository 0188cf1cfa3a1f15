/*
 * labels.c - building and checking the single-token label sets, and reading
 * option distributions from label logits (see labels.h).
 */
#include "decide/labels.h" // defines: struct jev_labels

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "decide/answer.h" // defines: jev_softmax

/* ---- checking one label ---- */

/* Most tokens of a cue we compare; a cue is a short text ("\n\n", "Answer:"). */
#define CUE_TOKENS_MAX 64

/*
 * The one token `text` becomes after the cue, or -1. Two encodings must
 * agree: the text alone is one token, and the cue followed by the text is
 * the cue's own tokens plus that same token (so no merge crosses the cue's
 * end and the model reads exactly this token at the answer position).
 */
static int32_t single_token(jev_encode_fn enc, void *ctx, const char *cue, const int32_t *cue_ids, int n_cue,
                            const char *text) {
    int32_t ids[4];
    if (enc(ctx, text, ids, 4) != 1)
        return -1;
    if (cue[0] == '\0')
        return ids[0];
    char joint[JEV_LABEL_CUE_MAX + JEV_LABEL_TEXT_MAX];
    snprintf(joint, sizeof joint, "%s%s", cue, text);
    int32_t jids[CUE_TOKENS_MAX + 2];
    int nj = enc(ctx, joint, jids, CUE_TOKENS_MAX + 2);
    if (nj != n_cue + 1 || memcmp(jids, cue_ids, (size_t)n_cue * sizeof(int32_t)) != 0 || jids[n_cue] != ids[0])
        return -1;
    return ids[0];
}

/* Whether any variant of the first n labels of a set already uses token id. */
static bool id_used(const struct jev_label *set, int32_t n, int32_t id) {
    for (int32_t i = 0; i < n; i++)
        for (int32_t v = 0; v < set[i].n_ids; v++)
            if (set[i].ids[v] == id)
                return true;
    return false;
}

/* ---- building the sets ---- */

/* The fixed candidate order for choice labels: A..Z, AA..ZZ, a..z, 0..9. */
static int32_t choice_candidate(int32_t k, char out[JEV_LABEL_TEXT_MAX]) {
    if (k < 26) {
        out[0] = (char)('A' + k);
        out[1] = '\0';
    } else if (k < 26 + 26 * 26) {
        out[0] = (char)('A' + (k - 26) / 26);
        out[1] = (char)('A' + (k - 26) % 26);
        out[2] = '\0';
    } else if (k < 26 + 676 + 26) {
        out[0] = (char)('a' + (k - 26 - 676));
        out[1] = '\0';
    } else if (k < 26 + 676 + 26 + 10) {
        out[0] = (char)('0' + (k - 26 - 676 - 26));
        out[1] = '\0';
    } else {
        return 0; /* no more candidates */
    }
    return 1;
}

/* A label that must be valid (noul, score); the alias is optional. */
static enum jev_status must_label(struct jev_label *dst, const struct jev_label *set, int32_t n_set, jev_encode_fn enc,
                                  void *ctx, const char *cue, const int32_t *cue_ids, int n_cue, const char *text,
                                  const char *alias, const char *what, struct jev_error *err) {
    int32_t id = single_token(enc, ctx, cue, cue_ids, n_cue, text);
    if (id < 0)
        return jev_fail(err, JEV_ERR_FORMAT, "labels: the %s label \"%s\" is not exactly one token after the cue", what,
                        text);
    if (id_used(set, n_set, id))
        return jev_fail(err, JEV_ERR_FORMAT, "labels: the %s label \"%s\" shares its token %d with another label", what,
                        text, id);
    snprintf(dst->text, sizeof dst->text, "%s", text);
    dst->ids[0] = id;
    dst->n_ids = 1;
    if (alias) {
        int32_t aid = single_token(enc, ctx, cue, cue_ids, n_cue, alias);
        if (aid >= 0 && aid != id && !id_used(set, n_set, aid))
            dst->ids[dst->n_ids++] = aid;
    }
    return JEV_OK;
}

/*
 * The candidate order is fixed and checked one by one, so the result depends
 * only on the tokenizer and the cue: the same model always gives option i
 * the same label, which keeps answers comparable across requests.
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
    int32_t cue_ids[CUE_TOKENS_MAX];
    int n_cue = 0;
    if (cue[0]) {
        n_cue = enc(ctx, cue, cue_ids, CUE_TOKENS_MAX);
        if (n_cue <= 0 || n_cue > CUE_TOKENS_MAX)
            return jev_fail(err, JEV_ERR_FORMAT, "labels: the cue encodes to %d tokens (1 to %d)", n_cue,
                            CUE_TOKENS_MAX);
    }

    /* choice: the fixed order, keeping what passes */
    char text[JEV_LABEL_TEXT_MAX];
    for (int32_t k = 0; out->n_choice < JEV_DECIDE_MAX_OPTIONS && choice_candidate(k, text); k++) {
        int32_t id = single_token(enc, ctx, cue, cue_ids, n_cue, text);
        if (id < 0 || id_used(out->choice, out->n_choice, id))
            continue;
        struct jev_label *l = &out->choice[out->n_choice++];
        snprintf(l->text, sizeof l->text, "%s", text);
        l->ids[0] = id;
        l->n_ids = 1;
    }
    if (out->n_choice == 0)
        return jev_fail(err, JEV_ERR_FORMAT, "labels: no choice label is one token after the cue");

    /* noul: yes / no, with their capitalised aliases */
    JEV_TRY(must_label(&out->noul[0], out->noul, 0, enc, ctx, cue, cue_ids, n_cue, "yes", "Yes", "noul", err));
    JEV_TRY(must_label(&out->noul[1], out->noul, 1, enc, ctx, cue, cue_ids, n_cue, "no", "No", "noul", err));

    /* score: the digits */
    for (int32_t i = 0; i < JEV_DECIDE_MAX_LEVELS; i++) {
        char d[2] = {(char)('0' + i), '\0'};
        JEV_TRY(must_label(&out->score[i], out->score, i, enc, ctx, cue, cue_ids, n_cue, d, NULL, "score", err));
    }
    return JEV_OK;
}

/* ---- using the sets ---- */

/* Only choice can run out of labels (noul has 2, score at most 10). */
enum jev_status jev_labels_check(const struct jev_labels *l, const struct jev_question *q, struct jev_error *err) {
    if (q->type == JEV_QTYPE_CHOICE && q->n_options > l->n_choice)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "questions.%s.criteria: %d options, but this tokenizer has only %d single-token labels "
                        "(the label-mode limit); use text-mode scoring",
                        q->id, q->n_options, l->n_choice);
    return JEV_OK;
}

static const struct jev_label *label_of(const struct jev_labels *l, enum jev_qtype t, int32_t i) {
    switch (t) {
    case JEV_QTYPE_NOUL: return i < 2 ? &l->noul[i] : NULL;
    case JEV_QTYPE_CHOICE: return i < l->n_choice ? &l->choice[i] : NULL;
    case JEV_QTYPE_SCORE: return i < JEV_DECIDE_MAX_LEVELS ? &l->score[i] : NULL;
    }
    return NULL;
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

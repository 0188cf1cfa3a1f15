/*
 * qtype-score.c - the score question type: ordered levels 0..N-1, lowest
 * first, N in 2..10; the answer is the expected level.
 *
 * Its slots (qtype.h): the caller gives the levels (their keys are the
 * digits); the labels are the digits 0..9; the prompt lists the levels
 * ("0. text - desc", "0." for an undescribed one), the same in label and
 * text mode; the text-mode candidate is the digit. Not here: criteria /
 * levels parsing and the answer objects (wire/qtype-wire-score.c).
 */
#include "decide/qtype.h" // defines: struct jev_qtype_ops

#include <stdio.h>

#include "decide/labels-int.h" // defines: dc_label_must
#include "decide/prompt-int.h" // defines: dc_prompt_*

/* Level i is labelled by the digit i; every digit must be one token. */
static enum jev_status score_labels_build(struct jev_labels *out, const struct dc_label_ctx *c, struct jev_error *err) {
    for (int32_t i = 0; i < JEV_DECIDE_MAX_LEVELS; i++) {
        char d[2] = {(char)('0' + i), '\0'};
        JEV_TRY(dc_label_must(&out->score[i], out->score, i, c, d, NULL, "score", err));
    }
    return JEV_OK;
}

static const struct jev_label *score_label_set(const struct jev_labels *l, int32_t *n) {
    *n = JEV_DECIDE_MAX_LEVELS;
    return l->score;
}

/* "Levels, lowest first:", one line per level (System One: "0. level text"; OpenAI: "0. label -
 * description"; an undescribed level: "0."), and the instruction to answer with the number. */
static void score_render(struct jev_prompt *p, const struct jev_question *q, const struct jev_labels *labels) {
    dc_prompt_tmpl(p, "Levels, lowest first:\n");
    for (int32_t i = 0; i < q->n_options; i++) {
        const struct jev_option *o = &q->options[i];
        dc_prompt_tmpl(p, labels ? jev_labels_text(labels, q->type, i) : o->key);
        dc_prompt_tmpl(p, o->text || dc_prompt_has_desc(o->desc) ? ". " : "."); /* an undescribed level: its number */
        dc_prompt_user(p, o->text, true);
        dc_prompt_desc_tail(p, o->desc, o->text ? " - " : "");
        dc_prompt_tmpl(p, "\n");
    }
    dc_prompt_tmpl(p, "Answer with the level's number from the given levels directly.");
}

/* "2.417": the expected level is the answer, not the most likely one. */
static void score_summary(const struct jev_question *q, const struct jev_answer *a, char *buf, size_t cap) {
    (void)q;
    snprintf(buf, cap, "%.3f", a->score);
}

/* The expected level sum_i i p_i; llama.cpp's confidence rule (answer.h). */
static void score_answer(struct jev_answer *a) {
    a->score = jev_score_expected(a->probs, a->n);
    a->confidence = jev_confidence_score(a->probs, a->n);
}

const struct jev_qtype_ops jev_qtype_score = {
    .type = JEV_QTYPE_SCORE,
    .none = JEV_QSLOT_BIT(JEV_QSLOT_FIXED_OPTIONS),
    .caller_keys = false, /* the digits are jev's */
    .name = "score",
    .fixed_options = NULL, /* none: the caller gives the levels */
    .candidate = jev_qtype_candidate_key,
    .summary = score_summary,
    .labels_build = score_labels_build,
    .label_set = score_label_set,
    .render = score_render,
    .render_genjson = dc_prompt_genjson_ids,
    .answer = score_answer,
};

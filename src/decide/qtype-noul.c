/*
 * qtype-noul.c - the noul (yes/no) question type: two fixed options, yes
 * (System One criteria "true") and no ("false"); the answer is P(yes).
 *
 * Its slots (qtype.h): the options are fixed; the labels are "yes" / "no"
 * with the aliases "Yes" / "No"; the prompt shows the outcome descriptions
 * that were given and Qwen-VL's yes/no instruction, the same in label and
 * text mode; the text-mode candidates are the keys. Not here: the wire's
 * "predicate" name and the answer objects (wire/qtype-wire-noul.c).
 */
#include "decide/qtype.h" // defines: struct jev_qtype_ops

#include "decide/labels-int.h" // defines: dc_label_must
#include "decide/prompt-int.h" // defines: dc_prompt_*

/* Option 0 is yes: criteria "true", P(yes) = probs[0]. */
static void noul_fixed_options(struct jev_question *q) {
    q->n_options = 2;
    q->options[0].key = q->options[0].text = "yes";
    q->options[1].key = q->options[1].text = "no";
}

/* yes / no, each with its capitalised alias read too (its mass added). */
static enum jev_status noul_labels_build(struct jev_labels *out, const struct dc_label_ctx *c, struct jev_error *err) {
    JEV_TRY(dc_label_must(&out->noul[0], out->noul, 0, c, "yes", "Yes", "noul", err));
    return dc_label_must(&out->noul[1], out->noul, 1, c, "no", "No", "noul", err);
}

static const struct jev_label *noul_label_set(const struct jev_labels *l, int32_t *n) {
    *n = 2;
    return l->noul;
}

/* The outcome descriptions, when given, as "yes: ..." / "no: ..."; the instruction is Qwen-VL's
 * yes/no phrasing. */
static void noul_render(struct jev_prompt *p, const struct jev_question *q, const struct jev_labels *labels) {
    for (int32_t i = 0; i < 2; i++) {
        if (!dc_prompt_has_desc(q->options[i].desc))
            continue;
        dc_prompt_tmpl(p, labels ? jev_labels_text(labels, q->type, i) : q->options[i].key);
        dc_prompt_tmpl(p, ": ");
        dc_prompt_user_value(p, q->options[i].desc, true);
        dc_prompt_tmpl(p, "\n");
    }
    dc_prompt_tmpl(p, "Please answer yes or no.");
}

/* The score is P(yes); the confidence (not sent on the wire) is the choice formula with k = 2. */
static void noul_answer(struct jev_answer *a) {
    a->score = a->probs[0];
    a->confidence = jev_confidence_choice(a->probs, a->n);
}

const struct jev_qtype_ops jev_qtype_noul = {
    .type = JEV_QTYPE_NOUL,
    .none = 0,
    .caller_keys = false, /* "yes" / "no" are jev's */
    .name = "noul",
    .fixed_options = noul_fixed_options,
    .candidate = jev_qtype_candidate_key,
    .summary = jev_qtype_summary_winner,
    .labels_build = noul_labels_build,
    .label_set = noul_label_set,
    .render = noul_render,
    .render_genjson = dc_prompt_genjson_ids,
    .answer = noul_answer,
};

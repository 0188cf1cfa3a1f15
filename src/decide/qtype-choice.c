/*
 * qtype-choice.c - the choice question type: one of 1..255 named options;
 * the answer is the argmax, ties to the first in request order.
 *
 * Its slots (qtype.h): the caller gives the options (their keys are the
 * caller's names); the labels are A..Z, AA..ZZ, a..z, 0..9, as many as are
 * one token; the prompt lists the options ("A. text - desc" in label mode,
 * "- text - desc" in text mode) with Qwen-VL's multiple-choice instruction;
 * the text-mode candidate is the option's text. Not here: criteria / choices
 * parsing and the answer objects (wire/qtype-wire-choice.c).
 */
#include "decide/qtype.h" // defines: struct jev_qtype_ops

#include <stdio.h>

#include "decide/labels-int.h" // defines: dc_label_token
#include "decide/prompt-int.h" // defines: dc_prompt_*

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

/* The fixed order, keeping what passes: option i always gets the same label, whatever the option
 * count. Only an empty set fails; a short one limits label mode (jev_labels_check). */
static enum jev_status choice_labels_build(struct jev_labels *out, const struct dc_label_ctx *c,
                                           struct jev_error *err) {
    char text[JEV_LABEL_TEXT_MAX];
    for (int32_t k = 0; out->n_choice < JEV_DECIDE_MAX_OPTIONS && choice_candidate(k, text); k++) {
        int32_t id = dc_label_token(c, text);
        if (id < 0 || dc_label_id_used(out->choice, out->n_choice, id))
            continue;
        struct jev_label *l = &out->choice[out->n_choice++];
        snprintf(l->text, sizeof l->text, "%s", text);
        l->ids[0] = id;
        l->n_ids = 1;
    }
    if (out->n_choice == 0)
        return jev_fail(err, JEV_ERR_FORMAT, "labels: no choice label is one token after the cue");
    return JEV_OK;
}

static const struct jev_label *choice_label_set(const struct jev_labels *l, int32_t *n) {
    *n = l->n_choice;
    return l->choice;
}

/* "Options:", one line per option, and the instruction: Qwen-VL's multiple-choice phrasing with
 * labels, "exactly as written" without (the option text is the answer). */
static void choice_render(struct jev_prompt *p, const struct jev_question *q, const struct jev_labels *labels) {
    dc_prompt_tmpl(p, "Options:\n");
    for (int32_t i = 0; i < q->n_options; i++) {
        const struct jev_option *o = &q->options[i];
        if (labels) {
            dc_prompt_tmpl(p, jev_labels_text(labels, q->type, i));
            dc_prompt_tmpl(p, ". ");
        } else {
            dc_prompt_tmpl(p, "- ");
        }
        dc_prompt_user(p, o->text, true);
        dc_prompt_desc_tail(p, o->desc, " - ");
        dc_prompt_tmpl(p, "\n");
    }
    dc_prompt_tmpl(p, labels ? "Answer with the option's letter from the given choices directly."
                             : "Answer with one of the options exactly as written.");
}

/* What the model read as the option: its text ("A dog"), the key when it has none. */
static const char *choice_candidate_text(const struct jev_option *o) { return o->text ? o->text : o->key; }

/* The score is the winner's probability; confidence clip((k p_max - 1)/(k - 1), 0, 1). */
static void choice_answer(struct jev_answer *a) {
    a->score = a->probs[a->winner];
    a->confidence = jev_confidence_choice(a->probs, a->n);
}

const struct jev_qtype_ops jev_qtype_choice = {
    .type = JEV_QTYPE_CHOICE,
    .none = JEV_QSLOT_BIT(JEV_QSLOT_FIXED_OPTIONS),
    .caller_keys = true, /* the option names */
    .name = "choice",
    .fixed_options = NULL, /* none: the caller names the options */
    .candidate = choice_candidate_text,
    .summary = jev_qtype_summary_winner,
    .labels_build = choice_labels_build,
    .label_set = choice_label_set,
    .render = choice_render,
    .render_genjson = dc_prompt_genjson_ids,
    .answer = choice_answer,
};

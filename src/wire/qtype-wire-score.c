/*
 * qtype-wire-score.c - the score question type on the wire
 * (wire/qtype-wire.h): System One criteria [level text or null, ...],
 * OpenAI levels [{label, description?}], lowest first; the answer is the
 * expected level with the legend (System One) or the labels (OpenAI).
 *
 * Not here: the digits as labels, the prompt, the math (decide/qtype-score.c).
 */
#include "wire/qtype-wire.h" // defines: struct jev_qtype_wire

#include "wire/request-internal.h"  // defines: jev_rq_*
#include "wire/response-internal.h" // defines: jev_resp_*

/* ---- System One ---- */

static int64_t score_s1_count(json_t *criteria) {
    return json_is_array(criteria) ? (int64_t)json_array_size(criteria) : 0;
}

/*
 * Level i is criteria[i], lowest first; its key is the digit the model reads.
 * A null level is an undescribed one (the model reads its number alone, the
 * legend echoes null), as a null choice description is: the TypeSafe SDK's
 * score() helper documents "entries may be null" and sends them (spec §2.2).
 */
static enum jev_status score_s1_parse(struct jev_question *q, json_t *crit, const char *path,
                                      struct jev_request_error *e) {
    const char *want = "an array of 2 to 10 level descriptions, lowest first";
    if (crit == NULL || json_is_null(crit))
        return jev_rq_fail(e, 422, path, "missing: a score question needs criteria, %s", want);
    if (!json_is_array(crit))
        return jev_rq_fail(e, 422, path, "must be %s", want);
    size_t n = json_array_size(crit);
    if (n < JEV_DECIDE_MIN_LEVELS || n > JEV_DECIDE_MAX_LEVELS)
        return jev_rq_fail(e, 422, path, "has %zu level%s (a score needs %d to %d)", n, n == 1 ? "" : "s",
                           JEV_DECIDE_MIN_LEVELS, JEV_DECIDE_MAX_LEVELS);
    size_t i;
    json_t *v;
    json_array_foreach(crit, i, v) {
        char p[400];
        jev_rq_path(p, sizeof p, "%s[%zu]", path, i);
        q->options[i].key = jev_rq_level_keys[i];
        if (json_is_null(v)) {
            q->options[i].value = v; /* legend: null, desc: none */
            continue;
        }
        if (json_is_string(v) && jev_rq_blank(json_string_value(v)))
            return jev_rq_fail(e, 422, p, "a level must not be empty");
        JEV_TRY(jev_rq_check_depth(v, p, e));
        q->options[i].desc = v;
        q->options[i].value = v;
    }
    q->n_options = (int32_t)n;
    return JEV_OK;
}

/* {"type":"score","score":s,"legend":{"0":level,...},"probabilities":{"0":p,...},"confidence":c};
 * the legend echoes each level as given (null stays null), the OpenAI label otherwise. */
static void score_s1_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    jev_jsonw_raw(w, ",\"score\":");
    jev_jsonw_double(w, a->score);
    jev_jsonw_raw(w, ",\"legend\":{");
    for (int32_t j = 0; j < q->n_options; j++) {
        if (j)
            jev_jsonw_raw(w, ",");
        jev_jsonw_str(w, q->options[j].key);
        jev_jsonw_raw(w, ":");
        if (q->options[j].value)
            jev_jsonw_value(w, q->options[j].value);
        else
            jev_jsonw_str(w, q->options[j].text ? q->options[j].text : q->options[j].key);
    }
    jev_jsonw_raw(w, "}");
    jev_resp_s1_probs_confidence(w, q, a);
}

/* ---- OpenAI ---- */

static int64_t score_oa_count(json_t *options) {
    return json_is_array(options) ? (int64_t)json_array_size(options) : 0;
}

/* levels[i] is level i; the label is what the model reads and the answer echoes. */
static enum jev_status score_oa_parse(struct jev_question *q, json_t *ls, const char *path,
                                      struct jev_request_error *e) {
    if (ls == NULL || json_is_null(ls))
        return jev_rq_fail(e, 422, path,
                           "missing: a score question needs levels, an array of 2 to 10 "
                           "{\"label\", \"description\"}, lowest first");
    if (!json_is_array(ls))
        return jev_rq_fail(e, 422, path, "must be an array of {\"label\", \"description\"}, lowest first");
    size_t n = json_array_size(ls);
    if (n < JEV_DECIDE_MIN_LEVELS || n > JEV_DECIDE_MAX_LEVELS)
        return jev_rq_fail(e, 422, path, "has %zu level%s (a score needs %d to %d)", n, n == 1 ? "" : "s",
                           JEV_DECIDE_MIN_LEVELS, JEV_DECIDE_MAX_LEVELS);
    static const char *const allowed[] = {"label", "description", NULL};
    size_t i;
    json_t *l;
    json_array_foreach(ls, i, l) {
        char p[400];
        jev_rq_path(p, sizeof p, "%s[%zu]", path, i);
        if (!json_is_object(l))
            return jev_rq_fail(e, 422, p, "must be an object {\"label\", \"description\"}");
        JEV_TRY(jev_rq_only_fields(l, p, allowed, "label, description", e));
        json_t *lab = json_object_get(l, "label");
        if (!json_is_string(lab) || json_string_length(lab) == 0)
            return jev_rq_fail(e, 422, p, "label must be a non-empty string");
        q->options[i].key = jev_rq_level_keys[i];
        q->options[i].text = json_string_value(lab);
        q->options[i].value = lab;
        JEV_TRY(jev_rq_desc(l, p, &q->options[i].desc, e));
    }
    q->n_options = (int32_t)n;
    return JEV_OK;
}

/* A probabilities entry: the level's index and its label. */
static void score_oa_entry(struct jev_jsonw *w, const struct jev_question *q, int32_t j) {
    const struct jev_option *o = &q->options[j];
    jev_jsonw_raw(w, "\"value\":");
    jev_jsonw_int(w, j);
    jev_jsonw_raw(w, ",\"label\":");
    if (o->text)
        jev_jsonw_str(w, o->text);
    else if (o->value && json_is_string(o->value))
        jev_jsonw_str(w, json_string_value(o->value));
    else
        jev_jsonw_str(w, o->key); /* a System One level given as JSON: its index */
}

/* {..., "score": s, "confidence": c, "probabilities": [{"value", "label", "probability"}, ...]} */
static void score_oa_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    jev_jsonw_raw(w, ",\"score\":");
    jev_jsonw_double(w, a->score);
    jev_jsonw_raw(w, ",\"confidence\":");
    jev_jsonw_double(w, a->confidence);
    jev_resp_oa_probs(w, q, a, score_oa_entry);
}

const struct jev_qtype_wire jev_qtype_wire_score = {
    .type = JEV_QTYPE_SCORE,
    .none = 0,
    .s1_count = score_s1_count,
    .s1_parse = score_s1_parse,
    .s1_answer = score_s1_answer,
    .oa_name = "score",
    .oa_options = "levels",
    .oa_count = score_oa_count,
    .oa_parse = score_oa_parse,
    .oa_answer = score_oa_answer,
};

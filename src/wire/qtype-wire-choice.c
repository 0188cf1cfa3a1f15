/*
 * qtype-wire-choice.c - the choice question type on the wire
 * (wire/qtype-wire.h): System One criteria {name: description or null},
 * OpenAI choices [{value: string or bool, description?}]; the answer is the
 * winner with its probabilities and confidence.
 *
 * Not here: the labels, the prompt, the math (decide/qtype-choice.c).
 */
#include "wire/qtype-wire.h" // defines: struct jev_qtype_wire

#include <string.h>

#include "wire/request-internal.h"  // defines: jev_rq_*
#include "wire/response-internal.h" // defines: jev_resp_*

/* ---- System One ---- */

static int64_t choice_s1_count(json_t *criteria) {
    return json_is_object(criteria) ? (int64_t)json_object_size(criteria) : 0;
}

/*
 * Options keep request order: jansson 2.14 iterates objects in insertion
 * order, and labels (A, B, ...) and answer probabilities follow it (spec
 * §2.2; tests/test-decide-request.c pins a non-alphabetical order).
 */
static enum jev_status choice_s1_parse(struct jev_question *q, json_t *crit, const char *path,
                                       struct jev_request_error *e) {
    const char *want = "an object mapping 1 to 255 option names to descriptions";
    if (crit == NULL || json_is_null(crit))
        return jev_rq_fail(e, 422, path, "missing: a choice question needs criteria, %s", want);
    if (!json_is_object(crit))
        return jev_rq_fail(e, 422, path, "must be %s", want);
    size_t n = json_object_size(crit);
    if (n < JEV_DECIDE_MIN_OPTIONS)
        return jev_rq_fail(e, 422, path, "has no options (a choice needs %d to %d)", JEV_DECIDE_MIN_OPTIONS,
                           JEV_DECIDE_MAX_OPTIONS);
    if (n > JEV_DECIDE_MAX_OPTIONS)
        return jev_rq_fail(e, 422, path, "has %zu options (the maximum is %d)", n, JEV_DECIDE_MAX_OPTIONS);
    const char *k;
    json_t *v;
    int32_t i = 0;
    json_object_foreach(crit, k, v) {
        char p[400];
        jev_rq_path(p, sizeof p, "%s.%s", path, k);
        if (k[0] == '\0')
            return jev_rq_fail(e, 422, path, "an option name must not be empty");
        JEV_TRY(jev_rq_check_depth(v, p, e));
        q->options[i].key = q->options[i].text = k;
        q->options[i].desc = json_is_null(v) ? NULL : v;
        i++;
    }
    q->n_options = i;
    return JEV_OK;
}

/* {"type":"choice","choice":key,"probabilities":{key:p,...},"confidence":c} */
static void choice_s1_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    jev_jsonw_raw(w, ",\"choice\":");
    jev_jsonw_str(w, q->options[a->winner].key);
    jev_resp_s1_probs_confidence(w, q, a);
}

/* ---- OpenAI ---- */

static int64_t choice_oa_count(json_t *options) {
    return json_is_array(options) ? (int64_t)json_array_size(options) : 0;
}

/*
 * choices[].value is typed: the string "true" and the boolean true are
 * different values (OAI-PY) and answers echo the type back. Both render as
 * the text true, so a question may not hold both (the model could not tell
 * them apart, and generate_json ids would collide).
 */
static enum jev_status choice_oa_parse(struct jev_question *q, json_t *cs, const char *path,
                                       struct jev_request_error *e) {
    if (cs == NULL || json_is_null(cs))
        return jev_rq_fail(e, 422, path,
                           "missing: a choice question needs choices, an array of 1 to 255 "
                           "{\"value\", \"description\"}");
    if (!json_is_array(cs))
        return jev_rq_fail(e, 422, path, "must be an array of {\"value\", \"description\"}");
    size_t n = json_array_size(cs);
    if (n < JEV_DECIDE_MIN_OPTIONS)
        return jev_rq_fail(e, 422, path, "has no choices (a choice needs %d to %d)", JEV_DECIDE_MIN_OPTIONS,
                           JEV_DECIDE_MAX_OPTIONS);
    if (n > JEV_DECIDE_MAX_OPTIONS)
        return jev_rq_fail(e, 422, path, "has %zu choices (the maximum is %d)", n, JEV_DECIDE_MAX_OPTIONS);
    static const char *const allowed[] = {"value", "description", NULL};
    size_t i;
    json_t *c;
    json_array_foreach(cs, i, c) {
        char p[400];
        jev_rq_path(p, sizeof p, "%s[%zu]", path, i);
        if (!json_is_object(c))
            return jev_rq_fail(e, 422, p, "must be an object {\"value\", \"description\"}");
        JEV_TRY(jev_rq_only_fields(c, p, allowed, "value, description", e));
        json_t *v = json_object_get(c, "value");
        const char *key = NULL;
        if (json_is_string(v))
            key = json_string_value(v);
        else if (json_is_boolean(v))
            key = json_is_true(v) ? "true" : "false";
        else
            return jev_rq_fail(e, 422, p, "value must be a string or a boolean");
        if (key[0] == '\0')
            return jev_rq_fail(e, 422, p, "value must not be empty");
        for (size_t j = 0; j < i; j++) {
            if (strcmp(q->options[j].key, key) != 0)
                continue;
            if (json_equal(q->options[j].value, v))
                return jev_rq_fail(e, 422, p, "duplicate value \"%s\" (choices must be unique)", key);
            return jev_rq_fail(e, 422, p,
                               "values true and \"true\" (or false and \"false\") cannot both be used: "
                               "the model reads them the same");
        }
        q->options[i].key = q->options[i].text = key;
        q->options[i].value = v;
        JEV_TRY(jev_rq_desc(c, p, &q->options[i].desc, e));
    }
    q->n_options = (int32_t)n;
    return JEV_OK;
}

/* A probabilities entry: the option's typed value. */
static void choice_oa_entry(struct jev_jsonw *w, const struct jev_question *q, int32_t j) {
    jev_jsonw_raw(w, "\"value\":");
    jev_resp_option_value(w, &q->options[j]);
}

/* {..., "choice": value, "confidence": c, "probabilities": [{"value", "probability"}, ...]} */
static void choice_oa_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    jev_jsonw_raw(w, ",\"choice\":");
    jev_resp_option_value(w, &q->options[a->winner]);
    jev_jsonw_raw(w, ",\"confidence\":");
    jev_jsonw_double(w, a->confidence);
    jev_resp_oa_probs(w, q, a, choice_oa_entry);
}

const struct jev_qtype_wire jev_qtype_wire_choice = {
    .type = JEV_QTYPE_CHOICE,
    .none = 0,
    .s1_count = choice_s1_count,
    .s1_parse = choice_s1_parse,
    .s1_answer = choice_s1_answer,
    .oa_name = "choice",
    .oa_options = "choices",
    .oa_count = choice_oa_count,
    .oa_parse = choice_oa_parse,
    .oa_answer = choice_oa_answer,
};

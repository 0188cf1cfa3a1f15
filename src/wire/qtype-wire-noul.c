/*
 * qtype-wire-noul.c - the noul question type on the wire (wire/qtype-wire.h):
 * System One "noul" with criteria {"true": desc, "false": desc} (optional),
 * OpenAI "predicate" with no options field (§8.3: no outcome descriptions);
 * the answer is P(yes), and no confidence is sent (§4.2).
 *
 * Not here: the yes / no options themselves, the prompt, the math
 * (decide/qtype-noul.c).
 */
#include "wire/qtype-wire.h" // defines: struct jev_qtype_wire

#include <string.h>

#include "wire/request-internal.h" // defines: jev_rq_*

/* ---- System One ---- */

/* Always yes and no, whatever the criteria say. */
static int64_t noul_s1_count(json_t *criteria) {
    (void)criteria;
    return 2;
}

/* The options are decide's fixed yes / no (already in q); criteria only adds their descriptions. */
static enum jev_status noul_s1_parse(struct jev_question *q, json_t *crit, const char *path,
                                     struct jev_request_error *e) {
    if (crit == NULL || json_is_null(crit))
        return JEV_OK;
    if (!json_is_object(crit))
        return jev_rq_fail(e, 422, path, "must be null or an object with optional keys \"true\" and \"false\"");
    const char *k;
    json_t *v;
    json_object_foreach(crit, k, v) {
        char p[400];
        jev_rq_path(p, sizeof p, "%s.%s", path, k);
        if (strcmp(k, "true") != 0 && strcmp(k, "false") != 0)
            return jev_rq_fail(e, 422, p, "unknown noul criteria key (allowed: \"true\", \"false\")");
        JEV_TRY(jev_rq_check_depth(v, p, e));
        q->options[strcmp(k, "true") == 0 ? 0 : 1].desc = json_is_null(v) ? NULL : v;
    }
    return JEV_OK;
}

/* {"type":"noul","noul":P(yes)} */
static void noul_s1_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    (void)q;
    jev_jsonw_raw(w, ",\"noul\":");
    jev_jsonw_double(w, a->probs[0]);
}

/* ---- OpenAI ---- */

static int64_t noul_oa_count(json_t *options) {
    (void)options;
    return 2;
}

/* {"type":"predicate","name":...,"probability":P(yes)} */
static void noul_oa_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    (void)q;
    jev_jsonw_raw(w, ",\"probability\":");
    jev_jsonw_double(w, a->probs[0]);
}

const struct jev_qtype_wire jev_qtype_wire_noul = {
    .type = JEV_QTYPE_NOUL,
    .none = JEV_QWSLOT_BIT(JEV_QWSLOT_OA_OPTIONS) | JEV_QWSLOT_BIT(JEV_QWSLOT_OA_PARSE),
    .s1_count = noul_s1_count,
    .s1_parse = noul_s1_parse,
    .s1_answer = noul_s1_answer,
    .oa_name = "predicate",
    .oa_options = NULL, /* none: a predicate lists no options */
    .oa_count = noul_oa_count,
    .oa_parse = NULL, /* none: yes / no are decide's fixed options */
    .oa_answer = noul_oa_answer,
};

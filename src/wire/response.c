/*
 * response.c - the response bodies of both wire shapes (key orders: see
 * response.h and spec/systemone.md §4, §8.2) and the error body. Each
 * answer's type-specific fields are its type's (wire/qtype-wire.h).
 */
#include "wire/response.h" // defines: jev_response_*

#include <stdlib.h>
#include <string.h>

#include "io/jsonw.h"               // defines: struct jev_jsonw
#include "wire/qtype-wire.h"        // defines: jev_qtype_wire_get
#include "wire/response-internal.h" // defines: jev_resp_*

/* ---- the parts several types share (response-internal.h) ---- */

void jev_resp_option_value(struct jev_jsonw *w, const struct jev_option *o) {
    if (o->value)
        jev_jsonw_value(w, o->value);
    else
        jev_jsonw_str(w, o->key);
}

void jev_resp_s1_probs_confidence(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    jev_jsonw_raw(w, ",\"probabilities\":{");
    for (int32_t j = 0; j < q->n_options; j++) {
        if (j)
            jev_jsonw_raw(w, ",");
        jev_jsonw_str(w, q->options[j].key);
        jev_jsonw_raw(w, ":");
        jev_jsonw_double(w, a->probs[j]);
    }
    jev_jsonw_raw(w, "},\"confidence\":");
    jev_jsonw_double(w, a->confidence);
}

void jev_resp_oa_probs(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a,
                       void (*entry)(struct jev_jsonw *w, const struct jev_question *q, int32_t j)) {
    jev_jsonw_raw(w, ",\"probabilities\":[");
    for (int32_t j = 0; j < q->n_options; j++) {
        jev_jsonw_raw(w, j ? ",{" : "{");
        entry(w, q, j);
        jev_jsonw_raw(w, ",\"probability\":");
        jev_jsonw_double(w, a->probs[j]);
        jev_jsonw_raw(w, "}");
    }
    jev_jsonw_raw(w, "]");
}

/* ---- response bodies ---- */

/* One System One answer; key order per §4.2: type first, then the type's fields (its s1_answer
 * slot: qtype-wire-*.c). */
static void s1_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    jev_jsonw_raw(w, "{\"type\":");
    jev_jsonw_str(w, jev_qtype_name(q->type));
    jev_qtype_wire_get(q->type)->s1_answer(w, q, a);
    jev_jsonw_raw(w, "}");
}

/* The envelope is exactly {model, answers, usage} (LCPP-T pins it); answers
 * in request order, usage with exactly its two keys. */
char *jev_response_systemone(const struct jev_request *r, const struct jev_answers *a, const char *model,
                             const struct jev_usage *usage) {
    JEV_ASSERT(a->n == r->n_questions);
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    jev_jsonw_raw(&w, "{\"model\":");
    jev_jsonw_str(&w, model ? model : "jev");
    jev_jsonw_raw(&w, ",\"answers\":{");
    for (int32_t i = 0; i < r->n_questions; i++) {
        if (i)
            jev_jsonw_raw(&w, ",");
        jev_jsonw_str(&w, r->questions[i].id);
        jev_jsonw_raw(&w, ":");
        s1_answer(&w, &r->questions[i], &a->items[i]);
    }
    jev_jsonw_raw(&w, "},\"usage\":{\"input_tokens\":");
    jev_jsonw_int(&w, usage ? usage->input_tokens : 0);
    jev_jsonw_raw(&w, ",\"output_tokens\":");
    jev_jsonw_int(&w, usage ? usage->output_tokens : 0);
    jev_jsonw_raw(&w, "}}");
    return jev_jsonw_finish(&w);
}

/* One OpenAI answer (§8.2): type (§8.3's name, or "refusal"), name (null when not given), then
 * the type's fields (its oa_answer slot); a refusal has none. */
static void oa_answer(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a) {
    const struct jev_qtype_wire *t = jev_qtype_wire_get(q->type);
    jev_jsonw_raw(w, "{\"type\":");
    jev_jsonw_str(w, a->refused ? "refusal" : t->oa_name);
    jev_jsonw_raw(w, ",\"name\":");
    if (q->named)
        jev_jsonw_str(w, q->id);
    else
        jev_jsonw_raw(w, "null");
    if (!a->refused)
        t->oa_answer(w, q, a);
    jev_jsonw_raw(w, "}");
}

/* total_tokens = input + output; cache writes and reasoning are not tracked (0). */
char *jev_response_openai(const struct jev_request *r, const struct jev_answers *a, const char *model,
                          const struct jev_usage *usage) {
    JEV_ASSERT(a->n == r->n_questions);
    int64_t in = usage ? usage->input_tokens : 0, out = usage ? usage->output_tokens : 0;
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    jev_jsonw_raw(&w, "{\"model\":");
    jev_jsonw_str(&w, model ? model : "jev");
    jev_jsonw_raw(&w, ",\"answers\":[");
    for (int32_t i = 0; i < r->n_questions; i++) {
        if (i)
            jev_jsonw_raw(&w, ",");
        oa_answer(&w, &r->questions[i], &a->items[i]);
    }
    jev_jsonw_raw(&w, "],\"usage\":{\"input_tokens\":");
    jev_jsonw_int(&w, in);
    jev_jsonw_raw(&w, ",\"input_tokens_details\":{\"cached_tokens\":");
    jev_jsonw_int(&w, usage ? usage->cached_tokens : 0);
    jev_jsonw_raw(&w, ",\"cache_write_tokens\":0},\"output_tokens\":");
    jev_jsonw_int(&w, out);
    jev_jsonw_raw(&w, ",\"output_tokens_details\":{\"reasoning_tokens\":0},\"total_tokens\":");
    jev_jsonw_int(&w, in + out);
    jev_jsonw_raw(&w, "}}");
    return jev_jsonw_finish(&w);
}

/* Exactly {"error":{"message","type","code"}} with no answers (§6.2). */
char *jev_response_error(int http_status, const char *type, const char *message) {
    struct jev_jsonw w;
    jev_jsonw_init(&w);
    jev_jsonw_raw(&w, "{\"error\":{\"message\":");
    jev_jsonw_str(&w, message ? message : "");
    jev_jsonw_raw(&w, ",\"type\":");
    jev_jsonw_str(&w, type ? type : "server_error");
    jev_jsonw_raw(&w, ",\"code\":");
    jev_jsonw_int(&w, http_status);
    jev_jsonw_raw(&w, "}}");
    return jev_jsonw_finish(&w);
}

char *jev_response_request_error(const struct jev_request_error *e) {
    if (e->http_status == 0)
        return jev_response_error(500, "server_error", e->message);
    return jev_response_error(e->http_status, e->type, e->message);
}

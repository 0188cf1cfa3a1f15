/*
 * response-internal.h - the parts of an answer object several question
 * types write the same way (response.c), for the per-type answer slots
 * (qtype-wire-*.c). Nothing outside src/wire/ uses it.
 */
#ifndef JEV_WIRE_RESPONSE_INTERNAL_H
#define JEV_WIRE_RESPONSE_INTERNAL_H

#include "decide/answer.h"  // defines: struct jev_answer
#include "decide/request.h" // defines: struct jev_question, struct jev_option
#include "io/jsonw.h"       // defines: struct jev_jsonw

/* An option's value as an answer echoes it: the typed value, else the key as a string. */
void jev_resp_option_value(struct jev_jsonw *w, const struct jev_option *o);

/* System One: ",\"probabilities\":{key:p,...},\"confidence\":c" (§4.2's order). */
void jev_resp_s1_probs_confidence(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a);

/* OpenAI: ",\"probabilities\":[{<entry>,\"probability\":p},...]" in option order; entry writes
 * the fields before the probability ("\"value\":..."). */
void jev_resp_oa_probs(struct jev_jsonw *w, const struct jev_question *q, const struct jev_answer *a,
                       void (*entry)(struct jev_jsonw *w, const struct jev_question *q, int32_t j));

#endif

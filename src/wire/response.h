/*
 * response.h - typed answers into the response bodies of both wire shapes:
 * the System One envelope {model, answers{id: ...}, usage{input_tokens,
 * output_tokens}} with answers in request order, the OpenAI shape of §8.2,
 * and the error body {"error": {"message", "type", "code"}}. Numbers are
 * written at full precision (shortest round-trip form).
 */
#ifndef JEV_WIRE_RESPONSE_H
#define JEV_WIRE_RESPONSE_H

#include "decide/answer.h" // defines: struct jev_answers, struct jev_usage
#include "wire/request.h"  // defines: struct jev_request, struct jev_request_error

/* Response bodies: malloc'd text; free with free(); NULL on OOM. */

/* model: the model that answered (never the requested alias); NULL = "jev". */
char *jev_response_systemone(const struct jev_request *r, const struct jev_answers *a, const char *model,
                             const struct jev_usage *usage);
char *jev_response_openai(const struct jev_request *r, const struct jev_answers *a, const char *model,
                          const struct jev_usage *usage);

/* {"error":{"message":...,"type":...,"code":http}}. */
char *jev_response_error(int http_status, const char *type, const char *message);
/* The same for a request refusal; http 0 (an internal failure) becomes 500 server_error. */
char *jev_response_request_error(const struct jev_request_error *e);

#endif

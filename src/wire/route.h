/*
 * route.h - the whole route for a request body, from bytes to a response
 * body: parse + validate (System One or the OpenAI shape), run on the
 * decider, render. include/jev.h's jev_decide_json is this with the
 * decider's own settings.
 */
#ifndef JEV_WIRE_ROUTE_H
#define JEV_WIRE_ROUTE_H

#include "decide/pipeline.h" // defines: struct jev_decider, struct jev_decide_params, struct jev_decide_result
#include "wire/request.h"    // defines: enum jev_request_shape, struct jev_request_error

/*
 * Returns the status; *response (malloc'd, caller frees) is the System One /
 * OpenAI response on success and the error body otherwise. rerr (may be NULL) receives the refusal of an
 * invalid request or the mapped error of a failed run (http 400 for an image
 * that does not decode, 413 for an image or prompt over a size limit, 422 for
 * a label set too small, 0 for an internal failure). result (may be NULL)
 * receives the run's result (caller frees).
 */
enum jev_status jev_decide_body(struct jev_decider *d, const char *body, size_t len, enum jev_request_shape shape,
                                const struct jev_decide_params *p, char **response, struct jev_request_error *rerr,
                                struct jev_decide_result *result);

/*
 * The answer to a run of a parsed request (what jev_decide_body does after jev_decide_run, for a
 * caller that runs requests its own way, as the server's scheduler does): *response (malloc'd;
 * NULL only when out of memory) is the System One / OpenAI response when s is JEV_OK and the
 * run's output stands, else the error body of the failure mapped to its class (rerr: its status,
 * 0 for an internal failure, type and message). Returns the final status: s, or JEV_ERR_FORMAT for
 * a generated output that fails its schema, JEV_ERR_NOMEM when the response cannot be rendered.
 * res and err are the run's (res is read only when s is JEV_OK or it generated).
 */
enum jev_status jev_decide_answer(const struct jev_decider *d, enum jev_request_shape shape,
                                  const struct jev_request *r, enum jev_status s, const struct jev_decide_result *res,
                                  const struct jev_error *err, char **response, struct jev_request_error *rerr);

/*
 * jev_decide_json (include/jev.h) over a request shape, plus the run's counters in *stats (may be
 * NULL; zeroed when the run failed): what the server answers and logs. *http_status is 200, the
 * refusal's status, or 500 for an internal failure.
 */
enum jev_status jev_decide_http(struct jev_decider *d, const char *body, size_t len, enum jev_request_shape shape,
                                char **response, int32_t *http_status, struct jev_decide_stats *stats);

#endif

/*
 * request.h - the wire shapes into a typed request (decide/request.h):
 *   - the System One body of POST /v1/systemone (spec/systemone.md §2-§3),
 *   - the OpenAI-shaped body of POST /v1/decisions (§8.1, the SDK subset),
 *   - the benchmark workload file bench/dog-workload.json (N decisions, id
 *     q%02d, decision i asks question i mod 8).
 * Validation follows the spec's "-> us" decisions; every refusal carries the
 * HTTP status and error type of §6.2's table so the server can map it, and a
 * message of the form "<field path>: <what is wrong> (<the limit>)".
 *
 * What this is not: no prompt text, no tokens, no image decoding beyond
 * base64 and a PNG/JPEG signature check (model/vision-preprocess decodes).
 */
#ifndef JEV_WIRE_REQUEST_H
#define JEV_WIRE_REQUEST_H

#include "decide/request.h" // defines: struct jev_request, the limits

/* ---- errors ---- */

/* A refusal as the server sends it: {"error": {"message", "type", "code"}}. */
struct jev_request_error {
    int http_status;                 /* 400, 413, 422 or 501; 0 when no error */
    const char *type;                /* static: "invalid_request_error", "request_too_large_error",
                                        "unprocessable_entity_error", "not_supported_error" */
    char param[320];                 /* the field path at fault ("questions.team.criteria"), "" if none */
    char message[JEV_ERROR_MSG_MAX]; /* "<param>: <what is wrong> (<limit>)" */
};

/* Parser switches. Zero-initialised = defaults. */
struct jev_request_opts {
    bool no_vision;        /* the model has no vision tower: an image is 501 */
    size_t max_body_bytes; /* 0 = JEV_DECIDE_MAX_BODY_BYTES */
};

/*
 * Parses and validates a body. On success *out owns the parsed tree; on
 * failure *out is zeroed (nothing to free), rerr holds the refusal and the
 * status maps it: JEV_ERR_FORMAT 400, JEV_ERR_NOMEM 413 (or real OOM, then
 * 500-worthy with http_status 0), JEV_ERR_INVALID_ARG 422, JEV_ERR_UNSUPPORTED
 * 501. opts may be NULL.
 */
enum jev_status jev_request_parse_systemone(const char *body, size_t len, const struct jev_request_opts *opts,
                                            struct jev_request *out, struct jev_request_error *rerr);
enum jev_status jev_request_parse_openai(const char *body, size_t len, const struct jev_request_opts *opts,
                                         struct jev_request *out, struct jev_request_error *rerr);

/*
 * The benchmark workload: n_decisions choice questions, decision i asks
 * question i mod Q of the file and has id q%02d; `context` goes to the system
 * turn, the state is "", the image is the file's `image` path (relative to
 * the repository root, as written; the caller resolves it).
 */
enum jev_status jev_request_load_workload(const char *json, size_t len, int32_t n_decisions, struct jev_request *out,
                                          struct jev_request_error *rerr);
enum jev_status jev_request_load_workload_file(const char *path, int32_t n_decisions, struct jev_request *out,
                                               struct jev_request_error *rerr);

/* Attaches an image file by path (the CLI's --image) to a parsed request:
 * the path is copied; a request that already has an image is refused (422,
 * the one-image limit). The bytes are read later, by whoever decodes. */
enum jev_status jev_request_set_image_path(struct jev_request *r, const char *path, struct jev_request_error *rerr);

/* Strict base64 (RFC 4648 standard alphabet; '=' padding optional, ASCII
 * whitespace skipped, anything else refused). Writes at most cap bytes to
 * out; returns the decoded length, or -1 on a bad character / bad padding /
 * more than cap bytes. Exposed for the fuzz target and tests. */
int64_t jev_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap);

#endif

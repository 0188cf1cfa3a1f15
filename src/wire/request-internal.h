/*
 * request-internal.h - helpers shared by the request parsers
 * (request-common.c; request-systemone.c for System One, request-openai.c for
 * the OpenAI shape and the workload file; qtype-wire-*.c for each question
 * type's fields). Nothing outside src/wire/ uses it.
 */
#ifndef JEV_WIRE_REQUEST_INTERNAL_H
#define JEV_WIRE_REQUEST_INTERNAL_H

#include "wire/request.h" // defines: struct jev_request, struct jev_request_error

/* Records a refusal: http 400/413/422/501 (0 = internal, e.g. OOM), the field
 * path (may be "" or NULL) and the message; returns the mapped status. Only
 * the first refusal sticks. */
enum jev_status jev_rq_fail(struct jev_request_error *e, int http, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* snprintf for field paths and messages: truncation of an over-long id is
 * intended (the limit keeps ids short), so it goes through vsnprintf. */
void jev_rq_path(char *buf, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

/* Size check, depth pre-scan and parse of a body into a JSON object root. */
enum jev_status jev_rq_load_body(const char *body, size_t len, const struct jev_request_opts *opts, json_t **root,
                                 struct jev_request_error *e);

/* Nesting of a JSON value (scalar 0), counted at most to limit + 1. */
int jev_rq_depth(const json_t *v, int limit);

/* Refuses a value nested deeper than JEV_DECIDE_MAX_DEPTH (422 at `path`). */
enum jev_status jev_rq_check_depth(const json_t *v, const char *path, struct jev_request_error *e);
/* At least one question and at most JEV_DECIDE_MAX_QUESTIONS (both request shapes). */
enum jev_status jev_rq_check_question_count(size_t nq, struct jev_request_error *e);

/* True when s is empty or only ASCII whitespace. */
bool jev_rq_blank(const char *s);

/* Checks `instructions` (NULL = absent): a non-empty string, object or array. */
enum jev_status jev_rq_check_instructions(const json_t *v, const char *path, struct jev_request_error *e);

/* Checks a question id / name: non-empty, at most JEV_DECIDE_MAX_ID_BYTES. */
enum jev_status jev_rq_check_id(const char *id, const char *path, struct jev_request_error *e);

/* OpenAI: an item's optional `description` (absent, null or a string; 422 otherwise) into *out. */
enum jev_status jev_rq_desc(json_t *item, const char *path, json_t **out, struct jev_request_error *e);

/* OpenAI: refuses (422 at path.<field>) a field of obj outside `allowed` (NULL-terminated; a NULL
 * entry ends it early), naming `list`. */
enum jev_status jev_rq_only_fields(json_t *obj, const char *path, const char *const *allowed, const char *list,
                                   struct jev_request_error *e);

/* Takes an image given as a data URL or raw base64 string (`images` entry,
 * OpenAI input_image) into r->image; counts images against the limit. */
enum jev_status jev_rq_add_image_url(struct jev_request *r, const char *url, const char *path,
                                     struct jev_request_error *e);

/* Takes base64 file bytes with a declared format ("png"/"jpg"/"jpeg", or NULL
 * for "sniff only") into r->image. */
enum jev_status jev_rq_add_image_base64(struct jev_request *r, const char *b64, size_t len, const char *declared,
                                        const char *path, struct jev_request_error *e);

/* Allocates r->block: questions then options (zeroed); extra bytes at the end
 * for ids, returned in *extra. */
enum jev_status jev_rq_alloc(struct jev_request *r, int32_t n_questions, int64_t n_options, size_t extra_bytes,
                             char **extra, struct jev_request_error *e);

/* Common tail of every parse: the vision check; frees r on failure. */
enum jev_status jev_rq_finish(struct jev_request *r, const struct jev_request_opts *opts, struct jev_request_error *e);

/* The level keys "0".."9" (static). */
extern const char *const jev_rq_level_keys[JEV_DECIDE_MAX_LEVELS];

#endif

/*
 * request.h - a typed decision request in C structs: optional image, state,
 * named questions (noul / choice / score) with their options in request order.
 *
 * Three outside shapes land in the same struct:
 *   - the System One body of POST /v1/systemone (spec/systemone.md §2-§3),
 *   - the OpenAI-shaped body of POST /v1/decisions (§8.1, the SDK subset),
 *   - the benchmark workload file bench/dog-workload.json (N decisions, id
 *     q%02d, decision i asks question i mod 8).
 * Validation follows the spec's "-> us" decisions; every refusal carries the
 * HTTP status and error type of §6.2's table so the server can map it, and a
 * message of the form "<field path>: <what is wrong> (<the limit>)".
 *
 * What this is not: no prompt text (prompt-render.h), no tokens, no image
 * decoding beyond base64 and a PNG/JPEG signature check (vision/ decodes).
 *
 * Ownership: a parsed request owns one jansson tree (the body) and one block
 * for its arrays; every json_t and string pointer in it borrows from those and
 * lives until jev_request_free. Parsing happens once per request, outside the
 * token loop, so it allocates freely (but sizes its arrays first).
 */
#ifndef JEV_DECIDE_REQUEST_H
#define JEV_DECIDE_REQUEST_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: enum jev_status, JEV_ERROR_MSG_MAX

/* ---- limits (every refusal message names the one it hit) ---- */

/* Body bytes read at most; more is 413 before parsing. One 16 MiB image in
 * base64 is 21.3 MiB, so 32 MiB leaves room for the text around it. */
#define JEV_DECIDE_MAX_BODY_BYTES ((size_t)32 << 20)
/* Decoded bytes of one image file; more is 413 (TypeSafe's 16 MiB). */
#define JEV_DECIDE_MAX_IMAGE_BYTES ((size_t)16 << 20)
/* Images per request: the engine places one image before the state; more is 422. */
#define JEV_DECIDE_MAX_IMAGES 1
/* Questions per request; more is 413 (llama.cpp's parse cap). The token
 * budget of the rendered prompt is checked later, by whoever tokenizes. */
#define JEV_DECIDE_MAX_QUESTIONS 4096
/* Options of one choice question, 1..255 (422 outside). */
#define JEV_DECIDE_MIN_OPTIONS 1
#define JEV_DECIDE_MAX_OPTIONS 255
/* Levels of one score question, 2..10 inclusive (422 outside): digits 0..9. */
#define JEV_DECIDE_MIN_LEVELS 2
#define JEV_DECIDE_MAX_LEVELS 10
/* Nesting of one caller JSON value (state, instructions, a description): a
 * scalar is 0, a container 1 + its deepest child. Deeper is 422. The raw body
 * is pre-scanned against JEV_DECIDE_MAX_DEPTH + JEV_DECIDE_DEPTH_ENVELOPE
 * before parsing, so a 5,000-level text never reaches the parser. */
#define JEV_DECIDE_MAX_DEPTH 32
#define JEV_DECIDE_DEPTH_ENVELOPE 6
/* Bytes of a question id / name (non-empty); longer is 422. */
#define JEV_DECIDE_MAX_ID_BYTES 256
/* OpenAI shape: safety_identifier and prompt_cache_key lengths (OAI-REF). */
#define JEV_DECIDE_MAX_SAFETY_ID_BYTES 128
#define JEV_DECIDE_MAX_CACHE_KEY_BYTES 64

/* ---- the request ---- */

enum jev_qtype {
    JEV_QTYPE_NOUL = 0,   /* yes/no: options [0] = yes (criteria "true"), [1] = no ("false") */
    JEV_QTYPE_CHOICE = 1, /* one of 1..255 named options */
    JEV_QTYPE_SCORE = 2,  /* ordered levels 0..N-1, lowest first, N in 2..10 */
};

enum jev_request_shape {
    JEV_SHAPE_SYSTEMONE = 0, /* POST /v1/systemone */
    JEV_SHAPE_OPENAI = 1,    /* POST /v1/decisions */
    JEV_SHAPE_WORKLOAD = 2,  /* bench/dog-workload.json */
};

enum jev_image_format {
    JEV_IMAGE_NONE = 0, /* no image, or a path whose bytes were not read */
    JEV_IMAGE_PNG = 1,  /* PNG signature */
    JEV_IMAGE_JPEG = 2, /* JPEG SOI marker */
};

/*
 * One option. What each field holds by question type and shape:
 *   noul    key "yes"/"no", text = key, desc = criteria.true / criteria.false
 *   choice  key = the option name (System One criteria key, OpenAI value as
 *           text, workload option id), text = what the model reads as the
 *           option (the name, or the workload's option text), desc = the
 *           description, value = OpenAI's typed value (string or bool)
 *   score   key "0".."N-1", text = OpenAI level label (NULL for System One),
 *           desc = the level text (System One criteria[i]) or OpenAI's
 *           description, value = the legend entry (criteria[i] / the label)
 */
struct jev_option {
    const char *key;  /* option id: generate_json value, answer key; unique within the question */
    const char *text; /* name shown to the model and text-mode candidate; NULL for a System One level */
    json_t *desc;     /* description (string or JSON), NULL when none; borrowed */
    json_t *value;    /* value echoed in answers, NULL = key as a string; borrowed */
};

struct jev_question {
    const char *id;             /* unique, non-empty; shown to the model; answer key */
    bool named;                 /* OpenAI: `name` was given (else answers echo null) */
    enum jev_qtype type;        /* noul / choice / score */
    json_t *instructions;       /* non-empty string, object or array; borrowed */
    int32_t n_options;          /* noul 2, choice 1..255, score 2..10 */
    struct jev_option *options; /* (n_options) in request order; may be shared between questions */
};

struct jev_image_input {
    enum jev_image_format format; /* sniffed from the bytes; NONE for a path or no image */
    unsigned char *bytes;         /* (n_bytes) the image file, decoded from base64; NULL for a path */
    size_t n_bytes;               /* byte count of `bytes` */
    const char *path;             /* workload / CLI: a file to read instead; NULL otherwise */
    const char *asset_key;        /* System One assets: the key the text refers to; NULL otherwise */
};

struct jev_request {
    enum jev_request_shape shape;     /* which body it came from */
    const char *model;                /* the requested model name, NULL when absent */
    const char *context;              /* text for the system turn (workload context, top-level
                                         `instructions` extension); NULL when none */
    json_t *state;                    /* string, object or array: what the questions are about */
    bool has_image;                   /* image below is set */
    struct jev_image_input image;     /* the one image, placed before the state */
    int32_t n_questions;              /* 1..JEV_DECIDE_MAX_QUESTIONS */
    struct jev_question *questions;   /* (n_questions) in request order */
    int32_t n_options_total;          /* sum of n_options over distinct option arrays */
    json_t *root;                     /* the parsed body every borrowed pointer points into */
    json_t *keep;                     /* values made while parsing (joined text), kept alive */
    void *block;                      /* one allocation: questions, options, ids */
};

/* ---- errors ---- */

/* A refusal as the server sends it: {"error": {"message", "type", "code"}}. */
struct jev_request_error {
    int http_status;                /* 400, 413, 422 or 501; 0 when no error */
    const char *type;               /* static: "invalid_request_error", "request_too_large_error",
                                       "unprocessable_entity_error", "not_supported_error" */
    char param[320];                /* the field path at fault ("questions.team.criteria"), "" if none */
    char message[JEV_ERROR_MSG_MAX]; /* "<param>: <what is wrong> (<limit>)" */
};

/* Parser switches. Zero-initialised = defaults. */
struct jev_request_opts {
    bool no_vision;          /* the model has no vision tower: an image is 501 */
    size_t max_body_bytes;   /* 0 = JEV_DECIDE_MAX_BODY_BYTES */
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
enum jev_status jev_request_load_workload(const char *json, size_t len, int32_t n_decisions,
                                          struct jev_request *out, struct jev_request_error *rerr);
enum jev_status jev_request_load_workload_file(const char *path, int32_t n_decisions, struct jev_request *out,
                                               struct jev_request_error *rerr);

/* Attaches an image file by path (the CLI's --image) to a parsed request:
 * the path is copied; a request that already has an image is refused (422,
 * the one-image limit). The bytes are read later, by whoever decodes. */
enum jev_status jev_request_set_image_path(struct jev_request *r, const char *path, struct jev_request_error *rerr);

/* Frees what a successful parse made; safe on a zeroed or freed request. */
void jev_request_free(struct jev_request *r);

/* "noul", "choice", "score" (System One names). */
const char *jev_qtype_name(enum jev_qtype t);

/* The index of question `id`, or -1. */
int32_t jev_request_find(const struct jev_request *r, const char *id);

/* Strict base64 (RFC 4648 standard alphabet; '=' padding optional, ASCII
 * whitespace skipped, anything else refused). Writes at most cap bytes to
 * out; returns the decoded length, or -1 on a bad character / bad padding /
 * more than cap bytes. Exposed for the fuzz target and tests. */
int64_t jev_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap);

#endif

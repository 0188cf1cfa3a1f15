/*
 * request.h - a typed decision request in C structs: optional image, state,
 * named questions (noul / choice / score) with their options in request order.
 *
 * Three outside shapes land in the same struct, parsed and validated in
 * src/wire/ (wire/request.h): the System One body, the OpenAI-shaped body
 * and the benchmark workload file. The limits below are the request's own;
 * the wire parsers refuse what exceeds them.
 *
 * What this is not: no parsing, no prompt text (prompt-render.h), no tokens,
 * no image decoding.
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
    JEV_QTYPE_COUNT       /* the number of types; each has its table (decide/qtype.h, wire/qtype-wire.h) */
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
    enum jev_request_shape shape;   /* which body it came from */
    const char *model;              /* the requested model name, NULL when absent */
    const char *context;            /* text for the system turn (workload context, top-level
                                       `instructions` extension); NULL when none */
    json_t *state;                  /* string, object or array: what the questions are about */
    bool has_image;                 /* image below is set */
    struct jev_image_input image;   /* the one image, placed before the state */
    int32_t n_questions;            /* 1..JEV_DECIDE_MAX_QUESTIONS */
    struct jev_question *questions; /* (n_questions) in request order */
    int32_t n_options_total;        /* sum of n_options over distinct option arrays */
    json_t *root;                   /* the parsed body every borrowed pointer points into */
    json_t *keep;                   /* values made while parsing (joined text), kept alive */
    void *block;                    /* one allocation: questions, options, ids */
};

/* Frees what a successful parse made; safe on a zeroed or freed request. */
void jev_request_free(struct jev_request *r);

/* "noul", "choice", "score" (System One names; decide/qtype.c, "unknown" outside the enum). */
const char *jev_qtype_name(enum jev_qtype t);

/* The index of question `id`, or -1. */
int32_t jev_request_find(const struct jev_request *r, const char *id);

#endif

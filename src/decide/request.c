/*
 * request.c - the System One body (POST /v1/systemone) into struct
 * jev_request, plus the helpers every request shape shares: refusals with
 * their HTTP status, the depth pre-scan, strict base64, image intake.
 *
 * The validation rules are spec/systemone.md's "-> us" decisions:
 *   - unknown top-level fields are ignored (clients add their own), unknown
 *     question fields are 422;
 *   - `state` is required: a string, object or array (null, numbers and
 *     booleans are 422); `document` is accepted as an alias;
 *   - `instructions` must be a non-empty string, object or array (422);
 *   - choice takes 1..255 options, score 2..10 levels (422 outside);
 *   - images: `assets` (TypeSafe: key -> {type:"image", format, data_base64},
 *     every asset referenced by its key somewhere in the text, else 400) or
 *     `images` / `files` (data URLs or raw base64); one image per request.
 * Not here: prompt text, tokens, the token budget (413 from whoever
 * tokenizes), the queue (429).
 */
#include "decide/request-internal.h" // defines: jev_rq_*, struct jev_request

#include "decide/jsonw.h" // defines: jev_jsonw_utf8_fix

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

const char *const jev_rq_level_keys[JEV_DECIDE_MAX_LEVELS] = {"0", "1", "2", "3", "4", "5", "6", "7", "8", "9"};

/* ---- refusals ---- */

/* The error type strings of llama.cpp's contract (spec §6.2), by status. */
static const char *http_type(int http) {
    switch (http) {
    case 400: return "invalid_request_error";
    case 413: return "request_too_large_error";
    case 422: return "unprocessable_entity_error";
    case 501: return "not_supported_error";
    }
    return "server_error";
}

/* Each HTTP class maps to one jev status, so a caller that only looks at the
 * status still tells malformed (400) from too large (413) from invalid (422). */
static enum jev_status http_status_code(int http) {
    switch (http) {
    case 400: return JEV_ERR_FORMAT;
    case 413: return JEV_ERR_NOMEM;
    case 422: return JEV_ERR_INVALID_ARG;
    case 501: return JEV_ERR_UNSUPPORTED;
    }
    return JEV_ERR_NOMEM; /* 0: an allocation failed */
}

/*
 * Only the first refusal sticks: parsers return as soon as one check fails,
 * but a helper deep in a walk may be reached again on the way out, and the
 * message must name the first fault, not the last.
 */
enum jev_status jev_rq_fail(struct jev_request_error *e, int http, const char *param, const char *fmt, ...) {
    if (e->http_status != 0 || e->message[0] != '\0')
        return http_status_code(e->http_status); /* the first refusal sticks */
    e->http_status = http;
    e->type = http_type(http);
    jev_rq_path(e->param, sizeof e->param, "%s", param ? param : "");
    char what[JEV_ERROR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    if (e->param[0])
        jev_rq_path(e->message, sizeof e->message, "%s: %s", e->param, what);
    else
        jev_rq_path(e->message, sizeof e->message, "%s", what);
    /* a message may quote the body (an id, jansson's view of a bad byte): keep it valid UTF-8 */
    jev_jsonw_utf8_fix(e->param);
    jev_jsonw_utf8_fix(e->message);
    return http_status_code(http);
}

void jev_rq_path(char *buf, size_t size, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(buf, size, fmt, ap);
    va_end(ap);
}

static enum jev_status oom(struct jev_request_error *e) {
    return jev_rq_fail(e, 0, "", "out of memory while parsing the request");
}

/* ---- depth ---- */

/* The number of questions: at least one, at most JEV_DECIDE_MAX_QUESTIONS (413 above). */
enum jev_status jev_rq_check_question_count(size_t nq, struct jev_request_error *e) {
    if (nq == 0)
        return jev_rq_fail(e, 422, "questions", "is empty (at least one question)");
    if (nq > JEV_DECIDE_MAX_QUESTIONS)
        return jev_rq_fail(e, 413, "questions", "%zu questions (the limit is %d per request)", nq,
                           JEV_DECIDE_MAX_QUESTIONS);
    return JEV_OK;
}

/*
 * Walks the raw bytes once, outside strings, and refuses nesting deeper than
 * limit before jansson sees them: jansson recurses per level, and a body of
 * 5,000 '[' must cost nothing. Strings are skipped with their escapes so that
 * brackets inside text do not count.
 */
static bool prescan_depth_ok(const char *s, size_t n, int limit) {
    int depth = 0;
    bool in_str = false;
    for (size_t i = 0; i < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\')
                i++; /* the escaped byte cannot end the string */
            else if (c == '"')
                in_str = false;
            continue;
        }
        if (c == '"')
            in_str = true;
        else if (c == '[' || c == '{') {
            if (++depth > limit)
                return false;
        } else if ((c == ']' || c == '}') && depth > 0)
            depth--;
    }
    return true;
}

int jev_rq_depth(const json_t *v, int limit) {
    if (limit < 0)
        return 1; /* already past the limit: stop descending */
    int best = 0;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)(uintptr_t)v, k, c) {
            int d = jev_rq_depth(c, limit - 1);
            if (d > best)
                best = d;
        }
        return best + 1;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) {
            int d = jev_rq_depth(c, limit - 1);
            if (d > best)
                best = d;
        }
        return best + 1;
    }
    return 0;
}

enum jev_status jev_rq_check_depth(const json_t *v, const char *path, struct jev_request_error *e) {
    int d = jev_rq_depth(v, JEV_DECIDE_MAX_DEPTH);
    if (d > JEV_DECIDE_MAX_DEPTH)
        return jev_rq_fail(e, 422, path, "nested deeper than the limit of %d levels", JEV_DECIDE_MAX_DEPTH);
    return JEV_OK;
}

/* ---- body ---- */

/* JSON whitespace only (the four bytes RFC 8259 allows between tokens). */
static bool all_space(const char *s, size_t n) {
    for (size_t i = 0; i < n; i++)
        if (s[i] != ' ' && s[i] != '\t' && s[i] != '\r' && s[i] != '\n')
            return false;
    return true;
}

/*
 * The checks that need no parse come first, cheapest first: the byte size
 * (413 before anything is read), emptiness, then the nesting pre-scan, so
 * that a hostile body costs one linear pass. Duplicate keys are refused by
 * the parser: a silent last-one-wins would let two clients read the same
 * body differently.
 */
enum jev_status jev_rq_load_body(const char *body, size_t len, const struct jev_request_opts *opts, json_t **root,
                                 struct jev_request_error *e) {
    *root = NULL;
    size_t max = opts && opts->max_body_bytes ? opts->max_body_bytes : JEV_DECIDE_MAX_BODY_BYTES;
    if (len > max)
        return jev_rq_fail(e, 413, "", "the body is %zu bytes (the limit is %zu bytes)", len, max);
    if (body == NULL || all_space(body, len))
        return jev_rq_fail(e, 400, "", "the body is empty (expected a JSON object)");
    if (!prescan_depth_ok(body, len, JEV_DECIDE_MAX_DEPTH + JEV_DECIDE_DEPTH_ENVELOPE))
        return jev_rq_fail(e, 422, "", "the body nests deeper than %d levels (values may nest at most %d)",
                           JEV_DECIDE_MAX_DEPTH + JEV_DECIDE_DEPTH_ENVELOPE, JEV_DECIDE_MAX_DEPTH);
    json_error_t jerr;
    json_t *v = json_loadb(body, len, JSON_REJECT_DUPLICATES, &jerr);
    if (v == NULL)
        return jev_rq_fail(e, 400, "", "the body is not valid JSON: %s (line %d, column %d)", jerr.text, jerr.line,
                           jerr.column);
    if (!json_is_object(v)) {
        json_decref(v);
        return jev_rq_fail(e, 400, "", "the body must be a JSON object");
    }
    *root = v;
    return JEV_OK;
}

/* Size first, allocate once: [questions | options | extra], zeroed. The
 * parsers count options before filling so the block never grows. */
enum jev_status jev_rq_alloc(struct jev_request *r, int32_t n_questions, int64_t n_options, size_t extra_bytes,
                             char **extra, struct jev_request_error *e) {
    size_t qb = (size_t)n_questions * sizeof(struct jev_question);
    size_t ob = (size_t)n_options * sizeof(struct jev_option);
    r->block = calloc(1, qb + ob + extra_bytes + 1);
    if (r->block == NULL)
        return oom(e);
    r->questions = r->block;
    r->n_questions = n_questions;
    if (extra)
        *extra = (char *)r->block + qb + ob;
    return JEV_OK;
}

/* ---- common field checks ---- */

static bool blank_string(const char *s) { return all_space(s, strlen(s)); }

/*
 * Stricter than Jev on purpose, as llama.cpp is (spec §2.2 "-> us"): a
 * question without text gives the model nothing to answer, so absent, null,
 * blank strings and empty containers are all 422 rather than a guess.
 */
enum jev_status jev_rq_check_instructions(const json_t *v, const char *path, struct jev_request_error *e) {
    const char *want = "a non-empty string, object or array";
    if (v == NULL)
        return jev_rq_fail(e, 422, path, "missing: every question needs instructions (%s)", want);
    if (json_is_null(v))
        return jev_rq_fail(e, 422, path, "is null (expected %s)", want);
    if (json_is_string(v)) {
        if (blank_string(json_string_value(v)))
            return jev_rq_fail(e, 422, path, "is empty (expected %s)", want);
        return JEV_OK;
    }
    if (json_is_object(v) || json_is_array(v)) {
        if ((json_is_object(v) ? json_object_size(v) : json_array_size(v)) == 0)
            return jev_rq_fail(e, 422, path, "is empty (expected %s)", want);
        return jev_rq_check_depth(v, path, e);
    }
    return jev_rq_fail(e, 422, path, "must be %s, not a %s", want, json_is_number(v) ? "number" : "boolean");
}

enum jev_status jev_rq_check_id(const char *id, const char *path, struct jev_request_error *e) {
    size_t n = strlen(id);
    if (n == 0)
        return jev_rq_fail(e, 422, path, "a question id must not be empty");
    if (n > JEV_DECIDE_MAX_ID_BYTES)
        return jev_rq_fail(e, 422, path, "a question id is %zu bytes (the limit is %d)", n, JEV_DECIDE_MAX_ID_BYTES);
    return JEV_OK;
}

/* ---- base64 and images ---- */

static int b64_value(unsigned char c) {
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '+')
        return 62;
    if (c == '/')
        return 63;
    return -1;
}

/*
 * Written here rather than taken from OpenSSL: EVP_DecodeBlock neither skips
 * line breaks nor reports the real length with padding, and a strict decoder
 * is 40 lines. Groups of 4 symbols make 3 bytes; a final group of 2 or 3
 * symbols (with or without '=') makes 1 or 2. Non-zero leftover bits in the
 * last symbol are refused (canonical encoding only). out NULL counts only.
 */
int64_t jev_base64_decode(const char *in, size_t len, unsigned char *out, size_t cap) {
    uint32_t acc = 0;
    int nsym = 0, npad = 0;
    size_t n = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)in[i];
        if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
            continue;
        if (c == '=') {
            npad++;
            continue;
        }
        int v = b64_value(c);
        if (v < 0 || npad > 0)
            return -1; /* a foreign byte, or data after padding */
        acc = (acc << 6) | (uint32_t)v;
        if (++nsym == 4) {
            if (out && n + 3 > cap)
                return -1;
            if (out) {
                out[n] = (unsigned char)(acc >> 16);
                out[n + 1] = (unsigned char)(acc >> 8);
                out[n + 2] = (unsigned char)acc;
            }
            n += 3;
            nsym = 0;
            acc = 0;
        }
    }
    if (nsym == 1)
        return -1; /* 6 bits cannot make a byte */
    if (npad > 0 && (nsym == 0 || nsym + npad != 4))
        return -1; /* padding must complete the last group */
    if (nsym >= 2) {
        int nb = nsym - 1; /* 2 symbols -> 1 byte, 3 -> 2 */
        uint32_t extra_bits = nsym == 2 ? (acc & 0xf) : (acc & 0x3);
        if (extra_bits != 0)
            return -1;
        acc >>= nsym == 2 ? 4 : 2;
        if (out && n + (size_t)nb > cap)
            return -1;
        for (int k = 0; k < nb; k++)
            if (out)
                out[n + (size_t)k] = (unsigned char)(acc >> (8 * (nb - 1 - k)));
        n += (size_t)nb;
    }
    return (int64_t)n;
}

/* The file signature decides the format; the declared type only has to agree. */
static enum jev_image_format sniff(const unsigned char *b, size_t n) {
    static const unsigned char png[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    if (n >= 8 && memcmp(b, png, 8) == 0)
        return JEV_IMAGE_PNG;
    if (n >= 3 && b[0] == 0xff && b[1] == 0xd8 && b[2] == 0xff)
        return JEV_IMAGE_JPEG;
    return JEV_IMAGE_NONE;
}

/* Counted before decoding, so a request with too many images costs no decode. */
static enum jev_status count_image(struct jev_request *r, const char *path, struct jev_request_error *e) {
    if (r->has_image)
        return jev_rq_fail(e, 422, path, "a second image (the maximum is %d image per request)",
                           JEV_DECIDE_MAX_IMAGES);
    return JEV_OK;
}

/*
 * Validates and measures the base64 first (counting mode), so that the size
 * limit is enforced before any allocation and the one allocation is exact.
 */
enum jev_status jev_rq_add_image_base64(struct jev_request *r, const char *b64, size_t len, const char *declared,
                                        const char *path, struct jev_request_error *e) {
    JEV_TRY(count_image(r, path, e));
    int64_t n = jev_base64_decode(b64, len, NULL, 0);
    if (n < 0)
        return jev_rq_fail(e, 422, path, "the image data is not valid base64");
    if ((size_t)n > JEV_DECIDE_MAX_IMAGE_BYTES)
        return jev_rq_fail(e, 413, path, "the image is %lld bytes (the limit is %zu bytes)", (long long)n,
                           JEV_DECIDE_MAX_IMAGE_BYTES);
    if (n == 0)
        return jev_rq_fail(e, 422, path, "the image data is empty");
    unsigned char *bytes = malloc((size_t)n);
    if (bytes == NULL)
        return oom(e);
    JEV_ASSERT(jev_base64_decode(b64, len, bytes, (size_t)n) == n);
    enum jev_image_format f = sniff(bytes, (size_t)n);
    const char *fname = f == JEV_IMAGE_PNG ? "png" : "jpeg";
    enum jev_status s = JEV_OK;
    if (f == JEV_IMAGE_NONE)
        s = jev_rq_fail(e, 422, path, "the image is neither PNG nor JPEG (only those two are read)");
    else if (declared && ((f == JEV_IMAGE_PNG) != (strcmp(declared, "png") == 0)))
        s = jev_rq_fail(e, 422, path, "the image is declared %s but its bytes are %s", declared, fname);
    if (s != JEV_OK) {
        free(bytes);
        return s;
    }
    r->has_image = true;
    r->image.bytes = bytes;
    r->image.n_bytes = (size_t)n;
    r->image.format = f;
    return JEV_OK;
}

static bool prefix_ci(const char *s, const char *p) { return strncasecmp(s, p, strlen(p)) == 0; }

/*
 * "data:image/png;base64,...." (parameters between the type and ";base64"
 * are allowed, e.g. ";name=x"), or raw base64. Remote URLs are refused: the
 * engine never fetches.
 */
enum jev_status jev_rq_add_image_url(struct jev_request *r, const char *url, const char *path,
                                     struct jev_request_error *e) {
    if (prefix_ci(url, "http://") || prefix_ci(url, "https://") || prefix_ci(url, "file:"))
        return jev_rq_fail(e, 422, path, "only data URLs (or raw base64) are accepted; URLs are not fetched");
    if (!prefix_ci(url, "data:"))
        return jev_rq_add_image_base64(r, url, strlen(url), NULL, path, e);
    const char *comma = strchr(url, ',');
    if (comma == NULL)
        return jev_rq_fail(e, 422, path, "a data URL needs a comma before its data");
    size_t hlen = (size_t)(comma - url);
    if (hlen < 12 || strncasecmp(comma - 7, ";base64", 7) != 0)
        return jev_rq_fail(e, 422, path, "a data URL must be base64 (data:image/png;base64,...)");
    const char *mime = url + 5;
    size_t mlen = strcspn(mime, ";,");
    const char *declared = NULL;
    if (mlen == 9 && strncasecmp(mime, "image/png", 9) == 0)
        declared = "png";
    else if ((mlen == 10 && strncasecmp(mime, "image/jpeg", 10) == 0) ||
             (mlen == 9 && strncasecmp(mime, "image/jpg", 9) == 0))
        declared = "jpeg";
    else
        return jev_rq_fail(e, 422, path, "the data URL type \"%.*s\" is not image/png or image/jpeg", (int)mlen,
                           mime);
    return jev_rq_add_image_base64(r, comma + 1, strlen(comma + 1), declared, path, e);
}

enum jev_status jev_rq_finish(struct jev_request *r, const struct jev_request_opts *opts,
                              struct jev_request_error *e) {
    if (r->has_image && opts && opts->no_vision)
        return jev_rq_fail(e, 501, "images", "the loaded model has no vision tower and cannot read images");
    return JEV_OK;
}

/* ---- System One: questions ---- */

/* The option count a question value will need (0 for malformed ones, which
 * validation refuses later); used to size the block before filling it. */
static int64_t s1_option_count(json_t *q) {
    const char *t = json_string_value(json_object_get(q, "type"));
    json_t *c = json_object_get(q, "criteria");
    if (t == NULL)
        return 0;
    if (strcmp(t, "noul") == 0)
        return 2;
    if (strcmp(t, "choice") == 0 && json_is_object(c))
        return (int64_t)json_object_size(c);
    if (strcmp(t, "score") == 0 && json_is_array(c))
        return (int64_t)json_array_size(c);
    return 0;
}

/* A noul is two fixed options; criteria only adds their descriptions. */
static enum jev_status s1_noul(struct jev_question *q, json_t *crit, const char *path,
                               struct jev_request_error *e) {
    q->n_options = 2;
    q->options[0].key = q->options[0].text = "yes";
    q->options[1].key = q->options[1].text = "no";
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

/*
 * Options keep request order: jansson 2.14 iterates objects in insertion
 * order, and labels (A, B, ...) and answer probabilities follow it (spec
 * §2.2; tests/test-decide-request.c pins a non-alphabetical order).
 */
static enum jev_status s1_choice(struct jev_question *q, json_t *crit, const char *path,
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

/*
 * Level i is criteria[i], lowest first; its key is the digit the model reads.
 * A null level is an undescribed one (the model reads its number alone, the
 * legend echoes null), as a null choice description is: the TypeSafe SDK's
 * score() helper documents "entries may be null" and sends them (spec §2.2).
 */
static enum jev_status s1_score(struct jev_question *q, json_t *crit, const char *path,
                                struct jev_request_error *e) {
    const char *want = "an array of 2 to 10 level descriptions, lowest first";
    if (crit == NULL || json_is_null(crit))
        return jev_rq_fail(e, 422, path, "missing: a score question needs criteria, %s", want);
    if (!json_is_array(crit))
        return jev_rq_fail(e, 422, path, "must be %s", want);
    size_t n = json_array_size(crit);
    if (n < JEV_DECIDE_MIN_LEVELS || n > JEV_DECIDE_MAX_LEVELS)
        return jev_rq_fail(e, 422, path, "has %zu level%s (a score needs %d to %d)", n, n == 1 ? "" : "s",
                           JEV_DECIDE_MIN_LEVELS, JEV_DECIDE_MAX_LEVELS);
    size_t i;
    json_t *v;
    json_array_foreach(crit, i, v) {
        char p[400];
        jev_rq_path(p, sizeof p, "%s[%zu]", path, i);
        q->options[i].key = jev_rq_level_keys[i];
        if (json_is_null(v)) {
            q->options[i].value = v; /* legend: null, desc: none */
            continue;
        }
        if (json_is_string(v) && blank_string(json_string_value(v)))
            return jev_rq_fail(e, 422, p, "a level must not be empty");
        JEV_TRY(jev_rq_check_depth(v, p, e));
        q->options[i].desc = v;
        q->options[i].value = v;
    }
    q->n_options = (int32_t)n;
    return JEV_OK;
}

/*
 * One question: id, shape, type (so that the field list can depend on it),
 * unknown fields (422, spec §2.1 "-> us"), instructions, then the criteria
 * of its type. The order fixes which message a multi-fault question gets.
 */
static enum jev_status s1_question(struct jev_question *q, const char *id, json_t *v, struct jev_request_error *e) {
    char path[400], p[440];
    jev_rq_path(path, sizeof path, "questions.%s", id);
    JEV_TRY(jev_rq_check_id(id, path, e));
    if (!json_is_object(v))
        return jev_rq_fail(e, 422, path, "a question must be an object with type, instructions and criteria");
    q->id = id;
    json_t *t = json_object_get(v, "type");
    jev_rq_path(p, sizeof p, "%s.type", path);
    if (t == NULL)
        return jev_rq_fail(e, 422, p, "missing (one of noul, choice, score)");
    if (!json_is_string(t))
        return jev_rq_fail(e, 422, p, "must be a string (one of noul, choice, score)");
    const char *ts = json_string_value(t);
    if (strcmp(ts, "noul") == 0)
        q->type = JEV_QTYPE_NOUL;
    else if (strcmp(ts, "choice") == 0)
        q->type = JEV_QTYPE_CHOICE;
    else if (strcmp(ts, "score") == 0)
        q->type = JEV_QTYPE_SCORE;
    else if (strcmp(ts, "box") == 0)
        return jev_rq_fail(e, 422, p, "unsupported question type \"box\" (supported: noul, choice, score)");
    else
        return jev_rq_fail(e, 422, p, "unknown question type \"%s\" (one of noul, choice, score)", ts);
    const char *k;
    json_t *f;
    json_object_foreach(v, k, f) {
        if (strcmp(k, "type") != 0 && strcmp(k, "instructions") != 0 && strcmp(k, "criteria") != 0) {
            jev_rq_path(p, sizeof p, "%s.%s", path, k);
            return jev_rq_fail(e, 422, p, "unknown question field (allowed: type, instructions, criteria)");
        }
    }
    jev_rq_path(p, sizeof p, "%s.instructions", path);
    json_t *ins = json_object_get(v, "instructions");
    JEV_TRY(jev_rq_check_instructions(ins, p, e));
    q->instructions = ins;
    jev_rq_path(p, sizeof p, "%s.criteria", path);
    json_t *crit = json_object_get(v, "criteria");
    if (q->type == JEV_QTYPE_NOUL)
        return s1_noul(q, crit, p, e);
    if (q->type == JEV_QTYPE_CHOICE)
        return s1_choice(q, crit, p, e);
    return s1_score(q, crit, p, e);
}

/* ---- System One: images ---- */

/* Whether text `key` occurs in any string or object key under v. */
/* References are plain-text matches (spec §3.1: keys must not occur by accident). */
static bool mentions(const json_t *v, const char *key) {
    if (v == NULL)
        return false;
    if (json_is_string(v))
        return strstr(json_string_value(v), key) != NULL;
    if (json_is_object(v)) {
        const char *k;
        json_t *c;
        json_object_foreach((json_t *)(uintptr_t)v, k, c) {
            if (strstr(k, key) != NULL || mentions(c, key))
                return true;
        }
        return false;
    }
    if (json_is_array(v)) {
        size_t i;
        json_t *c;
        json_array_foreach(v, i, c) {
            if (mentions(c, key))
                return true;
        }
    }
    return false;
}

static bool request_mentions(const struct jev_request *r, const char *key) {
    if (mentions(r->state, key) || (r->context && strstr(r->context, key)))
        return true;
    for (int32_t i = 0; i < r->n_questions; i++) {
        const struct jev_question *q = &r->questions[i];
        if (strstr(q->id, key) || mentions(q->instructions, key))
            return true;
        for (int32_t j = 0; j < q->n_options; j++)
            if ((q->type == JEV_QTYPE_CHOICE && strstr(q->options[j].key, key)) || mentions(q->options[j].desc, key))
                return true;
    }
    return false;
}

/* TypeSafe's assets map; the reference check runs after all questions are in. */
static enum jev_status s1_assets(struct jev_request *r, json_t *assets, struct jev_request_error *e) {
    if (!json_is_object(assets))
        return jev_rq_fail(e, 422, "assets", "must be an object mapping asset keys to image assets");
    const char *k;
    json_t *a;
    json_object_foreach(assets, k, a) {
        char p[400];
        jev_rq_path(p, sizeof p, "assets.%s", k);
        if (k[0] == '\0')
            return jev_rq_fail(e, 422, "assets", "an asset key must not be empty");
        if (!json_is_object(a))
            return jev_rq_fail(e, 422, p, "must be an object {\"type\": \"image\", \"format\", \"data_base64\"}");
        const char *type = json_string_value(json_object_get(a, "type"));
        if (type == NULL || strcmp(type, "image") != 0)
            return jev_rq_fail(e, 422, p, "type must be \"image\" (the only asset type)");
        if (json_object_get(a, "part") != NULL)
            return jev_rq_fail(e, 501, p, "multipart asset parts are not supported; send data_base64");
        const char *fmt = json_string_value(json_object_get(a, "format"));
        if (fmt == NULL || (strcmp(fmt, "png") != 0 && strcmp(fmt, "jpg") != 0 && strcmp(fmt, "jpeg") != 0))
            return jev_rq_fail(e, 422, p, "format must be \"png\" or \"jpg\"");
        json_t *d = json_object_get(a, "data_base64");
        if (!json_is_string(d))
            return jev_rq_fail(e, 422, p, "data_base64 must be a string of base64 (no data: prefix)");
        JEV_TRY(jev_rq_add_image_base64(r, json_string_value(d), json_string_length(d),
                                        strcmp(fmt, "png") == 0 ? "png" : "jpeg", p, e));
        r->image.asset_key = k;
    }
    return JEV_OK;
}

/* The open forms first (images, its alias files), then assets; all count
 * against the one-image limit, in that order. */
static enum jev_status s1_images(struct jev_request *r, json_t *root, struct jev_request_error *e) {
    json_t *v = json_object_get(root, "videos");
    if (v != NULL && !json_is_null(v) && !(json_is_array(v) && json_array_size(v) == 0))
        return jev_rq_fail(e, 422, "videos", "videos are not supported (absent, null or [] only)");
    const char *names[2] = {"images", "files"};
    for (int n = 0; n < 2; n++) {
        json_t *im = json_object_get(root, names[n]);
        if (im == NULL || json_is_null(im))
            continue;
        if (!json_is_array(im))
            return jev_rq_fail(e, 422, names[n], "must be an array of data URLs or base64 strings");
        size_t i;
        json_t *u;
        json_array_foreach(im, i, u) {
            char p[64];
            jev_rq_path(p, sizeof p, "%s[%zu]", names[n], i);
            if (!json_is_string(u))
                return jev_rq_fail(e, 422, p, "must be a data URL or a base64 string");
            JEV_TRY(jev_rq_add_image_url(r, json_string_value(u), p, e));
        }
    }
    json_t *assets = json_object_get(root, "assets");
    if (assets != NULL && !json_is_null(assets))
        JEV_TRY(s1_assets(r, assets, e));
    return JEV_OK;
}

/* ---- System One: the body ---- */

/* The System One body, in the order the refusals are documented (docs/decide.md §3). */
static enum jev_status s1_parse(json_t *root, struct jev_request *r, struct jev_request_error *e) {
    r->shape = JEV_SHAPE_SYSTEMONE;
    json_t *m = json_object_get(root, "model");
    if (m != NULL && !json_is_null(m) && !json_is_string(m))
        return jev_rq_fail(e, 422, "model", "must be a string");
    r->model = json_string_value(m);

    /* state, or SPEC's `document` alias */
    json_t *st = json_object_get(root, "state");
    const char *sname = "state";
    if (st == NULL && json_object_get(root, "document") != NULL) {
        st = json_object_get(root, "document");
        sname = "document";
    } else if (st != NULL && json_object_get(root, "document") != NULL)
        return jev_rq_fail(e, 422, "document", "give state or its alias document, not both");
    if (st == NULL)
        return jev_rq_fail(e, 422, "state", "missing (a string, object or array)");
    if (!json_is_string(st) && !json_is_object(st) && !json_is_array(st))
        return jev_rq_fail(e, 422, sname, "must be a string, object or array, not %s",
                           json_is_null(st) ? "null" : json_is_number(st) ? "a number" : "a boolean");
    JEV_TRY(jev_rq_check_depth(st, sname, e));
    r->state = st;

    /* vLLM's top-level `instructions` extension: text ahead of all questions */
    json_t *ctx = json_object_get(root, "instructions");
    if (ctx != NULL && !json_is_null(ctx) && !json_is_string(ctx))
        return jev_rq_fail(e, 422, "instructions", "must be a string (text placed ahead of all questions)");
    r->context = json_string_value(ctx);

    json_t *qs = json_object_get(root, "questions");
    if (qs == NULL)
        return jev_rq_fail(e, 422, "questions", "missing (an object mapping ids to questions)");
    if (!json_is_object(qs))
        return jev_rq_fail(e, 422, "questions", "must be an object mapping ids to questions");
    size_t nq = json_object_size(qs);
    JEV_TRY(jev_rq_check_question_count(nq, e));
    int64_t nopt = 0;
    const char *id;
    json_t *qv;
    json_object_foreach(qs, id, qv) { nopt += s1_option_count(qv); }
    JEV_TRY(jev_rq_alloc(r, (int32_t)nq, nopt, 0, NULL, e));
    struct jev_option *opts = (struct jev_option *)(r->questions + nq);
    int32_t i = 0;
    json_object_foreach(qs, id, qv) {
        struct jev_question *q = &r->questions[i++];
        q->options = opts;
        JEV_TRY(s1_question(q, id, qv, e));
        JEV_ASSERT(q->n_options == s1_option_count(qv));
        opts += q->n_options;
        r->n_options_total += q->n_options;
    }

    JEV_TRY(s1_images(r, root, e));
    if (r->image.asset_key && !request_mentions(r, r->image.asset_key)) {
        char p[400];
        jev_rq_path(p, sizeof p, "assets.%s", r->image.asset_key);
        return jev_rq_fail(e, 400, p, "the asset is never referenced (write its key in state, instructions or "
                                      "criteria where the image belongs)");
    }
    return JEV_OK;
}

enum jev_status jev_request_parse_systemone(const char *body, size_t len, const struct jev_request_opts *opts,
                                            struct jev_request *out, struct jev_request_error *rerr) {
    memset(out, 0, sizeof *out);
    memset(rerr, 0, sizeof *rerr);
    enum jev_status s = jev_rq_load_body(body, len, opts, &out->root, rerr);
    if (s == JEV_OK)
        s = s1_parse(out->root, out, rerr);
    if (s == JEV_OK)
        s = jev_rq_finish(out, opts, rerr);
    if (s != JEV_OK)
        jev_request_free(out);
    return s;
}

/* ---- lifetime and lookups ---- */

enum jev_status jev_request_set_image_path(struct jev_request *r, const char *path, struct jev_request_error *rerr) {
    memset(rerr, 0, sizeof *rerr);
    if (path == NULL || path[0] == '\0')
        return jev_rq_fail(rerr, 422, "image", "the image path is empty");
    JEV_TRY(count_image(r, "image", rerr));
    json_t *copy = json_string(path);
    if (r->keep == NULL)
        r->keep = json_array();
    if (copy == NULL || r->keep == NULL || json_array_append_new(r->keep, copy) != 0)
        return oom(rerr);
    r->has_image = true;
    r->image.path = json_string_value(copy);
    return JEV_OK;
}

/* The image bytes and the block are ours; every other pointer borrows from root / keep. */
void jev_request_free(struct jev_request *r) {
    if (r == NULL)
        return;
    free(r->image.bytes);
    free(r->block);
    json_decref(r->keep);
    json_decref(r->root);
    memset(r, 0, sizeof *r);
}

const char *jev_qtype_name(enum jev_qtype t) {
    switch (t) {
    case JEV_QTYPE_NOUL: return "noul";
    case JEV_QTYPE_CHOICE: return "choice";
    case JEV_QTYPE_SCORE: return "score";
    }
    return "unknown";
}

int32_t jev_request_find(const struct jev_request *r, const char *id) {
    for (int32_t i = 0; i < r->n_questions; i++)
        if (strcmp(r->questions[i].id, id) == 0)
            return i;
    return -1;
}

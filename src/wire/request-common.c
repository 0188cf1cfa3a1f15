/*
 * request-common.c - what every request shape's parser shares: refusals with
 * their HTTP status, the depth pre-scan, strict base64, image intake, the
 * one allocation that holds a request's questions and options.
 *
 * Not here: the shapes themselves (request-systemone.c, request-openai.c),
 * prompt text, tokens, the token budget (413 from whoever tokenizes), the
 * queue (429).
 */
#include "wire/request-internal.h" // defines: jev_rq_*, struct jev_request

#include "io/jsonw.h" // defines: jev_jsonw_utf8_fix

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

/*
 * The field path ("state.prices[2]") of the value that ends at byte `end` of
 * a body whose parse stopped there: one pass over the bytes before it that
 * keeps, per open container, the last key (objects, as written, escapes
 * included) or the item index (arrays). The pre-scan has bounded the depth.
 * Only used to name the field of a refusal.
 */
static void path_at(const char *s, size_t end, char *out, size_t cap) {
    struct {
        bool obj;       /* object (else array) */
        bool want_key;  /* an object's next string is a key */
        size_t key;     /* the key's first byte */
        size_t key_len; /* its bytes */
        size_t index;   /* an array's item */
    } st[JEV_DECIDE_MAX_DEPTH + JEV_DECIDE_DEPTH_ENVELOPE + 1];
    int depth = 0, max = (int)(sizeof st / sizeof st[0]);
    for (size_t i = 0; i < end; i++) {
        char c = s[i];
        if (c == '"') {
            size_t start = ++i;
            while (i < end && s[i] != '"')
                i += s[i] == '\\' ? 2 : 1;
            if (depth > 0 && st[depth - 1].obj && st[depth - 1].want_key) {
                st[depth - 1].key = start;
                st[depth - 1].key_len = (i < end ? i : end) - start;
                st[depth - 1].want_key = false;
            }
        } else if ((c == '{' || c == '[') && depth < max) {
            st[depth].obj = c == '{';
            st[depth].want_key = c == '{';
            st[depth].key_len = 0;
            st[depth].index = 0;
            depth++;
        } else if ((c == '}' || c == ']') && depth > 0) {
            depth--;
        } else if (c == ',' && depth > 0) {
            st[depth - 1].index++;
            st[depth - 1].want_key = st[depth - 1].obj;
        }
    }
    size_t n = 0;
    out[0] = '\0';
    for (int d = 0; d < depth && n + 1 < cap; d++) {
        int k = st[d].obj ? snprintf(out + n, cap - n, "%s%.*s", n ? "." : "", (int)st[d].key_len, s + st[d].key)
                          : snprintf(out + n, cap - n, "[%zu]", st[d].index);
        n += k > 0 ? (size_t)k : 0;
    }
}

/* A number jansson cannot hold (an integer outside int64, a real past
 * DBL_MAX): 422 naming the field, with the number as written. */
static enum jev_status number_out_of_range(const char *body, size_t pos, struct jev_request_error *e) {
    size_t start = pos;
    while (start > 0 && body[start - 1] != '\0' && strchr("0123456789+-.eE", body[start - 1]) != NULL)
        start--; /* back over the number's own bytes */
    char path[256];
    path_at(body, pos, path, sizeof path);
    size_t n = pos - start;
    return jev_rq_fail(e, 422, path,
                       "the number %.*s%s is out of range (integers from -2^63 to 2^63-1 are kept exactly, reals "
                       "up to 1.7976931348623157e+308 in magnitude)",
                       (int)(n > 40 ? 40 : n), body + start, n > 40 ? "..." : "");
}

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
    if (v == NULL && json_error_code(&jerr) == json_error_numeric_overflow && jerr.position >= 0 &&
        (size_t)jerr.position <= len)
        return number_out_of_range(body, (size_t)jerr.position, e);
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

bool jev_rq_blank(const char *s) { return all_space(s, strlen(s)); }

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
        if (jev_rq_blank(json_string_value(v)))
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

/* An optional OpenAI description: absent, null or a string. */
enum jev_status jev_rq_desc(json_t *item, const char *path, json_t **out, struct jev_request_error *e) {
    json_t *d = json_object_get(item, "description");
    *out = NULL;
    if (d == NULL || json_is_null(d))
        return JEV_OK;
    if (!json_is_string(d)) {
        char p[440];
        jev_rq_path(p, sizeof p, "%s.description", path);
        return jev_rq_fail(e, 422, p, "must be a string");
    }
    *out = d;
    return JEV_OK;
}

enum jev_status jev_rq_only_fields(json_t *obj, const char *path, const char *const *allowed, const char *list,
                                   struct jev_request_error *e) {
    const char *k;
    json_t *v;
    json_object_foreach(obj, k, v) {
        bool ok = false;
        for (const char *const *a = allowed; *a; a++)
            ok = ok || strcmp(*a, k) == 0;
        if (!ok) {
            char p[440];
            jev_rq_path(p, sizeof p, "%s.%s", path, k);
            return jev_rq_fail(e, 422, p, "unknown field (allowed: %s)", list);
        }
    }
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
        return jev_rq_fail(e, 422, path, "a second image (the maximum is %d image per request)", JEV_DECIDE_MAX_IMAGES);
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
        return jev_rq_fail(e, 422, path, "the data URL type \"%.*s\" is not image/png or image/jpeg", (int)mlen, mime);
    return jev_rq_add_image_base64(r, comma + 1, strlen(comma + 1), declared, path, e);
}

enum jev_status jev_rq_finish(struct jev_request *r, const struct jev_request_opts *opts, struct jev_request_error *e) {
    if (r->has_image && opts && opts->no_vision)
        return jev_rq_fail(e, 501, "images", "the loaded model has no vision tower and cannot read images");
    return JEV_OK;
}

/* ---- a path in place of bytes ---- */

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

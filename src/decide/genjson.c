/*
 * genjson.c - the generate_json schema check and stop rule (see genjson.h).
 */
#include "decide/genjson.h" // defines: struct jev_genjson_result

#include "io/jsonw.h" // defines: jev_jsonw_utf8_fix

#include <jansson.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the check ---- */

static void invalid(struct jev_genjson_result *res, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void invalid(struct jev_genjson_result *res, const char *fmt, ...) {
    if (!res->valid)
        return; /* the first problem is the reason */
    res->valid = false;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(res->reason, sizeof res->reason, fmt, ap);
    va_end(ap);
    jev_jsonw_utf8_fix(res->reason); /* it may quote bytes of the output */
}

/* The option of q whose id is v, or -1 (ids are compared exactly, case included). */
static int32_t option_index(const struct jev_question *q, const char *v) {
    for (int32_t i = 0; i < q->n_options; i++)
        if (strcmp(q->options[i].key, v) == 0)
            return i;
    return -1;
}

/* "dog, cat, bird" for a reason message, cut to fit. */
static void list_options(const struct jev_question *q, char *buf, size_t cap) {
    size_t n = 0;
    buf[0] = '\0';
    for (int32_t i = 0; i < q->n_options && n + 1 < cap; i++) {
        int w = snprintf(buf + n, cap - n, "%s%s", i ? ", " : "", q->options[i].key);
        if (w < 0)
            break;
        n += (size_t)w;
    }
}

/*
 * jansson decides "exactly one JSON object": it refuses trailing
 * non-whitespace and, with JSON_REJECT_DUPLICATES, repeated keys. The rest
 * is the schema: keys in output order first (the first unexpected key or
 * bad value is the reason), then the missing ids in request order.
 */
enum jev_status jev_genjson_check(const struct jev_request *r, const char *text, size_t len,
                                  struct jev_genjson_result *out, struct jev_error *err) {
    memset(out, 0, sizeof *out);
    out->n = r->n_questions;
    out->raw = malloc(len + 1);
    out->choice = malloc((size_t)(r->n_questions > 0 ? r->n_questions : 1) * sizeof *out->choice);
    if (out->raw == NULL || out->choice == NULL) {
        jev_genjson_result_free(out);
        return jev_fail(err, JEV_ERR_NOMEM, "generate_json: cannot keep %zu bytes of output", len);
    }
    if (len)
        memcpy(out->raw, text, len);
    out->raw[len] = '\0';
    out->raw_len = len;
    for (int32_t i = 0; i < r->n_questions; i++)
        out->choice[i] = -1;
    out->valid = true;

    /* exactly one JSON object: jansson refuses trailing text and repeated keys */
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (root == NULL) {
        invalid(out, "not one JSON object: %s (line %d, column %d)", jerr.text, jerr.line, jerr.column);
        return JEV_OK;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        invalid(out, "the output is a JSON array, not an object");
        return JEV_OK;
    }
    /* decision id -> index, so that a long output costs O(keys), not O(keys x decisions) */
    json_t *index = json_object();
    for (int32_t i = 0; index && i < r->n_questions; i++)
        if (json_object_set_new(index, r->questions[i].id, json_integer(i)) != 0) {
            json_decref(index);
            index = NULL;
        }
    if (index == NULL) {
        json_decref(root);
        jev_genjson_result_free(out);
        return jev_fail(err, JEV_ERR_NOMEM, "generate_json: cannot index %d decision ids", r->n_questions);
    }
    const char *k;
    json_t *v;
    json_object_foreach(root, k, v) {
        json_t *hit = json_object_get(index, k);
        int32_t qi = hit ? (int32_t)json_integer_value(hit) : -1;
        if (qi < 0) {
            invalid(out, "unexpected key \"%s\" (not a decision id)", k);
            continue;
        }
        const struct jev_question *q = &r->questions[qi];
        char opts[256];
        if (!json_is_string(v)) {
            list_options(q, opts, sizeof opts);
            invalid(out, "\"%s\": the value is not a string option id (one of: %s)", k, opts);
            continue;
        }
        int32_t oi = option_index(q, json_string_value(v));
        if (oi < 0) {
            list_options(q, opts, sizeof opts);
            invalid(out, "\"%s\": \"%s\" is not an option id of this decision (one of: %s)", k, json_string_value(v),
                    opts);
            continue;
        }
        out->choice[qi] = oi;
    }
    int32_t missing = 0, first = -1;
    for (int32_t i = 0; i < r->n_questions; i++) {
        if (json_object_get(root, r->questions[i].id) == NULL) {
            missing++;
            if (first < 0)
                first = i;
        }
    }
    if (missing)
        invalid(out, "%d of %d decision ids missing, the first \"%s\"", missing, r->n_questions,
                r->questions[first].id);
    json_decref(index);
    json_decref(root);
    return JEV_OK;
}

void jev_genjson_result_free(struct jev_genjson_result *res) {
    free(res->raw);
    free(res->choice);
    memset(res, 0, sizeof *res);
}

/* The seed's budget: 24 new tokens per decision (one "qNN": "id", pair takes about 6 to 10). */
int32_t jev_genjson_max_tokens(int32_t n_decisions) {
    int64_t t = 24 * (int64_t)n_decisions;
    return t < 128 ? 128 : t > INT32_MAX ? INT32_MAX : (int32_t)t;
}

/* ---- the stop rule ---- */

void jev_genjson_scan_init(struct jev_genjson_scan *s) { memset(s, 0, sizeof *s); }

/* Brace counting outside strings; '[' and ']' count too, so a nested array
 * cannot close the object early. */
enum jev_genjson_stop jev_genjson_scan_feed(struct jev_genjson_scan *s, const char *bytes, size_t n) {
    for (size_t i = 0; i < n && s->state == JEV_GENJSON_MORE; i++) {
        char c = bytes[i];
        s->pos++;
        if (!s->started) {
            if (c == ' ' || c == '\t' || c == '\r' || c == '\n')
                continue;
            if (c != '{') {
                s->state = JEV_GENJSON_BROKEN; /* anything before the object fails the check */
                break;
            }
            s->started = true;
            s->depth = 1;
            continue;
        }
        if (s->in_string) {
            if (s->escape)
                s->escape = false;
            else if (c == '\\')
                s->escape = true;
            else if (c == '"')
                s->in_string = false;
            continue;
        }
        if (c == '"')
            s->in_string = true;
        else if (c == '{' || c == '[')
            s->depth++;
        else if ((c == '}' || c == ']') && --s->depth == 0) {
            s->state = JEV_GENJSON_COMPLETE;
            s->end = s->pos;
        }
    }
    return s->state;
}

/*
 * jsonw.c - the response writer (see jsonw.h for why it exists).
 */
#include "io/jsonw.h" // defines: struct jev_jsonw

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

void jev_jsonw_init(struct jev_jsonw *w) { jev_buf_init(&w->buf, JEV_JSONW_MAX_BYTES); }

void jev_jsonw_free(struct jev_jsonw *w) { jev_buf_free(&w->buf); }

/* Appends n bytes; after a failure (memory, or the cap) every call is a
 * no-op and finish returns NULL, so callers check once at the end. */
static void put(struct jev_jsonw *w, const char *s, size_t n) { jev_buf_add(&w->buf, s, n, NULL); }

void jev_jsonw_raw(struct jev_jsonw *w, const char *s) { put(w, s, strlen(s)); }

/* jansson's escaping: the two mandatory escapes, the short forms of the
 * common controls, \u00XX for the other bytes below 0x20. Bytes that are
 * not valid UTF-8 (a message quoting a malformed body, a cut at a buffer's
 * end) become U+FFFD, so the output is always valid JSON text. */
static void put_str(struct jev_jsonw *w, const char *s, size_t n) {
    put(w, "\"", 1);
    size_t run = 0; /* bytes copied as is, flushed in one piece */
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        size_t adv = 1;
        char u[8];
        if (c >= 0x80) {
            utf8proc_int32_t cp;
            utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
            if (k > 0) {
                run += (size_t)k;
                i += (size_t)k;
                continue;
            }
            esc = "\xef\xbf\xbd"; /* U+FFFD for one bad byte */
        }
        switch (esc ? 0x80 : c) {
        case 0x80: break; /* already replaced */
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        default:
            if (c < 0x20) {
                snprintf(u, sizeof u, "\\u%04x", c);
                esc = u;
            }
        }
        if (esc == NULL) {
            run++;
            i++;
            continue;
        }
        put(w, s + i - run, run);
        run = 0;
        put(w, esc, strlen(esc));
        i += adv;
    }
    put(w, s + n - run, run);
    put(w, "\"", 1);
}

void jev_jsonw_str(struct jev_jsonw *w, const char *s) { put_str(w, s, strlen(s)); }

void jev_jsonw_utf8_fix(char *s) {
    size_t n = strlen(s);
    for (size_t i = 0; i < n;) {
        utf8proc_int32_t cp;
        utf8proc_ssize_t k = utf8proc_iterate((const utf8proc_uint8_t *)s + i, (utf8proc_ssize_t)(n - i), &cp);
        if (k > 0) {
            i += (size_t)k;
        } else {
            s[i] = '?';
            i++;
        }
    }
}

/* The shortest of %.1g .. %.17g that reads back to d; 17 digits always do. */
void jev_format_double(double d, char out[32]) {
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(out, 32, "%.*g", prec, d);
        if (strtod(out, NULL) == d)
            break;
    }
    /* an integral value keeps a fraction so that readers see a real */
    if (strpbrk(out, ".eEn") == NULL)
        strcat(out, ".0");
}

void jev_jsonw_double(struct jev_jsonw *w, double d) {
    if (!isfinite(d)) {
        jev_jsonw_raw(w, "null");
        return;
    }
    char b[32];
    jev_format_double(d, b);
    jev_jsonw_raw(w, b);
}

void jev_jsonw_int(struct jev_jsonw *w, int64_t v) {
    char b[32];
    snprintf(b, sizeof b, "%" PRId64, v);
    jev_jsonw_raw(w, b);
}

/* Recursion depth is bounded by the request's nesting limit (32). */
void jev_jsonw_value(struct jev_jsonw *w, const json_t *v) {
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        put(w, "{", 1);
        const char *k;
        json_t *c;
        bool first = true;
        json_object_foreach((json_t *)(uintptr_t)v, k, c) {
            if (!first)
                put(w, ",", 1);
            first = false;
            jev_jsonw_str(w, k);
            put(w, ":", 1);
            jev_jsonw_value(w, c);
        }
        put(w, "}", 1);
        break;
    }
    case JSON_ARRAY: {
        put(w, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                put(w, ",", 1);
            jev_jsonw_value(w, json_array_get(v, i));
        }
        put(w, "]", 1);
        break;
    }
    case JSON_STRING: put_str(w, json_string_value(v), json_string_length(v)); break;
    case JSON_INTEGER: jev_jsonw_int(w, (int64_t)json_integer_value(v)); break;
    case JSON_REAL: jev_jsonw_double(w, json_real_value(v)); break;
    case JSON_TRUE: jev_jsonw_raw(w, "true"); break;
    case JSON_FALSE: jev_jsonw_raw(w, "false"); break;
    case JSON_NULL: jev_jsonw_raw(w, "null"); break;
    }
}

static void put_newline(struct jev_jsonw *w, int indent, int level) {
    put(w, "\n", 1);
    for (int i = 0; i < indent * level; i++)
        put(w, " ", 1);
}

/* The prompt layout; objects keep their stored (= request) key order. */
static void value_indent(struct jev_jsonw *w, const json_t *v, int indent, int level) {
    if (json_is_object(v) && json_object_size(v) > 0) {
        put(w, "{", 1);
        const char *k;
        json_t *c;
        bool first = true;
        json_object_foreach((json_t *)(uintptr_t)v, k, c) {
            if (!first)
                put(w, ",", 1);
            first = false;
            put_newline(w, indent, level + 1);
            jev_jsonw_str(w, k);
            put(w, ": ", 2);
            value_indent(w, c, indent, level + 1);
        }
        put_newline(w, indent, level);
        put(w, "}", 1);
    } else if (json_is_array(v) && json_array_size(v) > 0) {
        put(w, "[", 1);
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                put(w, ",", 1);
            put_newline(w, indent, level + 1);
            value_indent(w, json_array_get(v, i), indent, level + 1);
        }
        put_newline(w, indent, level);
        put(w, "]", 1);
    } else {
        jev_jsonw_value(w, v); /* scalars and empty containers */
    }
}

void jev_jsonw_value_indent(struct jev_jsonw *w, const json_t *v, int indent) { value_indent(w, v, indent, 0); }

char *jev_jsonw_finish(struct jev_jsonw *w) {
    char *out = NULL;
    jev_buf_take(&w->buf, &out, NULL, NULL);
    return out;
}

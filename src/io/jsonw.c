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

/* CPython's json.dumps escaping with ensure_ascii=False (its ESCAPE set is
 * exactly '"', '\\' and U+0000..U+001F): the two mandatory escapes, the short
 * forms \b \f \n \r \t, \u00xx (lower-case hex) for the other bytes below
 * 0x20; DEL, U+2028 and every other character are copied through as UTF-8.
 * Bytes that are not valid UTF-8 (a message quoting a malformed body, a cut at a buffer's
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

/* s = [-]d[.ddd]e(+|-)XX as "%.*e" writes it: replaces it, in place, with
 * the next decimal of as many digits away from zero (1.99e+03 -> 2.00e+03,
 * 9.9e+03 -> 1.0e+04); s holds size bytes. */
static void next_decimal_up(char *s, size_t size) {
    char *e = strchr(s, 'e');
    int exp10 = atoi(e + 1);
    size_t lead = s[0] == '-'; /* index of the first digit */
    for (size_t i = (size_t)(e - s); i-- > lead;) {
        if (s[i] == '.')
            continue;
        if (s[i] != '9') {
            s[i]++;
            return;
        }
        s[i] = '0';
    }
    /* all nines: the leading digit becomes 1, the exponent grows by one */
    s[lead] = '1';
    snprintf(e, size - (size_t)(e - s), "e%+03d", exp10 + 1);
}

/*
 * float.__repr__ (CPython's format_float_short, mode 'r'). C has no shortest
 * round-trip conversion, and a well-kept one (Ryu, double-conversion) is not
 * among this project's dependencies for one function that runs a few
 * hundred times per request, so the digits come from glibc's correctly
 * rounded printf and strtod: for p = 1..17, the p-digit decimal nearest to d
 * ("%.{p-1}e") is the first candidate; when it does not read back, the only
 * other p-digit candidate that can is its neighbour away from zero, and only
 * when d is a power of two (there the gap to the next double below is half
 * the gap above, so the nearest decimal can lie below and outside while the
 * next one up is inside: 2^-24 is 5.960464477539063e-08, not the 17-digit
 * 5.9604644775390625e-08). Among shortest candidates that read back, the
 * nearest wins, as in David Gay's dtoa mode 0 that CPython uses; the tests
 * compare against Python for every kind of double.
 *
 * The layout: scientific when the decimal point would sit more than 16
 * digits to the right of the first digit or 4 or more zeros to its left
 * (repr switches at 1e16 and below 1e-4), the exponent signed with at least
 * two digits (1e+16, 1e-05); otherwise positional with at least one digit
 * after the point (100.0, 0.0001).
 */
void jev_format_double(double d, char out[32]) {
    if (!isfinite(d)) {
        snprintf(out, 32, "%s", isnan(d) ? "nan" : d < 0 ? "-inf" : "inf");
        return;
    }
    int bexp;
    bool pow2 = fabs(frexp(d, &bexp)) == 0.5;
    char tmp[32];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, d);
        if (strtod(tmp, NULL) == d)
            break;
        if (pow2) {
            next_decimal_up(tmp, sizeof tmp);
            if (strtod(tmp, NULL) == d)
                break;
        }
    }
    /* the sign, the significant digits (trailing zeros dropped: %e pads) and
     * the exponent; d = 0.DIGITS x 10^decpt */
    const char *q = tmp;
    bool neg = *q == '-';
    if (neg)
        q++;
    char digits[24];
    int nd = 0;
    for (; *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0')
        nd--;
    int decpt = d == 0 ? 1 : exp10 + 1;
    size_t m = 0;
    if (neg)
        out[m++] = '-';
    if (decpt > 16 || decpt <= -4) {
        out[m++] = digits[0];
        if (nd > 1) {
            out[m++] = '.';
            memcpy(out + m, digits + 1, (size_t)nd - 1);
            m += (size_t)nd - 1;
        }
        snprintf(out + m, 32 - m, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
        return;
    }
    if (decpt <= 0) {
        out[m++] = '0';
        out[m++] = '.';
        for (int i = 0; i < -decpt; i++)
            out[m++] = '0';
        memcpy(out + m, digits, (size_t)nd);
        m += (size_t)nd;
    } else if (decpt >= nd) {
        memcpy(out + m, digits, (size_t)nd);
        m += (size_t)nd;
        for (int i = nd; i < decpt; i++)
            out[m++] = '0';
        out[m++] = '.';
        out[m++] = '0';
    } else {
        memcpy(out + m, digits, (size_t)decpt);
        m += (size_t)decpt;
        out[m++] = '.';
        memcpy(out + m, digits + decpt, (size_t)(nd - decpt));
        m += (size_t)(nd - decpt);
    }
    out[m] = '\0';
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
        size_t klen;
        json_t *c;
        bool first = true;
        json_object_keylen_foreach((json_t *)(uintptr_t)v, k, klen, c) {
            if (!first)
                put(w, ",", 1);
            first = false;
            put_str(w, k, klen);
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

/* CPython's json encoder (_iterencode) with an indent: a container opens, each
 * item goes on its own line one level deeper, items end in "," (no trailing
 * space when indenting, since Python 3.4), keys are followed by ": ", the
 * closer goes on its own line at the container's level; empty containers
 * stay "{}" / "[]". Objects keep their stored (= request) key order.
 * Recursion depth is bounded by the request's nesting limit (32). */
static void value_indent(struct jev_jsonw *w, const json_t *v, int indent, int level) {
    if (json_is_object(v) && json_object_size(v) > 0) {
        put(w, "{", 1);
        const char *k;
        size_t klen;
        json_t *c;
        bool first = true;
        json_object_keylen_foreach((json_t *)(uintptr_t)v, k, klen, c) {
            if (!first)
                put(w, ",", 1);
            first = false;
            put_newline(w, indent, level + 1);
            put_str(w, k, klen);
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

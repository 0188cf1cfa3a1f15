/*
 * jsonw.h - a small JSON text writer for responses whose bytes we promise:
 * keys in the order written, compact, and doubles in their shortest form
 * that reads back to the same double (full precision, no "%.17g" noise).
 *
 * Why not json_dumps: jansson prints reals with "%.17g" (0.1 becomes
 * 0.10000000000000001), and responses carry many probabilities. Everything
 * else (string escaping rules, caller JSON echoed back) matches jansson's
 * compact output. Not a parser; not for untrusted format strings.
 */
#ifndef JEV_IO_JSONW_H
#define JEV_IO_JSONW_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct jev_jsonw {
    char *buf;   /* text so far, NUL-terminated when non-NULL */
    size_t len;  /* bytes in buf */
    size_t cap;  /* bytes allocated */
    bool failed; /* an allocation failed: finish returns NULL */
};

void jev_jsonw_init(struct jev_jsonw *w);
void jev_jsonw_free(struct jev_jsonw *w);

/* Appends text as is. */
void jev_jsonw_raw(struct jev_jsonw *w, const char *s);
/* Appends a quoted, escaped string (UTF-8 passes through). */
void jev_jsonw_str(struct jev_jsonw *w, const char *s);
/* Appends a number: shortest round-trip form, ".0" added to integral values,
 * null for NaN / infinity (never produced for finite answers). */
void jev_jsonw_double(struct jev_jsonw *w, double d);
void jev_jsonw_int(struct jev_jsonw *w, int64_t v);
/* Appends a caller JSON value, compact, keys in their stored order. */
void jev_jsonw_value(struct jev_jsonw *w, const json_t *v);

/* Appends a caller JSON value in the fixed indented layout of the prompts:
 * `indent` spaces per level, "key": value, one item per line, empty
 * containers as {} / [], UTF-8 unescaped (jansson's JSON_INDENT layout). */
void jev_jsonw_value_indent(struct jev_jsonw *w, const json_t *v, int indent);

/* The text (caller frees with free()), or NULL after a failed allocation;
 * the writer is reset either way. */
char *jev_jsonw_finish(struct jev_jsonw *w);

/* Replaces, in place, every byte that is not part of valid UTF-8 with '?'
 * (messages that quote malformed input must stay valid text). */
void jev_jsonw_utf8_fix(char *s);

/* Shortest "%.*g" form of d that strtod reads back exactly; out holds 32. */
void jev_format_double(double d, char out[32]);

#endif

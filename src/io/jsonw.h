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

#include "base/buf.h" // defines: struct jev_buf

/* The most text one writer holds. Generous: a response echoes each byte of
 * a request at most three times (a score option's key in the legend and in
 * the probabilities, and its text) plus under 80 bytes per option (4096
 * questions x 255 options), about 180 MB for the largest (32 MiB) request;
 * the prompts' indented JSON of a request also stays under it unless the
 * request nests and repeats on purpose, and then it fails here (finish
 * returns NULL) instead of growing without bound. */
#define JEV_JSONW_MAX_BYTES ((size_t)256 << 20)

struct jev_jsonw {
    struct jev_buf buf; /* text so far, at most JEV_JSONW_MAX_BYTES; a failure makes finish return NULL */
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

/* The text (caller frees with free()), or NULL after a failed allocation or
 * past JEV_JSONW_MAX_BYTES; the writer is reset either way. */
char *jev_jsonw_finish(struct jev_jsonw *w);

/* Replaces, in place, every byte that is not part of valid UTF-8 with '?'
 * (messages that quote malformed input must stay valid text). */
void jev_jsonw_utf8_fix(char *s);

/* Shortest "%.*g" form of d that strtod reads back exactly; out holds 32. */
void jev_format_double(double d, char out[32]);

#endif

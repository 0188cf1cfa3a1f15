/*
 * jsonw.h - jev's one JSON text writer, for responses and prompts whose
 * bytes we promise: keys in the order written, strings escaped and numbers
 * written as CPython's json module writes them (floats as float.__repr__:
 * shortest round-trip digits, 100.0, 1e+16, 1e-05), either compact (the
 * responses) or in the indented layout of the prompts, which is
 * json.dumps(value, indent=2, ensure_ascii=False) byte for byte.
 *
 * Why not json_dumps: jansson prints reals with "%.17g" (0.1 becomes
 * 0.10000000000000001), and its indented layout is not Python's.
 * Not a parser; not for untrusted format strings.
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
/* Appends a number as jev_format_double writes it; null for NaN / infinity
 * (never produced for finite answers, and JSON input has none). */
void jev_jsonw_double(struct jev_jsonw *w, double d);
void jev_jsonw_int(struct jev_jsonw *w, int64_t v);
/* Appends a caller JSON value, compact, keys in their stored order. */
void jev_jsonw_value(struct jev_jsonw *w, const json_t *v);

/* Appends a caller JSON value as Python's json.dumps(v, indent=indent,
 * ensure_ascii=False) writes it: `indent` spaces per level, one item per
 * line ending in ",", "key": value, empty containers as {} / [], objects in
 * their stored (= request) key order, UTF-8 unescaped, integers exact,
 * floats as float.__repr__. tests/golden/state-render.json holds the proof. */
void jev_jsonw_value_indent(struct jev_jsonw *w, const json_t *v, int indent);

/* The text (caller frees with free()), or NULL after a failed allocation or
 * past JEV_JSONW_MAX_BYTES; the writer is reset either way. */
char *jev_jsonw_finish(struct jev_jsonw *w);

/* Replaces, in place, every byte that is not part of valid UTF-8 with '?'
 * (messages that quote malformed input must stay valid text). */
void jev_jsonw_utf8_fix(char *s);

/* Python's repr(d): the shortest digits that strtod reads back exactly,
 * nearest to d among those, laid out like float.__repr__ ("0.1", "100.0",
 * "-0.0", "1e+16", "1e-05", "5e-324"); "inf", "-inf", "nan" for the
 * non-finite. out holds 32 (the longest is 24 bytes). */
void jev_format_double(double d, char out[32]);

#endif

/*
 * genjson.h - strict checking of generate_json output, and its stop rule.
 *
 * The generate_json path asks the model for one compact JSON object mapping
 * every decision id to an option id (prompt-render.h). The output is valid
 * only if, with no repair of any kind:
 *   - it is exactly one JSON object (leading / trailing whitespace allowed,
 *     nothing else: no code fence, no prose, no second value),
 *   - its keys are exactly the decision ids: none missing, none extra, none
 *     repeated,
 *   - every value is a string equal to one of that decision's option ids
 *     (choice: the option key; noul: "yes" / "no"; score: "0".."N-1").
 * The raw text is always kept, valid or not (benchmark.md: failed outputs
 * are part of the record).
 *
 * Stop rule. The benchmark stops generation at EOS or at the token budget
 * max(128, 24 x decisions) (jev_genjson_max_tokens); that is the default and
 * what the published seed did. jev_genjson_scan offers the alternative of
 * stopping at the brace that closes the top-level object, and at the first
 * byte that already makes the output invalid (a non-space before '{'). Brace
 * stopping is more lenient than EOS stopping (whatever the model would have
 * written after the brace is never seen, so trailing text cannot fail the
 * check); a run that uses it must say so in its record.
 */
#ifndef JEV_DECIDE_GENJSON_H
#define JEV_DECIDE_GENJSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h"     // defines: struct jev_error
#include "decide/request.h" // defines: struct jev_request

#define JEV_GENJSON_REASON_MAX 512

struct jev_genjson_result {
    bool valid;                          /* the output meets the schema */
    int32_t n;                           /* decisions (the request's questions) */
    int32_t *choice;                     /* (n) option index per decision; -1 when missing or not allowed */
    char reason[JEV_GENJSON_REASON_MAX]; /* the first problem, "" when valid */
    char *raw;                           /* (raw_len) a copy of the output, NUL-terminated */
    size_t raw_len;                      /* bytes of raw */
};

/* Checks text against the request's decisions. Returns JEV_OK whether the
 * output is valid or not (see out->valid); fails only on allocation. Free
 * out with jev_genjson_result_free. */
enum jev_status jev_genjson_check(const struct jev_request *r, const char *text, size_t len,
                                  struct jev_genjson_result *out, struct jev_error *err);
void jev_genjson_result_free(struct jev_genjson_result *res);

/* max(128, 24 x decisions): the benchmark's new-token budget. */
int32_t jev_genjson_max_tokens(int32_t n_decisions);

/* ---- the optional stop rule ---- */

enum jev_genjson_stop {
    JEV_GENJSON_MORE = 0,     /* keep generating */
    JEV_GENJSON_COMPLETE = 1, /* the top-level object just closed */
    JEV_GENJSON_BROKEN = 2,   /* the output can no longer be valid */
};

/* A byte scanner fed with the decoded text as it grows (any chunking). */
struct jev_genjson_scan {
    int32_t depth;               /* open objects/arrays */
    bool started;                /* the top-level '{' was seen */
    bool in_string;              /* inside a JSON string */
    bool escape;                 /* the previous string byte was a backslash */
    enum jev_genjson_stop state; /* sticky once not MORE */
    size_t pos;                  /* bytes fed so far */
    size_t end;                  /* COMPLETE: bytes up to and including the closing brace */
};

void jev_genjson_scan_init(struct jev_genjson_scan *s);
enum jev_genjson_stop jev_genjson_scan_feed(struct jev_genjson_scan *s, const char *bytes, size_t n);

#endif

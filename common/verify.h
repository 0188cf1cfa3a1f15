/*
 * verify.h - the check of multi-token candidate scoring (`jev verify`,
 * benchmark.md "Multi-token scoring verification").
 *
 * For each case - a question and candidate texts, chosen to exercise the
 * trie: shared beginnings ("New York" / "New Delhi"), one candidate that is
 * a prefix of another, Chinese text - the engine's text-mode scoring
 * (shared path: prefix prefill, forked suffix, trie rounds, full-vocabulary
 * log-softmax at the query positions only) is compared, token by token,
 * with a plain full forward of prompt + candidate per candidate (no fork, no
 * trie, logits over the full vocabulary at every candidate position,
 * log-softmax in double). Reported: per token both log-probabilities, the
 * maximum absolute difference, and whether the candidate argmax agrees.
 *
 * What it is not: a model-quality test (a synthetic model's answers are
 * meaningless; the check is that the two computations agree).
 */
#ifndef JEV_COMMON_VERIFY_H
#define JEV_COMMON_VERIFY_H

#include <jansson.h>
#include <stdbool.h>

#include "base/error.h"      // defines: struct jev_error
#include "decide/pipeline.h" // defines: struct jev_decider

struct jev_verify_opts {
    const char *image;       /* an image for every case's prompt; NULL = text only */
    enum jev_trie_norm norm; /* candidate normalisation (sum default) */
    double tolerance;        /* pass when every |engine - reference| <= this; 0 = 1e-4 */
};

struct jev_verify_summary {
    int32_t n_cases;         /* cases run */
    int32_t n_tokens;        /* candidate tokens compared */
    double max_abs_diff;     /* over every token of every candidate */
    double argmax_agreement; /* fraction of cases whose candidate argmax agrees */
    bool pass;               /* max_abs_diff <= tolerance and full argmax agreement */
};

/*
 * Runs the built-in cases. *out (caller json_decref's) is the record that
 * `jev verify` writes: the cases with every candidate's token ids and both
 * per-token log-probabilities, the distributions, and the summary.
 */
enum jev_status jev_verify_run(struct jev_decider *d, const struct jev_verify_opts *opts, json_t **out,
                               struct jev_verify_summary *sum, struct jev_error *err);

#endif

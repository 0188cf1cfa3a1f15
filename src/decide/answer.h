/*
 * answer.h - typed answers from distributions.
 *
 * Input: per question, a distribution over its options in request order
 * (probabilities, unnormalised masses, or logits through jev_softmax). Out:
 *   noul    P(yes) (= probs[0]); no confidence on the wire (spec §4.2)
 *   choice  winner = argmax (ties go to the first in request order), the
 *           probabilities renormalised to sum to 1, confidence
 *           clip((k p_max - 1)/(k - 1), 0, 1), and 1 when k = 1 (§4.3)
 *   score   expected level sum_i i p_i, probabilities keyed "0".."N-1", the
 *           legend, confidence by llama.cpp's rule: mode = argmax,
 *           d = sum_i p_i |i - mode|, d_u = (1/N) sum_i |i - (N-1)/2|,
 *           confidence = max(0, 1 - d / d_u)  (= 2 p_max - 1 at N = 2)
 *
 * Not here: where the distributions come from (labels.h, trie.h), the
 * response bodies (wire/response.h).
 */
#ifndef JEV_DECIDE_ANSWER_H
#define JEV_DECIDE_ANSWER_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h"     // defines: struct jev_error
#include "decide/request.h" // defines: struct jev_request, enum jev_qtype

/* ---- math ---- */

/* Softmax in double with max-subtraction. -inf (and NaN, read as -inf)
 * entries get 0; all -inf gives the uniform distribution; +inf entries share
 * the mass equally. out may alias x. */
void jev_softmax(const double *x, int32_t n, double *out);

/* log-softmax with the same conventions (all -inf gives log(1/n)). */
void jev_log_softmax(const double *x, int32_t n, double *out);

/* Renormalises non-negative weights to sum to 1: NaN and negative weights
 * count as 0, +inf ones share the mass, an all-zero vector is uniform; the
 * rounding residue goes to the largest entry. out may alias w. */
void jev_normalize(const double *w, int32_t n, double *out);

/* The first index of the largest value. */
int32_t jev_argmax(const double *p, int32_t n);

/* clip((k p_max - 1)/(k - 1), 0, 1); 1 when k = 1. p sums to 1. */
double jev_confidence_choice(const double *p, int32_t n);

/* llama.cpp's score confidence (see the file comment); p sums to 1, n >= 2. */
double jev_confidence_score(const double *p, int32_t n);

/* sum_i i p_i. */
double jev_score_expected(const double *p, int32_t n);

/* ---- answers ---- */

struct jev_answer {
    enum jev_qtype type; /* the question's type */
    int32_t n;           /* options (noul: 2, [0] = yes) */
    double *probs;       /* (n) request order, sums to 1; points into jev_answers.probs */
    int32_t winner;      /* argmax, first in request order on ties */
    double confidence;   /* choice / score formula; noul: the choice formula with k = 2 (not sent) */
    double score;        /* score: expected level; noul: P(yes); choice: probs[winner] */
    bool refused;        /* OpenAI refusal answer (jev's scorer never sets it today) */
};

/* One answer per question of a request, allocated once. */
struct jev_answers {
    int32_t n;                /* = request n_questions */
    struct jev_answer *items; /* (n) */
    double *probs;            /* (sum of n_options) the storage items[i].probs point into */
};

enum jev_status jev_answers_init(struct jev_answers *a, const struct jev_request *r, struct jev_error *err);
void jev_answers_free(struct jev_answers *a);

/* Fills an answer from weights in request order (copied, renormalised). */
void jev_answer_set_probs(struct jev_answer *a, const double *w);
/* Fills an answer from logits (softmax first). */
void jev_answer_set_logits(struct jev_answer *a, const double *logits);

/* Token counts of one answered request. */
struct jev_usage {
    int64_t input_tokens;  /* prefill tokens evaluated, shared prefix once, image tokens included */
    int64_t output_tokens; /* 0 for scoring; generated tokens for generate_json */
    int64_t cached_tokens; /* OpenAI input_tokens_details.cached_tokens */
};

#endif

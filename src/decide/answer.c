/*
 * answer.c - distributions into typed answers (formulas: answer.h and
 * spec/systemone.md §4).
 */
#include "decide/answer.h" // defines: struct jev_answer

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "decide/qtype.h" // defines: jev_qtype_get

/* INFINITY is a float constant; comparisons here are in double. */
#define D_INF ((double)INFINITY)

/* ---- math ---- */

/*
 * Double precision throughout: label logits arrive as f32, but the
 * probabilities go on the wire at full precision and must sum to 1, and the
 * max-subtraction keeps exp() in range for any logit scale.
 */
void jev_softmax(const double *x, int32_t n, double *out) {
    if (n <= 0)
        return;
    double mx = -D_INF;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > mx) /* NaN compares false: never the max */
            mx = x[i];
    if (mx == -D_INF || mx == D_INF) {
        /* all -inf: uniform; some +inf: they split the mass */
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++)
            k += mx == -D_INF || x[i] == D_INF;
        for (int32_t i = 0; i < n; i++)
            out[i] = (mx == -D_INF || x[i] == D_INF) ? 1.0 / k : 0.0;
        return;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        out[i] = isnan(x[i]) ? 0.0 : exp(x[i] - mx);
        sum += out[i];
    }
    for (int32_t i = 0; i < n; i++)
        out[i] /= sum; /* sum >= 1: the max term is exp(0) */
}

/* log p_i = x_i - (max + log sum exp(x - max)): one pass for the sum, one to write. */
void jev_log_softmax(const double *x, int32_t n, double *out) {
    if (n <= 0)
        return;
    double mx = -D_INF;
    for (int32_t i = 0; i < n; i++)
        if (x[i] > mx)
            mx = x[i];
    if (mx == -D_INF || mx == D_INF) {
        /* the softmax's limit cases, in log form (no buffer: n may be a vocabulary) */
        int32_t k = 0;
        for (int32_t i = 0; i < n; i++)
            k += mx == -D_INF || x[i] == D_INF;
        for (int32_t i = 0; i < n; i++)
            out[i] = (mx == -D_INF || x[i] == D_INF) ? -log((double)k) : -D_INF;
        return;
    }
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++)
        sum += isnan(x[i]) ? 0.0 : exp(x[i] - mx);
    double lse = mx + log(sum);
    for (int32_t i = 0; i < n; i++)
        out[i] = isnan(x[i]) ? -D_INF : x[i] - lse;
}

/*
 * The one place weights become a distribution. The SPEC allows a sum of 1
 * within 1e-6 and clients have been seen summing three-decimal values to
 * 0.999; jev renormalises after every step instead, so what is written sums
 * to 1 to the last ulp or two.
 */
void jev_normalize(const double *w, int32_t n, double *out) {
    if (n <= 0)
        return;
    int32_t n_inf = 0;
    for (int32_t i = 0; i < n; i++)
        n_inf += w[i] == D_INF;
    double sum = 0.0;
    for (int32_t i = 0; i < n; i++) {
        double v = n_inf ? (w[i] == D_INF ? 1.0 : 0.0) : (isnan(w[i]) || w[i] < 0.0 ? 0.0 : w[i]);
        out[i] = v;
        sum += v;
    }
    if (!(sum > 0.0) || !isfinite(sum)) {
        /* all zero, or finite weights whose sum overflowed: scale down first */
        double mx = 0.0;
        for (int32_t i = 0; i < n; i++)
            mx = out[i] > mx ? out[i] : mx;
        sum = 0.0;
        for (int32_t i = 0; i < n; i++) {
            out[i] = mx > 0.0 ? out[i] / mx : 1.0;
            sum += out[i];
        }
    }
    double total = 0.0;
    for (int32_t i = 0; i < n; i++) {
        out[i] /= sum;
        total += out[i];
    }
    /* the division leaves a residue of a few ulps; give it to the largest
     * entry so that the sum a client computes is 1 as closely as doubles allow */
    int32_t top = jev_argmax(out, n);
    double fixed = out[top] + (1.0 - total);
    out[top] = fixed < 0.0 ? 0.0 : fixed > 1.0 ? 1.0 : fixed;
}

/* Strictly greater wins, so ties go to the first in request order (the documented rule). */
int32_t jev_argmax(const double *p, int32_t n) {
    int32_t best = 0;
    for (int32_t i = 1; i < n; i++)
        if (p[i] > p[best])
            best = i;
    return best;
}

/* Jev's published formula (§4.3): 0 for uniform, 1 for certainty. */
double jev_confidence_choice(const double *p, int32_t n) {
    if (n <= 1)
        return 1.0;
    double c = (n * p[jev_argmax(p, n)] - 1.0) / (n - 1);
    return c < 0.0 ? 0.0 : c > 1.0 ? 1.0 : c;
}

/*
 * llama.cpp's rule for any N (§4.3 "-> us"): the expected distance from the
 * mode, relative to that of a uniform distribution. d_u > 0 for N >= 2.
 */
double jev_confidence_score(const double *p, int32_t n) {
    if (n <= 1)
        return 1.0;
    int32_t mode = jev_argmax(p, n);
    double d = 0.0, du = 0.0, mid = (n - 1) / 2.0;
    for (int32_t i = 0; i < n; i++) {
        d += p[i] * fabs((double)(i - mode));
        du += fabs(i - mid);
    }
    du /= n;
    double c = 1.0 - d / du;
    return c < 0.0 ? 0.0 : c > 1.0 ? 1.0 : c;
}

double jev_score_expected(const double *p, int32_t n) {
    double s = 0.0;
    for (int32_t i = 0; i < n; i++)
        s += i * p[i];
    return s;
}

/* ---- answers ---- */

/* One block for every answer and its probabilities, sized from the request. */
enum jev_status jev_answers_init(struct jev_answers *a, const struct jev_request *r, struct jev_error *err) {
    memset(a, 0, sizeof *a);
    size_t total = 0;
    for (int32_t i = 0; i < r->n_questions; i++)
        total += (size_t)r->questions[i].n_options;
    /* size first: the answers, then every question's probabilities, in one block */
    size_t ib = (size_t)r->n_questions * sizeof(struct jev_answer);
    void *block = calloc(1, ib + total * sizeof(double) + 1);
    if (block == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "answers: cannot allocate %d answers", r->n_questions);
    a->n = r->n_questions;
    a->items = block;
    a->probs = (double *)(void *)((char *)block + ib);
    double *p = a->probs;
    for (int32_t i = 0; i < r->n_questions; i++) {
        a->items[i].type = r->questions[i].type;
        a->items[i].n = r->questions[i].n_options;
        a->items[i].probs = p;
        p += a->items[i].n;
        /* a fresh answer is the uniform distribution, never garbage */
        for (int32_t j = 0; j < a->items[i].n; j++)
            a->items[i].probs[j] = 1.0;
        jev_answer_set_probs(&a->items[i], a->items[i].probs);
    }
    return JEV_OK;
}

void jev_answers_free(struct jev_answers *a) {
    free(a->items);
    memset(a, 0, sizeof *a);
}

/* Derives every field from the renormalised distribution; w may alias a->probs. */
void jev_answer_set_probs(struct jev_answer *a, const double *w) {
    jev_normalize(w, a->n, a->probs);
    a->winner = jev_argmax(a->probs, a->n);
    jev_qtype_get(a->type)->answer(a); /* score and confidence are the type's */
}

void jev_answer_set_logits(struct jev_answer *a, const double *logits) {
    jev_softmax(logits, a->n, a->probs);
    jev_answer_set_probs(a, a->probs);
}

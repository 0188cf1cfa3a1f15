/*
 * answer-diff.h - two responses of the same request compared as the batch's
 * exactness contract says (docs/server.md): the same JSON shape, the same
 * keys, strings (choices, labels, ids) and integers (usage), and every real
 * number (probabilities, scores, confidences) within a tolerance. What the
 * tests of requests answered in company use; one request alone is compared
 * byte for byte instead.
 *
 * Where the CPU kernels allow it (OpenBLAS's SkylakeX kernels: rows of a
 * matrix product do not depend on the other rows of the call, backend/cpu/
 * cpu-matmul.c), answers in company are the same bytes as alone, and the
 * tests ask for that (answer_exact_company).
 *
 * What it is not: a JSON diff for people (it reports the largest difference
 * and whether anything else differed). Header-only (static functions).
 */
#ifndef JEV_TESTS_ANSWER_DIFF_H
#define JEV_TESTS_ANSWER_DIFF_H

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>
#include <strings.h>

#include "common/json-diff.h" // defines: jev_json_diff_walk

/* The largest difference between two response bodies' real numbers, or -1 when they differ in
 * anything else (or one is not JSON). */
static inline double answer_diff(const char *a, const char *b) {
    json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
    double worst = 0;
    bool same = ja && jb && jev_json_diff_walk(ja, jb, &worst);
    json_decref(ja);
    json_decref(jb);
    return same ? worst : -1;
}

/* OpenBLAS's name for the kernels it runs (also what tools/jev.c reads). */
char *openblas_get_corename(void);

/* Whether answers in company are the same bytes as alone on this machine: the server (a jev child
 * runs with the same OPENBLAS_CORETYPE, tests/run.sh) takes OpenBLAS's SkylakeX kernels. */
static inline bool answer_exact_company(void) {
    const char *core = openblas_get_corename();
    return core && !strcasecmp(core, "skylakex");
}

/* A response in company against the same request's alone: the same bytes where the kernels allow it,
 * else within 1e-6 with the same keys, choices and usage. *worst gets the difference (-1: other). */
static inline bool answer_same_in_company(const char *company, const char *alone, double *worst) {
    double d = company && alone ? answer_diff(company, alone) : -1;
    if (worst)
        *worst = d;
    if (answer_exact_company())
        return company && alone && !strcmp(company, alone);
    return d >= 0 && d <= 1e-6;
}

#endif

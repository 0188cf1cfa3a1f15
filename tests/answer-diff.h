/*
 * answer-diff.h - two responses of the same request compared as the batch's
 * exactness contract says (docs/server.md): the same JSON shape, the same
 * keys, strings (choices, labels, ids) and integers (usage), and every real
 * number (probabilities, scores, confidences) within a tolerance. What the
 * tests of requests answered in company use; one request alone is compared
 * byte for byte instead.
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

/* Walks a and b together: *worst gets the largest |a - b| over their real numbers; false when
 * anything but a real number differs (a key, a string, an integer, a length, a type). */
static inline bool answer_diff_walk(const json_t *a, const json_t *b, double *worst) {
    if (json_is_real(a) && json_is_real(b)) {
        double d = fabs(json_real_value(a) - json_real_value(b));
        if (d > *worst)
            *worst = d;
        return true;
    }
    if (json_typeof(a) != json_typeof(b))
        return false;
    if (json_is_object(a)) {
        if (json_object_size(a) != json_object_size(b))
            return false;
        const char *k;
        json_t *v;
        json_object_foreach((json_t *)(uintptr_t)a, k, v) {
            const json_t *w = json_object_get(b, k);
            if (!w || !answer_diff_walk(v, w, worst))
                return false;
        }
        return true;
    }
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!answer_diff_walk(json_array_get(a, i), json_array_get(b, i), worst))
                return false;
        return true;
    }
    return json_equal((json_t *)(uintptr_t)a, (json_t *)(uintptr_t)b);
}

/* The largest difference between two response bodies' real numbers, or -1 when they differ in
 * anything else (or one is not JSON). */
static inline double answer_diff(const char *a, const char *b) {
    json_t *ja = a ? json_loads(a, 0, NULL) : NULL, *jb = b ? json_loads(b, 0, NULL) : NULL;
    double worst = 0;
    bool same = ja && jb && answer_diff_walk(ja, jb, &worst);
    json_decref(ja);
    json_decref(jb);
    return same ? worst : -1;
}

#endif

/*
 * json-diff.h - two JSON values of the same shape compared number by number:
 * the largest difference of their real numbers, and whether anything else
 * (a key, a string, an integer, a length, a type) differs. The rule by which
 * answers in company are held to answers alone: the tests
 * (tests/answer-diff.h) and the load benchmark's --compare
 * (bench/serve-load.c) both use it.
 *
 * What it is not: a JSON diff for people. Header-only (static inline).
 */
#ifndef JEV_COMMON_JSON_DIFF_H
#define JEV_COMMON_JSON_DIFF_H

#include <jansson.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>

/* Walks a and b together: *worst gets the largest |a - b| over their real numbers; false when
 * anything but a real number differs (a key, a string, an integer, a length, a type). */
static inline bool jev_json_diff_walk(const json_t *a, const json_t *b, double *worst) {
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
            if (!w || !jev_json_diff_walk(v, w, worst))
                return false;
        }
        return true;
    }
    if (json_is_array(a)) {
        if (json_array_size(a) != json_array_size(b))
            return false;
        for (size_t i = 0; i < json_array_size(a); i++)
            if (!jev_json_diff_walk(json_array_get(a, i), json_array_get(b, i), worst))
                return false;
        return true;
    }
    return json_equal((json_t *)(uintptr_t)a, (json_t *)(uintptr_t)b);
}

#endif

/*
 * test-matrices.h - host weight matrices of every type for the op tests (tests/test-ops.c,
 * tests/cuda/test-cuda-*.c): f32, bf16, f16 and MLX affine codes of any width with f32, bf16 or
 * f16 scales, filled from the deterministic 0.1 + 2 cos(i) that the tests use for data; and the NMSE
 * the op tests compare with.
 * Include after <cmocka.h> (allocation failures are test failures).
 */
#ifndef JEV_TESTS_TEST_MATRICES_H
#define JEV_TESTS_TEST_MATRICES_H

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "base/half.h"     // defines: jev_f32_to_bf16, jev_f32_to_f16
#include "model/weights.h" // defines: struct jev_matrix

static inline float mat_det(int64_t i) { return 0.1f + 2.0f * (float)cos((double)i); }

/* A host matrix and the storage it owns. */
struct mat {
    struct jev_matrix m;          /* the host matrix */
    void *data, *scales, *biases; /* owned storage */
};

static inline void mat_free(struct mat *a) {
    free(a->data);
    free(a->scales);
    free(a->biases);
}

static inline struct mat mat_make(enum jev_mtype type, int32_t rows, int32_t cols, int bits, int group,
                                  enum jev_stype stype, int64_t seed) {
    struct mat a = {0};
    a.m.type = type;
    a.m.rows = rows;
    a.m.cols = cols;
    a.m.name = "test";
    size_t n = (size_t)rows * (size_t)cols;
    if (type == JEV_MTYPE_F32) {
        float *d = malloc(n * sizeof(float));
        assert_non_null(d);
        for (size_t i = 0; i < n; i++)
            d[i] = mat_det((int64_t)i * 7 + seed) * 0.05f;
        a.data = d;
    } else if (type == JEV_MTYPE_BF16 || type == JEV_MTYPE_F16) {
        uint16_t *d = malloc(n * sizeof(uint16_t));
        assert_non_null(d);
        for (size_t i = 0; i < n; i++) {
            float v = mat_det((int64_t)i * 7 + seed) * 0.05f;
            d[i] = type == JEV_MTYPE_BF16 ? jev_f32_to_bf16(v) : jev_f32_to_f16(v);
        }
        a.data = d;
    } else {
        a.m.bits = bits;
        a.m.group = group;
        a.m.stype = stype;
        size_t words = (size_t)rows * (size_t)cols * (size_t)bits / 32;
        uint32_t *d = calloc(words + 1, sizeof(uint32_t));
        assert_non_null(d);
        for (int32_t r = 0; r < rows; r++)
            for (int32_t c = 0; c < cols; c++) {
                uint32_t code =
                    (uint32_t)((mat_det((int64_t)r * cols + c + seed) + 1.9f) / 4.0f * (float)((1 << bits) - 1));
                code &= (1u << bits) - 1;
                int64_t bit = ((int64_t)r * cols + c) * bits;
                d[bit >> 5] |= code << (bit & 31);
                if ((bit & 31) + bits > 32)
                    d[(bit >> 5) + 1] |= code >> (32 - (bit & 31));
            }
        size_t groups = (size_t)rows * (size_t)(cols / group);
        size_t sz = stype == JEV_STYPE_F32 ? 4 : 2;
        a.scales = malloc(groups * sz);
        a.biases = malloc(groups * sz);
        assert_true(a.scales && a.biases);
        for (size_t g = 0; g < groups; g++) {
            float s = 0.01f + 0.002f * mat_det((int64_t)g + 3), b = -0.05f + 0.01f * mat_det((int64_t)g + 11);
            if (stype == JEV_STYPE_F32) {
                ((float *)a.scales)[g] = s;
                ((float *)a.biases)[g] = b;
            } else {
                ((uint16_t *)a.scales)[g] = stype == JEV_STYPE_BF16 ? jev_f32_to_bf16(s) : jev_f32_to_f16(s);
                ((uint16_t *)a.biases)[g] = stype == JEV_STYPE_BF16 ? jev_f32_to_bf16(b) : jev_f32_to_f16(b);
            }
        }
        a.data = d;
        a.m.scales = a.scales;
        a.m.biases = a.biases;
    }
    a.m.data = a.data;
    return a;
}

/* Normalised mean squared error of got against ref: sum (ref - got)^2 / sum ref^2 (the plain sum
 * when ref is all zero). The op tests' measure of agreement. */
static inline double mat_nmse(const float *ref, const float *got, int64_t n) {
    double num = 0, den = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = (double)ref[i] - (double)got[i];
        num += d * d;
        den += (double)ref[i] * (double)ref[i];
    }
    return den > 0 ? num / den : num;
}

/* A matrix shape and type of the op tests. */
struct mcase {
    const char *name;
    enum jev_mtype type;
    int32_t rows, cols;
    int bits, group;
    enum jev_stype stype;
};

/* The cases every matmul test covers: each type, odd shapes, every affine width and scale type
 * (3, 5, 6 bits and group 4 take the CPU's generic path). For `{MAT_CASES, ...}` initializers. */
#define MAT_CASES                                                                                                      \
    {"f32", JEV_MTYPE_F32, 70, 96, 0, 0, JEV_STYPE_F32}, {"f32 odd cols", JEV_MTYPE_F32, 37, 29, 0, 0, JEV_STYPE_F32}, \
        {"bf16", JEV_MTYPE_BF16, 70, 128, 0, 0, JEV_STYPE_F32},                                                        \
        {"bf16 odd", JEV_MTYPE_BF16, 13, 51, 0, 0, JEV_STYPE_F32},                                                     \
        {"f16", JEV_MTYPE_F16, 33, 64, 0, 0, JEV_STYPE_F32}, {"f16 odd", JEV_MTYPE_F16, 5, 3, 0, 0, JEV_STYPE_F32},    \
        {"q4 g64 bf16", JEV_MTYPE_QAFFINE, 70, 256, 4, 64, JEV_STYPE_BF16},                                            \
        {"q4 g32 f32", JEV_MTYPE_QAFFINE, 41, 128, 4, 32, JEV_STYPE_F32},                                              \
        {"q4 g64 f16", JEV_MTYPE_QAFFINE, 19, 192, 4, 64, JEV_STYPE_F16},                                              \
        {"q4 g4 (generic)", JEV_MTYPE_QAFFINE, 9, 32, 4, 4, JEV_STYPE_BF16},                                           \
        {"q8 g64 bf16", JEV_MTYPE_QAFFINE, 50, 128, 8, 64, JEV_STYPE_BF16},                                            \
        {"q8 g32 f32", JEV_MTYPE_QAFFINE, 17, 96, 8, 32, JEV_STYPE_F32},                                               \
        {"q3 g64 bf16 (generic)", JEV_MTYPE_QAFFINE, 23, 128, 3, 64, JEV_STYPE_BF16},                                  \
        {"q2 g32 f16", JEV_MTYPE_QAFFINE, 11, 64, 2, 32, JEV_STYPE_F16},                                               \
        {"q5 g64 bf16 (generic)", JEV_MTYPE_QAFFINE, 29, 128, 5, 64, JEV_STYPE_BF16}, {                                \
        "q6 g64 f32 (generic)", JEV_MTYPE_QAFFINE, 31, 192, 6, 64, JEV_STYPE_F32                                       \
    }

#endif

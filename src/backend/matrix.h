/*
 * matrix.h - the weight matrix format every backend computes with: f32,
 * bf16, f16 rows, or MLX's affine 4-bit (any of 2..8 bits) codes with a
 * scale and a bias per group. The model's loader points these at the mapped
 * file; a backend's mirror may hold its own copy (ops.h, matrix_mirror).
 *
 * jev_matrix_get / jev_matrix_row (matrix.c) are the reference
 * dequantization that every kernel must agree with.
 */
#ifndef JEV_BACKEND_MATRIX_H
#define JEV_BACKEND_MATRIX_H

#include <stdint.h>

#include "base/half.h" // defines: jev_bf16_to_f32, jev_f16_to_f32

enum jev_mtype {
    JEV_MTYPE_F32 = 0,     /* float rows */
    JEV_MTYPE_BF16 = 1,    /* bfloat16 rows */
    JEV_MTYPE_F16 = 2,     /* IEEE half rows */
    JEV_MTYPE_QAFFINE = 3, /* MLX affine: code stream per row, scale/bias per group */
};

/* The float type of a quantized matrix's scales and biases. */
enum jev_stype { JEV_STYPE_F32 = 0, JEV_STYPE_BF16 = 1, JEV_STYPE_F16 = 2 };

/* A weight matrix of `rows` outputs by `cols` inputs, row-major. */
struct jev_matrix {
    enum jev_mtype type;  /* element encoding */
    int32_t rows;         /* out features */
    int32_t cols;         /* in features (logical, before packing) */
    const void *data;     /* F32/BF16/F16: [rows][cols]; QAFFINE: u32 [rows][cols*bits/32] */
    const void *scales;   /* QAFFINE only: [rows][cols/group] of stype */
    const void *biases;   /* QAFFINE only: [rows][cols/group] of stype */
    enum jev_stype stype; /* QAFFINE only */
    int32_t bits;         /* QAFFINE only: 2, 3, 4, 5, 6 or 8 */
    int32_t group;        /* QAFFINE only: group size along cols */
    const char *name;     /* tensor name in the file, for messages */
};

/* Scale or bias i of a quantized matrix's stype-typed array p, widened exactly to f32: the reference's
 * (matrix.c), which the kernels read through too. */
static inline float jev_matrix_scale(enum jev_stype t, const void *p, int64_t i) {
    switch (t) {
    case JEV_STYPE_F32: return ((const float *)p)[i];
    case JEV_STYPE_BF16: return jev_bf16_to_f32(((const uint16_t *)p)[i]);
    case JEV_STYPE_F16: return jev_f16_to_f32(((const uint16_t *)p)[i]);
    }
    return 0.0f;
}

/* One element of a matrix as f32 (slow; for tests and references). */
float jev_matrix_get(const struct jev_matrix *m, int64_t row, int64_t col);

/* Dequantizes/converts row `row` into out[cols] (f32). */
void jev_matrix_row(const struct jev_matrix *m, int64_t row, float *out);

#endif

/*
 * matrix.c - element and row access for struct jev_matrix (matrix.h).
 *
 * This is the reference dequantization that every kernel must agree with:
 *   F32/BF16/F16: the stored value, widened exactly to f32.
 *   QAFFINE: W[r][k] = scale[r][k/G] * q[r][k] + bias[r][k/G], in f32, where
 *   q is element k of row r's little-endian bit stream of `bits`-bit codes.
 */
#include "backend/matrix.h" // defines: struct jev_matrix, jev_matrix_scale

/* The code of element k in a row's bit stream (bits may straddle u32 words). */
static uint32_t qcode(const uint32_t *row, int64_t k, int bits) {
    int64_t bit = k * bits;
    int64_t w = bit >> 5;
    int off = (int)(bit & 31);
    uint64_t v = row[w];
    if (off + bits > 32)
        v |= (uint64_t)row[w + 1] << 32;
    return (uint32_t)(v >> off) & ((1u << bits) - 1u);
}

float jev_matrix_get(const struct jev_matrix *m, int64_t r, int64_t c) {
    switch (m->type) {
    case JEV_MTYPE_F32: return ((const float *)m->data)[r * m->cols + c];
    case JEV_MTYPE_BF16: return jev_bf16_to_f32(((const uint16_t *)m->data)[r * m->cols + c]);
    case JEV_MTYPE_F16: return jev_f16_to_f32(((const uint16_t *)m->data)[r * m->cols + c]);
    case JEV_MTYPE_QAFFINE: {
        int64_t words = (int64_t)m->cols * m->bits / 32;
        int64_t groups = m->cols / m->group;
        const uint32_t *row = (const uint32_t *)m->data + r * words;
        float s = jev_matrix_scale(m->stype, m->scales, r * groups + c / m->group);
        float b = jev_matrix_scale(m->stype, m->biases, r * groups + c / m->group);
        return s * (float)qcode(row, c, m->bits) + b;
    }
    }
    return 0.0f;
}

void jev_matrix_row(const struct jev_matrix *m, int64_t r, float *out) {
    if (m->type == JEV_MTYPE_QAFFINE) {
        int64_t words = (int64_t)m->cols * m->bits / 32;
        int64_t groups = m->cols / m->group;
        const uint32_t *row = (const uint32_t *)m->data + r * words;
        for (int64_t g = 0; g < groups; g++) {
            float s = jev_matrix_scale(m->stype, m->scales, r * groups + g);
            float b = jev_matrix_scale(m->stype, m->biases, r * groups + g);
            for (int64_t k = g * m->group; k < (g + 1) * m->group; k++)
                out[k] = s * (float)qcode(row, k, m->bits) + b;
        }
        return;
    }
    for (int64_t c = 0; c < m->cols; c++)
        out[c] = jev_matrix_get(m, r, c);
}

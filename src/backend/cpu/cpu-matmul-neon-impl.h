/*
 * cpu-matmul-neon-impl.h - the NEON (aarch64) forms of cpu-matmul.c's hot kernels: the fused
 * few-token dot products (f32, bf16, f16, 8-bit and 4-bit rows) and the row dequantization of
 * the sgemm path. cpu-matmul.c includes this in place of its AVX2 kernels when it is built for
 * aarch64 (JEV_CPU_X86 0), so the functions keep the AVX2 ones' names, signatures and static
 * linkage; the driver around them (tasks, blocking, sgemm, prefetch) is shared. Not a header
 * for anything else: it needs cpu-matmul.c's enum kind and Q4_MAX_GROUPS (and matrix.h's jev_matrix_scale).
 *
 * Why written here rather than left to SIMDe (which compiles the other AVX2 kernels on aarch64):
 * GCC keeps SIMDe's 8-lane values in memory, so a 4 rows x 2 tokens kernel stored and reloaded
 * its 16 accumulators on every step (seen in the disassembly); these keep them in registers.
 *
 * Numerics are the AVX2 kernels', lane for lane: each 8-lane accumulator is two float32x4_t
 * (lanes 0-3 and 4-7) fed by the same fused multiply-adds in the same order, and the horizontal
 * sum adds the halves, then lanes (0+2)+(1+3), as jev_hsum8 does. Dequantized values are
 * scale * q + bias as a separate multiply and add (no FMA: -std=c11 does not contract them),
 * bit-identical to jev_matrix_row (tests/test-ops.c checks it exactly through embed).
 */
#ifndef JEV_BACKEND_CPU_MATMUL_NEON_IMPL_H
#define JEV_BACKEND_CPU_MATMUL_NEON_IMPL_H

#include <arm_neon.h>

/* 8 lanes as two halves. */
typedef struct {
    float32x4_t lo, hi;
} f32x8;

static inline f32x8 f8_zero(void) { return (f32x8){vdupq_n_f32(0.0f), vdupq_n_f32(0.0f)}; }
static inline f32x8 f8_load(const float *p) { return (f32x8){vld1q_f32(p), vld1q_f32(p + 4)}; }
static inline f32x8 f8_dup(float v) { return (f32x8){vdupq_n_f32(v), vdupq_n_f32(v)}; }
static inline void f8_store(float *p, f32x8 v) {
    vst1q_f32(p, v.lo);
    vst1q_f32(p + 4, v.hi);
}
/* acc + a * b, fused (as _mm256_fmadd_ps(a, b, acc)) */
static inline f32x8 f8_fma(f32x8 acc, f32x8 a, f32x8 b) {
    return (f32x8){vfmaq_f32(acc.lo, a.lo, b.lo), vfmaq_f32(acc.hi, a.hi, b.hi)};
}
/* s * q + b, rounded twice (the reference's dequantization) */
static inline f32x8 f8_mul_add(f32x8 s, f32x8 q, f32x8 b) {
    return (f32x8){vaddq_f32(vmulq_f32(s.lo, q.lo), b.lo), vaddq_f32(vmulq_f32(s.hi, q.hi), b.hi)};
}
/* jev_hsum8's order: halves, then (0 + 2) + (1 + 3) */
static inline float f8_hsum(f32x8 v) {
    float32x4_t s = vaddq_f32(v.lo, v.hi);
    float32x2_t p = vadd_f32(vget_low_f32(s), vget_high_f32(s));
    return vget_lane_f32(p, 0) + vget_lane_f32(p, 1);
}

/* 8 bf16 -> 8 f32 (exact: a shift). */
static inline f32x8 load_bf16x8_neon(const uint16_t *p) {
    uint16x8_t h = vld1q_u16(p);
    return (f32x8){vreinterpretq_f32_u32(vshll_n_u16(vget_low_u16(h), 16)),
                   vreinterpretq_f32_u32(vshll_high_n_u16(h, 16))};
}

/* 8 f16 -> 8 f32 (exact). */
static inline f32x8 load_f16x8_neon(const uint16_t *p) {
    float16x8_t h = vreinterpretq_f16_u16(vld1q_u16(p));
    return (f32x8){vcvt_f32_f16(vget_low_f16(h)), vcvt_high_f32_f16(h)};
}

/* 8 codes of 0..255 (u8, element order) as f32 */
static inline f32x8 u8x8_to_f8(uint8x8_t b) {
    uint16x8_t h = vmovl_u8(b);
    return (f32x8){vcvtq_f32_u32(vmovl_u16(vget_low_u16(h))), vcvtq_f32_u32(vmovl_high_u16(h))};
}

/* The 8 4-bit codes of one u32 word, element order (nibble j = element j), as f32. */
static inline f32x8 q4x8_neon(const uint32_t *word) {
    uint8x8_t b = vreinterpret_u8_u32(vdup_n_u32(*word)); /* bytes 0-3 (again in 4-7) */
    /* byte k: element 2k low, 2k + 1 high; interleaving the two gives elements 0..7 */
    return u8x8_to_f8(vzip1_u8(vand_u8(b, vdup_n_u8(15)), vshr_n_u8(b, 4)));
}

/* The 16 4-bit codes of 8 bytes as q4x16 gives them: even elements (low nibbles), odd (high). */
static inline void q4x16_neon(const uint8_t *p, f32x8 *even, f32x8 *odd) {
    uint8x8_t b = vld1_u8(p);
    *even = u8x8_to_f8(vand_u8(b, vdup_n_u8(15)));
    *odd = u8x8_to_f8(vshr_n_u8(b, 4));
}

/* The 8 8-bit codes of two u32 words (byte j = element j), as f32. */
static inline f32x8 q8x8_neon(const uint32_t *word) { return u8x8_to_f8(vld1_u8((const uint8_t *)word)); }

/* ---- row dequantization (both regimes) ---- */

/* Row r of w as f32 into out[cols], bit-identical to jev_matrix_row. */
static void dequant_row(const struct jev_matrix *w, enum kind k, int64_t r, float *out) {
    int64_t cols = w->cols;
    switch (k) {
    case K_F32: memcpy(out, (const float *)w->data + r * cols, (size_t)cols * sizeof(float)); return;
    case K_BF16: {
        const uint16_t *p = (const uint16_t *)w->data + r * cols;
        for (int64_t c = 0; c < cols; c += 8)
            f8_store(out + c, load_bf16x8_neon(p + c));
        return;
    }
    case K_F16: {
        const uint16_t *p = (const uint16_t *)w->data + r * cols;
        for (int64_t c = 0; c < cols; c += 8)
            f8_store(out + c, load_f16x8_neon(p + c));
        return;
    }
    case K_Q4:
    case K_Q8: {
        int64_t words = cols * w->bits / 32, groups = cols / w->group;
        const uint32_t *row = (const uint32_t *)w->data + r * words;
        int wpe8 = w->bits / 4; /* u32 words per 8 elements: 1 (4-bit) or 2 (8-bit) */
        for (int64_t g = 0; g < groups; g++) {
            f32x8 s = f8_dup(jev_matrix_scale(w->stype, w->scales, r * groups + g));
            f32x8 b = f8_dup(jev_matrix_scale(w->stype, w->biases, r * groups + g));
            for (int64_t c = g * w->group; c < (g + 1) * w->group; c += 8) {
                const uint32_t *wp = row + (c / 8) * wpe8;
                f8_store(out + c, f8_mul_add(s, k == K_Q4 ? q4x8_neon(wp) : q8x8_neon(wp), b));
            }
        }
        return;
    }
    case K_GENERIC: jev_matrix_row(w, r, out); return;
    }
}

/* ---- fused kernels (few tokens) ---- */

/* Dot products of nr (1..4) rows with nt (1..2) tokens, as cpu-matmul.c's FUSED_DENSE. */
#define FUSED_DENSE_NEON(NAME, ELEM, LOAD)                                                                             \
    static void NAME(const ELEM *const *rows, int nr, const float *x0, const float *x1, int64_t cols, float *y0,       \
                     float *y1) {                                                                                      \
        f32x8 a00 = f8_zero(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00;            \
        const ELEM *r0 = rows[0], *r1 = rows[nr > 1 ? 1 : 0], *r2 = rows[nr > 2 ? 2 : 0], *r3 = rows[nr > 3 ? 3 : 0];  \
        for (int64_t c = 0; c < cols; c += 8) {                                                                        \
            f32x8 xa = f8_load(x0 + c), xb = f8_load(x1 + c);                                                          \
            f32x8 w0 = LOAD(r0 + c), w1 = LOAD(r1 + c), w2 = LOAD(r2 + c), w3 = LOAD(r3 + c);                          \
            a00 = f8_fma(a00, w0, xa);                                                                                 \
            a01 = f8_fma(a01, w0, xb);                                                                                 \
            a10 = f8_fma(a10, w1, xa);                                                                                 \
            a11 = f8_fma(a11, w1, xb);                                                                                 \
            a20 = f8_fma(a20, w2, xa);                                                                                 \
            a21 = f8_fma(a21, w2, xb);                                                                                 \
            a30 = f8_fma(a30, w3, xa);                                                                                 \
            a31 = f8_fma(a31, w3, xb);                                                                                 \
        }                                                                                                              \
        float o0[4] = {f8_hsum(a00), f8_hsum(a10), f8_hsum(a20), f8_hsum(a30)};                                        \
        float o1[4] = {f8_hsum(a01), f8_hsum(a11), f8_hsum(a21), f8_hsum(a31)};                                        \
        for (int j = 0; j < nr; j++) {                                                                                 \
            y0[j] = o0[j];                                                                                             \
            if (y1)                                                                                                    \
                y1[j] = o1[j];                                                                                         \
        }                                                                                                              \
    }

FUSED_DENSE_NEON(fused_f32, float, f8_load)
FUSED_DENSE_NEON(fused_bf16, uint16_t, load_bf16x8_neon)
FUSED_DENSE_NEON(fused_f16, uint16_t, load_f16x8_neon)

/* 8-bit rows: per group the scale and bias, then 8 codes at a time, dequantized in registers. */
static void fused_q8(const struct jev_matrix *w, const int64_t *rid, int nr, const float *x0, const float *x1,
                     float *y0, float *y1) {
    int64_t cols = w->cols, words = cols * w->bits / 32, groups = cols / w->group;
    const uint32_t *rp[4];
    for (int j = 0; j < 4; j++)
        rp[j] = (const uint32_t *)w->data + rid[j < nr ? j : 0] * words;
    f32x8 a[4][2];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        a[j][0] = a[j][1] = f8_zero();
    for (int64_t g = 0; g < groups; g++) {
        f32x8 s[4], b[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            int64_t rr = rid[j < nr ? j : 0];
            s[j] = f8_dup(jev_matrix_scale(w->stype, w->scales, rr * groups + g));
            b[j] = f8_dup(jev_matrix_scale(w->stype, w->biases, rr * groups + g));
        }
        for (int64_t c = g * w->group; c < (g + 1) * w->group; c += 8) {
            f32x8 xa = f8_load(x0 + c), xb = f8_load(x1 + c);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                f32x8 wv = f8_mul_add(s[j], q8x8_neon(rp[j] + (c / 8) * 2), b[j]);
                a[j][0] = f8_fma(a[j][0], wv, xa);
                a[j][1] = f8_fma(a[j][1], wv, xb);
            }
        }
    }
    for (int j = 0; j < nr; j++) {
        y0[j] = f8_hsum(a[j][0]);
        if (y1)
            y1[j] = f8_hsum(a[j][1]);
    }
}

/* 4-bit rows, factorised per group as cpu-matmul.c says: scales of row r into s[groups]; returns
 * sum_g bias_g * xs[g] (bf16 scales 8 groups at a time, as the AVX2 form). */
static float q4_row_params(const struct jev_matrix *w, int64_t r, const float *xs, float *s) {
    int64_t groups = w->cols / w->group, g = 0;
    float bias = 0.0f;
    if (w->stype == JEV_STYPE_BF16) {
        const uint16_t *sp = (const uint16_t *)w->scales + r * groups, *bp = (const uint16_t *)w->biases + r * groups;
        f32x8 acc = f8_zero();
        for (; g + 8 <= groups; g += 8) {
            f8_store(s + g, load_bf16x8_neon(sp + g));
            acc = f8_fma(acc, load_bf16x8_neon(bp + g), f8_load(xs + g));
        }
        bias = f8_hsum(acc);
    }
    for (; g < groups; g++) {
        s[g] = jev_matrix_scale(w->stype, w->scales, r * groups + g);
        bias += jev_matrix_scale(w->stype, w->biases, r * groups + g) * xs[g];
    }
    return bias;
}

/* acc + o * xo + e * xe, in the AVX2 form's order (the even product first) */
static inline f32x8 q4_step(f32x8 acc, f32x8 e, f32x8 o, f32x8 xe, f32x8 xo) {
    return f8_fma(f8_fma(acc, e, xe), o, xo);
}

static void q4_1tok(const struct jev_matrix *w, const int64_t *rid, int nr, const float *x, const float *xs, float *y) {
    int64_t cols = w->cols, words = cols / 8, groups = cols / w->group, G = w->group;
    const uint8_t *rp[4];
    float sc[4][Q4_MAX_GROUPS], bias[4];
    for (int j = 0; j < 4; j++) {
        rp[j] = (const uint8_t *)((const uint32_t *)w->data + rid[j < nr ? j : 0] * words);
        bias[j] = q4_row_params(w, rid[j < nr ? j : 0], xs, sc[j]);
    }
    f32x8 tot0 = f8_zero(), tot1 = tot0, tot2 = tot0, tot3 = tot0;
    for (int64_t g = 0; g < groups; g++) {
        f32x8 a0 = f8_zero(), a1 = a0, a2 = a0, a3 = a0, e, o;
        for (int64_t c = g * G; c < (g + 1) * G; c += 16) {
            f32x8 xe = f8_load(x + c), xo = f8_load(x + c + 8);
            q4x16_neon(rp[0] + c / 2, &e, &o);
            a0 = q4_step(a0, e, o, xe, xo);
            q4x16_neon(rp[1] + c / 2, &e, &o);
            a1 = q4_step(a1, e, o, xe, xo);
            q4x16_neon(rp[2] + c / 2, &e, &o);
            a2 = q4_step(a2, e, o, xe, xo);
            q4x16_neon(rp[3] + c / 2, &e, &o);
            a3 = q4_step(a3, e, o, xe, xo);
        }
        tot0 = f8_fma(tot0, a0, f8_dup(sc[0][g]));
        tot1 = f8_fma(tot1, a1, f8_dup(sc[1][g]));
        tot2 = f8_fma(tot2, a2, f8_dup(sc[2][g]));
        tot3 = f8_fma(tot3, a3, f8_dup(sc[3][g]));
    }
    float out[4] = {f8_hsum(tot0) + bias[0], f8_hsum(tot1) + bias[1], f8_hsum(tot2) + bias[2], f8_hsum(tot3) + bias[3]};
    for (int j = 0; j < nr; j++)
        y[j] = out[j];
}

/* Two rows against two tokens, same factorisation. */
static void q4_2tok(const struct jev_matrix *w, const int64_t *rid, int nr, const float *x0, const float *x1,
                    const float *xs0, const float *xs1, float *y0, float *y1) {
    int64_t cols = w->cols, words = cols / 8, groups = cols / w->group, G = w->group;
    int64_t ra = rid[0], rb = rid[nr > 1 ? 1 : 0];
    const uint8_t *r0 = (const uint8_t *)((const uint32_t *)w->data + ra * words);
    const uint8_t *r1 = (const uint8_t *)((const uint32_t *)w->data + rb * words);
    float s0[Q4_MAX_GROUPS], s1[Q4_MAX_GROUPS];
    float b00 = q4_row_params(w, ra, xs0, s0), b10 = q4_row_params(w, rb, xs0, s1);
    float b01 = 0.0f, b11 = 0.0f;
    for (int64_t g = 0; g < groups; g++) {
        b01 += jev_matrix_scale(w->stype, w->biases, ra * groups + g) * xs1[g];
        b11 += jev_matrix_scale(w->stype, w->biases, rb * groups + g) * xs1[g];
    }
    f32x8 t00 = f8_zero(), t01 = t00, t10 = t00, t11 = t00;
    for (int64_t g = 0; g < groups; g++) {
        f32x8 a00 = f8_zero(), a01 = a00, a10 = a00, a11 = a00, e0, o0, e1, o1;
        for (int64_t c = g * G; c < (g + 1) * G; c += 16) {
            f32x8 xae = f8_load(x0 + c), xao = f8_load(x0 + c + 8);
            f32x8 xbe = f8_load(x1 + c), xbo = f8_load(x1 + c + 8);
            q4x16_neon(r0 + c / 2, &e0, &o0);
            q4x16_neon(r1 + c / 2, &e1, &o1);
            a00 = q4_step(a00, e0, o0, xae, xao);
            a01 = q4_step(a01, e0, o0, xbe, xbo);
            a10 = q4_step(a10, e1, o1, xae, xao);
            a11 = q4_step(a11, e1, o1, xbe, xbo);
        }
        f32x8 sa = f8_dup(s0[g]), sb = f8_dup(s1[g]);
        t00 = f8_fma(t00, a00, sa);
        t01 = f8_fma(t01, a01, sa);
        t10 = f8_fma(t10, a10, sb);
        t11 = f8_fma(t11, a11, sb);
    }
    y0[0] = f8_hsum(t00) + b00;
    y1[0] = f8_hsum(t01) + b01;
    if (nr > 1) {
        y0[1] = f8_hsum(t10) + b10;
        y1[1] = f8_hsum(t11) + b11;
    }
}

#endif

/*
 * cpu-matmul.c - the fast CPU matrix products: y[n][rows] = x[n][cols] . W^T
 * for f32, bf16, f16 and MLX affine-quantized W, threaded over the pool.
 *
 * Two regimes, picked by the token count n:
 * - One or two tokens (decode, n < JEV_CPU_GEMM_MIN_N): a fused
 *   AVX2/FMA kernel streams each weight row once, widening or dequantizing
 *   8 elements at a time in registers and multiplying them into up to two
 *   tokens at once (4 rows x 2 tokens = 8 accumulators). 4-bit codes are
 *   unpacked 16 at a time with one zero-extending load (low nibbles = even
 *   elements, high = odd, against activations permuted to match); 8-bit
 *   codes with one byte widen. This is
 *   memory-bound: the weights stream once per call.
 * - More tokens (prefill, forked suffixes): each pool thread takes an equal
 *   share of the output rows (with many threads and few rows, a block of rows
 *   and of tokens: gemm_blocks), dequantizes them tile by tile into its own f32
 *   buffer and calls OpenBLAS sgemm single-threaded on it (OpenBLAS's own threads would
 *   keep spinning after each call and steal the cores from the other ops:
 *   measured 2x slowdowns of the following parallel work on 2 cores).
 *   Weights stream once per call; the dequantization is O(rows*cols)
 *   against O(n*rows*cols) multiply-adds.
 *
 * Numerics: dequantized values are bit-identical to backend/matrix.c's
 * reference (scale * q + bias as a separate multiply and add, no FMA); only
 * the order of the f32 sums differs from cpu-dense.c (8 lanes, then a
 * horizontal add; or OpenBLAS's blocking), so parity is within f32
 * rounding of a dot product (tests/test-ops.c: NMSE <= 1e-7 for every type).
 *
 * Rows are independent (from 3 tokens up): a token's outputs are the same
 * bits whatever other tokens share the call, so a server that batches the
 * forwards of several requests answers each as it would alone (decide/
 * batch.c). Two things in OpenBLAS would break that, and are kept out: its
 * small-matrix kernel (0.3.21's SkylakeX sgemm takes it when M*N*K <= 1e6,
 * sgemm_small_kernel_permit, and its sums then depend on M), and tile sizes
 * that follow the token count. So a tile is as many rows as the buffer
 * holds whatever the tokens; a call that could be small for some token count
 * is made with enough rows never to be (the tokens padded with zero rows to
 * M*N*K > 1e6: a few rows at most, for tiles of N*K above 64 Ki, the K/V
 * projections), and the smallest tiles (N*K <= 64 Ki: the DeltaNet gates, a
 * label head) go through the fused f32 kernel (each output one 8-lane FMA
 * chain and a horizontal add). Which route a tile takes depends on its
 * shape only. Above the bound OpenBLAS's kernels (SkylakeX) compute each
 * output independently of M, N and the row's place: measured on every row of
 * calls of 1..9000 rows at several offsets, bit for bit. (On Haswell-only CPUs
 * OpenBLAS's large kernels do depend on M: there rows agree to the last bits.)
 * Other bit widths, odd group sizes and odd column counts take a generic
 * path (dequantize a row into scratch, then the f32 kernel).
 */
#include "backend/cpu/cpu.h"      // defines: jev_cpu_matmul_fast, struct jev_backend
#include "backend/cpu/cpu-simd.h" // defines: jev_hsum8, jev_hmax8, jev_exp8

#include <cblas.h>
#include <string.h>

#include "backend/matrix.h" // defines: jev_matrix_scale

#define ROWS_PER_TASK 32  /* fused path: output rows per pool task */
#define Q4_MAX_GROUPS 512 /* 4-bit fused kernel: groups per row (scales kept on the stack) */

/* ---- helpers ---- */

/* 8 bf16 -> 8 f32 (exact: a shift). */
JEV_AVX2 static inline __m256 load_bf16x8(const uint16_t *p) {
    __m128i h = _mm_loadu_si128((const __m128i *)(const void *)p);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* 8 f16 -> 8 f32 (exact, F16C). */
JEV_AVX2 static inline __m256 load_f16x8(const uint16_t *p) {
    return _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(const void *)p));
}

/* The 8 4-bit codes of one u32 word, element order (nibble j = element j), as f32. */
JEV_AVX2 static inline __m256 q4x8(const uint32_t *word) {
    const __m256i shifts = _mm256_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28);
    __m256i v = _mm256_set1_epi32((int)*word);
    v = _mm256_and_si256(_mm256_srlv_epi32(v, shifts), _mm256_set1_epi32(0xF));
    return _mm256_cvtepi32_ps(v);
}

/*
 * The 16 4-bit codes of 8 bytes as two f32 vectors: byte j holds element 2j
 * in its low nibble and 2j+1 in its high one, so one zero-extending load
 * gives the even elements (& 15) and the odd ones (>> 4). The activations
 * are permuted to match once per call (q4_permute). 12% fewer cycles than
 * one variable shift per u32 word, measured in L3.
 */
JEV_AVX2 static inline void q4x16(const uint8_t *b, __m256 *even, __m256 *odd) {
    __m256i v = _mm256_cvtepu8_epi32(_mm_loadl_epi64((const __m128i *)(const void *)b));
    *even = _mm256_cvtepi32_ps(_mm256_and_si256(v, _mm256_set1_epi32(15)));
    *odd = _mm256_cvtepi32_ps(_mm256_srli_epi32(v, 4));
}

/* x reordered per 16 elements to [x0, x2, ..., x14, x1, x3, ..., x15], the order of q4x16. */
static void q4_permute(const float *x, int64_t cols, float *xp) {
    for (int64_t b = 0; b < cols; b += 16)
        for (int j = 0; j < 8; j++) {
            xp[b + j] = x[b + 2 * j];
            xp[b + 8 + j] = x[b + 2 * j + 1];
        }
}

/* The 8 8-bit codes of two u32 words (byte j = element j), as f32. */
JEV_AVX2 static inline __m256 q8x8(const uint32_t *word) {
    __m128i b = _mm_loadl_epi64((const __m128i *)(const void *)word);
    return _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(b));
}

/* Which fused kernel fits a matrix. */
enum kind { K_F32, K_BF16, K_F16, K_Q4, K_Q8, K_GENERIC };

/* The fused kernels need 8-aligned columns and groups; everything else goes the generic way. */
JEV_AVX2 static enum kind kind_of(const struct jev_matrix *w) {
    if (w->cols % 8 != 0)
        return K_GENERIC;
    switch (w->type) {
    case JEV_MTYPE_F32: return K_F32;
    case JEV_MTYPE_BF16: return K_BF16;
    case JEV_MTYPE_F16: return K_F16;
    case JEV_MTYPE_QAFFINE:
        if (w->group % 8 != 0 || w->cols % w->group != 0)
            return K_GENERIC;
        if (w->bits == 4 && w->group % 16 == 0 && w->cols / w->group <= Q4_MAX_GROUPS)
            return K_Q4;
        return w->bits == 8 ? K_Q8 : K_GENERIC;
    }
    return K_GENERIC;
}

#if JEV_CPU_X86 /* on aarch64 the NEON forms of the kernels from here to struct mm_job */

/* ---- row dequantization (both regimes) ---- */

/* Row r of w as f32 into out[cols], bit-identical to jev_matrix_row. */
JEV_AVX2 static void dequant_row(const struct jev_matrix *w, enum kind k, int64_t r, float *out) {
    int64_t cols = w->cols;
    switch (k) {
    case K_F32: memcpy(out, (const float *)w->data + r * cols, (size_t)cols * sizeof(float)); return;
    case K_BF16: {
        const uint16_t *p = (const uint16_t *)w->data + r * cols;
        for (int64_t c = 0; c < cols; c += 8)
            _mm256_storeu_ps(out + c, load_bf16x8(p + c));
        return;
    }
    case K_F16: {
        const uint16_t *p = (const uint16_t *)w->data + r * cols;
        for (int64_t c = 0; c < cols; c += 8)
            _mm256_storeu_ps(out + c, load_f16x8(p + c));
        return;
    }
    case K_Q4:
    case K_Q8: {
        int64_t words = cols * w->bits / 32, groups = cols / w->group;
        const uint32_t *row = (const uint32_t *)w->data + r * words;
        int wpe8 = w->bits / 4; /* u32 words per 8 elements: 1 (4-bit) or 2 (8-bit) */
        for (int64_t g = 0; g < groups; g++) {
            __m256 s = _mm256_set1_ps(jev_matrix_scale(w->stype, w->scales, r * groups + g));
            __m256 b = _mm256_set1_ps(jev_matrix_scale(w->stype, w->biases, r * groups + g));
            for (int64_t c = g * w->group; c < (g + 1) * w->group; c += 8) {
                const uint32_t *wp = row + (c / 8) * wpe8;
                __m256 q = k == K_Q4 ? q4x8(wp) : q8x8(wp);
                _mm256_storeu_ps(out + c, _mm256_add_ps(_mm256_mul_ps(s, q), b));
            }
        }
        return;
    }
    case K_GENERIC: jev_matrix_row(w, r, out); return;
    }
}

/* ---- fused kernels (few tokens) ---- */

/*
 * Dot products of nr (1..4) rows with nt (1..2) tokens: y[t*ldy + j] for
 * row j of the block. The row loaders are the same for both; specialising by
 * the compile-time constants below lets the accumulators stay in registers.
 */
#define FUSED_DENSE(NAME, ELEM, LOAD)                                                                                  \
    JEV_AVX2 static void NAME(const ELEM *const *rows, int nr, const float *x0, const float *x1, int64_t cols,         \
                              float *y0, float *y1) {                                                                  \
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00, a31 = a00; \
        const ELEM *r0 = rows[0], *r1 = rows[nr > 1 ? 1 : 0], *r2 = rows[nr > 2 ? 2 : 0], *r3 = rows[nr > 3 ? 3 : 0];  \
        for (int64_t c = 0; c < cols; c += 8) {                                                                        \
            __m256 xa = _mm256_loadu_ps(x0 + c);                                                                       \
            __m256 xb = _mm256_loadu_ps(x1 + c);                                                                       \
            __m256 w0 = LOAD(r0 + c), w1 = LOAD(r1 + c), w2 = LOAD(r2 + c), w3 = LOAD(r3 + c);                         \
            a00 = _mm256_fmadd_ps(w0, xa, a00);                                                                        \
            a01 = _mm256_fmadd_ps(w0, xb, a01);                                                                        \
            a10 = _mm256_fmadd_ps(w1, xa, a10);                                                                        \
            a11 = _mm256_fmadd_ps(w1, xb, a11);                                                                        \
            a20 = _mm256_fmadd_ps(w2, xa, a20);                                                                        \
            a21 = _mm256_fmadd_ps(w2, xb, a21);                                                                        \
            a30 = _mm256_fmadd_ps(w3, xa, a30);                                                                        \
            a31 = _mm256_fmadd_ps(w3, xb, a31);                                                                        \
        }                                                                                                              \
        float o0[4] = {jev_hsum8(a00), jev_hsum8(a10), jev_hsum8(a20), jev_hsum8(a30)};                                \
        float o1[4] = {jev_hsum8(a01), jev_hsum8(a11), jev_hsum8(a21), jev_hsum8(a31)};                                \
        for (int j = 0; j < nr; j++) {                                                                                 \
            y0[j] = o0[j];                                                                                             \
            if (y1)                                                                                                    \
                y1[j] = o1[j];                                                                                         \
        }                                                                                                              \
    }

#define LOAD_F32(p) _mm256_loadu_ps(p)
FUSED_DENSE(fused_f32, float, LOAD_F32)
FUSED_DENSE(fused_bf16, uint16_t, load_bf16x8)
FUSED_DENSE(fused_f16, uint16_t, load_f16x8)

/* 8-bit rows: per group the scale and bias, then 8 codes at a time, dequantized in registers. */
JEV_AVX2 static void fused_q8(const struct jev_matrix *w, const int64_t *rid, int nr, const float *x0, const float *x1,
                              float *y0, float *y1) {
    const enum kind k = K_Q8;
    int64_t cols = w->cols, words = cols * w->bits / 32, groups = cols / w->group;
    const int wpe8 = k == K_Q4 ? 1 : 2;
    const uint32_t *rp[4];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        rp[j] = (const uint32_t *)w->data + rid[j < nr ? j : 0] * words;
    __m256 a[4][2];
#pragma GCC unroll 4
    for (int j = 0; j < 4; j++)
        a[j][0] = a[j][1] = _mm256_setzero_ps();
    for (int64_t g = 0; g < groups; g++) {
        __m256 s[4], b[4];
#pragma GCC unroll 4
        for (int j = 0; j < 4; j++) {
            int64_t rr = rid[j < nr ? j : 0];
            s[j] = _mm256_set1_ps(jev_matrix_scale(w->stype, w->scales, rr * groups + g));
            b[j] = _mm256_set1_ps(jev_matrix_scale(w->stype, w->biases, rr * groups + g));
        }
        for (int64_t c = g * w->group; c < (g + 1) * w->group; c += 8) {
            __m256 xa = _mm256_loadu_ps(x0 + c);
            __m256 xb = _mm256_loadu_ps(x1 + c);
#pragma GCC unroll 4
            for (int j = 0; j < 4; j++) {
                const uint32_t *wp = rp[j] + (c / 8) * wpe8;
                __m256 q = k == K_Q4 ? q4x8(wp) : q8x8(wp);
                __m256 wv = _mm256_add_ps(_mm256_mul_ps(s[j], q), b[j]);
                a[j][0] = _mm256_fmadd_ps(wv, xa, a[j][0]);
                a[j][1] = _mm256_fmadd_ps(wv, xb, a[j][1]);
            }
        }
    }
    for (int j = 0; j < nr; j++) {
        y0[j] = jev_hsum8(a[j][0]);
        if (y1)
            y1[j] = jev_hsum8(a[j][1]);
    }
}

/*
 * 4-bit rows, factorised per group: W.x = sum_g s_g (q_g . x_g) + sum_g b_g sum(x_g).
 * Per 8 weights this is broadcast, shift, mask, convert, multiply-add: the
 * scale is applied once per group, the bias term is one short dot with the
 * group sums of x (xs[g], computed once per call). Same value as the
 * dequantized dot up to f32 rounding.
 */
/* Scales of row r into s[groups]; returns sum_g bias_g * xs[g]. bf16 (the MLX default) 8 groups at a time. */
JEV_AVX2 static float q4_row_params(const struct jev_matrix *w, int64_t r, const float *xs, float *s) {
    int64_t groups = w->cols / w->group, g = 0;
    float bias = 0.0f;
    if (w->stype == JEV_STYPE_BF16) {
        const uint16_t *sp = (const uint16_t *)w->scales + r * groups, *bp = (const uint16_t *)w->biases + r * groups;
        __m256 acc = _mm256_setzero_ps();
        for (; g + 8 <= groups; g += 8) {
            _mm256_storeu_ps(s + g, load_bf16x8(sp + g));
            acc = _mm256_fmadd_ps(load_bf16x8(bp + g), _mm256_loadu_ps(xs + g), acc);
        }
        bias = jev_hsum8(acc);
    }
    for (; g < groups; g++) {
        s[g] = jev_matrix_scale(w->stype, w->scales, r * groups + g);
        bias += jev_matrix_scale(w->stype, w->biases, r * groups + g) * xs[g];
    }
    return bias;
}

JEV_AVX2 static void q4_1tok(const struct jev_matrix *w, const int64_t *rid, int nr, const float *x, const float *xs,
                             float *y) {
    int64_t cols = w->cols, words = cols / 8, groups = cols / w->group, G = w->group;
    const uint32_t *rp[4];
    float sc[4][Q4_MAX_GROUPS], bias[4];
    for (int j = 0; j < 4; j++) {
        rp[j] = (const uint32_t *)w->data + rid[j < nr ? j : 0] * words;
        bias[j] = q4_row_params(w, rid[j < nr ? j : 0], xs, sc[j]);
    }
    __m256 tot0 = _mm256_setzero_ps(), tot1 = tot0, tot2 = tot0, tot3 = tot0;
    for (int64_t g = 0; g < groups; g++) {
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, e, o;
        for (int64_t c = g * G; c < (g + 1) * G; c += 16) {
            __m256 xe = _mm256_loadu_ps(x + c), xo = _mm256_loadu_ps(x + c + 8);
            q4x16((const uint8_t *)rp[0] + c / 2, &e, &o);
            a0 = _mm256_fmadd_ps(o, xo, _mm256_fmadd_ps(e, xe, a0));
            q4x16((const uint8_t *)rp[1] + c / 2, &e, &o);
            a1 = _mm256_fmadd_ps(o, xo, _mm256_fmadd_ps(e, xe, a1));
            q4x16((const uint8_t *)rp[2] + c / 2, &e, &o);
            a2 = _mm256_fmadd_ps(o, xo, _mm256_fmadd_ps(e, xe, a2));
            q4x16((const uint8_t *)rp[3] + c / 2, &e, &o);
            a3 = _mm256_fmadd_ps(o, xo, _mm256_fmadd_ps(e, xe, a3));
        }
        tot0 = _mm256_fmadd_ps(a0, _mm256_set1_ps(sc[0][g]), tot0);
        tot1 = _mm256_fmadd_ps(a1, _mm256_set1_ps(sc[1][g]), tot1);
        tot2 = _mm256_fmadd_ps(a2, _mm256_set1_ps(sc[2][g]), tot2);
        tot3 = _mm256_fmadd_ps(a3, _mm256_set1_ps(sc[3][g]), tot3);
    }
    float out[4] = {jev_hsum8(tot0) + bias[0], jev_hsum8(tot1) + bias[1], jev_hsum8(tot2) + bias[2],
                    jev_hsum8(tot3) + bias[3]};
    for (int j = 0; j < nr; j++)
        y[j] = out[j];
}

/* Two rows against two tokens, same factorisation. */
JEV_AVX2 static void q4_2tok(const struct jev_matrix *w, const int64_t *rid, int nr, const float *x0, const float *x1,
                             const float *xs0, const float *xs1, float *y0, float *y1) {
    int64_t cols = w->cols, words = cols / 8, groups = cols / w->group, G = w->group;
    int64_t ra = rid[0], rb = rid[nr > 1 ? 1 : 0];
    const uint32_t *r0 = (const uint32_t *)w->data + ra * words;
    const uint32_t *r1 = (const uint32_t *)w->data + rb * words;
    float s0[Q4_MAX_GROUPS], s1[Q4_MAX_GROUPS];
    float b00 = q4_row_params(w, ra, xs0, s0), b10 = q4_row_params(w, rb, xs0, s1);
    float b01 = 0.0f, b11 = 0.0f;
    for (int64_t g = 0; g < groups; g++) {
        b01 += jev_matrix_scale(w->stype, w->biases, ra * groups + g) * xs1[g];
        b11 += jev_matrix_scale(w->stype, w->biases, rb * groups + g) * xs1[g];
    }
    __m256 t00 = _mm256_setzero_ps(), t01 = t00, t10 = t00, t11 = t00;
    for (int64_t g = 0; g < groups; g++) {
        __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, e0, o0, e1, o1;
        for (int64_t c = g * G; c < (g + 1) * G; c += 16) {
            __m256 xae = _mm256_loadu_ps(x0 + c), xao = _mm256_loadu_ps(x0 + c + 8);
            __m256 xbe = _mm256_loadu_ps(x1 + c), xbo = _mm256_loadu_ps(x1 + c + 8);
            q4x16((const uint8_t *)r0 + c / 2, &e0, &o0);
            q4x16((const uint8_t *)r1 + c / 2, &e1, &o1);
            a00 = _mm256_fmadd_ps(o0, xao, _mm256_fmadd_ps(e0, xae, a00));
            a01 = _mm256_fmadd_ps(o0, xbo, _mm256_fmadd_ps(e0, xbe, a01));
            a10 = _mm256_fmadd_ps(o1, xao, _mm256_fmadd_ps(e1, xae, a10));
            a11 = _mm256_fmadd_ps(o1, xbo, _mm256_fmadd_ps(e1, xbe, a11));
        }
        __m256 sa = _mm256_set1_ps(s0[g]), sb = _mm256_set1_ps(s1[g]);
        t00 = _mm256_fmadd_ps(a00, sa, t00);
        t01 = _mm256_fmadd_ps(a01, sa, t01);
        t10 = _mm256_fmadd_ps(a10, sb, t10);
        t11 = _mm256_fmadd_ps(a11, sb, t11);
    }
    y0[0] = jev_hsum8(t00) + b00;
    y1[0] = jev_hsum8(t01) + b01;
    if (nr > 1) {
        y0[1] = jev_hsum8(t10) + b10;
        y1[1] = jev_hsum8(t11) + b11;
    }
}

#else
#include "backend/cpu/cpu-matmul-neon-impl.h" // defines: dequant_row, fused_f32, fused_q8, q4_1tok, ... (NEON)
#endif

struct mm_job {
    struct jev_backend *be;
    const struct jev_matrix *w;
    enum kind kind;
    const int32_t *row_ids; /* NULL: rows 0..n_out-1 */
    int64_t n_out;          /* output columns of y (rows of W used) */
    const float *x;         /* [n][cols] */
    int64_t n;
    float *y;          /* [n][n_out] */
    int64_t share;     /* big path: output rows per task */
    int64_t tok_share; /* big path: tokens per task (n unless many threads share few rows) */
    int64_t row_tasks; /* big path: tasks across the rows; task = token block * row_tasks + row block */
    const float *xs;   /* 4-bit fused path: [n][groups] sums of x per group, computed once per call */
    const float *xp;   /* 4-bit fused path: [n][cols] x in q4x16's element order */
};

static int64_t row_id(const struct mm_job *j, int64_t r) { return j->row_ids ? j->row_ids[r] : r; }

/* Rows [r0, r0 + nr) of the output (nr <= 4) against tokens t and t+1 (nt = 1 or 2). */
/* Dispatches one block of rows x tokens to the kernel of the matrix type and stores the dots. */
JEV_AVX2 static void fused_block(const struct mm_job *j, int64_t r0, int nr, int64_t t, int nt, float *scratch) {
    const struct jev_matrix *w = j->w;
    int64_t cols = w->cols;
    const float *x0 = j->x + t * cols, *x1 = nt > 1 ? x0 + cols : x0;
    float y0[4], y1[4];
    int64_t rid[4];
    for (int q = 0; q < 4; q++)
        rid[q] = row_id(j, r0 + (q < nr ? q : 0));
    switch (j->kind) {
    case K_F32: {
        const float *rows[4];
        for (int q = 0; q < 4; q++)
            rows[q] = (const float *)w->data + rid[q] * cols;
        fused_f32(rows, nr, x0, x1, cols, y0, y1);
        break;
    }
    case K_BF16:
    case K_F16: {
        const uint16_t *rows[4];
        for (int q = 0; q < 4; q++)
            rows[q] = (const uint16_t *)w->data + rid[q] * cols;
        (j->kind == K_BF16 ? fused_bf16 : fused_f16)(rows, nr, x0, x1, cols, y0, y1);
        break;
    }
    case K_Q4:
    case K_Q8: fused_q8(w, rid, nr, x0, x1, y0, y1); break; /* K_Q4 rows go through fused_task_q4 */
    case K_GENERIC: {
        /* dequantize the rows into scratch, then the f32 kernel (cols need not be a multiple of 8) */
        for (int q = 0; q < nr; q++) {
            jev_matrix_row(w, rid[q], scratch + q * cols);
            for (int tt = 0; tt < nt; tt++) {
                const float *xt = tt ? x1 : x0;
                float acc = 0.0f;
                for (int64_t c = 0; c < cols; c++)
                    acc += scratch[q * cols + c] * xt[c];
                (tt ? y1 : y0)[q] = acc;
            }
        }
        break;
    }
    }
    for (int q = 0; q < nr; q++) {
        j->y[t * j->n_out + r0 + q] = y0[q];
        if (nt > 1)
            j->y[(t + 1) * j->n_out + r0 + q] = y1[q];
    }
}

/*
 * Requests every cache line of the next rows (codes, scales, biases) before
 * the kernel reads them. Decode streams the weights from DRAM; a row is only
 * 8 lines (1024 columns), too short for the hardware prefetcher to ramp up,
 * so without this the kernel waits on one line after the other. Measured on
 * the 248320-row LM head (2 threads): 12.6-14.8 ms against 16.8-18.1 ms
 * without, and better than prefetching 4 or 8 rows further ahead.
 */
JEV_AVX2 static void q4_prefetch(const struct jev_matrix *w, const int64_t *rid, int nr) {
    int64_t words = w->cols / 8, groups = w->cols / w->group;
    size_t sz = w->stype == JEV_STYPE_F32 ? 4 : 2;
    for (int q = 0; q < nr; q++) {
        const char *c = (const char *)((const uint32_t *)w->data + rid[q] * words);
        for (int64_t b = 0; b < words * 4; b += 64)
            _mm_prefetch(c + b, _MM_HINT_T0);
        _mm_prefetch((const char *)w->scales + (size_t)(rid[q] * groups) * sz, _MM_HINT_T0);
        _mm_prefetch((const char *)w->biases + (size_t)(rid[q] * groups) * sz, _MM_HINT_T0);
    }
}

/* The 4-bit rows of a task: 4 rows x 1 token or 2 rows x 2 tokens at a time. */
JEV_AVX2 static void fused_task_q4(struct mm_job *j, int64_t r0, int64_t r1) {
    const struct jev_matrix *w = j->w;
    int64_t cols = w->cols, groups = cols / w->group;
    const float *xs = j->xs;
    for (int64_t t = 0; t < j->n; t += 2) {
        const float *x0 = j->xp + t * cols;
        if (t + 1 < j->n) {
            for (int64_t r = r0; r < r1; r += 2) {
                int nr = r1 - r < 2 ? 1 : 2;
                int64_t rid[2] = {row_id(j, r), row_id(j, r + (nr > 1 ? 1 : 0))};
                q4_prefetch(w, rid, nr);
                float y0[2], y1[2];
                q4_2tok(w, rid, nr, x0, x0 + cols, xs + t * groups, xs + (t + 1) * groups, y0, y1);
                for (int q = 0; q < nr; q++) {
                    j->y[t * j->n_out + r + q] = y0[q];
                    j->y[(t + 1) * j->n_out + r + q] = y1[q];
                }
            }
        } else {
            for (int64_t r = r0; r < r1; r += 4) {
                int nr = (int)(r1 - r < 4 ? r1 - r : 4);
                int64_t rid[4];
                for (int q = 0; q < 4; q++)
                    rid[q] = row_id(j, r + (q < nr ? q : 0));
                q4_prefetch(w, rid, nr);
                float y[4];
                q4_1tok(w, rid, nr, x0, xs + t * groups, y);
                for (int q = 0; q < nr; q++)
                    j->y[t * j->n_out + r + q] = y[q];
            }
        }
    }
}

JEV_AVX2 static void fused_task(void *arg, int64_t task, int thread) {
    struct mm_job *j = arg;
    float *scratch = jev_cpu_scratch(j->be, thread);
    int64_t r0 = task * ROWS_PER_TASK;
    int64_t r1 = r0 + ROWS_PER_TASK < j->n_out ? r0 + ROWS_PER_TASK : j->n_out;
    if (j->kind == K_Q4) {
        fused_task_q4(j, r0, r1);
        return;
    }
    for (int64_t r = r0; r < r1; r += 4) {
        int nr = (int)(r1 - r < 4 ? r1 - r : 4);
        for (int64_t t = 0; t < j->n; t += 2)
            fused_block(j, r, nr, t, j->n - t >= 2 ? 2 : 1, scratch);
    }
}

/* ---- sgemm path (many tokens) ---- */

/* OpenBLAS 0.3.21 (SkylakeX) takes its small-matrix kernel when M*N*K <= this (the header says why). */
#define BLAS_SMALL_MNK 1000000
/* Tiles this small (N*K) go through fused_f32; larger ones below BLAS_SMALL_MNK are padded. */
#define TINY_NK 65536

/* y[t][n] = x[t] . tile[n] for a dequantized f32 tile of nr rows (ldy: y's row stride): one 8-lane
 * FMA chain per output and a horizontal add, the same bits however the tokens and rows are blocked. */
JEV_AVX2 static void small_tile(const float *x, int64_t nt, const float *wt, int64_t nr, int64_t cols, float *y,
                                int64_t ldy) {
    if (cols % 8) { /* odd widths (tests, the generic types): one scalar chain in column order */
        for (int64_t t = 0; t < nt; t++)
            for (int64_t r = 0; r < nr; r++) {
                float acc = 0.0f;
                for (int64_t c = 0; c < cols; c++)
                    acc += wt[r * cols + c] * x[t * cols + c];
                y[t * ldy + r] = acc;
            }
        return;
    }
    for (int64_t t = 0; t < nt; t += 2) {
        int ntt = nt - t >= 2 ? 2 : 1;
        const float *x0 = x + t * cols, *x1 = ntt > 1 ? x0 + cols : x0;
        for (int64_t r = 0; r < nr; r += 4) {
            int nrr = (int)(nr - r < 4 ? nr - r : 4);
            const float *rows[4];
            for (int q = 0; q < 4; q++)
                rows[q] = wt + (r + (q < nrr ? q : 0)) * cols;
            fused_f32(rows, nrr, x0, x1, cols, y + t * ldy + r, ntt > 1 ? y + (t + 1) * ldy + r : NULL);
        }
    }
}

/*
 * One task's block of output rows and tokens, tile by tile: dequantize (f32 rows are used in
 * place), then y[tokens, tile] = x[tokens] . tile^T with ldc = all output columns. Every output
 * element is one sgemm dot product over all columns (or one fused_f32 chain for a small tile), whatever
 * the blocks and the tokens.
 */
JEV_AVX2 static void gemm_task(void *arg, int64_t task, int thread) {
    struct mm_job *j = arg;
    const struct jev_matrix *w = j->w;
    int64_t cols = w->cols;
    int64_t r0 = task % j->row_tasks * j->share, n0 = task / j->row_tasks * j->tok_share;
    int64_t r1 = r0 + j->share < j->n_out ? r0 + j->share : j->n_out;
    int64_t nt = n0 + j->tok_share < j->n ? j->tok_share : j->n - n0;
    float *buf = jev_cpu_wbuf(j->be, thread);
    /* As many rows as the buffer holds, whatever the token count (rows independent: above). Smaller
     * tiles that stay in L2 were 2-3x faster at 8 tokens, but they made a token's sums depend on how
     * many tokens shared the call. */
    int64_t tile = JEV_CPU_WBUF_FLOATS / cols;
    if (tile < 16)
        tile = 16;
    for (int64_t t0 = r0; t0 < r1; t0 += tile) {
        int64_t nr = r1 - t0 < tile ? r1 - t0 : tile;
        const float *wt;
        if (j->kind == K_F32 && !j->row_ids) {
            wt = (const float *)w->data + t0 * cols; /* f32 rows are used in place */
        } else {
            for (int64_t q = 0; q < nr; q++)
                dequant_row(w, j->kind, row_id(j, t0 + q), buf + q * cols);
            wt = buf;
        }
        float *y = j->y + n0 * j->n_out + t0;
        const float *x = j->x + n0 * cols;
        int64_t pad = BLAS_SMALL_MNK / (nr * cols) + 1; /* the fewest rows OpenBLAS never calls small */
        if (nr * cols <= TINY_NK) {
            small_tile(x, nt, wt, nr, cols, y, j->n_out);
        } else if (nt < pad) { /* zero rows after the tokens, into the caller's scratch, and back */
            float *xs = jev_cpu_scratch(j->be, thread), *ys = xs + pad * cols;
            JEV_ASSERT(pad * (cols + nr) <= JEV_CPU_SCRATCH_FLOATS);
            memcpy(xs, x, (size_t)(nt * cols) * sizeof(float));
            memset(xs + nt * cols, 0, (size_t)((pad - nt) * cols) * sizeof(float));
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)pad, (int)nr, (int)cols, 1.0f, xs, (int)cols, wt,
                        (int)cols, 0.0f, ys, (int)nr);
            for (int64_t t = 0; t < nt; t++)
                memcpy(y + t * j->n_out, ys + t * nr, (size_t)nr * sizeof(float));
        } else {
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nt, (int)nr, (int)cols, 1.0f, x, (int)cols, wt,
                        (int)cols, 0.0f, y, (int)j->n_out);
        }
    }
}

/*
 * The big path's blocks. Rows alone while every thread gets at least GEMM_MIN_ROWS of them: each
 * weight byte is read once and the activations are packed once per thread. With many threads and
 * few rows (a 768-wide vision layer over 16 threads is 48 rows a thread), thin row shares make
 * every thread pack all the activations for little work. Then the rows go in blocks of at least
 * GEMM_MIN_ROWS, as many as divide the threads, and the tokens are split over the threads left
 * (blocks of at least GEMM_MIN_TOKENS), when that keeps at least as many threads busy.
 */
#define GEMM_MIN_ROWS 128
#define GEMM_MIN_TOKENS 64
static void gemm_blocks(struct mm_job *j, int64_t threads) {
    int64_t row_share = ((j->n_out + threads - 1) / threads + 15) / 16 * 16;
    int64_t row_blocks = (j->n_out + row_share - 1) / row_share, tok_blocks = 1;
    if (row_share < GEMM_MIN_ROWS) {
        int64_t r = j->n_out / GEMM_MIN_ROWS < threads ? j->n_out / GEMM_MIN_ROWS : threads;
        while (r > 1 && threads % r)
            r--;
        if (r < 1)
            r = 1;
        int64_t t = threads / r < j->n / GEMM_MIN_TOKENS ? threads / r : j->n / GEMM_MIN_TOKENS;
        if (t > 1 && r * t >= row_blocks) {
            row_blocks = r;
            tok_blocks = t;
        }
    }
    /* equal shares, rows rounded up to 16 and tokens to 8, so each task streams its part once */
    j->share = ((j->n_out + row_blocks - 1) / row_blocks + 15) / 16 * 16;
    j->row_tasks = (j->n_out + j->share - 1) / j->share;
    j->tok_share = ((j->n + tok_blocks - 1) / tok_blocks + 7) / 8 * 8;
}

/* ---- entry points ---- */

/* Picks the regime by token count; both spread rows over the pool, so each weight byte is read once. */
JEV_AVX2 static void run(struct mm_job *j) {
    JEV_ASSERT(j->w->cols <= JEV_CPU_WBUF_FLOATS && 4 * (int64_t)j->w->cols <= JEV_CPU_SCRATCH_FLOATS);
    if (j->n_out <= 0 || j->n <= 0)
        return;
    /* a head over chosen rows (candidate labels) always takes the tiled path: its logits are then the
     * same bits for 1 token as for many (the fused kernels below sum in another order) */
    if (j->n >= JEV_CPU_GEMM_MIN_N || j->row_ids) {
        if (jev_cpu_gemm512(j->be, j->w, j->row_ids, j->n_out, j->x, j->n, j->y))
            return; /* AVX-512 CPUs: the weights dequantized into the kernel's panels (cpu-gemm-avx512.c) */
        gemm_blocks(j, j->be->n_threads);
        int64_t tok_tasks = (j->n + j->tok_share - 1) / j->tok_share;
        jev_pool_run(j->be->pool, j->row_tasks * tok_tasks, gemm_task, j);
        return;
    }
    if (j->kind == K_Q4) {
        /* group sums of x, once per call, in the upper half of the caller's scratch (tasks do not use it) */
        int64_t groups = j->w->cols / j->w->group;
        float *xs = jev_cpu_scratch(j->be, 0) + JEV_CPU_SCRATCH_FLOATS / 2;
        JEV_ASSERT(j->n * groups <= JEV_CPU_SCRATCH_FLOATS / 2);
        for (int64_t t = 0; t < j->n; t++)
            for (int64_t g = 0; g < groups; g++) {
                const float *xg = j->x + t * j->w->cols + g * j->w->group;
                __m256 acc = _mm256_setzero_ps();
                for (int64_t c = 0; c < j->w->group; c += 8)
                    acc = _mm256_add_ps(acc, _mm256_loadu_ps(xg + c));
                xs[t * groups + g] = jev_hsum8(acc);
            }
        j->xs = xs;
        float *xp = xs + j->n * groups; /* then the permuted activations */
        JEV_ASSERT(j->n * (groups + j->w->cols) <= JEV_CPU_SCRATCH_FLOATS / 2);
        for (int64_t t = 0; t < j->n; t++)
            q4_permute(j->x + t * j->w->cols, j->w->cols, xp + t * j->w->cols);
        j->xp = xp;
    }
    jev_pool_run(j->be->pool, (j->n_out + ROWS_PER_TASK - 1) / ROWS_PER_TASK, fused_task, j);
}

void jev_cpu_matmul_fast(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    if (!jev_cpu_has_avx2()) {
        jev_cpu_matmul(be, w, x, n, y);
        return;
    }
    struct mm_job j = {be, w, kind_of(w), NULL, w->rows, x, n, y, 0, 0, 0, NULL, NULL};
    run(&j);
}

void jev_cpu_matmul_rows_fast(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids,
                              int32_t n_rows, const float *x, int64_t n, float *y) {
    if (!jev_cpu_has_avx2()) {
        jev_cpu_matmul_rows(be, w, row_ids, n_rows, x, n, y);
        return;
    }
    struct mm_job j = {be, w, kind_of(w), row_ids, n_rows, x, n, y, 0, 0, 0, NULL, NULL};
    run(&j);
}

/* Embedding rows through the same dequantization (bit-identical to jev_matrix_row). */
void jev_cpu_embed_fast(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out) {
    if (!jev_cpu_has_avx2()) {
        jev_cpu_embed(be, w, ids, n, out);
        return;
    }
    enum kind k = kind_of(w);
    for (int64_t t = 0; t < n; t++)
        dequant_row(w, k, ids[t], out + t * w->cols);
}

/*
 * cpu-matmul-bf16.c - fast mode's matrix products on the CPU (include/jev.h, enum jev_precision):
 * y[n][rows] = bf16(x)[n][cols] . bf16(W)^T with f32 accumulation, where the CPU has AVX512-BF16;
 * and the decision whether fast mode can run here (refused, naming the missing CPU feature, where not).
 *
 * What is rounded is what CUDA's fast mode rounds (cuda-matmul.cu, cuda-weights.cu): each weight as
 * backend/matrix.c gives it (f32; affine codes s * q + b, a multiply then an add), rounded to bf16 by
 * base/half.h's rule (nearest even, NaN kept a NaN); bf16 matrices as stored; the activations rounded
 * the same way. Here that rounding is integer arithmetic on 16 lanes, the same bits as
 * jev_f32_to_bf16 (the CPU's own vcvtneps2bf16 flushes subnormals). The product of two bf16 values is
 * exact in f32; the sums are f32. Everything that is not this product stays f32, as on CUDA:
 * matmul_rows (the head over candidate rows, scoring), attention, norms, the DeltaNet state.
 *
 * Which products: those of JEV_CPU_GEMM_MIN_N tokens or more (prefill, suffix scoring, the vision
 * tower). Products of 1 and 2 tokens (decode steps) run cpu-matmul.c's f32 kernels in both modes, as
 * CUDA's fast mode reads few-token rows in f32: the weights stream from memory either way, and the
 * bf16 form measured slower here (jev_cpu_matmul_op says where). jev_cpu_matmul_bf16 itself takes
 * any count (its tests hold 1 and 2 tokens too).
 *
 * Two kernels:
 * - AMX (tdpbf16ps), where the CPU has AMX-BF16 and Linux grants the process the tile state
 *   (arch_prctl ARCH_REQ_XCOMP_PERM). The weight rows dequantized to bf16 are the A tiles (16 rows
 *   x 32 values, no repacking); the activations are packed once per pass into B tiles (16 value
 *   pairs x 16 tokens, the pair-interleaved layout tdpbf16ps reads); 2 x 2 C tiles of 16 rows x 16
 *   tokens accumulate over the columns, then go to y through a transpose.
 * - AVX512 (vdpbf16ps), where there is no AMX: each output one 16-lane accumulator over the
 *   32-value chunks of its row and token, then one fixed horizontal sum; 4 rows x up to 4 tokens at
 *   a time, against tiles of 64 weight rows read in place (bf16) or dequantized into the thread's
 *   buffer. (Measured on the development machine with AMX switched off: slower than exact's
 *   OpenBLAS sgemm there; a kernel on pair-interleaved weight tiles would be the next step.)
 * Each output is summed over its own row and token only, in an order the kernel fixes (not the token
 * count, the thread split or the row's place): a token's outputs are the same bits whatever other
 * tokens share the call, so batched answers equal lone ones as in exact mode (cpu-matmul.c).
 *
 * Threads: as cpu-matmul.c, each pool task an equal share of the output rows. The activations of one
 * pass (at most JEV_CPU_XH_VALUES bf16 values; more tokens take several passes) are rounded first,
 * spread over the pool by tokens.
 *
 * Not here: the exact products (cpu-matmul.c, untouched: exact mode is the same code and bits as
 * before fast mode existed) and non-x86 CPUs (fast is refused there: jev_cpu_bf16_hw says NONE).
 */
#include "backend/cpu/cpu.h" // defines: struct jev_backend, enum jev_cpu_bf16, jev_cpu_wbuf, jev_cpu_scratch

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/matrix.h" // defines: struct jev_matrix, jev_matrix_row
#include "base/half.h"      // defines: jev_f32_to_bf16, jev_bf16_to_f32, jev_f16_to_f32

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#endif

/* ---- what the CPU has, and the decision ---- */

#define ARCH_REQ_XCOMP_PERM_ 0x1023 /* asm/prctl.h (Linux 5.16): ask for an extended state component */
#define XFEATURE_XTILEDATA_ 18      /* the AMX tile data */

static enum jev_cpu_bf16 g_hw;
static pthread_once_t g_hw_once = PTHREAD_ONCE_INIT;

static void hw_detect(void) {
    g_hw = JEV_CPU_BF16_NONE;
#if defined(__x86_64__)
    /* __builtin_cpu_supports also checks that the OS saves the AVX-512 state */
    if (!jev_cpu_has_avx2() || !__builtin_cpu_supports("avx512f") || !__builtin_cpu_supports("avx512bw") ||
        !__builtin_cpu_supports("avx512vl") || !__builtin_cpu_supports("avx512dq"))
        return;
    unsigned a, b, c, d, a1, b1, c1, d1;
    if (!__get_cpuid_count(7, 0, &a, &b, &c, &d) || a < 1) /* a: the last sub-leaf of leaf 7 */
        return;
    __cpuid_count(7, 1, a1, b1, c1, d1);
    if (!(a1 & (1u << 5))) /* CPUID.(7,1):EAX[5] AVX512_BF16 */
        return;
    g_hw = JEV_CPU_BF16_AVX512;
    /* CPUID.(7,0):EDX[22] AMX-BF16, [24] AMX-TILE; then the kernel's permission for this process (all its
     * threads, present and future) */
    if ((d & (1u << 22)) && (d & (1u << 24)) && syscall(SYS_arch_prctl, ARCH_REQ_XCOMP_PERM_, XFEATURE_XTILEDATA_) == 0)
        g_hw = JEV_CPU_BF16_AMX;
#endif
}

enum jev_cpu_bf16 jev_cpu_bf16_hw(void) {
    pthread_once(&g_hw_once, hw_detect);
    return g_hw;
}

enum jev_status jev_cpu_bf16_choose(enum jev_cpu_bf16 have, const char *cap, enum jev_cpu_bf16 *out,
                                    struct jev_error *err) {
    enum jev_cpu_bf16 limit = JEV_CPU_BF16_AMX;
    if (cap && *cap) {
        if (!strcmp(cap, "none"))
            limit = JEV_CPU_BF16_NONE;
        else if (!strcmp(cap, "avx512"))
            limit = JEV_CPU_BF16_AVX512;
        else if (strcmp(cap, "amx") != 0)
            return jev_fail(err, JEV_ERR_INVALID_ARG,
                            "cpu backend: JEV_CPU_BF16=\"%.40s\" is not a kernel set: expected none, avx512 or amx",
                            cap);
    }
    if (have == JEV_CPU_BF16_NONE)
        return jev_fail(err, JEV_ERR_UNSUPPORTED,
                        "cpu backend: precision \"fast\" (bf16 matrix products) needs AVX512-BF16 (CPU flag "
                        "avx512_bf16, with AVX-512 F, BW, VL and DQ), which this CPU does not have: use precision "
                        "exact on this CPU, or --backend cuda for fast");
    if (limit == JEV_CPU_BF16_NONE)
        return jev_fail(err, JEV_ERR_UNSUPPORTED,
                        "cpu backend: precision \"fast\" (bf16 matrix products): JEV_CPU_BF16=none turns this CPU's "
                        "AVX512-BF16 kernels off: use precision exact, or unset JEV_CPU_BF16");
    *out = have < limit ? have : limit;
    return JEV_OK;
}

enum jev_status jev_cpu_set_precision(struct jev_backend *be, enum jev_precision p, struct jev_error *err) {
    if (p == JEV_PRECISION_EXACT) {
        be->bf16 = JEV_CPU_BF16_NONE;
        return JEV_OK;
    }
    if (p != JEV_PRECISION_FAST)
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "cpu backend: precision %d is not a mode", (int)p);
    enum jev_cpu_bf16 k = JEV_CPU_BF16_NONE;
    JEV_TRY(jev_cpu_bf16_choose(jev_cpu_bf16_hw(), getenv("JEV_CPU_BF16"), &k, err));
    if (!be->xh) { /* untouched pages cost nothing until a product uses them */
        be->xh = aligned_alloc(64, (size_t)JEV_CPU_XH_VALUES * sizeof(uint16_t));
        if (!be->xh)
            return jev_fail(err, JEV_ERR_NOMEM, "cpu backend: no memory for fast mode's bf16 activations (%d MiB)",
                            (int)(JEV_CPU_XH_VALUES * sizeof(uint16_t) >> 20));
    }
    be->bf16 = k;
    return JEV_OK;
}

/* Fast mode's kernels from JEV_CPU_GEMM_MIN_N tokens. Products of 1 and 2 tokens (decode steps) run the
 * f32 kernels in both modes, as on CUDA: the weights stream from memory either way, and the bf16 form
 * was measured slower (bench/results/2026-12-02-dev-2core-cpu-fast: 91-103 against 68-76 ms a token). */
void jev_cpu_matmul_op(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    if (be && be->bf16 != JEV_CPU_BF16_NONE && n >= JEV_CPU_GEMM_MIN_N)
        jev_cpu_matmul_bf16(be, w, x, n, y);
    else
        jev_cpu_matmul_fast(be, w, x, n, y);
}

#if !defined(__x86_64__)

/* Never reached: jev_cpu_bf16_hw says NONE, so no instance is in fast mode. */
void jev_cpu_matmul_bf16(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    (void)be, (void)w, (void)x, (void)n, (void)y;
    JEV_ASSERT(!"fast mode has no kernels on this CPU");
}

#else

#define JEV_BF16 __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))
#define JEV_AMX __attribute__((target("avx2,fma,f16c,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16,amx-tile,amx-bf16")))
/* GCC's tile loads and ldtilecfg are asm statements that do not tell the compiler they read memory:
 * the stores before them (dequantized rows, packed activations, the tile config) must be made first. */
#define MEM_BARRIER() __asm__ volatile("" ::: "memory")

#define DOT_TILE 64 /* AVX512, 3+ tokens: weight rows dequantized per tile (128 KiB at 1024 columns: L2) */
#define AMX_TILE 64 /* AMX: weight rows per tile, a multiple of 32 (two A tiles) */

/* ---- rounding and dequantization to bf16 ---- */

/* 16 f32 -> 16 u32, each the jev_f32_to_bf16 of its lane (in the low half): nearest even, NaN quieted. */
JEV_BF16 static inline __m512i round16(__m512 v) {
    const __m512i u = _mm512_castps_si512(v);
    __mmask16 nan =
        _mm512_cmpgt_epu32_mask(_mm512_and_si512(u, _mm512_set1_epi32(0x7fffffff)), _mm512_set1_epi32(0x7f800000));
    __m512i odd = _mm512_and_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(1));
    __m512i r = _mm512_srli_epi32(_mm512_add_epi32(u, _mm512_add_epi32(_mm512_set1_epi32(0x7fff), odd)), 16);
    return _mm512_mask_mov_epi32(r, nan, _mm512_or_si512(_mm512_srli_epi32(u, 16), _mm512_set1_epi32(0x40)));
}

/* Two round16 results -> the 32 bf16 values in order (lo's 16, then hi's). */
JEV_BF16 static inline __m512i pack32(__m512i lo, __m512i hi) {
    static const uint16_t idx[32] = {0,  2,  4,  6,  8,  10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30,
                                     32, 34, 36, 38, 40, 42, 44, 46, 48, 50, 52, 54, 56, 58, 60, 62};
    return _mm512_permutex2var_epi16(lo, _mm512_loadu_si512(idx), hi);
}

/* 16 f32 from p, the lanes at or past `valid` (0..16) zero. */
JEV_BF16 static inline __m512 load16(const float *p, int64_t valid) {
    if (valid >= 16)
        return _mm512_loadu_ps(p);
    return _mm512_maskz_loadu_ps((__mmask16)(valid > 0 ? (1u << valid) - 1 : 0), p);
}

/* f32 values -> bf16 out[kp]: the cols values, then zeros. */
JEV_BF16 static void row_f32(const float *src, int64_t cols, int64_t kp, uint16_t *out) {
    int64_t c = 0;
    for (; c + 32 <= cols; c += 32)
        _mm512_storeu_si512(out + c, pack32(round16(_mm512_loadu_ps(src + c)), round16(_mm512_loadu_ps(src + c + 16))));
    for (; c < cols; c++)
        out[c] = jev_f32_to_bf16(src[c]);
    memset(out + cols, 0, (size_t)(kp - cols) * sizeof(uint16_t));
}

/* Which dequantization fits a matrix: the 4-bit lookup needs 32-value chunks inside a group, the 8-bit
 * one 16; other widths and groups go through jev_matrix_row. */
enum kind { K_F32, K_BF16, K_F16, K_Q4, K_Q8, K_GENERIC };

static enum kind kind_of(const struct jev_matrix *w) {
    switch (w->type) {
    case JEV_MTYPE_F32: return K_F32;
    case JEV_MTYPE_BF16: return K_BF16;
    case JEV_MTYPE_F16: return K_F16;
    case JEV_MTYPE_QAFFINE:
        if (w->group <= 0 || w->cols % w->group != 0)
            return K_GENERIC;
        if (w->bits == 4 && w->group % 32 == 0)
            return K_Q4;
        return w->bits == 8 && w->group % 16 == 0 ? K_Q8 : K_GENERIC;
    }
    return K_GENERIC;
}

static float scale_at(enum jev_stype t, const void *p, int64_t i) {
    switch (t) {
    case JEV_STYPE_F32: return ((const float *)p)[i];
    case JEV_STYPE_BF16: return jev_bf16_to_f32(((const uint16_t *)p)[i]);
    case JEV_STYPE_F16: return jev_f16_to_f32(((const uint16_t *)p)[i]);
    }
    return 0.0f;
}

/*
 * 4-bit rows: a group has 16 possible values, s * q + b for q = 0..15; rounded to bf16 once per group
 * they are a 16-entry table, and 32 codes become 32 bf16 weights with one vpermw. Byte j of the codes
 * holds element 2j in its low nibble and 2j+1 in its high one: widened to u32 lane j, (t | t << 12)
 * & 0x000F000F puts them in the lane's two u16 halves, in element order.
 */
JEV_BF16 static void row_q4(const struct jev_matrix *w, int64_t r, uint16_t *out) {
    const int64_t cols = w->cols, groups = cols / w->group;
    const uint8_t *codes = (const uint8_t *)w->data + r * (cols / 2);
    const __m512 iota = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512i nib = _mm512_set1_epi32(0x000F000F);
    for (int64_t g = 0; g < groups; g++) {
        __m512 s = _mm512_set1_ps(scale_at(w->stype, w->scales, r * groups + g));
        __m512 b = _mm512_set1_ps(scale_at(w->stype, w->biases, r * groups + g));
        __m512i v = round16(_mm512_add_ps(_mm512_mul_ps(s, iota), b));
        __m512i lut = pack32(v, v);
        for (int64_t c = g * w->group; c < (g + 1) * w->group; c += 32) {
            __m512i t = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(codes + c / 2)));
            __m512i q = _mm512_and_si512(_mm512_or_si512(t, _mm512_slli_epi32(t, 12)), nib);
            _mm512_storeu_si512(out + c, _mm512_permutexvar_epi16(q, lut));
        }
    }
}

/* 8-bit rows: 16 codes at a time, s * q + b in f32 (as jev_matrix_row), rounded. */
JEV_BF16 static void row_q8(const struct jev_matrix *w, int64_t r, uint16_t *out) {
    const int64_t cols = w->cols, groups = cols / w->group;
    const uint8_t *codes = (const uint8_t *)w->data + r * cols;
    for (int64_t c = 0; c < cols; c += 16) {
        int64_t g = r * groups + c / w->group;
        __m512 s = _mm512_set1_ps(scale_at(w->stype, w->scales, g));
        __m512 b = _mm512_set1_ps(scale_at(w->stype, w->biases, g));
        __m512 q =
            _mm512_cvtepi32_ps(_mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(codes + c))));
        _mm256_storeu_si256((__m256i *)(void *)(out + c),
                            _mm512_cvtepi32_epi16(round16(_mm512_add_ps(_mm512_mul_ps(s, q), b))));
    }
}

/* Row r of w as bf16 into out[kp] (zeros past cols); fs: cols floats of scratch for the generic way. */
JEV_BF16 static void row_bf16(const struct jev_matrix *w, enum kind k, int64_t r, int64_t kp, uint16_t *out,
                              float *fs) {
    const int64_t cols = w->cols;
    switch (k) {
    case K_F32: row_f32((const float *)w->data + r * cols, cols, kp, out); return;
    case K_BF16: memcpy(out, (const uint16_t *)w->data + r * cols, (size_t)cols * sizeof(uint16_t)); break;
    case K_F16: {
        const uint16_t *p = (const uint16_t *)w->data + r * cols;
        int64_t c = 0;
        for (; c + 32 <= cols; c += 32) {
            __m512 lo = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + c)));
            __m512 hi = _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(const void *)(p + c + 16)));
            _mm512_storeu_si512(out + c, pack32(round16(lo), round16(hi)));
        }
        for (; c < cols; c++)
            out[c] = jev_f32_to_bf16(jev_f16_to_f32(p[c]));
        break;
    }
    case K_Q4: row_q4(w, r, out); break;
    case K_Q8: row_q8(w, r, out); break;
    case K_GENERIC:
        jev_matrix_row(w, r, fs);
        row_f32(fs, cols, kp, out);
        return;
    }
    memset(out + cols, 0, (size_t)(kp - cols) * sizeof(uint16_t));
}

/* ---- the job ---- */

struct job {
    struct jev_backend *be;
    const struct jev_matrix *w;
    enum kind kind;
    const float *x; /* [n][cols] f32 (packing) */
    uint16_t *xh;   /* AVX512: [n][kp] bf16 rows; AMX: [token block][kp / 32][16][32] B tiles */
    int64_t n;      /* tokens of this pass */
    int64_t kp;     /* cols rounded up to 32 */
    int64_t share;  /* output rows per task */
    float *y;       /* [n][w->rows] */
};

/* Activations of tokens [16 * blk, 16 * blk + 16) to bf16 rows of kp (AVX512 kernel). */
JEV_BF16 static void pack_rows_task(void *arg, int64_t blk, int thread) {
    (void)thread;
    const struct job *j = arg;
    for (int64_t t = 16 * blk; t < j->n && t < 16 * blk + 16; t++)
        row_f32(j->x + t * j->w->cols, j->w->cols, j->kp, j->xh + t * j->kp);
}

/* The 16 x 16 transpose of 32-bit lanes (a 4 x 4 transpose of 128-bit lanes after two in-lane steps). */
JEV_BF16 static void transpose16(const __m512 in[16], __m512 out[16]) {
    __m512 t[16], u[16];
    for (int i = 0; i < 8; i++) {
        t[2 * i] = _mm512_unpacklo_ps(in[2 * i], in[2 * i + 1]);
        t[2 * i + 1] = _mm512_unpackhi_ps(in[2 * i], in[2 * i + 1]);
    }
    /* u[4i + c], 128-bit lane L: column 4L + c of rows 4i..4i+3 */
    for (int i = 0; i < 4; i++) {
        u[4 * i + 0] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0x44);
        u[4 * i + 1] = _mm512_shuffle_ps(t[4 * i + 0], t[4 * i + 2], 0xEE);
        u[4 * i + 2] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0x44);
        u[4 * i + 3] = _mm512_shuffle_ps(t[4 * i + 1], t[4 * i + 3], 0xEE);
    }
    for (int c = 0; c < 4; c++) {
        __m512 p0 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0x44), p1 = _mm512_shuffle_f32x4(u[c], u[4 + c], 0xEE);
        __m512 p2 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0x44),
               p3 = _mm512_shuffle_f32x4(u[8 + c], u[12 + c], 0xEE);
        out[c] = _mm512_shuffle_f32x4(p0, p2, 0x88);
        out[4 + c] = _mm512_shuffle_f32x4(p0, p2, 0xDD);
        out[8 + c] = _mm512_shuffle_f32x4(p1, p3, 0x88);
        out[12 + c] = _mm512_shuffle_f32x4(p1, p3, 0xDD);
    }
}

/* Activations of token block blk as AMX B tiles: per 32 columns, row k of the tile is the 16 tokens'
 * bf16 pairs (2k, 2k + 1), i.e. the transpose of the tokens' 16 pairs; tokens past n are zeros. */
JEV_BF16 static void pack_tiles_task(void *arg, int64_t blk, int thread) {
    (void)thread;
    const struct job *j = arg;
    const int64_t cols = j->w->cols, nkb = j->kp / 32;
    for (int64_t kb = 0; kb < nkb; kb++) {
        __m512 d[16], o[16];
        for (int t = 0; t < 16; t++) {
            int64_t tok = 16 * blk + t, c = 32 * kb;
            if (tok >= j->n) {
                d[t] = _mm512_setzero_ps();
                continue;
            }
            const float *p = j->x + tok * cols + c;
            d[t] = _mm512_castsi512_ps(pack32(round16(load16(p, cols - c)), round16(load16(p + 16, cols - c - 16))));
        }
        transpose16(d, o);
        uint16_t *dst = j->xh + (blk * nkb + kb) * 512;
        for (int k = 0; k < 16; k++)
            _mm512_storeu_si512(dst + 32 * k, _mm512_castps_si512(o[k]));
    }
}

/* ---- AVX512 kernel ---- */

/* The same sum every output gets: lanes 8-15 onto 0-7, then 4, 2, 1. */
JEV_BF16 static inline float hsum16(__m512 v) {
    __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
    __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
    b = _mm_add_ps(b, _mm_movehl_ps(b, b));
    b = _mm_add_ss(b, _mm_movehdup_ps(b));
    return _mm_cvtss_f32(b);
}

/* One 32-value chunk of the 4 rows (wv) against NT tokens of xb at column c. */
#define DOT_STEP(LOADW)                                                                                                \
    do {                                                                                                               \
        __m512i wv0 = LOADW(rows[0] + c), wv1 = LOADW(rows[1] + c), wv2 = LOADW(rows[2] + c),                          \
                wv3 = LOADW(rows[3] + c);                                                                              \
        _Pragma("GCC unroll 4") for (int t = 0; t < NT; t++) {                                                         \
            __m512bh xv = (__m512bh)_mm512_loadu_si512(xb + t * kp + c);                                               \
            acc[0][t] = _mm512_dpbf16_ps(acc[0][t], (__m512bh)wv0, xv);                                                \
            acc[1][t] = _mm512_dpbf16_ps(acc[1][t], (__m512bh)wv1, xv);                                                \
            acc[2][t] = _mm512_dpbf16_ps(acc[2][t], (__m512bh)wv2, xv);                                                \
            acc[3][t] = _mm512_dpbf16_ps(acc[3][t], (__m512bh)wv3, xv);                                                \
        }                                                                                                              \
    } while (0)
#define LOAD_FULL(p) _mm512_loadu_si512(p)
#define LOAD_TAIL(p) _mm512_maskz_loadu_epi16(tail, p)

/*
 * y[t * ldy + q] = weight row q (q < nr; rows[q] for q >= nr repeat a row and are not stored) . token t
 * (t < NT; xb rows of kp, zeros past cols). Only [0, cols) of a weight row is read, so bf16 rows are used
 * in place. NT is a constant in each caller and every index of acc is one after unrolling, so that the
 * 4 x NT accumulators stay in registers (a loop over nr here put them on the stack: every chunk
 * stored them).
 */
JEV_BF16 static inline __attribute__((always_inline)) void dot_tile(const uint16_t *const *rows, int nr,
                                                                    const uint16_t *xb, int64_t kp, int64_t cols,
                                                                    const int NT, float *y, int64_t ldy) {
    __m512 acc[4][4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
#pragma GCC unroll 4
        for (int t = 0; t < 4; t++)
            acc[q][t] = _mm512_setzero_ps();
    const int64_t full = cols / 32 * 32;
    int64_t c = 0;
    for (; c < full; c += 32)
        DOT_STEP(LOAD_FULL);
    if (c < cols) { /* the last, partial chunk */
        const __mmask32 tail = (__mmask32)((1ull << (cols - c)) - 1);
        DOT_STEP(LOAD_TAIL);
    }
    float out[4][4];
#pragma GCC unroll 4
    for (int q = 0; q < 4; q++)
#pragma GCC unroll 4
        for (int t = 0; t < NT; t++)
            out[q][t] = hsum16(acc[q][t]);
    for (int q = 0; q < nr; q++)
        for (int t = 0; t < NT; t++)
            y[t * ldy + q] = out[q][t];
}

JEV_BF16 static void dot_tile_n(const uint16_t *const *rows, int nr, const uint16_t *xb, int64_t kp, int64_t cols,
                                int nt, float *y, int64_t ldy) {
    switch (nt) {
    case 1: dot_tile(rows, nr, xb, kp, cols, 1, y, ldy); break;
    case 2: dot_tile(rows, nr, xb, kp, cols, 2, y, ldy); break;
    case 3: dot_tile(rows, nr, xb, kp, cols, 3, y, ldy); break;
    default: dot_tile(rows, nr, xb, kp, cols, 4, y, ldy); break;
    }
}

/* Rows [task * share, +share): a tile of rows at a time (in place for bf16), every token against it. */
JEV_BF16 static void dot_task(void *arg, int64_t task, int thread) {
    const struct job *j = arg;
    const struct jev_matrix *w = j->w;
    const int64_t cols = w->cols, kp = j->kp, ldy = w->rows;
    int64_t r0 = task * j->share, r1 = r0 + j->share < w->rows ? r0 + j->share : w->rows;
    uint16_t *buf = (uint16_t *)(void *)jev_cpu_wbuf(j->be, thread);
    float *fs = jev_cpu_scratch(j->be, thread);
    const int64_t tile = DOT_TILE;
    for (int64_t t0 = r0; t0 < r1; t0 += tile) {
        int64_t nr = r1 - t0 < tile ? r1 - t0 : tile, stride = kp;
        const uint16_t *base = buf;
        if (j->kind == K_BF16) {
            base = (const uint16_t *)w->data + t0 * cols;
            stride = cols;
        } else {
            for (int64_t q = 0; q < nr; q++)
                row_bf16(w, j->kind, t0 + q, kp, buf + q * kp, fs);
        }
        for (int64_t t = 0; t < j->n; t += 4) {
            int nt = j->n - t < 4 ? (int)(j->n - t) : 4;
            for (int64_t r = 0; r < nr; r += 4) {
                int rr = nr - r < 4 ? (int)(nr - r) : 4;
                const uint16_t *rows[4];
                for (int q = 0; q < 4; q++)
                    rows[q] = base + (r + (q < rr ? q : 0)) * stride;
                dot_tile_n(rows, rr, j->xh + t * kp, kp, cols, nt, j->y + t * ldy + t0 + r, ldy);
            }
        }
    }
}

/* ---- AMX kernel ---- */

/* ldtilecfg's 64 bytes: palette 1, tiles 0-7 of 16 rows x 64 bytes. */
struct tilecfg {
    uint8_t palette, start_row, reserved[14];
    uint16_t colsb[16];
    uint8_t rows[16];
};

/* A C tile (16 weight rows x 16 tokens, f32) into y: transposed, rows [0, nr) and tokens [0, nt) only. */
JEV_BF16 static void store_c(const float *ct, int64_t nr, int64_t nt, float *y, int64_t ldy) {
    __m512 in[16], out[16];
    for (int i = 0; i < 16; i++)
        in[i] = _mm512_loadu_ps(ct + 16 * i);
    transpose16(in, out);
    __mmask16 m = (__mmask16)(nr >= 16 ? 0xFFFF : (1u << nr) - 1);
    for (int64_t t = 0; t < nt && t < 16; t++)
        _mm512_mask_storeu_ps(y + t * ldy, m, out[t]);
}

/* Rows [task * share, +share) in tiles of AMX_TILE rows (zero rows past the share's end), against every
 * token block pair. C tiles: 0 = rows 0-15 x tokens 0-15, 1 = rows 0-15 x tokens 16-31, 2 and 3 the
 * same for rows 16-31; A: 4, 5; B: 6, 7. */
JEV_AMX static void amx_task(void *arg, int64_t task, int thread) {
    const struct job *j = arg;
    const struct jev_matrix *w = j->w;
    /* ldw: the buffer's row stride, kp plus one cache line, so that the 16 rows of an A tile do not
     * share a few cache sets when kp * 2 bytes is a power of two (1024 columns: 2 KiB) */
    const int64_t kp = j->kp, ldw = kp + 32, nkb = kp / 32, ldy = w->rows, ntb = (j->n + 15) / 16;
    int64_t r0 = task * j->share, r1 = r0 + j->share < w->rows ? r0 + j->share : w->rows;
    uint16_t *buf = (uint16_t *)(void *)jev_cpu_wbuf(j->be, thread);
    float *fs = jev_cpu_scratch(j->be, thread);
    float ct[4][256] __attribute__((aligned(64)));
    struct tilecfg cfg;
    memset(&cfg, 0, sizeof cfg);
    cfg.palette = 1;
    for (int i = 0; i < 8; i++) {
        cfg.rows[i] = 16;
        cfg.colsb[i] = 64;
    }
    MEM_BARRIER();
    _tile_loadconfig(&cfg);
    for (int64_t t0 = r0; t0 < r1; t0 += AMX_TILE) {
        int64_t nr = r1 - t0 < AMX_TILE ? r1 - t0 : AMX_TILE, nr32 = (nr + 31) / 32 * 32;
        for (int64_t q = 0; q < nr32; q++) {
            if (q < nr)
                row_bf16(w, j->kind, t0 + q, kp, buf + q * ldw, fs);
            else
                memset(buf + q * ldw, 0, (size_t)kp * sizeof(uint16_t));
        }
        MEM_BARRIER();
        for (int64_t tb = 0; tb < ntb; tb += 2) {
            const bool two = tb + 1 < ntb;
            const uint16_t *b0 = j->xh + tb * nkb * 512, *b1 = b0 + nkb * 512;
            for (int64_t rb = 0; rb < nr32; rb += 32) {
                const uint16_t *a0 = buf + rb * ldw, *a1 = a0 + 16 * ldw;
                _tile_zero(0);
                _tile_zero(1);
                _tile_zero(2);
                _tile_zero(3);
                if (two) {
                    for (int64_t kb = 0; kb < nkb; kb++) {
                        _tile_loadd(4, a0 + 32 * kb, ldw * 2);
                        _tile_loadd(6, b0 + 512 * kb, 64);
                        _tile_loadd(5, a1 + 32 * kb, ldw * 2);
                        _tile_loadd(7, b1 + 512 * kb, 64);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_dpbf16ps(2, 5, 6);
                        _tile_dpbf16ps(1, 4, 7);
                        _tile_dpbf16ps(3, 5, 7);
                    }
                } else {
                    for (int64_t kb = 0; kb < nkb; kb++) {
                        _tile_loadd(4, a0 + 32 * kb, ldw * 2);
                        _tile_loadd(6, b0 + 512 * kb, 64);
                        _tile_loadd(5, a1 + 32 * kb, ldw * 2);
                        _tile_dpbf16ps(0, 4, 6);
                        _tile_dpbf16ps(2, 5, 6);
                    }
                }
                _tile_stored(0, ct[0], 64);
                _tile_stored(2, ct[2], 64);
                if (two) {
                    _tile_stored(1, ct[1], 64);
                    _tile_stored(3, ct[3], 64);
                }
                MEM_BARRIER();
                for (int c = 0; c < 4; c += two ? 1 : 2) {
                    int64_t row = rb + 16 * (c >> 1), tok = 16 * (tb + (c & 1));
                    if (row < nr) /* the second block of rows may be all padding */
                        store_c(ct[c], nr - row, j->n - tok, j->y + tok * ldy + t0 + row, ldy);
                }
            }
        }
    }
    _tile_release();
}

/* ---- entry ---- */

void jev_cpu_matmul_bf16(struct jev_backend *be, const struct jev_matrix *w, const float *x, int64_t n, float *y) {
    JEV_ASSERT(be && be->xh && be->bf16 != JEV_CPU_BF16_NONE);
    if (n <= 0 || w->rows <= 0)
        return;
    const int64_t cols = w->cols, kp = (cols + 31) / 32 * 32;
    /* a pass holds at least 32 tokens; an AMX tile of rows and the generic row fit the thread's buffers */
    JEV_ASSERT(cols > 0 && kp * 32 <= JEV_CPU_XH_VALUES && AMX_TILE * (kp + 32) <= 2 * (int64_t)JEV_CPU_WBUF_FLOATS &&
               cols <= JEV_CPU_SCRATCH_FLOATS);
    const bool amx = be->bf16 == JEV_CPU_BF16_AMX;
    const int64_t pass = JEV_CPU_XH_VALUES / kp / 32 * 32, threads = be->n_threads > 0 ? be->n_threads : 1;
    for (int64_t t0 = 0; t0 < n; t0 += pass) {
        struct job j = {be, w, kind_of(w),      x + t0 * cols, be->xh, n - t0 < pass ? n - t0 : pass,
                        kp, 0, y + t0 * w->rows};
        jev_pool_run(be->pool, (j.n + 15) / 16, amx ? pack_tiles_task : pack_rows_task, &j);
        j.share = ((w->rows + threads - 1) / threads + 31) / 32 * 32;
        jev_pool_run(be->pool, (w->rows + j.share - 1) / j.share, amx ? amx_task : dot_task, &j);
    }
}

#endif

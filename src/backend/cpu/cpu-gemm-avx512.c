/*
 * cpu-gemm-avx512.c - a blocked AVX-512 kernel of this project for exact mode's products of 3 tokens
 * and more (prefill, suffix scoring, the vision tower): y[t][r] = x[t] . W[r]^T in f32, the weights
 * dequantized straight into the kernel's panels. JEV_CPU_GEMM=avx512 runs it for every matrix it reads;
 * the default (auto) for the quantized matrices of up to 1,024 columns, where it measured ahead of
 * cpu-matmul.c's OpenBLAS path in total on both machines (AUTO_MAX_COLS below), OpenBLAS for the rest.
 *
 * Why try it: around OpenBLAS's sgemm kernel the backend's call costs more work: each thread writes
 * its dequantized weights to a 16 MiB buffer (all of them, once per call: ~1.5 GB of f32 per
 * language-model forward), OpenBLAS reads that buffer back to pack it, zeroes C first (beta = 0),
 * and every thread packs the activations again. Profiled on the 2-core development machine (perf,
 * one 8-decision request): sgemm_kernel 59 % of the cycles, its packing 11 %, the dequantization
 * 5 %, the zeroing 1.5 %. Here the weights go from their 4-bit (8-bit, bf16, f16, f32) form into a
 * 32-row panel of KC columns that sits in L1, the activations are packed once per call for every
 * thread (one pool job), and C is written by the kernel alone (no zeroing pass).
 *
 * Measured (bench/gemm-bench.c, 2-core development machine, bench/results/2026-12-07-dev-2core-gemm-
 * kernel/, two runs, time against the OpenBLAS path): the language model's products at 512 tokens
 * 0.91-1.07 x (level), at 64 tokens 0.75-0.78 x (the scoring forwards: faster), the vision tower's at
 * 1824 rows 0.99-1.22 x (slower on its qkv product); whole 8-decision requests level within the
 * machine's noise. The kernel loop alone, with its panel in L1 and its tiles in L2, ran at the FMA
 * loop's peak (158 GFLOP/s a core); what it loses on the vision shapes is outside the loop (their
 * bf16 panels dequantized again for each block of tokens, C's reloads between KC blocks). A kernel
 * choice that followed the token count would make a token's bits depend on its company, so one
 * kernel serves every count.
 *
 * The blocking (BLIS's): the activations of a call are packed in tiles of MR = 14 tokens x KC = 256
 * columns ([k][14], zero rows past the last token); each task takes a range of 32-row panels of W
 * (and, with few panels and many threads, of token tiles), and for each block of MC_TILES tiles and
 * each KC block dequantizes a panel's 32 x KC weights into [k][32] (32 KiB: L1; 16 rows x 16 columns
 * at a time, turned in registers) and runs the 14 x 32 kernel over the block's tiles (448 x 256
 * floats of activations: L2). The kernel keeps 28 accumulators of 16 lanes in registers: per column,
 * two weight vectors and 14 broadcast tokens, 28 FMAs.
 *
 * Numerics: each output is one FMA chain over its columns in order, from zero (between KC blocks
 * the chain's value waits in C: the kernel loads it into its accumulators). That order depends on the
 * column count alone: not on the tokens that share the call, the thread split or the row's place, so
 * a token's outputs are the same bits alone or in any company (what the batched server relies on:
 * decide/batch.c), for every row count, with no padding rule. The dequantized values are
 * bit-identical to backend/matrix.c's (scale * q + bias, a multiply then an add; bf16 / f16 widened
 * exactly). Against cpu-matmul.c's OpenBLAS path only the order of the f32 sums differs.
 */
#include "backend/cpu/cpu.h" // defines: struct jev_backend, enum jev_cpu_gemm, jev_cpu_wbuf, jev_cpu_scratch

#include <stdint.h>
#include <string.h>

#include "backend/matrix.h" // defines: struct jev_matrix, jev_matrix_get, jev_matrix_scale

/* ---- the choice (every CPU) ---- */

static bool has_avx512(void) {
#if JEV_CPU_X86
    return __builtin_cpu_supports("avx512f"); /* also checks that the OS saves the AVX-512 state */
#else
    return false;
#endif
}

enum jev_status jev_cpu_gemm_choose(const char *knob, enum jev_cpu_gemm *out, struct jev_error *err) {
    *out = JEV_CPU_GEMM_OPENBLAS;
    if (!knob || !*knob || !strcmp(knob, "auto")) { /* the default: each kernel where it measured ahead */
        if (has_avx512())
            *out = JEV_CPU_GEMM_AUTO;
        return JEV_OK;
    }
    if (!strcmp(knob, "openblas"))
        return JEV_OK;
    if (strcmp(knob, "avx512") != 0)
        return jev_fail(
            err, JEV_ERR_INVALID_ARG,
            "cpu backend: JEV_CPU_GEMM=\"%.40s\" is not a product kernel: expected auto, openblas or avx512", knob);
    if (!has_avx512())
        return jev_fail(err, JEV_ERR_UNSUPPORTED,
                        "cpu backend: JEV_CPU_GEMM=avx512 needs AVX-512 F (CPU flag avx512f), which this CPU does not "
                        "have: unset it, or set openblas");
    *out = JEV_CPU_GEMM_AVX512;
    return JEV_OK;
}

#if !JEV_CPU_X86

bool jev_cpu_gemm512(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int64_t n_out,
                     const float *x, int64_t n, float *y) {
    (void)be, (void)w, (void)row_ids, (void)n_out, (void)x, (void)n, (void)y;
    return false; /* never chosen: jev_cpu_gemm_choose says OPENBLAS off x86 */
}

#else

#include <immintrin.h>

#define JEV_AVX512 __attribute__((target("avx2,fma,f16c,avx512f")))

#define MR 14       /* tokens of a kernel tile */
#define NR 32       /* weight rows of a panel: two vectors of 16 */
#define KC 256      /* columns of a block: a panel of 32 x 256 floats is 32 KiB (L1) */
#define MC_TILES 40 /* token tiles per block at most: 560 x 256 activations, 560 KiB (L2); a 512-token slice is one */

struct g_job {
    const struct jev_matrix *w;
    const int32_t *row_ids; /* NULL: rows 0..n_out-1 */
    int64_t n_out, cols;
    const float *x; /* this pass's first token */
    int64_t n;      /* this pass's tokens */
    float *y;       /* this pass's first output row; row stride n_out */
    float *pa;      /* the packed activations: [kblock][tile][KC][MR] */
    int64_t tiles, kblocks;
    int64_t panels_per_task, tiles_per_task, row_tasks;
    struct jev_backend *be;
};

/* Whether this file's panels read the matrix: the dense types at any width, 4- and 8-bit codes in
 * groups of a power of two from 16 columns that divides KC (every MLX group size). */
static bool supported(const struct jev_matrix *w) {
    switch (w->type) {
    case JEV_MTYPE_F32:
    case JEV_MTYPE_BF16:
    case JEV_MTYPE_F16: return true;
    case JEV_MTYPE_QAFFINE:
        return (w->bits == 4 || w->bits == 8) && w->group >= 16 && (w->group & (w->group - 1)) == 0 &&
               KC % w->group == 0 && w->cols % w->group == 0;
    }
    return false;
}

/* Where a panel row's values of one KC block start: its codes (or values) at the block's first column
 * and, for codes, the index of the block's first group's scale. Set once per row and block, so that
 * the 16-value loads below do no division. */
struct row_at {
    const unsigned char *p;
    int64_t g;
};

static struct row_at row_at(const struct jev_matrix *w, int64_t r, int64_t c0) {
    int64_t bits = w->type == JEV_MTYPE_F32 ? 32 : w->type == JEV_MTYPE_QAFFINE ? w->bits : 16;
    struct row_at at = {(const unsigned char *)w->data + (r * w->cols + c0) * bits / 8, 0};
    if (w->type == JEV_MTYPE_QAFFINE)
        at.g = r * (w->cols / w->group) + c0 / w->group;
    return at;
}

/* 16 values from column k of a block (k a multiple of 16; at: the row's row_at), bit-identical to
 * jev_matrix_row. s, b: the scale and bias of the group k is in (codes only). */
JEV_AVX512 static inline __m512 load16(const struct jev_matrix *w, struct row_at at, int64_t k, __m512 s, __m512 b) {
    switch (w->type) {
    case JEV_MTYPE_F32: return _mm512_loadu_ps((const float *)(const void *)at.p + k);
    case JEV_MTYPE_BF16: {
        __m256i h = _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)at.p + k));
        return _mm512_castsi512_ps(_mm512_slli_epi32(_mm512_cvtepu16_epi32(h), 16));
    }
    case JEV_MTYPE_F16:
        return _mm512_cvtph_ps(
            _mm256_loadu_si256((const __m256i *)(const void *)((const uint16_t *)(const void *)at.p + k)));
    case JEV_MTYPE_QAFFINE: {
        __m512i q;
        if (w->bits == 4) { /* two words, element j in nibble j % 8 of word j / 8 */
            uint64_t two;
            memcpy(&two, at.p + k / 2, sizeof two);
            const __m512i word = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
            const __m512i shift = _mm512_setr_epi32(0, 4, 8, 12, 16, 20, 24, 28, 0, 4, 8, 12, 16, 20, 24, 28);
            q = _mm512_permutexvar_epi32(word, _mm512_set1_epi64((long long)two));
            q = _mm512_and_si512(_mm512_srlv_epi32(q, shift), _mm512_set1_epi32(15));
        } else { /* four words, element j in byte j */
            q = _mm512_cvtepu8_epi32(_mm_loadu_si128((const __m128i *)(const void *)(at.p + k)));
        }
        return _mm512_add_ps(_mm512_mul_ps(s, _mm512_cvtepi32_ps(q)), b);
    }
    }
    return _mm512_setzero_ps();
}

/* r[i] = row i of a 16 x 16 block; after: r[k] = its column k. */
JEV_AVX512 static void transpose16(__m512 r[16]) {
    __m512 t[16];
    for (int i = 0; i < 16; i += 2) {
        t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
        t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
    }
    for (int i = 0; i < 16; i += 4) {
        __m512d a = _mm512_castps_pd(t[i]), b = _mm512_castps_pd(t[i + 1]);
        __m512d c = _mm512_castps_pd(t[i + 2]), d = _mm512_castps_pd(t[i + 3]);
        r[i] = _mm512_castpd_ps(_mm512_unpacklo_pd(a, c));
        r[i + 1] = _mm512_castpd_ps(_mm512_unpackhi_pd(a, c));
        r[i + 2] = _mm512_castpd_ps(_mm512_unpacklo_pd(b, d));
        r[i + 3] = _mm512_castpd_ps(_mm512_unpackhi_pd(b, d));
    }
    for (int i = 0; i < 4; i++) {
        t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
        t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
        t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
        t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
    }
    for (int i = 0; i < 4; i++) {
        r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
        r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
        r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
        r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
    }
}

/* Panel rows [o0, o0 + NR) of the output (those past n_out zero) over columns [c0, c0 + kc), as
 * pb[k][NR]: 16 rows x 16 columns dequantized, then turned in registers. */
JEV_AVX512 static void pack_panel(const struct g_job *j, int64_t o0, int64_t c0, int64_t kc, float *pb) {
    int64_t k16 = kc / 16 * 16;
    const struct jev_matrix *w = j->w;
    bool codes = w->type == JEV_MTYPE_QAFFINE;
    int64_t group = codes ? w->group : 0;
    for (int64_t h = 0; h < NR; h += 16) {
        int64_t rows[16];
        struct row_at at[16];
        int nv = 0; /* rows of this half that exist */
        for (int q = 0; q < 16; q++)
            if (o0 + h + q < j->n_out) {
                rows[nv] = j->row_ids ? j->row_ids[o0 + h + q] : o0 + h + q;
                at[nv] = row_at(j->w, rows[nv], c0);
                nv++;
            }
        __m512 sc[16], bi[16]; /* each row's scale and bias in the current group (codes) */
        for (int64_t k = 0; k < k16; k += 16) {
            if (codes && k % group == 0)
                for (int q = 0; q < nv; q++) {
                    int64_t g = at[q].g + k / group;
                    sc[q] = _mm512_set1_ps(jev_matrix_scale(w->stype, w->scales, g));
                    bi[q] = _mm512_set1_ps(jev_matrix_scale(w->stype, w->biases, g));
                }
            __m512 r[16];
            for (int q = 0; q < 16; q++)
                r[q] = q < nv ? load16(w, at[q], k, sc[q], bi[q]) : _mm512_setzero_ps();
            transpose16(r);
            for (int q = 0; q < 16; q++)
                _mm512_store_ps(pb + (k + q) * NR + h, r[q]);
        }
        for (int64_t k = k16; k < kc; k++) /* a dense matrix's last columns, when cols % 16 != 0 */
            for (int q = 0; q < 16; q++)
                pb[k * NR + h + q] = q < nv ? jev_matrix_get(w, rows[q], c0 + k) : 0.0f;
    }
}

/*
 * y[i][0..nv) = (first ? 0 : y[i][0..nv)) + sum over k < kc of a[k][i] * b[k][0..nv), one FMA at a
 * time in k's order, for the tile's mv tokens: the kernel. first: the first KC block.
 */
JEV_AVX512 static void kernel(int64_t kc, const float *a, const float *b, float *y, int64_t ldy, int64_t mv, int64_t nv,
                              bool first) {
    __mmask16 m0 = nv >= 16 ? 0xFFFF : (__mmask16)((1u << nv) - 1);
    __mmask16 m1 = nv >= 32 ? 0xFFFF : nv > 16 ? (__mmask16)((1u << (nv - 16)) - 1) : 0;
    __m512 c[MR][2];
    for (int i = 0; i < MR; i++) {
        bool load = !first && i < mv;
        c[i][0] = load ? _mm512_maskz_loadu_ps(m0, y + i * ldy) : _mm512_setzero_ps();
        c[i][1] = load ? _mm512_maskz_loadu_ps(m1, y + i * ldy + 16) : _mm512_setzero_ps();
    }
    for (int64_t k = 0; k < kc; k++) {
        __m512 b0 = _mm512_load_ps(b + k * NR), b1 = _mm512_load_ps(b + k * NR + 16);
        const float *ak = a + k * MR;
#pragma GCC unroll 14
        for (int i = 0; i < MR; i++) {
            __m512 av = _mm512_set1_ps(ak[i]);
            c[i][0] = _mm512_fmadd_ps(av, b0, c[i][0]);
            c[i][1] = _mm512_fmadd_ps(av, b1, c[i][1]);
        }
    }
    for (int64_t i = 0; i < mv; i++) {
        _mm512_mask_storeu_ps(y + i * ldy, m0, c[i][0]);
        _mm512_mask_storeu_ps(y + i * ldy + 16, m1, c[i][1]);
    }
}

/* Packing task: one KC block of one tile of tokens into pa ([k][MR]; tokens past the pass zero). */
JEV_AVX512 static void pack_task(void *arg, int64_t task, int thread) {
    (void)thread;
    const struct g_job *j = arg;
    int64_t kb = task / j->tiles, tile = task % j->tiles;
    int64_t c0 = kb * KC, kc = j->cols - c0 < KC ? j->cols - c0 : KC;
    float *pa = j->pa + (kb * j->tiles + tile) * (KC * MR);
    for (int64_t i = 0; i < MR; i++) {
        int64_t t = tile * MR + i;
        if (t >= j->n) {
            for (int64_t k = 0; k < kc; k++)
                pa[k * MR + i] = 0.0f;
            continue;
        }
        const float *xr = j->x + t * j->cols + c0;
        for (int64_t k = 0; k < kc; k++)
            pa[k * MR + i] = xr[k];
    }
}

/* Product task: a range of panels against a range of token tiles, block by block. */
JEV_AVX512 static void gemm_task(void *arg, int64_t task, int thread) {
    const struct g_job *j = arg;
    int64_t panels = (j->n_out + NR - 1) / NR;
    int64_t p0 = task % j->row_tasks * j->panels_per_task, t0 = task / j->row_tasks * j->tiles_per_task;
    int64_t p1 = p0 + j->panels_per_task < panels ? p0 + j->panels_per_task : panels;
    int64_t t1 = t0 + j->tiles_per_task < j->tiles ? t0 + j->tiles_per_task : j->tiles;
    float *pb = (float *)(((uintptr_t)jev_cpu_scratch(j->be, thread) + 63) & ~(uintptr_t)63);
    int64_t blocks = (t1 - t0 + MC_TILES - 1) / MC_TILES, per = (t1 - t0 + blocks - 1) / blocks; /* even blocks */
    for (int64_t b0 = t0; b0 < t1; b0 += per) {
        int64_t b1 = b0 + per < t1 ? b0 + per : t1;
        for (int64_t kb = 0; kb < j->kblocks; kb++) {
            int64_t c0 = kb * KC, kc = j->cols - c0 < KC ? j->cols - c0 : KC;
            for (int64_t p = p0; p < p1; p++) {
                int64_t o0 = p * NR, nv = j->n_out - o0 < NR ? j->n_out - o0 : NR;
                pack_panel(j, o0, c0, kc, pb);
                for (int64_t tile = b0; tile < b1; tile++) {
                    int64_t mv = j->n - tile * MR < MR ? j->n - tile * MR : MR;
                    kernel(kc, j->pa + (kb * j->tiles + tile) * (KC * MR), pb, j->y + tile * MR * j->n_out + o0,
                           j->n_out, mv, nv, kb == 0);
                }
            }
        }
    }
}

/* AUTO's share: quantized matrices of at most AUTO_MAX_COLS columns, the language model's products of the
 * hidden size (its DeltaNet and attention inputs, the MLP's gate and up, the head's candidate rows).
 * Measured against OpenBLAS (bench/gemm-bench.c), kernel time over OpenBLAS time: on those 0.75-1.07 x on
 * 2 cores (64-512 tokens) and 0.50-1.14 x on 16 (the one above 1: the small 512 x 1024 k/v product at 512
 * tokens, 0.92 against 0.81 ms; over the three LM shapes at 512 tokens 11.35 against 12.11 ms); behind on
 * the inner dimensions of 2,048-3,584 (16 cores: 1.03-1.08 x at 512 tokens) and mixed on the vision tower's
 * bf16 products (2 cores: up to 1.22 x).
 * By the matrix alone, never the token count: a token's bits stay the same in any company. */
#define AUTO_MAX_COLS 1024

static bool auto_takes(const struct jev_matrix *w) { return w->type == JEV_MTYPE_QAFFINE && w->cols <= AUTO_MAX_COLS; }

bool jev_cpu_gemm512(struct jev_backend *be, const struct jev_matrix *w, const int32_t *row_ids, int64_t n_out,
                     const float *x, int64_t n, float *y) {
    if (be->gemm == JEV_CPU_GEMM_OPENBLAS || (be->gemm == JEV_CPU_GEMM_AUTO && !auto_takes(w)) || !supported(w))
        return false;
    _Static_assert(JEV_CPU_SCRATCH_FLOATS >= KC * NR + 16, "a panel fits a thread's scratch");
    int64_t cols = w->cols, kblocks = (cols + KC - 1) / KC;
    /* the packed activations in the threads' weight buffers (one block: cpu.c allocates them at once);
     * a call with more tokens than they hold runs in passes (the sums do not depend on the pass) */
    int64_t room = (int64_t)be->n_threads * JEV_CPU_WBUF_FLOATS;
    int64_t pass_tiles = room / (kblocks * KC * MR);
    if (pass_tiles < 1)
        return false; /* rows of ~300k columns and more (one thread): the sgemm path, by shape alone */
    int64_t panels = (n_out + NR - 1) / NR, want = 2 * (int64_t)be->n_threads;
    for (int64_t t0 = 0; t0 < n; t0 += pass_tiles * MR) {
        int64_t np = n - t0 < pass_tiles * MR ? n - t0 : pass_tiles * MR;
        struct g_job j = {.w = w,
                          .row_ids = row_ids,
                          .n_out = n_out,
                          .cols = cols,
                          .x = x + t0 * cols,
                          .n = np,
                          .y = y + t0 * n_out,
                          .pa = jev_cpu_wbuf(be, 0),
                          .tiles = (np + MR - 1) / MR,
                          .kblocks = kblocks,
                          .be = be};
        /* two tasks a thread (the pool balances them); few panels: split the tokens too */
        int64_t row_tasks = panels < want ? panels : want, tok_tasks = 1;
        if (panels < want) {
            tok_tasks = (want + panels - 1) / panels;
            if (tok_tasks > j.tiles)
                tok_tasks = j.tiles;
        }
        j.panels_per_task = (panels + row_tasks - 1) / row_tasks;
        j.row_tasks = (panels + j.panels_per_task - 1) / j.panels_per_task;
        j.tiles_per_task = (j.tiles + tok_tasks - 1) / tok_tasks;
        tok_tasks = (j.tiles + j.tiles_per_task - 1) / j.tiles_per_task;
        jev_pool_run(be->pool, kblocks * j.tiles, pack_task, &j);
        jev_pool_run(be->pool, j.row_tasks * tok_tasks, gemm_task, &j);
    }
    return true;
}

#endif

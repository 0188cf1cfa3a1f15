/*
 * cpu-vision.c - the vision tower's own ops on the CPU: 2-D rotary on q/k,
 * bidirectional multi-head attention, and the bilinear position-embedding add.
 *
 * Attention has two forms. jev_cpu_vision_attention_ref is the scalar
 * reference: per query, scores in index order, a two-pass softmax with libm
 * expf, then the weighted sum of values. jev_cpu_vision_attention (the table
 * entry) is the fast form: tasks of (head, 32 queries) over the pool, keys in
 * chunks of 128 with an online softmax (running max and sum, as torch's CPU
 * flash attention does), the q.k^T and p.v products as 4x16 register tiles
 * with AVX2 FMA, and a vectorised exp (Cephes polynomial, within 2 ulp of
 * expf); on a CPU without AVX2 the same blocking runs scalar kernels. From
 * 256 rows on, the two products are single-threaded OpenBLAS sgemm calls per
 * task instead (128 queries against key chunks of up to 1968, what the
 * scratch holds), straight from the qkv rows. Every form fits the
 * per-thread scratch for any number of patches and never allocates.
 * tests/test-vision.c checks both kernel sets against the reference (NMSE).
 *
 * Rotary and the position add are cheap (n * D work) and stay scalar, in
 * torch's operation order.
 */
#include "backend/cpu/cpu.h"      // defines: jev_cpu_vision_*, jev_cpu_scratch
#include "backend/cpu/cpu-simd.h" // defines: jev_hsum8, jev_hmax8, jev_exp8

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include <cblas.h>

/* The AVX2 kernels carry JEV_AVX2, so the file builds with any -march (the sanitizer and fuzz builds pass
 * none); jev_cpu_vision_attention checks the CPU at run time and uses the scalar kernels otherwise. */

/* ---- rotary ---- */

struct vis_pw_job {
    struct jev_backend *be;
    float *x;
    const float *cos, *sin, *w;
    const int32_t *idx;
    const struct jev_matrix *table;
    int32_t n_heads, head_dim;
};

static void vision_rope_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const struct vis_pw_job *j = arg;
    const int32_t head_dim = j->head_dim, half = head_dim / 2, dim = j->n_heads * head_dim;
    for (int64_t r = r0; r < r1; r++) {
        const float *c = j->cos + r * head_dim, *s = j->sin + r * head_dim;
        for (int part = 0; part < 2; part++) { /* q, then k */
            for (int32_t h = 0; h < j->n_heads; h++) {
                float *x = j->x + r * 3 * dim + (int64_t)part * dim + (int64_t)h * head_dim;
                for (int32_t d = 0; d < half; d++) {
                    float a = x[d], b = x[d + half];
                    /* torch: (x * cos) + (rotate_half(x) * sin), rotate_half(x) = [-x2, x1] */
                    x[d] = a * c[d] + (-b) * s[d];
                    x[d + half] = b * c[d + half] + a * s[d + half];
                }
            }
        }
    }
}

void jev_cpu_vision_rope(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                         int32_t n_heads, int32_t head_dim) {
    struct vis_pw_job j = {.x = qkv, .cos = cos, .sin = sin, .n_heads = n_heads, .head_dim = head_dim};
    jev_cpu_for_rows(be, n, 2 * (int64_t)n_heads * head_dim, vision_rope_rows, &j);
}

/* ---- position embedding ---- */

static void vision_pos_add_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    const struct vis_pw_job *j = arg;
    const int32_t d = j->table->cols;
    float *row = jev_cpu_scratch(j->be, thread), *pe = row + d;
    for (int64_t r = r0; r < r1; r++) {
        /* torch: (pos_embed(idx) * w[:, :, None]).sum(1), then hidden + pos: the 4 taps summed in order first */
        for (int k = 0; k < 4; k++) {
            jev_matrix_row(j->table, j->idx[r * 4 + k], row);
            float wk = j->w[r * 4 + k];
            if (k == 0)
                for (int32_t c = 0; c < d; c++)
                    pe[c] = row[c] * wk;
            else
                for (int32_t c = 0; c < d; c++)
                    pe[c] += row[c] * wk;
        }
        float *xr = j->x + r * d;
        for (int32_t c = 0; c < d; c++)
            xr[c] += pe[c];
    }
}

void jev_cpu_vision_pos_add(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                            int64_t n, float *x) {
    JEV_ASSERT(2 * table->cols <= JEV_CPU_SCRATCH_FLOATS);
    struct vis_pw_job j = {.be = be, .x = x, .w = w, .idx = idx, .table = table};
    jev_cpu_for_rows(be, n, 4 * (int64_t)table->cols, vision_pos_add_rows, &j);
}

/* ---- attention: scalar reference ---- */

void jev_cpu_vision_attention_ref(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads,
                                  int32_t head_dim, float scale, float *out) {
    (void)be;
    const int64_t dim = (int64_t)n_heads * head_dim, stride = 3 * dim;
    float *p = malloc((size_t)n * sizeof *p);
    JEV_ASSERT(p != NULL);
    for (int32_t h = 0; h < n_heads; h++) {
        for (int64_t i = 0; i < n; i++) {
            const float *q = qkv + i * stride + (int64_t)h * head_dim;
            float m = -INFINITY;
            for (int64_t j = 0; j < n; j++) {
                const float *k = qkv + j * stride + dim + (int64_t)h * head_dim;
                float s = 0.0f;
                for (int32_t d = 0; d < head_dim; d++)
                    s += q[d] * k[d];
                p[j] = s * scale;
                if (p[j] > m)
                    m = p[j];
            }
            float l = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                p[j] = expf(p[j] - m);
                l += p[j];
            }
            float *o = out + i * dim + (int64_t)h * head_dim;
            for (int32_t d = 0; d < head_dim; d++)
                o[d] = 0.0f;
            for (int64_t j = 0; j < n; j++) {
                const float *v = qkv + j * stride + 2 * dim + (int64_t)h * head_dim;
                for (int32_t d = 0; d < head_dim; d++)
                    o[d] += p[j] * v[d];
            }
            for (int32_t d = 0; d < head_dim; d++)
                o[d] /= l;
        }
    }
    free(p);
}

/* ---- attention: fast form ---- */

#define ATT_BQ 32  /* queries per task */
#define ATT_BK 128 /* keys per chunk */
#define ATT_MAX_HD 256

struct att_job {
    struct jev_backend *be;
    const float *qkv; /* [n][3*dim] */
    int64_t n;        /* rows */
    int32_t heads;    /* H */
    int32_t hd;       /* head dim */
    float scale;      /* softmax scale */
    float *out;       /* [n][dim] */
    int64_t qblocks;  /* ceil(n / ATT_BQ) */
    bool avx2;        /* use the AVX2 kernels */
};

/* The three kernels of one key chunk, over a query block:
 *   qk:      S[BQ][BK] = Q[BQ][hd] . KT[hd][BK] * scale
 *   softmax: per query row i < nq: new running max, alpha = exp(m_old - m_new), S <- exp(S - m_new) over the nk
 *            real keys (0 on the padding), l = l * alpha + sum, O[i] *= alpha
 *   pv:      O[i][:] += sum_c S[i][c] * V[c][:] over the nk keys (V rows `stride` apart) */

static void qk_scalar(const float *Q, const float *KT, int32_t hd, float scale, float *S) {
    for (int64_t i = 0; i < ATT_BQ; i++)
        for (int64_t c = 0; c < ATT_BK; c++) {
            float acc = 0.0f;
            for (int32_t d = 0; d < hd; d++)
                acc += Q[i * hd + d] * KT[(int64_t)d * ATT_BK + c];
            S[i * ATT_BK + c] = acc * scale;
        }
}

static void softmax_scalar(float *S, int64_t ld, int64_t nq, int64_t nk, float *m, float *l, float *O, int32_t hd) {
    for (int64_t i = 0; i < nq; i++) {
        float *s = S + i * ld, mc = -INFINITY;
        for (int64_t c = 0; c < nk; c++)
            mc = s[c] > mc ? s[c] : mc;
        float mn = m[i] > mc ? m[i] : mc, alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn), sum = 0.0f;
        int64_t c = 0;
        for (; c < nk; c++) {
            s[c] = expf(s[c] - mn);
            sum += s[c];
        }
        for (; c < ld; c++)
            s[c] = 0.0f;
        l[i] = l[i] * alpha + sum;
        m[i] = mn;
        for (int32_t d = 0; d < hd; d++)
            O[i * hd + d] *= alpha;
    }
}

static void pv_scalar(const float *S, const float *V, int64_t stride, int64_t nq, int64_t nk, int32_t hd, float *O) {
    for (int64_t i = 0; i < nq; i++)
        for (int64_t c = 0; c < nk; c++) {
            float pc = S[i * ATT_BK + c];
            const float *v = V + c * stride;
            float *o = O + i * hd;
            for (int32_t d = 0; d < hd; d++)
                o[d] += pc * v[d];
        }
}

/* 4 queries x 16 keys per register tile (8 accumulators), the head dim as the inner loop */
JEV_AVX2 static void qk_avx2(const float *Q, const float *KT, int32_t hd, float scale, float *S) {
    const __m256 sc = _mm256_set1_ps(scale);
    for (int64_t i = 0; i < ATT_BQ; i += 4) {
        for (int64_t c = 0; c < ATT_BK; c += 16) {
            __m256 a00 = _mm256_setzero_ps(), a01 = a00, a10 = a00, a11 = a00, a20 = a00, a21 = a00, a30 = a00,
                   a31 = a00;
            for (int32_t d = 0; d < hd; d++) {
                const float *kt = KT + (int64_t)d * ATT_BK + c;
                __m256 k0 = _mm256_loadu_ps(kt), k1 = _mm256_loadu_ps(kt + 8);
                __m256 b0 = _mm256_broadcast_ss(Q + (i + 0) * hd + d), b1 = _mm256_broadcast_ss(Q + (i + 1) * hd + d);
                __m256 b2 = _mm256_broadcast_ss(Q + (i + 2) * hd + d), b3 = _mm256_broadcast_ss(Q + (i + 3) * hd + d);
                a00 = _mm256_fmadd_ps(b0, k0, a00);
                a01 = _mm256_fmadd_ps(b0, k1, a01);
                a10 = _mm256_fmadd_ps(b1, k0, a10);
                a11 = _mm256_fmadd_ps(b1, k1, a11);
                a20 = _mm256_fmadd_ps(b2, k0, a20);
                a21 = _mm256_fmadd_ps(b2, k1, a21);
                a30 = _mm256_fmadd_ps(b3, k0, a30);
                a31 = _mm256_fmadd_ps(b3, k1, a31);
            }
            float *s = S + i * ATT_BK + c;
            _mm256_storeu_ps(s, _mm256_mul_ps(a00, sc));
            _mm256_storeu_ps(s + 8, _mm256_mul_ps(a01, sc));
            _mm256_storeu_ps(s + ATT_BK, _mm256_mul_ps(a10, sc));
            _mm256_storeu_ps(s + ATT_BK + 8, _mm256_mul_ps(a11, sc));
            _mm256_storeu_ps(s + 2 * ATT_BK, _mm256_mul_ps(a20, sc));
            _mm256_storeu_ps(s + 2 * ATT_BK + 8, _mm256_mul_ps(a21, sc));
            _mm256_storeu_ps(s + 3 * ATT_BK, _mm256_mul_ps(a30, sc));
            _mm256_storeu_ps(s + 3 * ATT_BK + 8, _mm256_mul_ps(a31, sc));
        }
    }
}

JEV_AVX2 static void softmax_avx2(float *S, int64_t ld, int64_t nq, int64_t nk, float *m, float *l, float *O,
                                  int32_t hd) {
    for (int64_t i = 0; i < nq; i++) {
        float *s = S + i * ld, mc = -INFINITY;
        int64_t c = 0;
        __m256 mv = _mm256_set1_ps(-INFINITY);
        for (; c + 8 <= nk; c += 8)
            mv = _mm256_max_ps(mv, _mm256_loadu_ps(s + c));
        mc = jev_hmax8(mv);
        for (; c < nk; c++)
            mc = s[c] > mc ? s[c] : mc;
        float mn = m[i] > mc ? m[i] : mc, alpha = m[i] == -INFINITY ? 0.0f : expf(m[i] - mn);
        __m256 mnv = _mm256_set1_ps(mn), sv = _mm256_setzero_ps();
        for (c = 0; c + 8 <= nk; c += 8) {
            __m256 e = jev_exp8(_mm256_sub_ps(_mm256_loadu_ps(s + c), mnv));
            _mm256_storeu_ps(s + c, e);
            sv = _mm256_add_ps(sv, e);
        }
        float sum = jev_hsum8(sv);
        for (; c < nk; c++) {
            s[c] = expf(s[c] - mn);
            sum += s[c];
        }
        for (; c < ld; c++) /* padded keys weigh nothing */
            s[c] = 0.0f;
        l[i] = l[i] * alpha + sum;
        m[i] = mn;
        for (int32_t d = 0; d < hd; d++)
            O[i * hd + d] *= alpha;
    }
}

/* 4 queries x 16 output dims per register tile, the keys as the inner loop; hd % 16 == 0 */
JEV_AVX2 static void pv_avx2(const float *S, const float *V, int64_t stride, int64_t nq, int64_t nk, int32_t hd,
                             float *O) {
    for (int64_t i = 0; i < nq; i += 4) { /* rows past nq have zero weights (S zeroed) and are never stored */
        for (int32_t d = 0; d < hd; d += 16) {
            float *o0 = O + i * hd + d;
            __m256 a00 = _mm256_loadu_ps(o0), a01 = _mm256_loadu_ps(o0 + 8);
            __m256 a10 = _mm256_loadu_ps(o0 + hd), a11 = _mm256_loadu_ps(o0 + hd + 8);
            __m256 a20 = _mm256_loadu_ps(o0 + 2 * hd), a21 = _mm256_loadu_ps(o0 + 2 * hd + 8);
            __m256 a30 = _mm256_loadu_ps(o0 + 3 * hd), a31 = _mm256_loadu_ps(o0 + 3 * hd + 8);
            const float *p = S + i * ATT_BK;
            for (int64_t c = 0; c < nk; c++) {
                const float *v = V + c * stride + d;
                __m256 v0 = _mm256_loadu_ps(v), v1 = _mm256_loadu_ps(v + 8);
                __m256 b0 = _mm256_broadcast_ss(p + c), b1 = _mm256_broadcast_ss(p + ATT_BK + c);
                __m256 b2 = _mm256_broadcast_ss(p + 2 * ATT_BK + c), b3 = _mm256_broadcast_ss(p + 3 * ATT_BK + c);
                a00 = _mm256_fmadd_ps(b0, v0, a00);
                a01 = _mm256_fmadd_ps(b0, v1, a01);
                a10 = _mm256_fmadd_ps(b1, v0, a10);
                a11 = _mm256_fmadd_ps(b1, v1, a11);
                a20 = _mm256_fmadd_ps(b2, v0, a20);
                a21 = _mm256_fmadd_ps(b2, v1, a21);
                a30 = _mm256_fmadd_ps(b3, v0, a30);
                a31 = _mm256_fmadd_ps(b3, v1, a31);
            }
            _mm256_storeu_ps(o0, a00);
            _mm256_storeu_ps(o0 + 8, a01);
            _mm256_storeu_ps(o0 + hd, a10);
            _mm256_storeu_ps(o0 + hd + 8, a11);
            _mm256_storeu_ps(o0 + 2 * hd, a20);
            _mm256_storeu_ps(o0 + 2 * hd + 8, a21);
            _mm256_storeu_ps(o0 + 3 * hd, a30);
            _mm256_storeu_ps(o0 + 3 * hd + 8, a31);
        }
    }
}

/* One task: ATT_BQ queries of one head against every key. Scratch layout (floats):
 * Q [BQ][hd] | KT [hd][BK] | S [BQ][BK] | O [BQ][hd] | m [BQ] | l [BQ]. */
static void att_task(void *arg, int64_t task, int thread) {
    const struct att_job *j = arg;
    const int32_t hd = j->hd, h = (int32_t)(task / j->qblocks);
    const int64_t dim = (int64_t)j->heads * hd, stride = 3 * dim;
    const int64_t q0 = (task % j->qblocks) * ATT_BQ;
    const int64_t nq = j->n - q0 < ATT_BQ ? j->n - q0 : ATT_BQ;
    float *Q = jev_cpu_scratch(j->be, thread), *KT = Q + ATT_BQ * hd, *S = KT + (size_t)hd * ATT_BK,
          *O = S + ATT_BQ * ATT_BK, *m = O + ATT_BQ * hd, *l = m + ATT_BQ;
    /* queries, zero-padded to a full block */
    for (int64_t i = 0; i < ATT_BQ; i++) {
        if (i < nq)
            memcpy(Q + i * hd, j->qkv + (q0 + i) * stride + (int64_t)h * hd, (size_t)hd * sizeof(float));
        else
            memset(Q + i * hd, 0, (size_t)hd * sizeof(float));
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(O, 0, (size_t)ATT_BQ * (size_t)hd * sizeof(float));
    for (int64_t k0 = 0; k0 < j->n; k0 += ATT_BK) {
        const int64_t nk = j->n - k0 < ATT_BK ? j->n - k0 : ATT_BK;
        /* K^T of this chunk, zero-padded: KT[d][c] = k_{k0+c}[d] */
        for (int64_t c = 0; c < ATT_BK; c++) {
            if (c < nk) {
                const float *k = j->qkv + (k0 + c) * stride + dim + (int64_t)h * hd;
                for (int32_t d = 0; d < hd; d++)
                    KT[(int64_t)d * ATT_BK + c] = k[d];
            } else {
                for (int32_t d = 0; d < hd; d++)
                    KT[(int64_t)d * ATT_BK + c] = 0.0f;
            }
        }
        const float *V = j->qkv + k0 * stride + 2 * dim + (int64_t)h * hd;
        if (j->avx2) {
            qk_avx2(Q, KT, hd, j->scale, S);
            softmax_avx2(S, ATT_BK, nq, nk, m, l, O, hd);
        } else {
            qk_scalar(Q, KT, hd, j->scale, S);
            softmax_scalar(S, ATT_BK, nq, nk, m, l, O, hd);
        }
        for (int64_t i = nq; i < ATT_BQ; i++) /* padded queries: no weight */
            memset(S + i * ATT_BK, 0, ATT_BK * sizeof(float));
        if (j->avx2 && hd % 16 == 0)
            pv_avx2(S, V, stride, nq, nk, hd, O);
        else
            pv_scalar(S, V, stride, nq, nk, hd, O);
    }
    for (int64_t i = 0; i < nq; i++) {
        float *dst = j->out + (q0 + i) * dim + (int64_t)h * hd;
        for (int32_t d = 0; d < hd; d++)
            dst[d] = O[i * hd + d] / l[i];
    }
}

/* The BLAS form of a task, for long sequences: ATT_BQ_BLAS queries against key chunks of up to `bk`, both
 * products as single-threaded sgemm straight from the qkv rows (lda = ldb = 3*dim), the online softmax
 * between them. Scratch: S [BQ][bk] | O [BQ][hd] | m [BQ] | l [BQ]. */
/* 128, not 64: each task packs its head's keys and values for sgemm, so twice the queries a task halve
 * that work: one layer at 1824 patches 88-89 -> 77-79 ms on 2 cores, the same output bits (one key
 * chunk either way; bench/vision-attention-bench.c, bench/results/2026-12-08-dev-2core-vision-attention/) */
#define ATT_BQ_BLAS 128
#define ATT_BLAS_MIN_N 256 /* below this the register-tile kernels win */

static void att_task_blas(void *arg, int64_t task, int thread) {
    const struct att_job *j = arg;
    const int32_t hd = j->hd, h = (int32_t)(task / j->qblocks);
    const int64_t dim = (int64_t)j->heads * hd, stride = 3 * dim;
    const int64_t q0 = (task % j->qblocks) * ATT_BQ_BLAS;
    const int64_t nq = j->n - q0 < ATT_BQ_BLAS ? j->n - q0 : ATT_BQ_BLAS;
    /* the key chunk: as long as the scratch allows, a multiple of 16, at most 2048 */
    int64_t bk = (JEV_CPU_SCRATCH_FLOATS - (int64_t)ATT_BQ_BLAS * (hd + 2)) / ATT_BQ_BLAS / 16 * 16;
    if (bk > 2048)
        bk = 2048;
    float *S = jev_cpu_scratch(j->be, thread), *O = S + ATT_BQ_BLAS * bk, *m = O + ATT_BQ_BLAS * hd,
          *l = m + ATT_BQ_BLAS;
    for (int64_t i = 0; i < nq; i++) {
        m[i] = -INFINITY;
        l[i] = 0.0f;
    }
    memset(O, 0, (size_t)nq * (size_t)hd * sizeof(float));
    const float *Q = j->qkv + q0 * stride + (int64_t)h * hd;
    for (int64_t k0 = 0; k0 < j->n; k0 += bk) {
        const int64_t nk = j->n - k0 < bk ? j->n - k0 : bk;
        const float *K = j->qkv + k0 * stride + dim + (int64_t)h * hd;
        const float *V = j->qkv + k0 * stride + 2 * dim + (int64_t)h * hd;
        /* S = scale * Q K^T */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, (int)nq, (int)nk, hd, j->scale, Q, (int)stride, K,
                    (int)stride, 0.0f, S, (int)bk);
        if (j->avx2)
            softmax_avx2(S, bk, nq, nk, m, l, O, hd);
        else
            softmax_scalar(S, bk, nq, nk, m, l, O, hd);
        /* O += P V (O was rescaled by alpha in the softmax) */
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, (int)nq, hd, (int)nk, 1.0f, S, (int)bk, V, (int)stride,
                    1.0f, O, hd);
    }
    for (int64_t i = 0; i < nq; i++) {
        float *dst = j->out + (q0 + i) * dim + (int64_t)h * hd;
        for (int32_t d = 0; d < hd; d++)
            dst[d] = O[i * hd + d] / l[i];
    }
}

/* Exposed for the parity test: force_scalar runs the blocked form with the scalar kernels. */
void jev_cpu_vision_attention_blocked(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads,
                                      int32_t head_dim, float scale, float *out, bool force_scalar) {
    JEV_ASSERT(head_dim > 0 && head_dim <= ATT_MAX_HD);
    /* scratch: Q + KT + S + O + m + l, well inside the per-thread floats */
    JEV_ASSERT((int64_t)ATT_BQ * head_dim * 2 + (int64_t)head_dim * ATT_BK + ATT_BQ * ATT_BK + 2 * ATT_BQ <=
               JEV_CPU_SCRATCH_FLOATS);
    if (n <= 0)
        return;
    bool avx2 = !force_scalar && jev_cpu_has_avx2();
    if (!force_scalar && n >= ATT_BLAS_MIN_N &&
        (int64_t)ATT_BQ_BLAS * (head_dim + 2) + (int64_t)ATT_BQ_BLAS * 128 <= JEV_CPU_SCRATCH_FLOATS) {
        struct att_job j = {be, qkv, n, n_heads, head_dim, scale, out, (n + ATT_BQ_BLAS - 1) / ATT_BQ_BLAS, avx2};
        jev_pool_run(be->pool, (int64_t)n_heads * j.qblocks, att_task_blas, &j);
        return;
    }
    struct att_job j = {be, qkv, n, n_heads, head_dim, scale, out, (n + ATT_BQ - 1) / ATT_BQ, avx2};
    jev_pool_run(be->pool, (int64_t)n_heads * j.qblocks, att_task, &j);
}

void jev_cpu_vision_attention(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                              float scale, float *out) {
    jev_cpu_vision_attention_blocked(be, qkv, n, n_heads, head_dim, scale, out, false);
}

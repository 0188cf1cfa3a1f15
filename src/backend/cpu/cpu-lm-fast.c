/*
 * cpu-lm-fast.c - the fast CPU forms of the two heavy LM ops: causal
 * attention over K/V spans and the Gated DeltaNet delta rule. The scalar
 * forms in cpu-lm.c are their parity references (tests/test-ops.c).
 *
 * Attention: one task per (run, block of up to 8 query rows, K/V head)
 * computes the scores of every query head of the GQA group of every row of the
 * block against each key row loaded once (AVX2 dots over dh, four heads
 * sharing the key's loads), the f32 softmax (exp 8 lanes at a time, the sum
 * in 8 lanes then across), then weights . V with two heads' sums in registers
 * over the keys. Each (row, head) runs the operations of a lone row in the
 * same order (one row a task with per-key axpys before: the same bits), so a
 * row's output does not depend on the rows it shares a block with; 1.9-2.3x
 * less time at 64 decisions on the 2-core machine (three alternated pairs:
 * 2.85-3.23 -> 1.29-1.70 s of attention).
 *
 * Delta rule, chunked: the same matrices as torch_chunk_gated_delta_rule,
 * formed by the same operations, one small-matrix kernel call each
 * (cpu-small-gemm.c, inside the pool task of one (run, value head); OpenBLAS
 * calls of this size cost more in set-up than in arithmetic):
 *     A   = Kb Kn^T, At = Q Kn^T           gemm, then decay mask
 *     U   = solve(I + strict(A), V*beta)   unit lower triangular solve
 *     W   = solve(I + strict(A), Kb*e^cum) the same
 *     U  -= W S                            gemm
 *     O   = (Q e^cum) S + At U             two gemm into the output rows
 *     S   = e^cum_last S + Kd^T U          gemm
 * torch's triangular solve (unitriangular) is the same forward substitution.
 * Delta rule, recurrent (one token): two passes over each head's state
 * (decay + read, then write + output), 8 lanes of dv at a time.
 * Both need dk and dv to be multiples of 8; other shapes use the reference.
 *
 * Conv: per (run, block of 256 channels) the taps are transposed to
 * [K][256] so that 8 channels advance together; SiLU runs 8 lanes at a time
 * through jev_exp8 (within 2 ulp of the reference's expf).
 */
#include "backend/cpu/cpu.h"      // defines: jev_cpu_attention_fast, jev_cpu_gdn_rule_fast
#include "backend/cpu/cpu-simd.h" // defines: jev_hsum8, jev_hmax8, jev_exp8

#include <math.h>
#include <string.h>

#define MAX_GROUP 16    /* query heads per K/V head handled together */
#define MAX_ATTN_ROWS 8 /* query rows of one run an attention task takes */

JEV_AVX2 static inline float dot8(const float *a, const float *b, int32_t n) {
    __m256 s0 = _mm256_setzero_ps(), s1 = s0;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
        s1 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i + 8), _mm256_loadu_ps(b + i + 8), s1);
    }
    for (; i < n; i += 8)
        s0 = _mm256_fmadd_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i), s0);
    return jev_hsum8(_mm256_add_ps(s0, s1));
}

/* y += a * x over n (multiple of 8) */
JEV_AVX2 static inline void axpy8(float *y, float a, const float *x, int32_t n) {
    __m256 av = _mm256_set1_ps(a);
    for (int32_t i = 0; i < n; i += 8)
        _mm256_storeu_ps(y + i, _mm256_fmadd_ps(av, _mm256_loadu_ps(x + i), _mm256_loadu_ps(y + i)));
}

/* ---- attention ---- */

/* dot8(q + h * n, k, n) for the nh (1..4) query heads q, q + n, ...: the same operations in the same
 * order as dot8 for each (so the same bits), the key's loads shared. */
JEV_AVX2 static inline void dot8_heads(const float *q, int32_t nh, const float *k, int32_t n, float *out) {
    if (nh != 4) { /* the accumulators stay in registers only with constant indices: the 4-head form below */
        for (int32_t h = 0; h < nh; h++)
            out[h] = dot8(q + h * n, k, n);
        return;
    }
    __m256 a0 = _mm256_setzero_ps(), a1 = a0, b0 = a0, b1 = a0, c0 = a0, c1 = a0, d0 = a0, d1 = a0;
    const float *qa = q, *qb = q + n, *qc = q + 2 * n, *qd = q + 3 * n;
    int32_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256 k0 = _mm256_loadu_ps(k + i), k1 = _mm256_loadu_ps(k + i + 8);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i), k0, a0);
        a1 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i + 8), k1, a1);
        b0 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i), k0, b0);
        b1 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i + 8), k1, b1);
        c0 = _mm256_fmadd_ps(_mm256_loadu_ps(qc + i), k0, c0);
        c1 = _mm256_fmadd_ps(_mm256_loadu_ps(qc + i + 8), k1, c1);
        d0 = _mm256_fmadd_ps(_mm256_loadu_ps(qd + i), k0, d0);
        d1 = _mm256_fmadd_ps(_mm256_loadu_ps(qd + i + 8), k1, d1);
    }
    for (; i < n; i += 8) {
        __m256 k0 = _mm256_loadu_ps(k + i);
        a0 = _mm256_fmadd_ps(_mm256_loadu_ps(qa + i), k0, a0);
        b0 = _mm256_fmadd_ps(_mm256_loadu_ps(qb + i), k0, b0);
        c0 = _mm256_fmadd_ps(_mm256_loadu_ps(qc + i), k0, c0);
        d0 = _mm256_fmadd_ps(_mm256_loadu_ps(qd + i), k0, d0);
    }
    out[0] = jev_hsum8(_mm256_add_ps(a0, a1));
    out[1] = jev_hsum8(_mm256_add_ps(b0, b1));
    out[2] = jev_hsum8(_mm256_add_ps(c0, c1));
    out[3] = jev_hsum8(_mm256_add_ps(d0, d1));
}

/* o0 (and o1, when p1 is not NULL) = sum over keys k < n_keys of p[k] * v[k] in key order, one FMA a
 * key from zero: the operations of axpy8 over the keys (so its bits), with each value row's loads
 * shared by two heads and the sums in registers. dh: a multiple of 8. */
JEV_AVX2 static void weigh_values(const float *const *v, int32_t n_keys, const float *p0, const float *p1, int32_t dh,
                                  float *o0, float *o1) {
    int32_t c = 0;
    for (; c + 32 <= dh; c += 32) { /* 4 + 4 accumulators in registers */
        __m256 a0 = _mm256_setzero_ps(), a1 = a0, a2 = a0, a3 = a0, b0 = a0, b1 = a0, b2 = a0, b3 = a0;
        for (int32_t k = 0; k < n_keys; k++) {
            const float *vk = v[k] + c;
            __m256 x = _mm256_set1_ps(p0[k]), y = _mm256_set1_ps(p1 ? p1[k] : 0.0f);
            __m256 v0 = _mm256_loadu_ps(vk), v1 = _mm256_loadu_ps(vk + 8);
            __m256 v2 = _mm256_loadu_ps(vk + 16), v3 = _mm256_loadu_ps(vk + 24);
            a0 = _mm256_fmadd_ps(x, v0, a0);
            a1 = _mm256_fmadd_ps(x, v1, a1);
            a2 = _mm256_fmadd_ps(x, v2, a2);
            a3 = _mm256_fmadd_ps(x, v3, a3);
            b0 = _mm256_fmadd_ps(y, v0, b0);
            b1 = _mm256_fmadd_ps(y, v1, b1);
            b2 = _mm256_fmadd_ps(y, v2, b2);
            b3 = _mm256_fmadd_ps(y, v3, b3);
        }
        _mm256_storeu_ps(o0 + c, a0);
        _mm256_storeu_ps(o0 + c + 8, a1);
        _mm256_storeu_ps(o0 + c + 16, a2);
        _mm256_storeu_ps(o0 + c + 24, a3);
        if (p1) {
            _mm256_storeu_ps(o1 + c, b0);
            _mm256_storeu_ps(o1 + c + 8, b1);
            _mm256_storeu_ps(o1 + c + 16, b2);
            _mm256_storeu_ps(o1 + c + 24, b3);
        }
    }
    for (; c < dh; c += 8) { /* the last 8-column pieces */
        __m256 a = _mm256_setzero_ps(), b = a;
        for (int32_t k = 0; k < n_keys; k++) {
            __m256 vk = _mm256_loadu_ps(v[k] + c);
            a = _mm256_fmadd_ps(_mm256_set1_ps(p0[k]), vk, a);
            b = _mm256_fmadd_ps(_mm256_set1_ps(p1 ? p1[k] : 0.0f), vk, b);
        }
        _mm256_storeu_ps(o0 + c, a);
        if (p1)
            _mm256_storeu_ps(o1 + c, b);
    }
}

/* The first row of a block starting at run row i0 that sees key `key`. */
static inline int32_t first_row(const struct jev_attn_run *run, int32_t i0, int32_t key) {
    int32_t i = key - run->n_past - i0;
    return i > 0 ? i : 0;
}

struct attn_job {
    const struct jev_attn_shape *s;
    const float *q;
    const struct jev_attn_run *runs;
    const int64_t *task0; /* [n_runs + 1] */
    int32_t rows;         /* query rows a task takes (the last block of a run fewer) */
    float *o;
    struct jev_backend *be;
};

JEV_AVX2 /*
          * A block of up to j->rows query rows of one run and one K/V head: the group's query heads are
          * consecutive, and each key (value) row is loaded once for every head of every row of the
          * block, which makes the op compute-bound where one row a task streamed the whole K/V span from
          * L2 or memory for each query row. Each (row, head) still runs the same operations in the same
          * order as alone (its dots, its softmax, its axpys in key order), so its output does not depend
          * on the block it shares.
          */
    static void
    attn_task(void *arg, int64_t task, int thread) {
    struct attn_job *j = arg;
    const struct jev_attn_shape *s = j->s;
    int32_t r = 0;
    while (j->task0[r + 1] <= task)
        r++;
    const struct jev_attn_run *run = &j->runs[r];
    int64_t local = task - j->task0[r];
    int32_t i0 = (int32_t)(local / s->n_kv_heads) * j->rows;
    int32_t kvh = (int32_t)(local % s->n_kv_heads);
    int32_t nb = run->n - i0 < j->rows ? run->n - i0 : j->rows;
    int32_t grp = s->n_heads / s->n_kv_heads, dh = s->head_dim, kv_dim = s->n_kv_heads * dh;
    int32_t last = run->n_past + i0 + nb;          /* keys the block's last row sees */
    float *score = jev_cpu_scratch(j->be, thread); /* [nb][grp][last], then the value rows' addresses */
    JEV_ASSERT((int64_t)nb * grp * last + 2 * (int64_t)last + 2 <= JEV_CPU_SCRATCH_FLOATS && grp <= MAX_GROUP);
    const float **vrow = (const float **)(void *)(score + ((int64_t)nb * grp * last + 1) / 2 * 2);

    float mx[MAX_GROUP * MAX_ATTN_ROWS];
    for (int32_t g = 0; g < nb * grp; g++)
        mx[g] = -INFINITY;
    int32_t key = 0;
    for (int32_t sp = 0; sp < run->n_spans && key < last; sp++)
        for (int32_t r2 = 0; r2 < run->spans[sp].n && key < last; r2++, key++) {
            const float *kv = run->spans[sp].k + (int64_t)r2 * kv_dim + kvh * dh;
            vrow[key] = run->spans[sp].v + (int64_t)r2 * kv_dim + kvh * dh;
            /* the block's rows from the first that sees this key (causal: run row i0 + i sees
             * n_past + i0 + i + 1 keys) */
            for (int32_t i = first_row(run, i0, key); i < nb; i++) {
                const float *qh = j->q + ((run->row0 + i0 + i) * s->n_heads + kvh * grp) * dh;
                for (int32_t g0 = 0; g0 < grp; g0 += 4) {
                    float d[4];
                    int32_t nh = grp - g0 < 4 ? grp - g0 : 4;
                    dot8_heads(qh + g0 * dh, nh, kv, dh, d);
                    for (int32_t h = 0; h < nh; h++) {
                        int32_t g = g0 + h;
                        float v = d[h] * s->scale;
                        score[((int64_t)i * grp + g) * last + key] = v;
                        mx[i * grp + g] = v > mx[i * grp + g] ? v : mx[i * grp + g];
                    }
                }
            }
        }
    for (int32_t i = 0; i < nb; i++) {
        int32_t n_keys = run->n_past + i0 + i + 1;
        float *oh = j->o + ((run->row0 + i0 + i) * s->n_heads + kvh * grp) * dh;
        for (int32_t g = 0; g < grp; g++) {
            float *sc = score + ((int64_t)i * grp + g) * last, sum = 0.0f, m = mx[i * grp + g];
            int32_t k = 0;
            __m256 mv = _mm256_set1_ps(m), sv = _mm256_setzero_ps();
            for (; k + 8 <= n_keys; k += 8) { /* jev_exp8: within 2 ulp of expf */
                __m256 e = jev_exp8(_mm256_sub_ps(_mm256_loadu_ps(sc + k), mv));
                _mm256_storeu_ps(sc + k, e);
                sv = _mm256_add_ps(sv, e);
            }
            sum = jev_hsum8(sv);
            for (; k < n_keys; k++) {
                sc[k] = expf(sc[k] - m);
                sum += sc[k];
            }
            for (k = 0; k < n_keys; k++)
                sc[k] = sc[k] / sum;
        }
        for (int32_t g = 0; g < grp; g += 2) {
            const float *p0 = score + ((int64_t)i * grp + g) * last;
            const float *p1 = g + 1 < grp ? p0 + last : NULL;
            weigh_values(vrow, n_keys, p0, p1, dh, oh + g * dh, oh + (g + 1) * dh);
        }
    }
}

void jev_cpu_attention_fast(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                            const struct jev_attn_run *runs, int32_t n_runs, float *o) {
    /* a row's scores must fit the per-thread scratch; longer contexts take the per-head reference */
    int64_t longest = 0;
    int32_t grp = s->n_kv_heads > 0 ? s->n_heads / s->n_kv_heads : 0;
    for (int32_t r = 0; r < n_runs; r++)
        longest = runs[r].n_past + runs[r].n > longest ? runs[r].n_past + runs[r].n : longest;
    if (!jev_cpu_has_avx2() || s->head_dim % 8 != 0 || grp > MAX_GROUP ||
        longest * (grp + 2) + 2 > JEV_CPU_SCRATCH_FLOATS) {
        jev_cpu_attention(be, s, q, runs, n_runs, o);
        return;
    }
    /* rows a task: as many as the scratch holds scores (and the value rows' addresses) for, at most
     * MAX_ATTN_ROWS */
    int64_t rows = (JEV_CPU_SCRATCH_FLOATS - 2 * longest - 2) / (longest * grp);
    struct attn_job j = {s, q, runs, NULL, (int32_t)(rows < MAX_ATTN_ROWS ? rows : MAX_ATTN_ROWS), o, be};
    int64_t task0[JEV_CPU_MAX_RUNS + 1];
    JEV_ASSERT(n_runs <= JEV_CPU_MAX_RUNS);
    task0[0] = 0;
    for (int32_t r = 0; r < n_runs; r++)
        task0[r + 1] = task0[r] + (int64_t)((runs[r].n + j.rows - 1) / j.rows) * s->n_kv_heads;
    j.task0 = task0;
    jev_pool_run(be->pool, task0[n_runs], attn_task, &j);
}

/* ---- causal conv ---- */

#define CONV_BLOCK 256

struct conv_job {
    const float *mixed;
    const float *taps;
    int32_t conv_dim, kernel;
    const struct jev_gdn_run *runs;
    int32_t blocks;
    float *u;
    struct jev_backend *be;
};

JEV_AVX2 static void conv_task(void *arg, int64_t task, int thread) {
    struct conv_job *j = arg;
    const struct jev_gdn_run *run = &j->runs[task / j->blocks];
    int32_t c0 = (int32_t)(task % j->blocks) * CONV_BLOCK;
    int32_t nc = j->conv_dim - c0 < CONV_BLOCK ? j->conv_dim - c0 : CONV_BLOCK;
    int32_t K = j->kernel, C = j->conv_dim;
    float *tt = jev_cpu_scratch(j->be, thread); /* [K][CONV_BLOCK] transposed taps */
    for (int32_t c = 0; c < nc; c++)
        for (int32_t k = 0; k < K; k++)
            tt[k * CONV_BLOCK + c] = j->taps[(int64_t)(c0 + c) * K + k];
    const float *win = jev_cpu_conv_in(run); /* the window before the run */
    for (int32_t t = 0; t < run->n; t++) {
        float *out = j->u + (run->row0 + t) * C + c0;
        int32_t c = 0;
        for (; c + 8 <= nc; c += 8) {
            __m256 acc = _mm256_setzero_ps();
            for (int32_t k = 0; k < K; k++) {
                int32_t src = t - (K - 1) + k; /* < 0: from the window */
                const float *x =
                    src >= 0 ? j->mixed + (run->row0 + src) * C + c0 + c : win + (int64_t)(K - 1 + src) * C + c0 + c;
                acc = _mm256_fmadd_ps(_mm256_loadu_ps(tt + k * CONV_BLOCK + c), _mm256_loadu_ps(x), acc);
            }
            _mm256_storeu_ps(out + c, jev_silu8(acc));
        }
        for (; c < nc; c++) { /* channels past a multiple of 8: the reference's scalar form */
            float acc = 0.0f;
            for (int32_t k = 0; k < K; k++) {
                int32_t src = t - (K - 1) + k;
                float x = src >= 0 ? j->mixed[(run->row0 + src) * C + c0 + c] : win[(K - 1 + src) * C + c0 + c];
                acc += tt[k * CONV_BLOCK + c] * x;
            }
            out[c] = acc / (1.0f + expf(-acc)); /* SiLU */
        }
    }
    /* the new window: the last K-1 inputs (old window rows n+w > w are read before being overwritten) */
    for (int32_t w = 0; w < K - 1; w++) {
        int32_t src = run->n - (K - 1) + w;
        float *dst = run->conv + (int64_t)w * C + c0;
        const float *from = src >= 0 ? j->mixed + (run->row0 + src) * C + c0 : win + (int64_t)(K - 1 + src) * C + c0;
        memmove(dst, from, (size_t)nc * sizeof(float));
    }
}

void jev_cpu_gdn_conv_fast(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim,
                           int32_t kernel, const struct jev_gdn_run *runs, int32_t n_runs, float *u) {
    if (!jev_cpu_has_avx2() || (int64_t)kernel * CONV_BLOCK > JEV_CPU_SCRATCH_FLOATS) {
        jev_cpu_gdn_conv(be, mixed, taps, conv_dim, kernel, runs, n_runs, u);
        return;
    }
    int32_t blocks = (conv_dim + CONV_BLOCK - 1) / CONV_BLOCK;
    struct conv_job j = {mixed, taps, conv_dim, kernel, runs, blocks, u, be};
    jev_pool_run(be->pool, (int64_t)n_runs * blocks, conv_task, &j);
}

/* ---- delta rule ---- */

struct gdn_job {
    const struct jev_gdn_shape *s;
    const float *u;
    const float *g;
    const float *beta;
    const struct jev_gdn_run *runs;
    float *o;
    struct jev_backend *be;
    int32_t conv_dim;
};

/* out = x / sqrt(sum(x^2) + 1e-6) * mul (HF l2norm, sum form; mul = 1 for keys) */
JEV_AVX2 static inline void l2norm8(const float *x, int32_t d, float mul, float *out) {
    float inv = 1.0f / sqrtf(dot8(x, x, d) + 1e-6f);
    __m256 iv = _mm256_set1_ps(inv), mv = _mm256_set1_ps(mul);
    for (int32_t i = 0; i < d; i += 8) {
        __m256 v = _mm256_mul_ps(_mm256_loadu_ps(x + i), iv);
        _mm256_storeu_ps(out + i, mul == 1.0f ? v : _mm256_mul_ps(v, mv));
    }
}

/*
 * The recurrence for one value head. Pass 1 decays S and reads S^T k in the
 * same sweep; pass 2 writes k delta^T and reads S^T q; S rows are dv
 * contiguous floats, so both passes stream the 64 KiB state once.
 */
JEV_AVX2 static void recurrent_head(const struct gdn_job *j, const struct jev_gdn_run *run, int32_t h, float *scratch) {
    const struct jev_gdn_shape *s = j->s;
    int32_t dk = s->dk, dv = s->dv, kh = h / (s->hv / s->hk), key_dim = s->hk * dk;
    float *S = run->ssm + (int64_t)h * dk * dv;
    float *q = scratch, *k = q + dk, *mem = k + dk, *out_acc = mem + dv;
    const float qdiv = sqrtf((float)dk);
    for (int32_t t = 0; t < run->n; t++) {
        int64_t row = run->row0 + t;
        const float *ur = j->u + row * j->conv_dim;
        l2norm8(ur + kh * dk, dk, 1.0f, q);
        for (int32_t i = 0; i < dk; i++)
            q[i] = q[i] / qdiv; /* torch: query / dk ** 0.5 */
        l2norm8(ur + key_dim + kh * dk, dk, 1.0f, k);
        const float *v = ur + 2 * key_dim + h * dv;
        __m256 decay = _mm256_set1_ps(expf(j->g[row * s->hv + h]));
        float beta = j->beta[row * s->hv + h];
        /* pass 1: S *= decay; mem = S^T k */
        memset(mem, 0, (size_t)dv * sizeof(float));
        for (int32_t m = 0; m < dk; m++) {
            float *Sm = S + (int64_t)m * dv;
            __m256 km = _mm256_set1_ps(k[m]);
            for (int32_t d = 0; d < dv; d += 8) {
                __m256 sv = _mm256_mul_ps(_mm256_loadu_ps(Sm + d), decay);
                _mm256_storeu_ps(Sm + d, sv);
                _mm256_storeu_ps(mem + d, _mm256_fmadd_ps(sv, km, _mm256_loadu_ps(mem + d)));
            }
        }
        /* delta = (v - mem) * beta */
        for (int32_t d = 0; d < dv; d++)
            mem[d] = (v[d] - mem[d]) * beta;
        /* pass 2: S += k delta^T; out = S^T q */
        memset(out_acc, 0, (size_t)dv * sizeof(float));
        for (int32_t m = 0; m < dk; m++) {
            float *Sm = S + (int64_t)m * dv;
            __m256 km = _mm256_set1_ps(k[m]), qm = _mm256_set1_ps(q[m]);
            for (int32_t d = 0; d < dv; d += 8) {
                __m256 sv = _mm256_fmadd_ps(km, _mm256_loadu_ps(mem + d), _mm256_loadu_ps(Sm + d));
                _mm256_storeu_ps(Sm + d, sv);
                _mm256_storeu_ps(out_acc + d, _mm256_fmadd_ps(sv, qm, _mm256_loadu_ps(out_acc + d)));
            }
        }
        memcpy(j->o + row * (s->hv * dv) + h * dv, out_acc, (size_t)dv * sizeof(float));
    }
}

/* The chunked form for one value head, one BLAS call per torch matrix product (see the file comment). */
JEV_AVX2 static void chunk_head(const struct gdn_job *j, const struct jev_gdn_run *run, int32_t h, float *scratch) {
    const struct jev_gdn_shape *s = j->s;
    int32_t dk = s->dk, dv = s->dv, C = s->chunk, kh = h / (s->hv / s->hk), key_dim = s->hk * dk;
    int32_t ldo = s->hv * dv;
    float *S = run->ssm + (int64_t)h * dk * dv; /* [dk][dv] */
    float *Q = scratch;                         /* [C][dk] */
    float *Kn = Q + C * dk;                     /* [C][dk] */
    float *Kb = Kn + C * dk;                    /* [C][dk] */
    float *W = Kb + C * dk;                     /* [C][dk] */
    float *U = W + C * dk;                      /* [C][dv] */
    float *A = U + C * dv;                      /* [C][C] */
    float *At = A + C * C;                      /* [C][C] */
    float *cum = At + C * C;                    /* [C] */
    float *KnT = cum + C;                       /* [dk][C]: Kn transposed, the right operand of A and At */
    const float qscale = (float)(1.0 / sqrt((double)dk));
    for (int32_t c0 = 0; c0 < run->n; c0 += C) {
        int32_t L = run->n - c0 < C ? run->n - c0 : C;
        for (int32_t i = 0; i < L; i++) {
            int64_t row = run->row0 + c0 + i;
            const float *ur = j->u + row * j->conv_dim;
            l2norm8(ur + kh * dk, dk, qscale, Q + i * dk);
            l2norm8(ur + key_dim + kh * dk, dk, 1.0f, Kn + i * dk);
            float b = j->beta[row * s->hv + h];
            float g = j->g[row * s->hv + h];
            cum[i] = i == 0 ? g : cum[i - 1] + g;
            float ec = expf(cum[i]);
            const float *v = ur + 2 * key_dim + h * dv;
            for (int32_t d = 0; d < dk; d++) {
                Kb[i * dk + d] = Kn[i * dk + d] * b;
                W[i * dk + d] = Kb[i * dk + d] * ec;
            }
            for (int32_t d = 0; d < dv; d++)
                U[i * dv + d] = v[d] * b;
        }
        for (int32_t i = 0; i < L; i++)
            for (int32_t d = 0; d < dk; d++)
                KnT[d * C + i] = Kn[i * dk + d];
        jev_cpu_small_gemm(L, L, dk, 1.0f, Kb, dk, 1, KnT, C, 0.0f, A, C);
        jev_cpu_small_gemm(L, L, dk, 1.0f, Q, dk, 1, KnT, C, 0.0f, At, C);
        for (int32_t i = 0; i < L; i++)
            for (int32_t m = 0; m < L; m++) {
                float decay = m <= i ? expf(cum[i] - cum[m]) : 0.0f;
                A[i * C + m] = A[i * C + m] * decay;
                At[i * C + m] = At[i * C + m] * decay;
            }
        jev_cpu_small_trsm_lower_unit(L, dv, A, C, U, dv);
        jev_cpu_small_trsm_lower_unit(L, dk, A, C, W, dk);
        jev_cpu_small_gemm(L, dv, dk, -1.0f, W, dk, 1, S, dv, 1.0f, U, dv);
        for (int32_t i = 0; i < L; i++) {
            float ec = expf(cum[i]);
            for (int32_t d = 0; d < dk; d++)
                Q[i * dk + d] = Q[i * dk + d] * ec;
        }
        float *out = j->o + (run->row0 + c0) * ldo + h * dv;
        jev_cpu_small_gemm(L, dv, dk, 1.0f, Q, dk, 1, S, dv, 0.0f, out, ldo);
        jev_cpu_small_gemm(L, dv, L, 1.0f, At, C, 1, U, dv, 1.0f, out, ldo);
        float last = cum[L - 1];
        for (int32_t i = 0; i < L; i++) {
            float e = expf(last - cum[i]);
            for (int32_t d = 0; d < dk; d++)
                Kn[i * dk + d] = Kn[i * dk + d] * e;
        }
        jev_cpu_small_gemm(dk, dv, L, 1.0f, Kn, 1, dk, U, dv, expf(last), S, dv); /* Kn^T U */
    }
}

/*
 * Subnormals are flushed to zero inside a task (MXCSR FTZ + DAZ, restored
 * after). The decays e^cum reach 1e-38 and below within a chunk for fast-
 * forgetting heads, and every product with such a factor is subnormal: on
 * the full-size synthetic model ~3% of the chunk matrices' values were
 * (counted). Intel cores take a microcode assist per subnormal operand;
 * AMD's mostly do not. Measured with JEV_PROFILE=1: the delta rule ran 8x
 * slower per thread on the GPU machine's 16-core Xeon than on the 2-core
 * EPYC, with OpenBLAS and with cpu-small-gemm.c alike, which is what
 * subnormal assists look like (flushing there is yet to be measured; on the
 * EPYC it changes the op's time by -3%). Flushing drops
 * terms below 1.2e-38, invisible beside the O(1e-3..1) values they are
 * summed with; the scalar reference (cpu-lm.c) keeps them, and the parity
 * test still holds at its NMSE 1e-7 limit.
 */
#define MXCSR_FTZ_DAZ 0x8040u

JEV_AVX2 static void gdn_task(void *arg, int64_t task, int thread) {
    struct gdn_job *j = arg;
    const struct jev_gdn_run *run = &j->runs[task / j->s->hv];
    int32_t h = (int32_t)(task % j->s->hv);
    float *scratch = jev_cpu_scratch(j->be, thread);
    jev_cpu_gdn_state_in(run, h, (int64_t)j->s->dk * j->s->dv);
    unsigned int csr = _mm_getcsr();
    _mm_setcsr(csr | MXCSR_FTZ_DAZ);
    if (run->recurrent)
        recurrent_head(j, run, h, scratch);
    else
        chunk_head(j, run, h, scratch);
    _mm_setcsr(csr);
}

void jev_cpu_gdn_rule_fast(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                           const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o) {
    int64_t need =
        5 * (int64_t)s->chunk * s->dk + (int64_t)s->chunk * s->dv + 2 * (int64_t)s->chunk * s->chunk + s->chunk;
    if (!jev_cpu_has_avx2() || s->dk % 8 != 0 || s->dv % 8 != 0 || need > JEV_CPU_SCRATCH_FLOATS) {
        jev_cpu_gdn_rule(be, s, u, g, beta, runs, n_runs, o);
        return;
    }
    struct gdn_job j = {s, u, g, beta, runs, o, be, 2 * s->hk * s->dk + s->hv * s->dv};
    jev_pool_run(be->pool, (int64_t)n_runs * s->hv, gdn_task, &j);
}

/*
 * cpu-lm.c - the language model's ops on the CPU, scalar reference form:
 * copy, q/gate split, rotary, sigmoid gate, causal attention over K/V spans,
 * and the Gated DeltaNet pieces (conv, gates, delta rule, gated RMSNorm).
 * The sigmoid gate and the gated RMSNorm have no second form: their
 * sigmoid / SiLU run 8 lanes at a time through jev_exp8 where AVX2 is
 * there (within 2 ulp of expf; tested against the formula in double).
 *
 * Numerics follow HF transformers' torch code (modeling_qwen3_5.py) op by op
 * in f32, sums in index order: the attention is eager_attention_forward
 * (scores * scale, f32 softmax with max subtraction, weights . V); the delta
 * rule is torch_chunk_gated_delta_rule (chunk of 64, UT solve by forward
 * substitution, inter-chunk scan) or torch_recurrent_gated_delta_rule.
 * Padding of the last chunk is left out: padded rows are exactly zero in
 * every product torch forms, so skipping them changes no bit.
 *
 * Threads: each op spreads independent work (runs x heads, rows) over the
 * backend's pool; a task never writes what another task reads, so results
 * do not depend on the thread count.
 */
#include "backend/cpu/cpu.h" // defines: jev_cpu_* LM ops, jev_cpu_scratch

#include <math.h>
#include <string.h>

#include "backend/cpu/cpu-simd.h" // defines: jev_exp8, jev_silu8

/* ---- small pointwise ops ---- */

/* The arguments of the pointwise ops below; each uses the fields it names. */
struct lm_pw_job {
    const float *x, *z, *w, *cos, *sin, *a_log, *dt_bias;
    float *y, *y2;
    int32_t heads, dh, n_freq, d;
    float eps;
};

static void copy_elems(void *arg, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const struct lm_pw_job *j = arg;
    memcpy(j->y + i0, j->x + i0, (size_t)(i1 - i0) * sizeof(float));
}

void jev_cpu_copy(struct jev_backend *be, float *dst, const float *src, int64_t n) {
    struct lm_pw_job j = {.x = src, .y = dst};
    jev_cpu_for_rows(be, n, 1, copy_elems, &j);
}

/* HF views q_proj's output as [T, heads, 2*dh] and chunks the last dim: per head query first, then gate. */
static void split_qgate_rows(void *arg, int64_t t0, int64_t t1, int thread) {
    (void)thread;
    const struct lm_pw_job *j = arg;
    const int32_t heads = j->heads, dh = j->dh;
    for (int64_t t = t0; t < t1; t++)
        for (int32_t h = 0; h < heads; h++) {
            const float *src = j->x + (t * heads + h) * 2 * dh;
            memcpy(j->y + (t * heads + h) * dh, src, (size_t)dh * sizeof(float));
            memcpy(j->y2 + (t * heads + h) * dh, src + dh, (size_t)dh * sizeof(float));
        }
}

void jev_cpu_split_qgate(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                         float *gate) {
    struct lm_pw_job j = {.x = qg, .y = q, .y2 = gate, .heads = heads, .dh = dh};
    jev_cpu_for_rows(be, n, 2 * (int64_t)heads * dh, split_qgate_rows, &j);
}

/* Dims beyond 2*n_freq pass through (partial rotary). */
static void rope_rows(void *arg, int64_t t0, int64_t t1, int thread) {
    (void)thread;
    const struct lm_pw_job *j = arg;
    const int32_t heads = j->heads, dh = j->dh, n_freq = j->n_freq;
    for (int64_t t = t0; t < t1; t++) {
        const float *c = j->cos + t * n_freq;
        const float *s = j->sin + t * n_freq;
        for (int32_t h = 0; h < heads; h++) {
            float *v = j->y + (t * heads + h) * dh;
            for (int32_t d = 0; d < n_freq; d++) {
                /* HF: q*cos + rotate_half(q)*sin with rotate_half = cat(-x2, x1) */
                float x1 = v[d], x2 = v[d + n_freq];
                v[d] = x1 * c[d] - x2 * s[d];
                v[d + n_freq] = x2 * c[d] + x1 * s[d];
            }
        }
    }
}

void jev_cpu_rope(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                  const float *cos, const float *sin) {
    struct lm_pw_job j = {.y = x, .cos = cos, .sin = sin, .heads = heads, .dh = dh, .n_freq = n_freq};
    jev_cpu_for_rows(be, n, (int64_t)heads * dh, rope_rows, &j);
}

/* 8 lanes at a time through jev_exp8 where AVX2 is there; the rest (and other CPUs) the scalar form */
JEV_AVX2 static int64_t sigmoid_mul_avx2(float *y, const float *z, int64_t i0, int64_t i1) {
    const __m256 one = _mm256_set1_ps(1.0f);
    int64_t i = i0;
    for (; i + 8 <= i1; i += 8) {
        __m256 e = jev_exp8(_mm256_sub_ps(_mm256_setzero_ps(), _mm256_loadu_ps(z + i)));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(y + i), _mm256_div_ps(one, _mm256_add_ps(one, e))));
    }
    return i;
}

static void sigmoid_mul_elems(void *arg, int64_t i0, int64_t i1, int thread) {
    (void)thread;
    const struct lm_pw_job *j = arg;
    int64_t i = jev_cpu_has_avx2() ? sigmoid_mul_avx2(j->y, j->z, i0, i1) : i0;
    for (; i < i1; i++)
        j->y[i] = j->y[i] * (1.0f / (1.0f + expf(-j->z[i])));
}

void jev_cpu_sigmoid_mul(struct jev_backend *be, float *x, const float *gate, int64_t n) {
    struct lm_pw_job j = {.y = x, .z = gate};
    jev_cpu_for_rows(be, n, 1, sigmoid_mul_elems, &j);
}

/* ---- attention ---- */

/* A task is one (run, query row, query head); tasks are numbered run by run. */
struct attn_job {
    const struct jev_attn_shape *s;
    const float *q;
    const struct jev_attn_run *runs;
    int32_t n_runs;
    const int64_t *task0; /* [n_runs + 1] first task of each run */
    float *o;
    struct jev_backend *be;
};

/*
 * One query row of one head: scores over every visible key in span order,
 * the softmax, then the weighted sum of values. Two passes over the keys,
 * with the scores in per-thread scratch, as torch materialises them.
 */
static void attn_task(void *arg, int64_t task, int thread) {
    struct attn_job *j = arg;
    const struct jev_attn_shape *s = j->s;
    int32_t r = 0;
    while (j->task0[r + 1] <= task)
        r++;
    const struct jev_attn_run *run = &j->runs[r];
    int64_t local = task - j->task0[r];
    int32_t i = (int32_t)(local / s->n_heads);
    int32_t h = (int32_t)(local % s->n_heads);
    int32_t kvh = h / (s->n_heads / s->n_kv_heads);
    int32_t dh = s->head_dim;
    int32_t kv_dim = s->n_kv_heads * dh;
    int64_t row = run->row0 + i;
    const float *qv = j->q + (row * s->n_heads + h) * dh;
    float *out = j->o + (row * s->n_heads + h) * dh;
    int32_t n_keys = run->n_past + i + 1;
    float *score = jev_cpu_scratch(j->be, thread); /* [n_keys] */
    JEV_ASSERT(n_keys <= JEV_CPU_SCRATCH_FLOATS);

    /* scores = (q . k) * scale, then a max-subtracted f32 softmax */
    float mx = -INFINITY;
    int32_t key = 0;
    for (int32_t sp = 0; sp < run->n_spans && key < n_keys; sp++)
        for (int32_t r2 = 0; r2 < run->spans[sp].n && key < n_keys; r2++, key++) {
            const float *kv = run->spans[sp].k + (int64_t)r2 * kv_dim + kvh * dh;
            float acc = 0.0f;
            for (int32_t d = 0; d < dh; d++)
                acc += qv[d] * kv[d];
            score[key] = acc * s->scale;
            if (score[key] > mx)
                mx = score[key];
        }
    JEV_ASSERT(key == n_keys);
    float sum = 0.0f;
    for (int32_t k = 0; k < n_keys; k++) {
        score[k] = expf(score[k] - mx);
        sum += score[k];
    }
    for (int32_t k = 0; k < n_keys; k++)
        score[k] = score[k] / sum;

    /* o = weights . V */
    for (int32_t d = 0; d < dh; d++)
        out[d] = 0.0f;
    key = 0;
    for (int32_t sp = 0; sp < run->n_spans && key < n_keys; sp++)
        for (int32_t r2 = 0; r2 < run->spans[sp].n && key < n_keys; r2++, key++) {
            const float *vv = run->spans[sp].v + (int64_t)r2 * kv_dim + kvh * dh;
            float w = score[key];
            for (int32_t d = 0; d < dh; d++)
                out[d] += w * vv[d];
        }
}

void jev_cpu_attention(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                       const struct jev_attn_run *runs, int32_t n_runs, float *o) {
    int64_t task0[JEV_CPU_MAX_RUNS + 1];
    JEV_ASSERT(n_runs <= JEV_CPU_MAX_RUNS);
    task0[0] = 0;
    for (int32_t r = 0; r < n_runs; r++)
        task0[r + 1] = task0[r] + (int64_t)runs[r].n * s->n_heads;
    struct attn_job j = {s, q, runs, n_runs, task0, o, be};
    jev_pool_run(be->pool, task0[n_runs], attn_task, &j);
}

/* ---- Gated DeltaNet: conv and gates ---- */

#define CONV_CHANNELS_PER_TASK 256

struct conv_job {
    const float *mixed;
    const float *taps;
    int32_t conv_dim, kernel;
    const struct jev_gdn_run *runs;
    int32_t blocks; /* channel blocks per run */
    float *u;
};

/*
 * One run and one block of channels: every output row, then the window.
 * Row t of the run reads inputs t-K+1..t, where negative indices fall in the
 * window left by the sequence's previous tokens (zeros for a fresh one).
 */
static void conv_task(void *arg, int64_t task, int thread) {
    (void)thread;
    struct conv_job *j = arg;
    const struct jev_gdn_run *run = &j->runs[task / j->blocks];
    int32_t c0 = (int32_t)(task % j->blocks) * CONV_CHANNELS_PER_TASK;
    int32_t c1 = c0 + CONV_CHANNELS_PER_TASK < j->conv_dim ? c0 + CONV_CHANNELS_PER_TASK : j->conv_dim;
    int32_t K = j->kernel, C = j->conv_dim;
    const float *win = jev_cpu_conv_in(run); /* the window before the run */
    for (int32_t t = 0; t < run->n; t++) {
        float *out = j->u + (run->row0 + t) * C;
        for (int32_t c = c0; c < c1; c++) {
            /* window taps 0..K-2 read the state / earlier rows, tap K-1 the current token */
            float acc = 0.0f;
            for (int32_t k = 0; k < K; k++) {
                int32_t src = t - (K - 1) + k; /* row within the run; < 0 = from the window */
                float x = src >= 0 ? j->mixed[(run->row0 + src) * C + c] : win[(K - 1 + src) * C + c];
                acc += j->taps[c * K + k] * x;
            }
            out[c] = acc / (1.0f + expf(-acc));
        }
    }
    /* the new window: the last K-1 inputs (state rows first when the run is short) */
    for (int32_t w = 0; w < K - 1; w++) {
        int32_t src = run->n - (K - 1) + w;
        for (int32_t c = c0; c < c1; c++) {
            float x = src >= 0 ? j->mixed[(run->row0 + src) * C + c] : win[(K - 1 + src) * C + c];
            /* src < 0 reads old window row n+w > w, which this loop has not overwritten yet (in place) */
            run->conv[w * C + c] = x;
        }
    }
}

void jev_cpu_gdn_conv(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                      const struct jev_gdn_run *runs, int32_t n_runs, float *u) {
    int32_t blocks = (conv_dim + CONV_CHANNELS_PER_TASK - 1) / CONV_CHANNELS_PER_TASK;
    struct conv_job j = {mixed, taps, conv_dim, kernel, runs, blocks, u};
    jev_pool_run(be->pool, (int64_t)n_runs * blocks, conv_task, &j);
}

/* The gates in f32 (HF casts a and A_log to f32 here: fp16 would overflow exp). x = a, z = b, y = g, y2 = beta. */
static void gdn_gates_rows(void *arg, int64_t t0, int64_t t1, int thread) {
    (void)thread;
    const struct lm_pw_job *j = arg;
    const int32_t hv = j->heads;
    for (int64_t t = t0; t < t1; t++)
        for (int32_t h = 0; h < hv; h++) {
            float x = j->x[t * hv + h] + j->dt_bias[h];
            float sp = x > 20.0f ? x : log1pf(expf(x)); /* torch softplus, beta 1, threshold 20 */
            j->y[t * hv + h] = -expf(j->a_log[h]) * sp;
            j->y2[t * hv + h] = 1.0f / (1.0f + expf(-j->z[t * hv + h]));
        }
}

void jev_cpu_gdn_gates(struct jev_backend *be, const float *a, const float *b, const float *a_log, const float *dt_bias,
                       int64_t n, int32_t hv, float *g, float *beta) {
    struct lm_pw_job j = {.x = a, .z = b, .a_log = a_log, .dt_bias = dt_bias, .y = g, .y2 = beta, .heads = hv};
    jev_cpu_for_rows(be, n, hv, gdn_gates_rows, &j);
}

/* y[i] = (w[i] * (x[i] * inv)) * silu(z[i]) for the lanes of whole vectors; returns where it stopped. */
JEV_AVX2 static int32_t gated_tail_avx2(const float *x, const float *z, const float *w, float inv, int32_t d,
                                        float *y) {
    const __m256 iv = _mm256_set1_ps(inv);
    int32_t i = 0;
    for (; i + 8 <= d; i += 8) {
        __m256 n = _mm256_mul_ps(_mm256_loadu_ps(w + i), _mm256_mul_ps(_mm256_loadu_ps(x + i), iv));
        _mm256_storeu_ps(y + i, _mm256_mul_ps(n, jev_silu8(_mm256_loadu_ps(z + i))));
    }
    return i;
}

static void gated_rmsnorm_rows(void *arg, int64_t r0, int64_t r1, int thread) {
    (void)thread;
    const struct lm_pw_job *j = arg;
    const int32_t d = j->d;
    for (int64_t r = r0; r < r1; r++) {
        const float *xr = j->x + r * d;
        const float *zr = j->z + r * d;
        float *yr = j->y + r * d;
        float inv = jev_cpu_rms_inv(xr, d, j->eps);
        int32_t i = jev_cpu_has_avx2() ? gated_tail_avx2(xr, zr, j->w, inv, d, yr) : 0;
        for (; i < d; i++) {
            float zi = zr[i];
            yr[i] = (j->w[i] * (xr[i] * inv)) * (zi / (1.0f + expf(-zi)));
        }
    }
}

void jev_cpu_gated_rmsnorm(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n, int32_t d,
                           float eps, float *y) {
    struct lm_pw_job j = {.x = x, .z = z, .w = w, .y = y, .d = d, .eps = eps};
    jev_cpu_for_rows(be, n, d, gated_rmsnorm_rows, &j);
}

/* ---- Gated DeltaNet: the delta rule ---- */

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

/* x * rsqrt(sum(x^2) + 1e-6) (HF l2norm, the sum form), then * mul or / div. */
static void l2norm_into(const float *x, int32_t d, float *out) {
    float ss = 0.0f;
    for (int32_t i = 0; i < d; i++)
        ss += x[i] * x[i];
    float inv = 1.0f / sqrtf(ss + 1e-6f);
    for (int32_t i = 0; i < d; i++)
        out[i] = x[i] * inv;
}

/* One token at a time (torch_recurrent_gated_delta_rule): decay, read, delta write, output. */
static void gdn_recurrent_head(const struct gdn_job *j, const struct jev_gdn_run *run, int32_t h, float *scratch) {
    const struct jev_gdn_shape *s = j->s;
    int32_t dk = s->dk, dv = s->dv;
    int32_t kh = h / (s->hv / s->hk);
    int32_t key_dim = s->hk * dk;
    float *S = run->ssm + (int64_t)h * dk * dv;                     /* [dk][dv] */
    float *q = scratch, *k = scratch + dk, *mem = scratch + 2 * dk; /* [dk], [dk], [dv] */
    const float qdiv = sqrtf((float)dk);                            /* torch: query / (dk ** 0.5) */
    for (int32_t t = 0; t < run->n; t++) {
        int64_t row = run->row0 + t;
        const float *ur = j->u + row * j->conv_dim;
        l2norm_into(ur + kh * dk, dk, q);
        l2norm_into(ur + key_dim + kh * dk, dk, k);
        for (int32_t i = 0; i < dk; i++)
            q[i] = q[i] / qdiv;
        const float *v = ur + 2 * key_dim + h * dv;
        float decay = expf(j->g[row * s->hv + h]);
        float beta = j->beta[row * s->hv + h];
        for (int64_t i = 0; i < (int64_t)dk * dv; i++)
            S[i] = S[i] * decay;
        for (int32_t c = 0; c < dv; c++)
            mem[c] = 0.0f;
        for (int32_t i = 0; i < dk; i++)
            for (int32_t c = 0; c < dv; c++)
                mem[c] += S[i * dv + c] * k[i];
        for (int32_t c = 0; c < dv; c++)
            mem[c] = (v[c] - mem[c]) * beta; /* delta */
        for (int32_t i = 0; i < dk; i++)
            for (int32_t c = 0; c < dv; c++)
                S[i * dv + c] = S[i * dv + c] + k[i] * mem[c];
        float *out = j->o + row * (s->hv * dv) + h * dv;
        for (int32_t c = 0; c < dv; c++)
            out[c] = 0.0f;
        for (int32_t i = 0; i < dk; i++)
            for (int32_t c = 0; c < dv; c++)
                out[c] += S[i * dv + c] * q[i];
    }
}

/*
 * Chunked form (torch_chunk_gated_delta_rule) for one value head of a run,
 * chunk by chunk from the start of the run. Per chunk of L <= C rows:
 *   cum = cumsum(g); D[i][j] = exp(cum_i - cum_j) (j <= i)
 *   A = (k_beta K^T) * D, attn = (Q K^T) * D            (lower triangle)
 *   U = (I + strict(A))^-1 (V * beta), W = (I + strict(A))^-1 (k_beta * exp(cum))
 *   V' = U - W S; O = (Q * exp(cum)) S + attn V'
 *   S = S * exp(cum_last) + (K * exp(cum_last - cum))^T V'
 */
static void gdn_chunk_head(const struct gdn_job *j, const struct jev_gdn_run *run, int32_t h, float *scratch) {
    const struct jev_gdn_shape *s = j->s;
    int32_t dk = s->dk, dv = s->dv, C = s->chunk;
    int32_t kh = h / (s->hv / s->hk);
    int32_t key_dim = s->hk * dk;
    float *S = run->ssm + (int64_t)h * dk * dv;           /* [dk][dv] */
    float *Q = scratch;                                   /* [C][dk] normalised, scaled queries */
    float *Kn = Q + C * dk;                               /* [C][dk] normalised keys */
    float *W = Kn + C * dk;                               /* [C][dk] k_beta * exp(cum), then solved */
    float *U = W + C * dk;                                /* [C][dv] v * beta, then solved, then V' */
    float *A = U + C * dv;                                /* [C][C] */
    float *At = A + C * C;                                /* [C][C] intra-chunk attention */
    float *cum = At + C * C;                              /* [C] */
    float *bet = cum + C;                                 /* [C] */
    float *tmp = bet + C;                                 /* [max(dk, dv)] */
    const float qscale = (float)(1.0 / sqrt((double)dk)); /* torch: dk ** -0.5 as an f32 scalar */

    for (int32_t c0 = 0; c0 < run->n; c0 += C) {
        int32_t L = run->n - c0 < C ? run->n - c0 : C;
        /* normalise, gates, cumulative log decay */
        for (int32_t i = 0; i < L; i++) {
            int64_t row = run->row0 + c0 + i;
            const float *ur = j->u + row * j->conv_dim;
            l2norm_into(ur + kh * dk, dk, Q + i * dk);
            for (int32_t d = 0; d < dk; d++)
                Q[i * dk + d] = Q[i * dk + d] * qscale;
            l2norm_into(ur + key_dim + kh * dk, dk, Kn + i * dk);
            bet[i] = j->beta[row * s->hv + h];
            float g = j->g[row * s->hv + h];
            cum[i] = i == 0 ? g : cum[i - 1] + g;
            const float *v = ur + 2 * key_dim + h * dv;
            for (int32_t d = 0; d < dv; d++)
                U[i * dv + d] = v[d] * bet[i];
            float ec = expf(cum[i]);
            for (int32_t d = 0; d < dk; d++)
                W[i * dk + d] = (Kn[i * dk + d] * bet[i]) * ec;
        }
        /* A (strictly lower) and attn (lower with diagonal) */
        for (int32_t i = 0; i < L; i++)
            for (int32_t m = 0; m <= i; m++) {
                float decay = expf(cum[i] - cum[m]);
                float kk = 0.0f, qk = 0.0f;
                for (int32_t d = 0; d < dk; d++) {
                    kk += (Kn[i * dk + d] * bet[i]) * Kn[m * dk + d];
                    qk += Q[i * dk + d] * Kn[m * dk + d];
                }
                A[i * C + m] = kk * decay;
                At[i * C + m] = qk * decay;
            }
        /* forward substitution with the unit lower triangle I + strict(A) */
        for (int32_t i = 1; i < L; i++) {
            for (int32_t d = 0; d < dv; d++) {
                float acc = 0.0f;
                for (int32_t m = 0; m < i; m++)
                    acc += A[i * C + m] * U[m * dv + d];
                U[i * dv + d] = U[i * dv + d] - acc;
            }
            for (int32_t d = 0; d < dk; d++) {
                float acc = 0.0f;
                for (int32_t m = 0; m < i; m++)
                    acc += A[i * C + m] * W[m * dk + d];
                W[i * dk + d] = W[i * dk + d] - acc;
            }
        }
        /* V' = U - W S; O = (Q exp(cum)) S + attn V' */
        for (int32_t i = 0; i < L; i++) {
            for (int32_t d = 0; d < dv; d++) {
                float acc = 0.0f;
                for (int32_t m = 0; m < dk; m++)
                    acc += W[i * dk + m] * S[m * dv + d];
                U[i * dv + d] = U[i * dv + d] - acc;
            }
        }
        for (int32_t i = 0; i < L; i++) {
            float ec = expf(cum[i]);
            for (int32_t m = 0; m < dk; m++)
                tmp[m] = Q[i * dk + m] * ec;
            float *out = j->o + (run->row0 + c0 + i) * (s->hv * dv) + h * dv;
            for (int32_t d = 0; d < dv; d++) {
                float inter = 0.0f;
                for (int32_t m = 0; m < dk; m++)
                    inter += tmp[m] * S[m * dv + d];
                float intra = 0.0f;
                for (int32_t m = 0; m <= i; m++)
                    intra += At[i * C + m] * U[m * dv + d];
                out[d] = inter + intra;
            }
        }
        /* S = S * exp(cum_last) + (K exp(cum_last - cum))^T V' */
        float last = cum[L - 1];
        float chunk_decay = expf(last);
        for (int32_t i = 0; i < L; i++) {
            float e = expf(last - cum[i]);
            for (int32_t d = 0; d < dk; d++)
                Kn[i * dk + d] = Kn[i * dk + d] * e;
        }
        for (int32_t m = 0; m < dk; m++)
            for (int32_t d = 0; d < dv; d++) {
                float acc = 0.0f;
                for (int32_t i = 0; i < L; i++)
                    acc += Kn[i * dk + m] * U[i * dv + d];
                S[m * dv + d] = S[m * dv + d] * chunk_decay + acc;
            }
    }
}

/* One (run, value head): heads and runs are independent, so they spread over the pool. */
static void gdn_task(void *arg, int64_t task, int thread) {
    struct gdn_job *j = arg;
    const struct jev_gdn_run *run = &j->runs[task / j->s->hv];
    int32_t h = (int32_t)(task % j->s->hv);
    float *scratch = jev_cpu_scratch(j->be, thread);
    jev_cpu_gdn_state_in(run, h, (int64_t)j->s->dk * j->s->dv);
    if (run->recurrent)
        gdn_recurrent_head(j, run, h, scratch);
    else
        gdn_chunk_head(j, run, h, scratch);
}

/* Scratch floats the chunked form needs per thread. */
int64_t jev_cpu_gdn_scratch(const struct jev_gdn_shape *s) {
    int64_t C = s->chunk, dk = s->dk, dv = s->dv;
    return 3 * C * dk + C * dv + 2 * C * C + 2 * C + (dk > dv ? dk : dv);
}

void jev_cpu_gdn_rule(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                      const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o) {
    JEV_ASSERT(jev_cpu_gdn_scratch(s) <= JEV_CPU_SCRATCH_FLOATS);
    struct gdn_job j = {s, u, g, beta, runs, o, be, 2 * s->hk * s->dk + s->hv * s->dv};
    jev_pool_run(be->pool, (int64_t)n_runs * s->hv, gdn_task, &j);
}

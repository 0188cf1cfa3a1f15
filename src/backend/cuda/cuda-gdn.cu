/*
 * cuda-gdn.cu - the Gated DeltaNet ops on the GPU: the causal depthwise conv
 * + SiLU over each run's conv window, and the gated delta rule over each
 * run's recurrent state. The CPU scalar forms (backend/cpu/cpu-lm.c) are the
 * reference; tests/cuda/test-cuda-gdn.c compares against the CPU op table.
 *
 * Conv, two kernels queued in order on the stream:
 *   conv_rows   one thread per (run, channel, block of tokens): every output
 *               row reads its K inputs from the run's rows or, before the
 *               run's first row, from the old window;
 *   conv_window one thread per (run, channel): the new window (the last K-1
 *               inputs, oldest first), written in place row 0 first as the
 *               CPU does, so an old window row n+w > w that a short run still
 *               needs is read before it is overwritten.
 *
 * Delta rule. Runs the model layer marks chunked (prefill) with at least CHUNK_MIN_ROWS rows take
 * the chunked form (HF torch_chunk_gated_delta_rule: chunk_prepare and chunk_propagate, described
 * at their section below); the others (decode's single cached tokens, the decision suffixes) take
 * the token-by-token recurrence (rule_recurrent), which keeps a head's state on chip, needs no
 * scratch and serves short runs well. The two forms are the same function: in f32 the CPU's
 * chunked and recurrent forms agree to NMSE 1e-13..1e-12 on the test's inputs (dk = dv = 128, 500
 * tokens, slow and fast decay: measured), far below the 1e-7 parity bound. A run the recurrence
 * takes scales its queries as the CPU form for that run does (recurrent: / sqrt(dk); chunked:
 * * f32(dk^-0.5)). A shape the chunked kernels do not take (dims not multiples of 4, a chunk over
 * 64, more shared memory than the device has) takes the recurrence.
 *
 * Recurrence layout: one block per (run, value head, slice of 16 columns of
 * the [dk][dv] state). S = S*e^g + k (beta (v - S^T k))^T and o = S^T q touch
 * only a slice's own columns, so the slices need no communication. Thread
 * (group, col) of the 128 (8 groups x 16 columns) holds rows group, group+8,
 * ... of its column in registers; sums over dk are per-thread partials, then
 * the two groups of a warp (shuffle), then the 4 warps (shared memory).
 * Warps 0 and 1 normalise q and k of each token into shared memory. Three
 * barriers per token: after q and k, inside each of the two column sums.
 */
#include "backend/cuda/cuda-int.h" // defines: struct jev_backend, jev_cuda_stage, jev_cuda_check

#include <math.h>

/* ---- causal conv + SiLU ---- */

#define CONV_THREADS 128 /* channels per block */
#define CONV_TOKENS 16   /* output rows per block */

/* x[t][c] of the run's input stream: the run's rows from t = 0, the old window before (t = -(K-1)..-1). */
__device__ static inline float conv_input(const float *mixed, const struct jev_gdn_run &run, int32_t C, int32_t K,
                                          int32_t t, int32_t c) {
    return t >= 0 ? mixed[(run.row0 + t) * C + c] : run.conv[(int64_t)(K - 1 + t) * C + c];
}

/* grid (channel blocks, token blocks, runs): u[t][c] = silu(sum_k taps[c][k] * x[t-K+1+k][c]). */
__global__ static void conv_rows(const float *mixed, const float *taps, int32_t C, int32_t K,
                                 const struct jev_gdn_run *runs, float *u) {
    const struct jev_gdn_run run = runs[blockIdx.z];
    const int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    const int32_t t0 = (int32_t)blockIdx.y * CONV_TOKENS;
    if (c >= C || t0 >= run.n)
        return;
    const int32_t t1 = t0 + CONV_TOKENS < run.n ? t0 + CONV_TOKENS : run.n;
    const float *tap = taps + (int64_t)c * K;
    for (int32_t t = t0; t < t1; t++) {
        float acc = 0.0f;
        for (int32_t k = 0; k < K; k++)
            acc += tap[k] * conv_input(mixed, run, C, K, t - (K - 1) + k, c);
        u[(run.row0 + t) * C + c] = acc / (1.0f + expf(-acc)); /* SiLU as the CPU */
    }
}

/* grid (channel blocks, runs), after conv_rows: window row w = x[n-K+1+w], w = 0..K-2, in place. */
__global__ static void conv_window(const float *mixed, int32_t C, int32_t K, const struct jev_gdn_run *runs) {
    const struct jev_gdn_run run = runs[blockIdx.y];
    const int32_t c = (int32_t)(blockIdx.x * blockDim.x + threadIdx.x);
    if (c >= C)
        return;
    for (int32_t w = 0; w < K - 1; w++) /* reads old row n+w (> w, not yet written) when the run is short */
        run.conv[(int64_t)w * C + c] = conv_input(mixed, run, C, K, run.n - (K - 1) + w, c);
}

void jev_cuda_gdn_conv(struct jev_backend *be, const float *mixed, const float *taps, int32_t conv_dim, int32_t kernel,
                       const struct jev_gdn_run *runs, int32_t n_runs, float *u) {
    if (n_runs <= 0)
        return;
    int32_t max_n = 0;
    for (int32_t r = 0; r < n_runs; r++)
        max_n = runs[r].n > max_n ? runs[r].n : max_n;
    jev_cuda_stage_reset(be);
    const struct jev_gdn_run *runs_dev =
        (const struct jev_gdn_run *)jev_cuda_stage(be, runs, (size_t)n_runs * sizeof(*runs));
    const unsigned channel_blocks = (unsigned)((conv_dim + CONV_THREADS - 1) / CONV_THREADS);
    if (max_n > 0) {
        dim3 grid(channel_blocks, (unsigned)((max_n + CONV_TOKENS - 1) / CONV_TOKENS), (unsigned)n_runs);
        conv_rows<<<grid, CONV_THREADS, 0, be->stream>>>(mixed, taps, conv_dim, kernel, runs_dev, u);
        jev_cuda_check(be, cudaGetLastError(), "gdn_conv");
    }
    if (kernel > 1) {
        dim3 grid(channel_blocks, (unsigned)n_runs);
        conv_window<<<grid, CONV_THREADS, 0, be->stream>>>(mixed, conv_dim, kernel, runs_dev);
        jev_cuda_check(be, cudaGetLastError(), "gdn_conv window");
    }
}

/* ---- gated delta rule, recurrent form ---- */

#define RULE_COLS 16 /* state columns per block */
#define RULE_WARPS 4
#define RULE_THREADS (32 * RULE_WARPS)
#define RULE_GROUPS (RULE_THREADS / RULE_COLS) /* row groups: thread (group, col) holds rows group + 8 r */

struct rule_args {
    struct jev_gdn_shape s;
    const float *u;                 /* [rows][2*hk*dk + hv*dv] = [q | k | v] */
    const float *g;                 /* [rows][hv] log decay */
    const float *beta;              /* [rows][hv] */
    const struct jev_gdn_run *runs; /* device copy */
    float *o;                       /* [rows][hv*dv] */
    float qdiv;                     /* sqrtf(dk): the recurrent form's query divisor */
    float qscale;                   /* f32(dk^-0.5): the chunked form's query multiplier */
};

__device__ static inline float warp_sum(float x) {
    for (int off = 16; off > 0; off >>= 1)
        x += __shfl_xor_sync(0xffffffffu, x, off);
    return x;
}

/* out[0..d) = x / sqrt(sum(x^2) + 1e-6) * mul or / div (HF l2norm, sum form), by one warp. */
__device__ static inline void l2norm_warp(const float *x, int32_t d, bool divide, float factor, float *out) {
    const int lane = (int)(threadIdx.x % 32);
    float ss = 0.0f;
    for (int32_t i = lane; i < d; i += 32)
        ss += x[i] * x[i];
    const float inv = 1.0f / sqrtf(warp_sum(ss) + 1e-6f);
    for (int32_t i = lane; i < d; i += 32) {
        const float y = x[i] * inv;
        out[i] = divide ? y / factor : y * factor;
    }
}

/* The sum over dk of one column's per-thread partials: the warp's two row groups, then the warps. Every thread of
 * the column gets the total. One __syncthreads inside; partial[] must not be rewritten before the next barrier. */
__device__ static inline float column_sum(float x, float (*partial)[RULE_COLS]) {
    const int lane = (int)(threadIdx.x % 32), warp = (int)(threadIdx.x / 32), col = (int)(threadIdx.x % RULE_COLS);
    x += __shfl_xor_sync(0xffffffffu, x, 16);
    if (lane < RULE_COLS)
        partial[warp][lane] = x;
    __syncthreads();
    float total = 0.0f;
    for (int w = 0; w < RULE_WARPS; w++)
        total += partial[w][col];
    return total;
}

/* grid (column slices, value heads, runs); ROWS state rows per thread (dk <= ROWS * RULE_GROUPS); dynamic shared
 * memory: 2*dk floats (the token's normalised q and k). */
template <int ROWS> __global__ static void __launch_bounds__(RULE_THREADS) rule_recurrent(const struct rule_args a) {
    extern __shared__ float qk[];
    __shared__ float partial_mem[RULE_WARPS][RULE_COLS];
    __shared__ float partial_out[RULE_WARPS][RULE_COLS];
    const struct jev_gdn_run run = a.runs[blockIdx.z];
    if (run.n <= 0)
        return;
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, h = (int32_t)blockIdx.y;
    const int32_t kh = h / (hv / a.s.hk), key_dim = a.s.hk * dk, conv_dim = 2 * key_dim + hv * dv;
    const int32_t warp = (int32_t)(threadIdx.x / 32), group = (int32_t)(threadIdx.x / RULE_COLS);
    const int32_t col = (int32_t)blockIdx.x * RULE_COLS + (int32_t)(threadIdx.x % RULE_COLS);
    const bool has_col = col < dv;
    float *qn = qk, *kn = qk + dk;
    float *S = run.ssm + (int64_t)h * dk * dv; /* [dk][dv] */

    float state[ROWS]; /* S[group + RULE_GROUPS r][col] */
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int32_t i = group + RULE_GROUPS * r;
        state[r] = has_col && i < dk ? S[(int64_t)i * dv + col] : 0.0f;
    }
    for (int32_t t = 0; t < run.n; t++) {
        const int64_t row = run.row0 + t;
        const float *ur = a.u + row * conv_dim;
        /* q and k of this token; the previous token's readers are past its last barrier */
        if (warp == 0)
            l2norm_warp(ur + kh * dk, dk, run.recurrent, run.recurrent ? a.qdiv : a.qscale, qn);
        else if (warp == 1)
            l2norm_warp(ur + key_dim + kh * dk, dk, false, 1.0f, kn);
        __syncthreads();
        const float decay = expf(a.g[row * hv + h]);
        const float beta = a.beta[row * hv + h];
        /* S *= e^g; mem = S^T k */
        float mem = 0.0f;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int32_t i = group + RULE_GROUPS * r;
            if (i < dk) {
                state[r] = state[r] * decay;
                mem += state[r] * kn[i];
            }
        }
        mem = column_sum(mem, partial_mem);
        /* delta = (v - mem) * beta; S += k delta^T; out = S^T q */
        const float v = has_col ? ur[2 * key_dim + h * dv + col] : 0.0f;
        const float delta = (v - mem) * beta;
        float out = 0.0f;
#pragma unroll
        for (int r = 0; r < ROWS; r++) {
            const int32_t i = group + RULE_GROUPS * r;
            if (i < dk) {
                state[r] = state[r] + kn[i] * delta;
                out += state[r] * qn[i];
            }
        }
        out = column_sum(out, partial_out);
        if (warp == 0 && threadIdx.x < RULE_COLS && has_col)
            a.o[row * (hv * dv) + h * dv + col] = out;
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int32_t i = group + RULE_GROUPS * r;
        if (has_col && i < dk)
            S[(int64_t)i * dv + col] = state[r];
    }
}

/* ---- gated delta rule, chunked form ---- */

/*
 * HF torch_chunk_gated_delta_rule for runs the model layer marks chunked (prefill) with at least
 * CHUNK_MIN_ROWS rows, in two kernels per group of chunks:
 *
 * chunk_prepare, one block per (chunk, value head), every chunk of every run at once (a chunk's
 * matrices do not depend on the state, so no chunk waits for another):
 *   1 q, k L2-normalised (q * f32(dk^-0.5)), beta, cum = cumsum(g) (one thread, in row order)
 *   2 A = -(k beta . k) e^(cum_i - cum_m), m < i; At = (q . k) e^(cum_i - cum_m), m <= i
 *   3 T = (I - A)^-1 by HF's row recurrence T[i][j] = A[i][j] + sum_{j<m<i} A[i][m] T[m][j], one thread
 *     per column j walking down its rows (a column reads only its own earlier rows and A)
 *   4 W = T (k beta e^cum) (HF k_cumdecay), U = T (v beta) (HF value): 64-row products
 *   and writes W, U, At, q e^cum, k e^(cum_last - cum) and e^cum_last to the scratch record of
 *   (chunk, head).
 * chunk_propagate, one block per (run segment, value head, slice of RULE_COLS state columns), its
 * chunks in order with the slice of the state S [dk][cols] in shared memory:
 *   V' = U - W S;  o = (q e^cum) S + At V';  S = S e^cum_last + (k e^(cum_last - cum))^T V'
 * Steps 1-4 were the old single kernel's serial part (one column per thread through 64 rows, again in
 * every slice); here they run chunk-parallel once per head, and the sequential part is three
 * [64 x dk] x [dk x cols] products per chunk. Sums run in another order than the CPU's (which solves
 * by forward substitution rather than forming T, as HF does), so results agree to f32 rounding (the
 * parity test's NMSE bound), not bit for bit.
 *
 * A group holds at most CHUNK_GROUP_BYTES of records; a run longer than a group continues in the next
 * group's first segment (the state is in global memory between the launches, in stream order), so a
 * segment's run appears once per group. Thread tiles read shared rows as float4: dk and dv multiples
 * of 4, chunk at most 64 (HF: 64); other shapes take the recurrence, as does a device without the
 * shared memory.
 */
#define CHUNK_THREADS 256
#define CHUNK_MIN_ROWS 64                    /* shorter runs take the recurrence */
#define CHUNK_MAX 64                         /* the thread tiles cover 64 rows */
#define CHUNK_GROUP_BYTES ((size_t)32 << 20) /* scratch records per launch pair */

struct chunk_job { /* one chunk of one run */
    int64_t row0;  /* its first batch row */
    int32_t L;     /* rows, 1..chunk */
    int32_t pad;
};

struct chunk_seg {   /* consecutive chunks of one run inside a group */
    float *ssm;      /* the run's state [hv][dk][dv] */
    int32_t chunk0;  /* its first job in the group */
    int32_t n_chunk; /* jobs */
};

struct chunk_args {
    struct jev_gdn_shape s;
    const float *u, *g, *beta;
    const struct chunk_job *jobs;
    const struct chunk_seg *segs;
    float *rec; /* [jobs][hv] records of chunk_rec_floats */
    float *o;
    float qscale; /* f32(dk^-0.5) */
};

/* One (chunk, head) record: W, Qe, Kd [C][dk], U [C][dv], At [C][C], e^cum_last (+3 floats of padding). */
__host__ __device__ static inline size_t chunk_rec_floats(const struct jev_gdn_shape &s) {
    return 3 * (size_t)s.chunk * s.dk + (size_t)s.chunk * s.dv + (size_t)s.chunk * s.chunk + 4;
}

__host__ __device__ static inline size_t prepare_shared_floats(const struct jev_gdn_shape &s) {
    const size_t C = (size_t)s.chunk, wide = (size_t)(s.dk > s.dv ? s.dk : s.dv);
    return C * (wide + 4) + C * ((size_t)s.dk + 4) + 2 * C * (C + 1) + 2 * C;
}

__host__ __device__ static inline size_t propagate_shared_floats(const struct jev_gdn_shape &s) {
    const size_t C = (size_t)s.chunk;
    return C * ((size_t)s.dk + 4) + C * (C + 4) + C * RULE_COLS + (size_t)s.dk * RULE_COLS;
}

/* Row-major [rows][n] global (dense) to shared with row stride ld, float4 at a time (n % 4 == 0). */
__device__ static inline void stage_rows(float *dst, int32_t ld, const float *src, int32_t rows, int32_t n) {
    const int32_t n4 = n / 4;
    for (int32_t e = (int32_t)threadIdx.x; e < rows * n4; e += (int32_t)blockDim.x) {
        const int32_t i = e / n4, c = e % n4;
        *(float4 *)(dst + (size_t)i * ld + 4 * c) = *(const float4 *)(src + (size_t)i * n + 4 * c);
    }
}

__device__ static inline float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}

/* grid (jobs, value heads). Shared: Qv [C][wide + 4] (q, then v beta), Kw [C][dk + 4] (k, then k beta
 * e^cum), A and T [C][C + 1], cum and beta [C]. Rows at and past L are zero, so the full 64-row tiles
 * add nothing from them. */
__global__ static void __launch_bounds__(CHUNK_THREADS) chunk_prepare(const struct chunk_args a) {
    extern __shared__ float sh[];
    const struct chunk_job job = a.jobs[blockIdx.x];
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, C = a.s.chunk, L = job.L, h = (int32_t)blockIdx.y;
    const int32_t kh = h / (hv / a.s.hk), key_dim = a.s.hk * dk, conv_dim = 2 * key_dim + hv * dv;
    const int32_t wide = dk > dv ? dk : dv, ldq = wide + 4, ldk = dk + 4, lda = C + 1;
    const int tid = (int)threadIdx.x, warp = tid / 32, n_warps = CHUNK_THREADS / 32;
    float *Qv = sh, *Kw = Qv + (size_t)C * ldq, *A = Kw + (size_t)C * ldk, *T = A + (size_t)C * lda;
    float *cum = T + (size_t)C * lda, *bet = cum + C;
    float *rec = a.rec + ((size_t)blockIdx.x * hv + h) * chunk_rec_floats(a.s);
    float *Wg = rec, *Qe = Wg + (size_t)C * dk, *Kd = Qe + (size_t)C * dk, *Ug = Kd + (size_t)C * dk;
    float *Atg = Ug + (size_t)C * dv, *last = Atg + (size_t)C * C;

    /* 1: normalised q and k (zero rows past L), gates, cumulative log decay */
    for (int32_t i = warp; i < C; i += n_warps) {
        if (i < L) {
            const float *ur = a.u + (job.row0 + i) * conv_dim;
            l2norm_warp(ur + kh * dk, dk, false, a.qscale, Qv + (size_t)i * ldq);
            l2norm_warp(ur + key_dim + kh * dk, dk, false, 1.0f, Kw + (size_t)i * ldk);
        } else {
            for (int32_t d = tid % 32; d < dk; d += 32)
                Qv[(size_t)i * ldq + d] = Kw[(size_t)i * ldk + d] = 0.0f;
        }
        if (tid % 32 == 0) {
            bet[i] = i < L ? a.beta[(job.row0 + i) * hv + h] : 0.0f;
            cum[i] = i < L ? a.g[(job.row0 + i) * hv + h] : 0.0f;
        }
    }
    __syncthreads();
    if (tid == 0) {
        for (int32_t i = 1; i < L; i++)
            cum[i] = cum[i - 1] + cum[i];
        for (int32_t i = L; i < C; i++)
            cum[i] = cum[L - 1];
        last[0] = expf(cum[L - 1]);
    }
    __syncthreads();

    /* 2: A and At, thread tile rows ib + 16 r by columns mb + 16 c (the upper triangle is computed and dropped) */
    {
        const int ib = tid / 16, mb = tid % 16;
        float kk[4][4], qk[4][4];
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++)
                kk[r][c] = qk[r][c] = 0.0f;
        for (int32_t d = 0; d < dk; d += 4) {
            float4 ki[4], qi[4], km[4];
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int32_t i = ib + 16 * r < C ? ib + 16 * r : 0;
                ki[r] = *(const float4 *)(Kw + (size_t)i * ldk + d);
                qi[r] = *(const float4 *)(Qv + (size_t)i * ldq + d);
                const float b = bet[i];
                ki[r] = make_float4(ki[r].x * b, ki[r].y * b, ki[r].z * b, ki[r].w * b); /* k_beta = k * beta */
            }
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int32_t m = mb + 16 * c < C ? mb + 16 * c : 0;
                km[c] = *(const float4 *)(Kw + (size_t)m * ldk + d);
            }
#pragma unroll
            for (int r = 0; r < 4; r++)
#pragma unroll
                for (int c = 0; c < 4; c++) {
                    kk[r][c] = dot4(ki[r], km[c], kk[r][c]);
                    qk[r][c] = dot4(qi[r], km[c], qk[r][c]);
                }
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c < 4; c++) {
                const int32_t i = ib + 16 * r, m = mb + 16 * c;
                if (i >= C || m >= C)
                    continue;
                const bool on = m <= i && i < L;
                const float decay = on ? expf(cum[i] - cum[m]) : 0.0f;
                A[(size_t)i * lda + m] = on && m < i ? -(kk[r][c] * decay) : 0.0f;
                Atg[(size_t)i * C + m] = on ? qk[r][c] * decay : 0.0f;
            }
    }
    /* q e^cum and k e^(cum_last - cum) for the propagation */
    for (int32_t e = tid; e < C * dk; e += CHUNK_THREADS) {
        const int32_t i = e / dk, d = e % dk;
        Qe[e] = Qv[(size_t)i * ldq + d] * expf(cum[i]);
        Kd[e] = Kw[(size_t)i * ldk + d] * expf(cum[L - 1] - cum[i]);
    }
    __syncthreads();

    /* 3 (setup): v beta over q, k beta e^cum over k, T = I */
    for (int32_t e = tid; e < C * dk; e += CHUNK_THREADS) {
        const int32_t i = e / dk, d = e % dk;
        Kw[(size_t)i * ldk + d] = (Kw[(size_t)i * ldk + d] * bet[i]) * expf(cum[i]);
    }
    for (int32_t e = tid; e < C * dv; e += CHUNK_THREADS) {
        const int32_t i = e / dv, d = e % dv;
        Qv[(size_t)i * ldq + d] = i < L ? a.u[(job.row0 + i) * conv_dim + 2 * key_dim + h * dv + d] * bet[i] : 0.0f;
    }
    for (int32_t e = tid; e < C * C; e += CHUNK_THREADS)
        T[(size_t)(e / C) * lda + e % C] = e / C == e % C ? 1.0f : 0.0f;
    __syncthreads();
    /* 3: the row recurrence, one column per thread, four partial sums */
    if (tid < L) {
        const int32_t j = tid;
        for (int32_t i = j + 1; i < L; i++) {
            const float *Ai = A + (size_t)i * lda;
            float p0 = 0.0f, p1 = 0.0f, p2 = 0.0f, p3 = 0.0f;
            int32_t m = j + 1;
            for (; m + 3 < i; m += 4) {
                p0 = fmaf(Ai[m], T[(size_t)m * lda + j], p0);
                p1 = fmaf(Ai[m + 1], T[(size_t)(m + 1) * lda + j], p1);
                p2 = fmaf(Ai[m + 2], T[(size_t)(m + 2) * lda + j], p2);
                p3 = fmaf(Ai[m + 3], T[(size_t)(m + 3) * lda + j], p3);
            }
            for (; m < i; m++)
                p0 = fmaf(Ai[m], T[(size_t)m * lda + j], p0);
            T[(size_t)i * lda + j] = Ai[j] + ((p0 + p1) + (p2 + p3));
        }
    }
    __syncthreads();

    /* 4: W = T Kw and U = T Qv, thread tile rows warp + 8 r by one float4 of columns */
    for (int pass = 0; pass < 2; pass++) {
        const float *B = pass == 0 ? Kw : Qv;
        const int32_t ldb = pass == 0 ? ldk : ldq, n4 = (pass == 0 ? dk : dv) / 4;
        float *out = pass == 0 ? Wg : Ug;
        const int32_t n = 4 * n4;
        for (int32_t c4 = tid % 32; c4 < n4; c4 += 32) {
            float4 acc[8];
#pragma unroll
            for (int r = 0; r < 8; r++)
                acc[r] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int32_t m = 0; m < C; m++) {
                const float4 b = *(const float4 *)(B + (size_t)m * ldb + 4 * c4);
#pragma unroll
                for (int r = 0; r < 8; r++) {
                    const int32_t i = warp + 8 * r < C ? warp + 8 * r : 0;
                    const float t = T[(size_t)i * lda + m];
                    acc[r].x = fmaf(t, b.x, acc[r].x);
                    acc[r].y = fmaf(t, b.y, acc[r].y);
                    acc[r].z = fmaf(t, b.z, acc[r].z);
                    acc[r].w = fmaf(t, b.w, acc[r].w);
                }
            }
#pragma unroll
            for (int r = 0; r < 8; r++)
                if (warp + 8 * r < C)
                    *(float4 *)(out + (size_t)(warp + 8 * r) * n + 4 * c4) = acc[r];
        }
    }
}

/* grid (slices, value heads, segments). Shared: X [C][dk + 4] (W, then q e^cum, then k e^(cum_last - cum)),
 * At [C][C + 4], V [C][cols] (U, then V'), S [dk][cols]. Thread (row group ig = tid / 16, column c = tid % 16)
 * takes rows ig + 16 r of the chunk in the row products and state rows 4 ig .. (step 64) in the update. */
__global__ static void __launch_bounds__(CHUNK_THREADS) chunk_propagate(const struct chunk_args a) {
    extern __shared__ float sh[];
    const struct chunk_seg seg = a.segs[blockIdx.z];
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, C = a.s.chunk, h = (int32_t)blockIdx.y;
    const int32_t col0 = (int32_t)blockIdx.x * RULE_COLS, ncol = dv - col0 < RULE_COLS ? dv - col0 : RULE_COLS;
    const int32_t ldx = dk + 4, ldt = C + 4;
    const int tid = (int)threadIdx.x, ig = tid / RULE_COLS, c = tid % RULE_COLS;
    float *X = sh, *At = X + (size_t)C * ldx, *V = At + (size_t)C * ldt, *S = V + (size_t)C * RULE_COLS;
    float *Sg = seg.ssm + (int64_t)h * dk * dv; /* [dk][dv] */
    const size_t rec_n = chunk_rec_floats(a.s);

    for (int32_t e = tid; e < dk * RULE_COLS; e += CHUNK_THREADS) {
        const int32_t i = e / RULE_COLS, cc = e % RULE_COLS;
        S[e] = cc < ncol ? Sg[(int64_t)i * dv + col0 + cc] : 0.0f;
    }
    for (int32_t k = 0; k < seg.n_chunk; k++) {
        const struct chunk_job job = a.jobs[seg.chunk0 + k];
        const float *rec = a.rec + ((size_t)(seg.chunk0 + k) * hv + h) * rec_n;
        const float *Wg = rec, *Qe = Wg + (size_t)C * dk, *Kd = Qe + (size_t)C * dk, *Ug = Kd + (size_t)C * dk;
        const float *Atg = Ug + (size_t)C * dv, chunk_decay = Atg[(size_t)C * C];
        const int32_t L = job.L;
        __syncthreads(); /* S loaded; the previous chunk's update has read X and V */
        stage_rows(X, ldx, Wg, L, dk);
        for (int32_t e = tid; e < L * RULE_COLS; e += CHUNK_THREADS) {
            const int32_t i = e / RULE_COLS, cc = e % RULE_COLS;
            V[e] = cc < ncol ? Ug[(size_t)i * dv + col0 + cc] : 0.0f;
        }
        __syncthreads();
        /* V' = U - W S */
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int32_t d = 0; d < dk; d += 4) {
            const float4 s = make_float4(S[d * RULE_COLS + c], S[(d + 1) * RULE_COLS + c], S[(d + 2) * RULE_COLS + c],
                                         S[(d + 3) * RULE_COLS + c]);
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int32_t i = ig + 16 * r < L ? ig + 16 * r : 0;
                acc[r] = dot4(*(const float4 *)(X + (size_t)i * ldx + d), s, acc[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
            if (ig + 16 * r < L)
                V[(ig + 16 * r) * RULE_COLS + c] = V[(ig + 16 * r) * RULE_COLS + c] - acc[r];
        __syncthreads();
        stage_rows(X, ldx, Qe, L, dk);
        stage_rows(At, ldt, Atg, L, C);
        __syncthreads();
        /* o = (q e^cum) S + At V' (At is zero above the diagonal) */
        float inter[4] = {0.0f, 0.0f, 0.0f, 0.0f}, intra[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int32_t d = 0; d < dk; d += 4) {
            const float4 s = make_float4(S[d * RULE_COLS + c], S[(d + 1) * RULE_COLS + c], S[(d + 2) * RULE_COLS + c],
                                         S[(d + 3) * RULE_COLS + c]);
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int32_t i = ig + 16 * r < L ? ig + 16 * r : 0;
                inter[r] = dot4(*(const float4 *)(X + (size_t)i * ldx + d), s, inter[r]);
            }
        }
        for (int32_t m = 0; m < L; m += 4) { /* L < 4 past the end reads At's zero padding, V's stale rows x 0 */
            float4 v;
            v.x = V[m * RULE_COLS + c];
            v.y = m + 1 < L ? V[(m + 1) * RULE_COLS + c] : 0.0f;
            v.z = m + 2 < L ? V[(m + 2) * RULE_COLS + c] : 0.0f;
            v.w = m + 3 < L ? V[(m + 3) * RULE_COLS + c] : 0.0f;
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int32_t i = ig + 16 * r < L ? ig + 16 * r : 0;
                intra[r] = dot4(*(const float4 *)(At + (size_t)i * ldt + m), v, intra[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
            if (ig + 16 * r < L && c < ncol)
                a.o[(job.row0 + ig + 16 * r) * (hv * dv) + h * dv + col0 + c] = inter[r] + intra[r];
        __syncthreads();
        stage_rows(X, ldx, Kd, L, dk);
        __syncthreads();
        /* S = S e^cum_last + (k e^(cum_last - cum))^T V' */
        for (int32_t d0 = 4 * ig; d0 < dk; d0 += 4 * (CHUNK_THREADS / RULE_COLS)) {
            float4 up = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int32_t i = 0; i < L; i++) {
                const float4 kd = *(const float4 *)(X + (size_t)i * ldx + d0);
                const float v = V[i * RULE_COLS + c];
                up.x = fmaf(kd.x, v, up.x);
                up.y = fmaf(kd.y, v, up.y);
                up.z = fmaf(kd.z, v, up.z);
                up.w = fmaf(kd.w, v, up.w);
            }
            S[d0 * RULE_COLS + c] = S[d0 * RULE_COLS + c] * chunk_decay + up.x;
            S[(d0 + 1) * RULE_COLS + c] = S[(d0 + 1) * RULE_COLS + c] * chunk_decay + up.y;
            S[(d0 + 2) * RULE_COLS + c] = S[(d0 + 2) * RULE_COLS + c] * chunk_decay + up.z;
            S[(d0 + 3) * RULE_COLS + c] = S[(d0 + 3) * RULE_COLS + c] * chunk_decay + up.w;
        }
    }
    __syncthreads();
    for (int32_t e = tid; e < dk * RULE_COLS; e += CHUNK_THREADS) {
        const int32_t i = e / RULE_COLS, cc = e % RULE_COLS;
        if (cc < ncol)
            Sg[(int64_t)i * dv + col0 + cc] = S[e];
    }
}

/* Queues the chunked form for the runs in runs[0..n): groups of at most CHUNK_GROUP_BYTES of records, each a
 * prepare launch over its chunks and a propagate launch over its segments. */
static void rule_chunked_runs(struct jev_backend *be, struct chunk_args *a, const struct jev_gdn_run *runs, int32_t n) {
    const struct jev_gdn_shape *s = &a->s;
    const size_t rec_bytes = chunk_rec_floats(*s) * sizeof(float) * (size_t)s->hv;
    int64_t total = 0;
    for (int32_t r = 0; r < n; r++)
        total += (runs[r].n + s->chunk - 1) / s->chunk;
    int64_t cap = (int64_t)(CHUNK_GROUP_BYTES / rec_bytes);
    cap = cap < 1 ? 1 : cap < total ? cap : total;
    struct chunk_job *jobs = (struct chunk_job *)malloc((size_t)cap * sizeof *jobs);
    struct chunk_seg *segs = (struct chunk_seg *)malloc((size_t)cap * sizeof *segs);
    a->rec = jev_cuda_work(be, (size_t)cap * rec_bytes);
    if (!jobs || !segs || !a->rec) { /* jev_cuda_work recorded its own failure */
        if (!jobs || !segs)
            jev_cuda_check(be, cudaErrorMemoryAllocation, "gdn_rule chunk tables");
        free(jobs);
        free(segs);
        return;
    }
    const size_t prep_shared = prepare_shared_floats(*s) * sizeof(float);
    const size_t prop_shared = propagate_shared_floats(*s) * sizeof(float);
    jev_cuda_check(be,
                   cudaFuncSetAttribute(chunk_prepare, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prep_shared),
                   "gdn_rule shared memory");
    jev_cuda_check(be,
                   cudaFuncSetAttribute(chunk_propagate, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)prop_shared),
                   "gdn_rule shared memory");
    const unsigned slices = (unsigned)((s->dv + RULE_COLS - 1) / RULE_COLS);
    int32_t r = 0, next = 0; /* the next chunk to queue: run r, its chunk index next */
    while (r < n) {
        int32_t n_jobs = 0, n_segs = 0;
        while (r < n && n_jobs < cap) {
            segs[n_segs] = (struct chunk_seg){runs[r].ssm, n_jobs, 0};
            for (; next * s->chunk < runs[r].n && n_jobs < cap; next++) {
                const int32_t left = runs[r].n - next * s->chunk;
                jobs[n_jobs++] =
                    (struct chunk_job){runs[r].row0 + (int64_t)next * s->chunk, left < s->chunk ? left : s->chunk, 0};
                segs[n_segs].n_chunk++;
            }
            n_segs++;
            if (next * s->chunk >= runs[r].n) {
                r++;
                next = 0;
            }
        }
        a->jobs = (const struct chunk_job *)jev_cuda_stage(be, jobs, (size_t)n_jobs * sizeof *jobs);
        a->segs = (const struct chunk_seg *)jev_cuda_stage(be, segs, (size_t)n_segs * sizeof *segs);
        chunk_prepare<<<dim3((unsigned)n_jobs, (unsigned)s->hv), CHUNK_THREADS, prep_shared, be->stream>>>(*a);
        jev_cuda_check(be, cudaGetLastError(), "gdn_rule (chunk prepare)");
        chunk_propagate<<<dim3(slices, (unsigned)s->hv, (unsigned)n_segs), CHUNK_THREADS, prop_shared, be->stream>>>(
            *a);
        jev_cuda_check(be, cudaGetLastError(), "gdn_rule (chunk propagate)");
    }
    free(jobs);
    free(segs);
}

/* Records a launch error (the ops cannot fail); dk above the kernels' register budget is a sizing bug. */
void jev_cuda_gdn_rule(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                       const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o) {
    if (n_runs <= 0)
        return;
    if (s->dk > 32 * RULE_GROUPS || s->dk <= 0 || s->dv <= 0 || s->hk <= 0 || s->hv % s->hk != 0) {
        jev_cuda_check(be, cudaErrorInvalidValue, "gdn_rule shape");
        return;
    }
    /* long chunked-form runs to the chunked kernels, the rest to the recurrence */
    const bool chunk_fits = s->chunk > 0 && s->chunk <= CHUNK_MAX && s->chunk % 4 == 0 && s->dk % 4 == 0 &&
                            s->dv % 4 == 0 && prepare_shared_floats(*s) * sizeof(float) <= be->shared_optin &&
                            propagate_shared_floats(*s) * sizeof(float) <= be->shared_optin;
    struct jev_gdn_run *sel = (struct jev_gdn_run *)malloc(2 * (size_t)n_runs * sizeof *sel);
    if (!sel) {
        jev_cuda_check(be, cudaErrorMemoryAllocation, "gdn_rule run tables");
        return;
    }
    struct jev_gdn_run *chunked = sel, *recurrent = sel + n_runs;
    int32_t n_chunked = 0, n_recurrent = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        if (chunk_fits && !runs[r].recurrent && runs[r].n >= CHUNK_MIN_ROWS)
            chunked[n_chunked++] = runs[r];
        else
            recurrent[n_recurrent++] = runs[r];
    }
    jev_cuda_stage_reset(be);
    if (n_chunked > 0) {
        struct chunk_args c;
        c.s = *s;
        c.u = u;
        c.g = g;
        c.beta = beta;
        c.o = o;
        c.qscale = (float)(1.0 / sqrt((double)s->dk));
        rule_chunked_runs(be, &c, chunked, n_chunked);
    }
    if (n_recurrent > 0) {
        struct rule_args a;
        a.s = *s;
        a.u = u;
        a.g = g;
        a.beta = beta;
        a.o = o;
        a.qdiv = sqrtf((float)s->dk);
        a.qscale = (float)(1.0 / sqrt((double)s->dk));
        a.runs = (const struct jev_gdn_run *)jev_cuda_stage(be, recurrent, (size_t)n_recurrent * sizeof(*runs));
        const unsigned slices = (unsigned)((s->dv + RULE_COLS - 1) / RULE_COLS);
        dim3 grid(slices, (unsigned)s->hv, (unsigned)n_recurrent);
        size_t shared = 2 * (size_t)s->dk * sizeof(float);
        if (s->dk <= 16 * RULE_GROUPS)
            rule_recurrent<16><<<grid, RULE_THREADS, shared, be->stream>>>(a);
        else
            rule_recurrent<32><<<grid, RULE_THREADS, shared, be->stream>>>(a);
        jev_cuda_check(be, cudaGetLastError(), "gdn_rule (recurrent)");
    }
    free(sel); /* staged: the copies were taken */
}

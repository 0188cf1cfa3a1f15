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
 * the chunked form (HF torch_chunk_gated_delta_rule: cuda-gdn-chunk.cu); the others (decode's single cached tokens, the
 * decision suffixes) take the token-by-token recurrence (rule_recurrent), which keeps a head's state on chip, needs no
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
 * Tokens go in tiles of RULE_TILE: a tile's q, k, v and gates are loaded at
 * once (the loads in flight together) and q, k normalised in shared memory
 * before its steps, which leaves two barriers a token (the column sums) and
 * no global load in the dependent chain.
 */
#include "backend/cuda/cuda-int.h"     // defines: struct jev_backend, jev_cuda_stage, jev_cuda_check
#include "backend/cuda/cuda-gdn-int.h" // defines: RULE_COLS, l2norm_warp, jev_cuda_gdn_rule_chunked

#include <math.h>

/* ---- causal conv + SiLU ---- */

#define CONV_THREADS 128 /* channels per block */
#define CONV_TOKENS 16   /* output rows per block */

/* x[t][c] of the run's input stream: the run's rows from t = 0, the old window before (t = -(K-1)..-1). */
__device__ static inline float conv_input(const float *mixed, const struct jev_gdn_run &run, int32_t C, int32_t K,
                                          int32_t t, int32_t c) {
    const float *win = run.conv_in ? run.conv_in : run.conv; /* a light fork reads its parent's (ops.h) */
    return t >= 0 ? mixed[(run.row0 + t) * C + c] : win[(int64_t)(K - 1 + t) * C + c];
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

/* grid (channel blocks, runs), after conv_rows: window row w = x[n-K+1+w], w = 0..K-2, in place or from conv_in. */
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

#define RULE_TILE 16 /* tokens whose q, k, v and gates are loaded and normalised before their steps */

/* Dynamic shared memory of rule_recurrent, floats: a tile's q and k [RULE_TILE][2][dk], v [RULE_TILE][cols], decay
 * and beta [RULE_TILE]. */
static inline size_t recurrent_shared_floats(int32_t dk) {
    return (size_t)RULE_TILE * (2 * (size_t)dk + RULE_COLS + 2);
}

/* Loads tokens t0..t0+T of the run into the tile: q and k (raw, every thread a share of the 2 T dk values, so that
 * the loads are in flight together), then each warp normalises its vectors in place; v of the block's columns,
 * e^g and beta. Ends with a barrier. */
__device__ static void recurrent_tile(const struct rule_args &a, const struct jev_gdn_run &run, int32_t t0, int32_t T,
                                      float *qk, float *vt, float *decay, float *bet) {
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, h = (int32_t)blockIdx.y;
    const int32_t kh = h / (hv / a.s.hk), key_dim = a.s.hk * dk, conv_dim = 2 * key_dim + hv * dv;
    const int tid = (int)threadIdx.x, warp = tid / 32;
    const int32_t total = 2 * T * dk;
#pragma unroll 8
    for (int32_t e = tid; e < total; e += RULE_THREADS) {
        const int32_t t = e / (2 * dk), which = (e / dk) % 2, d = e % dk;
        qk[e] = a.u[(run.row0 + t0 + t) * conv_dim + which * key_dim + kh * dk + d];
    }
    const int32_t col = (int32_t)blockIdx.x * RULE_COLS + tid % RULE_COLS;
    for (int32_t t = tid / RULE_COLS; t < T; t += RULE_GROUPS)
        vt[t * RULE_COLS + tid % RULE_COLS] =
            col < dv ? a.u[(run.row0 + t0 + t) * conv_dim + 2 * key_dim + h * dv + col] : 0.0f;
    if (tid < T) {
        decay[tid] = expf(a.g[(run.row0 + t0 + tid) * hv + h]);
        bet[tid] = a.beta[(run.row0 + t0 + tid) * hv + h];
    }
    __syncthreads();
    for (int32_t v = warp; v < 2 * T; v += RULE_WARPS) { /* q: / sqrt(dk) (recurrent) or * f32(dk^-0.5) (chunked) */
        float *x = qk + (size_t)v * dk;
        if (v % 2 == 0)
            l2norm_warp(x, dk, run.recurrent, run.recurrent ? a.qdiv : a.qscale, x);
        else
            l2norm_warp(x, dk, false, 1.0f, x);
    }
    __syncthreads();
}

/* grid (column slices, value heads, runs); ROWS state rows per thread (dk <= ROWS * RULE_GROUPS); dynamic shared
 * memory: recurrent_shared_floats(dk). Each tile of RULE_TILE tokens is loaded and normalised first (its loads
 * together), then its tokens step through the state with two barriers each (the column sums). */
template <int ROWS> __global__ static void __launch_bounds__(RULE_THREADS) rule_recurrent(const struct rule_args a) {
    extern __shared__ float tile[];
    __shared__ float partial_mem[RULE_WARPS][RULE_COLS];
    __shared__ float partial_out[RULE_WARPS][RULE_COLS];
    const struct jev_gdn_run run = a.runs[blockIdx.z];
    if (run.n <= 0)
        return;
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, h = (int32_t)blockIdx.y;
    const int32_t group = (int32_t)(threadIdx.x / RULE_COLS), c = (int32_t)(threadIdx.x % RULE_COLS);
    const int32_t col = (int32_t)blockIdx.x * RULE_COLS + c;
    const bool has_col = col < dv;
    float *qk = tile, *vt = qk + (size_t)RULE_TILE * 2 * dk, *decay = vt + RULE_TILE * RULE_COLS;
    float *bet = decay + RULE_TILE;
    float *S = run.ssm + (int64_t)h * dk * dv;                                    /* [dk][dv], written at the end */
    const float *S0 = (run.ssm_in ? run.ssm_in : run.ssm) + (int64_t)h * dk * dv; /* read first (ops.h) */

    float state[ROWS]; /* S[group + RULE_GROUPS r][col] */
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int32_t i = group + RULE_GROUPS * r;
        state[r] = has_col && i < dk ? S0[(int64_t)i * dv + col] : 0.0f;
    }
    for (int32_t t0 = 0; t0 < run.n; t0 += RULE_TILE) {
        const int32_t T = run.n - t0 < RULE_TILE ? run.n - t0 : RULE_TILE;
        recurrent_tile(a, run, t0, T, qk, vt, decay, bet); /* the previous tile's readers are past its last barrier */
        for (int32_t t = 0; t < T; t++) {
            const float *qn = qk + (size_t)t * 2 * dk, *kn = qn + dk;
            /* S *= e^g; mem = S^T k */
            float mem = 0.0f;
#pragma unroll
            for (int r = 0; r < ROWS; r++) {
                const int32_t i = group + RULE_GROUPS * r;
                if (i < dk) {
                    state[r] = state[r] * decay[t];
                    mem += state[r] * kn[i];
                }
            }
            mem = column_sum(mem, partial_mem);
            /* delta = (v - mem) * beta; S += k delta^T; out = S^T q */
            const float delta = (vt[t * RULE_COLS + c] - mem) * bet[t];
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
            if (threadIdx.x < RULE_COLS && has_col)
                a.o[(run.row0 + t0 + t) * (hv * dv) + h * dv + col] = out;
        }
    }
#pragma unroll
    for (int r = 0; r < ROWS; r++) {
        const int32_t i = group + RULE_GROUPS * r;
        if (has_col && i < dk)
            S[(int64_t)i * dv + col] = state[r];
    }
}

/* Shorter chunked-form runs take the recurrence: 64 dependent steps beat a chunk's set-up. */
#define CHUNK_MIN_ROWS 64

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
    const bool chunk_fits = jev_cuda_gdn_chunk_fits(be, s);
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
    if (n_chunked > 0)
        jev_cuda_gdn_rule_chunked(be, s, u, g, beta, chunked, n_chunked, o);
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
        size_t shared = recurrent_shared_floats(s->dk) * sizeof(float);
        if (s->dk <= 16 * RULE_GROUPS)
            rule_recurrent<16><<<grid, RULE_THREADS, shared, be->stream>>>(a);
        else
            rule_recurrent<32><<<grid, RULE_THREADS, shared, be->stream>>>(a);
        jev_cuda_check(be, cudaGetLastError(), "gdn_rule (recurrent)");
    }
    free(sel); /* staged: the copies were taken */
}

/*
 * cuda-gdn-chunk.cu - the gated delta rule's chunked form on the GPU (HF torch_chunk_gated_delta_rule),
 * for the runs the model layer marks chunked (prefill) that are at least CHUNK_MIN_ROWS long; the
 * recurrence and the conv are in cuda-gdn.cu, which picks the runs for this file.
 *
 * Three kernels per group of chunks, queued in order on the stream:
 *   chunk_prepare    one block per (chunk, value head), every chunk of every run at once (a chunk's
 *                    matrices do not depend on the state):
 *                    1 q, k L2-normalised (q * f32(dk^-0.5)), beta, cum = cumsum(g) (one thread, in
 *                      row order as the CPU)
 *                    2 A = -(k beta . k) e^(cum_i - cum_m), m < i; At = (q . k) e^(cum_i - cum_m), m <= i
 *                    3 T = (I - A)^-1 by HF's row recurrence T[i][j] = A[i][j] + sum_{j<m<i} A[i][m] T[m][j]:
 *                      four lanes per column j, rows in order (a row reads only its column's earlier rows)
 *                    4 W = T (k beta e^cum) (HF k_cumdecay), U = T (v beta) (HF value)
 *                    and writes W, U, At, q e^cum, k e^(cum_last - cum) and e^cum_last to the scratch
 *                    record of (chunk, head).
 *   chunk_propagate  one block per (run segment, value head, slice of RULE_COLS state columns), the
 *                    segment's chunks in order with the slice of the state S [dk][cols] in shared memory:
 *                    records S (the chunk's starting state), V' = U - W S (over U), then
 *                    S = S e^cum_last + (k e^(cum_last - cum))^T V'. The only sequential part.
 *   chunk_output     one block per (chunk, value head), every chunk at once again:
 *                    o = (q e^cum) S + At V'.
 * Sums run in another order than the CPU's (which solves by forward substitution rather than forming
 * T, as HF does), so results agree to f32 rounding (the parity test's NMSE bound), not bit for bit.
 *
 * A group holds at most CHUNK_GROUP_BYTES of records; a run longer than a group continues in the next
 * group's first segment (the state is in global memory between the launches, in stream order), so a
 * segment's run appears once per group. Thread tiles read shared rows as float4: dk and dv multiples
 * of 4, a chunk of at most 64 rows (HF: 64); other shapes, or a device without the shared memory,
 * take the recurrence (jev_cuda_gdn_chunk_fits).
 */
#include "backend/cuda/cuda-int.h"     // defines: struct jev_backend, jev_cuda_stage, jev_cuda_work
#include "backend/cuda/cuda-gdn-int.h" // defines: RULE_COLS, l2norm_warp, jev_cuda_gdn_rule_chunked

#include <math.h>
#include <stdlib.h>

#define CHUNK_THREADS 256
#define CHUNK_MAX 64                         /* the thread tiles cover 64 rows */
#define CHUNK_GROUP_BYTES ((size_t)48 << 20) /* scratch records per launch group */

struct chunk_job { /* one chunk of one run */
    int64_t row0;  /* its first batch row */
    int32_t L;     /* rows, 1..chunk */
    int32_t pad;
};

struct chunk_seg {         /* consecutive chunks of one run inside a group */
    float *ssm;            /* the run's state [hv][dk][dv], written after the segment's last chunk */
    const float *ssm_from; /* the state before its first chunk: the run's ssm_in for its first segment */
    int32_t chunk0;        /* its first job in the group */
    int32_t n_chunk;       /* jobs */
};

struct chunk_args {
    struct jev_gdn_shape s;
    const float *u, *g, *beta;
    const struct chunk_job *jobs;
    const struct chunk_seg *segs;
    float *rec; /* [jobs][hv] records */
    float *o;
    float qscale; /* f32(dk^-0.5) */
};

/* One (chunk, head) record, floats: W, Qe (q e^cum), Kd (k e^(cum_last - cum)) [C][dk]; U, then V' [C][dv];
 * At [C][C]; S, the chunk's starting state [dk][dv]; e^cum_last and 3 floats of padding. */
struct chunk_rec {
    float *W, *Qe, *Kd, *U, *At, *S, *last;
};

__host__ __device__ static inline size_t chunk_rec_floats(const struct jev_gdn_shape &s) {
    const size_t C = (size_t)s.chunk;
    return 3 * C * s.dk + C * s.dv + C * C + (size_t)s.dk * s.dv + 4;
}

__device__ static inline struct chunk_rec chunk_rec_at(const struct chunk_args &a, int32_t job, int32_t h) {
    const size_t C = (size_t)a.s.chunk, dk = (size_t)a.s.dk, dv = (size_t)a.s.dv;
    struct chunk_rec r;
    r.W = a.rec + ((size_t)job * a.s.hv + h) * chunk_rec_floats(a.s);
    r.Qe = r.W + C * dk;
    r.Kd = r.Qe + C * dk;
    r.U = r.Kd + C * dk;
    r.At = r.U + C * dv;
    r.S = r.At + C * C;
    r.last = r.S + dk * dv;
    return r;
}

__host__ __device__ static inline size_t prepare_shared_floats(const struct jev_gdn_shape &s) {
    const size_t C = (size_t)s.chunk, wide = (size_t)(s.dk > s.dv ? s.dk : s.dv);
    return C * (wide + 4) + C * ((size_t)s.dk + 4) + 2 * C * (C + 1) + 2 * C;
}

__host__ __device__ static inline size_t propagate_shared_floats(const struct jev_gdn_shape &s) {
    const size_t C = (size_t)s.chunk;
    return 2 * C * ((size_t)s.dk + 4) + C * RULE_COLS + (size_t)s.dk * RULE_COLS;
}

__host__ __device__ static inline size_t output_shared_floats(const struct jev_gdn_shape &s) {
    const size_t C = (size_t)s.chunk, dk = (size_t)s.dk, dv = (size_t)s.dv;
    return C * (dk + 4) + C * (C + 4) + dk * (dv + 4) + C * (dv + 4);
}

/* Row-major [rows][n] global (dense, read-only here) to shared with row stride ld, float4 at a time (n % 4 == 0);
 * four loads in flight a thread before their stores. */
__device__ static inline void stage_rows(float *dst, int32_t ld, const float *src, int32_t rows, int32_t n) {
    const int32_t n4 = n / 4, total = rows * n4, step = (int32_t)blockDim.x;
    for (int32_t e0 = (int32_t)threadIdx.x; e0 < total; e0 += 4 * step) {
        float4 v[4];
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int32_t e = e0 + k * step;
            if (e < total)
                v[k] = __ldg((const float4 *)(src + (size_t)(e / n4) * n + 4 * (e % n4)));
        }
#pragma unroll
        for (int k = 0; k < 4; k++) {
            const int32_t e = e0 + k * step;
            if (e < total)
                *(float4 *)(dst + (size_t)(e / n4) * ld + 4 * (e % n4)) = v[k];
        }
    }
}

__device__ static inline float dot4(float4 a, float4 b, float acc) {
    acc = fmaf(a.x, b.x, acc);
    acc = fmaf(a.y, b.y, acc);
    acc = fmaf(a.z, b.z, acc);
    return fmaf(a.w, b.w, acc);
}

__device__ static inline float4 axpy4(float t, float4 b, float4 acc) {
    acc.x = fmaf(t, b.x, acc.x);
    acc.y = fmaf(t, b.y, acc.y);
    acc.z = fmaf(t, b.z, acc.z);
    acc.w = fmaf(t, b.w, acc.w);
    return acc;
}

/* ---- chunk_prepare ---- */

/* Step 1: normalised q and k into Q, K (rows past L zero), beta and the cumulative log decay (past L: the last). */
__device__ static void prepare_load(const struct chunk_args &a, const struct chunk_job &job, int32_t h, float *Q,
                                    int32_t ldq, float *K, int32_t ldk, float *cum, float *bet, float *last) {
    const int32_t dk = a.s.dk, hv = a.s.hv, C = a.s.chunk, L = job.L;
    const int32_t kh = h / (hv / a.s.hk), key_dim = a.s.hk * dk, conv_dim = 2 * key_dim + hv * a.s.dv;
    const int tid = (int)threadIdx.x, warp = tid / 32;
    for (int32_t i = warp; i < C; i += CHUNK_THREADS / 32) {
        if (i < L) {
            const float *ur = a.u + (job.row0 + i) * conv_dim;
            l2norm_warp(ur + kh * dk, dk, false, a.qscale, Q + (size_t)i * ldq);
            l2norm_warp(ur + key_dim + kh * dk, dk, false, 1.0f, K + (size_t)i * ldk);
        } else {
            for (int32_t d = tid % 32; d < dk; d += 32)
                Q[(size_t)i * ldq + d] = K[(size_t)i * ldk + d] = 0.0f;
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
}

/* Step 2: A (shared, negated, strictly lower) and At (global, lower with the diagonal). Thread tile: rows
 * ib + 16 r by columns mb + 16 c; sub-tiles with c > r lie wholly above the diagonal and are skipped. */
__device__ static void prepare_products(const struct chunk_args &a, int32_t L, const float *Q, int32_t ldq,
                                        const float *K, int32_t ldk, const float *cum, const float *bet, float *A,
                                        int32_t lda, float *At) {
    const int32_t dk = a.s.dk, C = a.s.chunk;
    const int tid = (int)threadIdx.x, ib = tid / 16, mb = tid % 16;
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
            const float b = bet[i];
            ki[r] = *(const float4 *)(K + (size_t)i * ldk + d);
            ki[r] = make_float4(ki[r].x * b, ki[r].y * b, ki[r].z * b, ki[r].w * b); /* k_beta = k * beta */
            qi[r] = *(const float4 *)(Q + (size_t)i * ldq + d);
        }
#pragma unroll
        for (int c = 0; c < 4; c++) {
            const int32_t m = mb + 16 * c < C ? mb + 16 * c : 0;
            km[c] = *(const float4 *)(K + (size_t)m * ldk + d);
        }
#pragma unroll
        for (int r = 0; r < 4; r++)
#pragma unroll
            for (int c = 0; c <= r; c++) {
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
            At[(size_t)i * C + m] = on ? qk[r][c] * decay : 0.0f;
        }
}

/* Step 3: T = I + the row recurrence over A, in place of the identity T holds. Column j = tid / 4 of each row is
 * the sum of four lanes' interleaved partials (one warp: shuffles, no block barrier); rows in order. */
__device__ static void prepare_inverse(int32_t L, const float *A, float *T, int32_t lda) {
    const int tid = (int)threadIdx.x, j = tid / 4, part = tid % 4, j_first = (tid / 32) * 8;
    for (int32_t i = j_first + 1; i < L; i++) {
        float p = 0.0f;
        if (j < i) {
            const float *Ai = A + (size_t)i * lda;
            for (int32_t m = j + 1 + part; m < i; m += 4)
                p = fmaf(Ai[m], T[(size_t)m * lda + j], p);
        }
        p += __shfl_xor_sync(0xffffffffu, p, 1);
        p += __shfl_xor_sync(0xffffffffu, p, 2);
        if (j < i && part == 0)
            T[(size_t)i * lda + j] = A[(size_t)i * lda + j] + p;
        __syncwarp();
    }
}

/* Step 4: out[C][n] = T B (T lower triangular): thread tile rows warp + 8 r by one float4 of columns; the rows of
 * block r need T's columns up to 8 r + 7 only. */
__device__ static void prepare_apply(int32_t C, const float *T, int32_t lda, const float *B, int32_t ldb, int32_t n,
                                     float *out) {
    const int tid = (int)threadIdx.x, warp = tid / 32;
    for (int32_t c4 = tid % 32; c4 < n / 4; c4 += 32) {
        float4 acc[8];
#pragma unroll
        for (int r = 0; r < 8; r++)
            acc[r] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
#pragma unroll
        for (int blk = 0; blk < 8; blk++)
            for (int32_t m = 8 * blk; m < 8 * blk + 8 && m < C; m++) {
                const float4 b = *(const float4 *)(B + (size_t)m * ldb + 4 * c4);
#pragma unroll
                for (int r = blk; r < 8; r++) {
                    const int32_t i = warp + 8 * r < C ? warp + 8 * r : 0;
                    acc[r] = axpy4(T[(size_t)i * lda + m], b, acc[r]);
                }
            }
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (warp + 8 * r < C)
                *(float4 *)(out + (size_t)(warp + 8 * r) * n + 4 * c4) = acc[r];
    }
}

/* grid (jobs, value heads). Shared: Qv [C][wide + 4] (q, then v beta), Kw [C][dk + 4] (k, then k beta e^cum),
 * A and T [C][C + 1], cum and beta [C]. Rows at and past L are zero, so full 64-row tiles add nothing from them. */
__global__ static void __launch_bounds__(CHUNK_THREADS) chunk_prepare(const struct chunk_args a) {
    extern __shared__ float sh[];
    const struct chunk_job job = a.jobs[blockIdx.x];
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, C = a.s.chunk, L = job.L, h = (int32_t)blockIdx.y;
    const int32_t key_dim = a.s.hk * dk, conv_dim = 2 * key_dim + hv * dv;
    const int32_t wide = dk > dv ? dk : dv, ldq = wide + 4, ldk = dk + 4, lda = C + 1;
    const int tid = (int)threadIdx.x;
    float *Qv = sh, *Kw = Qv + (size_t)C * ldq, *A = Kw + (size_t)C * ldk, *T = A + (size_t)C * lda;
    float *cum = T + (size_t)C * lda, *bet = cum + C;
    const struct chunk_rec rec = chunk_rec_at(a, (int32_t)blockIdx.x, h);

    prepare_load(a, job, h, Qv, ldq, Kw, ldk, cum, bet, rec.last);
    prepare_products(a, L, Qv, ldq, Kw, ldk, cum, bet, A, lda, rec.At);
    for (int32_t e = tid; e < C * dk; e += CHUNK_THREADS) { /* what the propagation and the output read */
        const int32_t i = e / dk, d = e % dk;
        rec.Qe[e] = Qv[(size_t)i * ldq + d] * expf(cum[i]);
        rec.Kd[e] = Kw[(size_t)i * ldk + d] * expf(cum[L - 1] - cum[i]);
    }
    __syncthreads();
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
    prepare_inverse(L, A, T, lda);
    __syncthreads();
    prepare_apply(C, T, lda, Kw, ldk, dk, rec.W);
    prepare_apply(C, T, lda, Qv, ldq, dv, rec.U);
}

/* ---- chunk_propagate ---- */

/* grid (slices, value heads, segments). Shared: W and Kd [C][dk + 4], V [C][cols] (U, then V'), S [dk][cols].
 * Thread (row group ig = tid / 16, column c = tid % 16) takes rows ig + 16 r of V' and state rows 4 ig .. (step
 * 64) of the update. */
__global__ static void __launch_bounds__(CHUNK_THREADS) chunk_propagate(const struct chunk_args a) {
    extern __shared__ float sh[];
    const struct chunk_seg seg = a.segs[blockIdx.z];
    const int32_t dk = a.s.dk, dv = a.s.dv, C = a.s.chunk, h = (int32_t)blockIdx.y;
    const int32_t col0 = (int32_t)blockIdx.x * RULE_COLS, ncol = dv - col0 < RULE_COLS ? dv - col0 : RULE_COLS;
    const int32_t ldx = dk + 4;
    const int tid = (int)threadIdx.x, ig = tid / RULE_COLS, c = tid % RULE_COLS;
    float *W = sh, *Kd = W + (size_t)C * ldx, *V = Kd + (size_t)C * ldx, *S = V + (size_t)C * RULE_COLS;
    float *Sg = seg.ssm + (int64_t)h * dk * dv;            /* [dk][dv] */
    const float *Sf = seg.ssm_from + (int64_t)h * dk * dv; /* where the segment starts from */

    for (int32_t e = tid; e < dk * RULE_COLS; e += CHUNK_THREADS) {
        const int32_t i = e / RULE_COLS, cc = e % RULE_COLS;
        S[e] = cc < ncol ? Sf[(int64_t)i * dv + col0 + cc] : 0.0f;
    }
    for (int32_t k = 0; k < seg.n_chunk; k++) {
        const int32_t L = a.jobs[seg.chunk0 + k].L;
        const struct chunk_rec rec = chunk_rec_at(a, seg.chunk0 + k, h);
        __syncthreads(); /* S loaded; the previous chunk's update has read W, Kd and V */
        stage_rows(W, ldx, rec.W, L, dk);
        stage_rows(Kd, ldx, rec.Kd, L, dk);
        for (int32_t e = tid; e < L * RULE_COLS; e += CHUNK_THREADS) {
            const int32_t i = e / RULE_COLS, cc = e % RULE_COLS;
            V[e] = cc < ncol ? rec.U[(size_t)i * dv + col0 + cc] : 0.0f;
        }
        for (int32_t e = tid; e < dk * RULE_COLS; e += CHUNK_THREADS) /* the chunk's starting state, for the output */
            if (e % RULE_COLS < ncol)
                rec.S[(size_t)(e / RULE_COLS) * dv + col0 + e % RULE_COLS] = S[e];
        __syncthreads();
        /* V' = U - W S */
        float acc[4] = {0.0f, 0.0f, 0.0f, 0.0f};
        for (int32_t d = 0; d < dk; d += 4) {
            const float4 s = make_float4(S[d * RULE_COLS + c], S[(d + 1) * RULE_COLS + c], S[(d + 2) * RULE_COLS + c],
                                         S[(d + 3) * RULE_COLS + c]);
#pragma unroll
            for (int r = 0; r < 4; r++) {
                const int32_t i = ig + 16 * r < L ? ig + 16 * r : 0;
                acc[r] = dot4(*(const float4 *)(W + (size_t)i * ldx + d), s, acc[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < 4; r++) {
            const int32_t i = ig + 16 * r;
            if (i < L) {
                const float v = V[i * RULE_COLS + c] - acc[r];
                V[i * RULE_COLS + c] = v;
                if (c < ncol)
                    rec.U[(size_t)i * dv + col0 + c] = v;
            }
        }
        __syncthreads();
        /* S = S e^cum_last + (k e^(cum_last - cum))^T V' */
        const float chunk_decay = rec.last[0];
        for (int32_t d0 = 4 * ig; d0 < dk; d0 += 4 * (CHUNK_THREADS / RULE_COLS)) {
            float4 up = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
            for (int32_t i = 0; i < L; i++)
                up = axpy4(V[i * RULE_COLS + c], *(const float4 *)(Kd + (size_t)i * ldx + d0), up);
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

/* ---- chunk_output ---- */

/* grid (jobs, value heads). Shared: Qe [C][dk + 4], At [C][C + 4], S [dk][dv + 4], V' [C][dv + 4]. Thread tile:
 * rows warp + 8 r by one float4 of columns; inter = Qe S and intra = At V' summed apart, then added (the CPU's
 * order of the two terms). */
__global__ static void __launch_bounds__(CHUNK_THREADS) chunk_output(const struct chunk_args a) {
    extern __shared__ float sh[];
    const struct chunk_job job = a.jobs[blockIdx.x];
    const int32_t dk = a.s.dk, dv = a.s.dv, hv = a.s.hv, C = a.s.chunk, L = job.L, h = (int32_t)blockIdx.y;
    const int32_t ldq = dk + 4, ldt = C + 4, ldv = dv + 4;
    const int tid = (int)threadIdx.x, warp = tid / 32;
    float *Qe = sh, *At = Qe + (size_t)C * ldq, *S = At + (size_t)C * ldt, *V = S + (size_t)dk * ldv;
    const struct chunk_rec rec = chunk_rec_at(a, (int32_t)blockIdx.x, h);
    stage_rows(Qe, ldq, rec.Qe, L, dk);
    stage_rows(At, ldt, rec.At, L, C);
    stage_rows(S, ldv, rec.S, dk, dv);
    stage_rows(V, ldv, rec.U, L, dv);
    __syncthreads();
    for (int32_t c4 = tid % 32; c4 < dv / 4; c4 += 32) {
        float4 inter[8], intra[8];
#pragma unroll
        for (int r = 0; r < 8; r++)
            inter[r] = intra[r] = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        for (int32_t d = 0; d < dk; d++) {
            const float4 s = *(const float4 *)(S + (size_t)d * ldv + 4 * c4);
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int32_t i = warp + 8 * r < L ? warp + 8 * r : 0;
                inter[r] = axpy4(Qe[(size_t)i * ldq + d], s, inter[r]);
            }
        }
        for (int32_t m = 0; m < L; m++) { /* At is zero above the diagonal */
            const float4 v = *(const float4 *)(V + (size_t)m * ldv + 4 * c4);
#pragma unroll
            for (int r = 0; r < 8; r++) {
                const int32_t i = warp + 8 * r < L ? warp + 8 * r : 0;
                intra[r] = axpy4(At[(size_t)i * ldt + m], v, intra[r]);
            }
        }
#pragma unroll
        for (int r = 0; r < 8; r++)
            if (warp + 8 * r < L)
                *(float4 *)(a.o + (job.row0 + warp + 8 * r) * (hv * dv) + h * dv + 4 * c4) = make_float4(
                    inter[r].x + intra[r].x, inter[r].y + intra[r].y, inter[r].z + intra[r].z, inter[r].w + intra[r].w);
    }
}

/* ---- launcher ---- */

bool jev_cuda_gdn_chunk_fits(const struct jev_backend *be, const struct jev_gdn_shape *s) {
    const size_t most = be->shared_optin;
    return s->chunk > 0 && s->chunk <= CHUNK_MAX && s->chunk % 4 == 0 && s->dk % 4 == 0 && s->dv % 4 == 0 &&
           prepare_shared_floats(*s) * sizeof(float) <= most && propagate_shared_floats(*s) * sizeof(float) <= most &&
           output_shared_floats(*s) * sizeof(float) <= most;
}

/* Allows kernel `bytes` of dynamic shared memory, once per backend and size: the attribute is a maximum, so
 * only a larger shape (a call in the hot path otherwise: every DeltaNet layer of every prefill) sets it again. */
static void set_shared(struct jev_backend *be, int which, const void *kernel, size_t bytes) {
    jev_cuda_allow_shared(be, &be->gdn_chunk_shared[which], kernel, bytes, "gdn_rule shared memory");
}

/* Queues the three kernels over one group: jobs[n_jobs] chunks, segs[n_segs] segments. */
static void launch_group(struct jev_backend *be, struct chunk_args *a, const struct chunk_job *jobs, int32_t n_jobs,
                         const struct chunk_seg *segs, int32_t n_segs) {
    const struct jev_gdn_shape *s = &a->s;
    a->jobs = (const struct chunk_job *)jev_cuda_stage(be, jobs, (size_t)n_jobs * sizeof *jobs);
    a->segs = (const struct chunk_seg *)jev_cuda_stage(be, segs, (size_t)n_segs * sizeof *segs);
    const unsigned slices = (unsigned)((s->dv + RULE_COLS - 1) / RULE_COLS);
    const dim3 per_chunk((unsigned)n_jobs, (unsigned)s->hv), per_seg(slices, (unsigned)s->hv, (unsigned)n_segs);
    chunk_prepare<<<per_chunk, CHUNK_THREADS, prepare_shared_floats(*s) * sizeof(float), be->stream>>>(*a);
    jev_cuda_check(be, cudaGetLastError(), "gdn_rule (chunk prepare)");
    chunk_propagate<<<per_seg, CHUNK_THREADS, propagate_shared_floats(*s) * sizeof(float), be->stream>>>(*a);
    jev_cuda_check(be, cudaGetLastError(), "gdn_rule (chunk propagate)");
    chunk_output<<<per_chunk, CHUNK_THREADS, output_shared_floats(*s) * sizeof(float), be->stream>>>(*a);
    jev_cuda_check(be, cudaGetLastError(), "gdn_rule (chunk output)");
}

void jev_cuda_gdn_rule_chunked(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                               const float *beta, const struct jev_gdn_run *runs, int32_t n, float *o) {
    const size_t rec_bytes = chunk_rec_floats(*s) * sizeof(float) * (size_t)s->hv;
    int64_t total = 0;
    for (int32_t r = 0; r < n; r++)
        total += (runs[r].n + s->chunk - 1) / s->chunk;
    int64_t cap = (int64_t)(CHUNK_GROUP_BYTES / rec_bytes);
    cap = cap < 1 ? 1 : cap < total ? cap : total;
    struct chunk_args a;
    a.s = *s;
    a.u = u;
    a.g = g;
    a.beta = beta;
    a.o = o;
    a.qscale = (float)(1.0 / sqrt((double)s->dk));
    a.rec = jev_cuda_work(be, (size_t)cap * rec_bytes);
    struct chunk_job *jobs = (struct chunk_job *)malloc((size_t)cap * sizeof *jobs);
    struct chunk_seg *segs = (struct chunk_seg *)malloc((size_t)cap * sizeof *segs);
    if (!jobs || !segs || !a.rec) { /* jev_cuda_work records its own failure */
        if (!jobs || !segs)
            jev_cuda_check(be, cudaErrorMemoryAllocation, "gdn_rule chunk tables");
        free(jobs);
        free(segs);
        return;
    }
    set_shared(be, 0, (const void *)chunk_prepare, prepare_shared_floats(*s) * sizeof(float));
    set_shared(be, 1, (const void *)chunk_propagate, propagate_shared_floats(*s) * sizeof(float));
    set_shared(be, 2, (const void *)chunk_output, output_shared_floats(*s) * sizeof(float));
    int32_t r = 0, next = 0; /* the next chunk to queue: run r's chunk number next */
    while (r < n) {
        int32_t n_jobs = 0, n_segs = 0;
        while (r < n && n_jobs < cap) {
            /* a run's first segment starts from its ssm_in (a light fork's parent, ops.h), later ones from
             * what the previous group left in ssm */
            const float *from = next == 0 && runs[r].ssm_in ? runs[r].ssm_in : runs[r].ssm;
            segs[n_segs] = (struct chunk_seg){runs[r].ssm, from, n_jobs, 0};
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
        launch_group(be, &a, jobs, n_jobs, segs, n_segs);
    }
    free(jobs);
    free(segs);
}

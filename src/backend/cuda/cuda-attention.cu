/*
 * cuda-attention.cu - softmax attention on the GPU: the LM's causal GQA attention over K/V spans
 * and the vision tower's bidirectional attention.
 *
 * LM (jev_cuda_attention, as jev_cpu_attention in backend/cpu/cpu-lm.c): the host run and span
 * descriptors are flattened into tables (runs with their first query index and first span;
 * spans with their device K/V pointers) and staged to the device. Runs of ATT_TILE_MIN_ROWS rows or
 * more (prefills, question suffixes) go to the tiled kernel (cuda-attention-tile.cu says why); the
 * others (decode steps) to the per-row kernel here. Per-row kernel: one block per (query row,
 * query head, split of its keys): the query is kept in registers (head_dim / 32 values per lane, head_dim <= 256),
 * each of the block's warps takes every ATT_WARPS-th key of each span, dots it with the query
 * (lanes over the dims, shuffle reduction) and folds it into its own online softmax (running
 * max m, sum l and weighted values, rescaled by expf(m_old - m_new) when the max grows). The
 * warps' partial results are merged at the end in shared memory and divided by the total sum.
 * A row with more than ATT_SPLIT_KEYS keys splits them over up to ATT_MAX_SPLITS blocks (a decode
 * step has one query row: 8 heads were 8 blocks on a GPU of 132 SMs, each walking thousands of keys
 * with a load on every step's path); each block leaves its (max, sum, weighted values) and a second
 * kernel merges them as the warps' are merged. The split count is a function of the row's own key
 * count, so a row's sums do not depend on its company; a row of one split takes the same arithmetic
 * on either path (e^0 = 1 exactly), so its bits do not depend on whether the launch merges.
 * Mathematically this is the CPU's two-pass softmax (scores * scale, max-subtracted expf, weights
 * . V); only the f32 rounding order differs. No score matrix goes to global memory, and any
 * number of keys fits.
 *
 * Vision (jev_cuda_vision_attention, as jev_cpu_vision_attention in backend/cpu/cpu-vision.c):
 * three steps per block of queries, all heads at once: S = Q K^T * scale with a cuBLAS
 * strided-batched sgemm over heads into the backend's scratch [H][queries][n], a row softmax
 * kernel (max-subtracted expf, divided by the row sum), then O = P V with a second strided-batched
 * sgemm straight into out. Queries are split into blocks so that the scores stay below
 * VIS_SCORE_BYTES (a single block up to n = sqrt(2^27 / H): 3344 patches at 12 heads, the benchmark image's
 * 1824 in one).
 *
 * Fast mode (be->precision) makes both products bf16 tensor-core GEMMs with f32 accumulation
 * (cublasGemmStridedBatchedEx, CUDA_R_16BF inputs, CUBLAS_COMPUTE_32F), as matmul's fast form: Q, K
 * and V rounded to bf16 once per call (jev_cuda_to_bf16) into the backend's own buffer vh (grown
 * like matmul's xh); S comes out f32 and the softmax is the same f32 kernel (max-subtracted expf,
 * divided by the row sum), which then stores P rounded to bf16 over the first half of each row's
 * scores (in place: no second score-sized array, which at 1824 patches would be 76 MiB more device
 * memory); P V reads it with ld 2 n. Why: the f32 products took ~6.5 ms of an image's vision
 * forward on the H200 (12 layers of 12 heads over 1824 patches), several times their bf16
 * tensor-core floor (the gain is measured on the GPU, not assumed here). Checked against a CPU
 * reference of the same bf16 Q, K, V and P within a derived bound (tests/cuda/test-cuda-attention.c).
 * Exact mode is the f32 path above, unchanged: the same calls as before fast mode had its own.
 *
 * Row-major through column-major cuBLAS (see cuda-matmul.cu): the row-major [a][b] array is the
 * column-major b x a matrix. With dim = H*hd and ld = 3*dim, head h's Q, K and V rows start at
 * qkv + h*hd, qkv + dim + h*hd, qkv + 2*dim + h*hd (batch stride hd). S (row-major [qb][n]) is
 * S^T (n x qb) = K Q^T = op_T(K^T) . Q^T: sgemm(OP_T, OP_N, m = n, n = qb, k = hd, A = K, lda = ld,
 * B = Q, ldb = ld, C = S, ldc = n). O (row-major [qb][hd] inside out, ld dim) is O^T (hd x qb) =
 * V^T P^T: sgemm(OP_N, OP_N, m = hd, n = qb, k = n, A = V, lda = ld, B = P, ldb = n, C = out,
 * ldc = dim). The scale is the sgemm's alpha: alpha * (q . k), one rounding as the CPU's s * scale.
 * Fast mode's calls are the same with bf16 A and B (Q, K, V at the same offsets of vh; P with
 * ldb = 2 n and batch stride 2 n qb).
 */
extern "C" {
#include "base/error.h" // defines: JEV_ASSERT (a C header without its own extern "C")
}
#include "backend/cuda/cuda-attention-int.h" // defines: struct att_run, struct att_span, jev_cuda_attention_tiled
#include "backend/cuda/cuda-int.h" // defines: struct jev_backend, jev_cuda_stage, jev_cuda_work, jev_cuda_to_bf16
#include "base/half.h"             // defines: jev_f32_to_bf16 (host and device)

#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#define ATT_WARPS 8                         /* LM attention: warps per (query row, head) block */
#define ATT_MAX_DH 256                      /* LM attention: largest head_dim (8 values per lane) */
#define ATT_SPLIT_KEYS 256                  /* LM attention: keys per block before a row's keys split */
#define ATT_MAX_SPLITS 16                   /* LM attention: most blocks one (row, head) takes */
#define VIS_SCORE_BYTES ((size_t)512 << 20) /* vision attention: score scratch per query block */
#define VIS_SOFTMAX_THREADS 256

/* ---- LM attention ---- */

/* The sum of v over the 32 lanes of a warp, in every lane. */
__device__ static inline float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* Blocks a row of n_keys keys takes: a function of the row alone (see the top). */
__host__ __device__ static inline int32_t row_splits(int64_t n_keys) {
    int64_t s = (n_keys + ATT_SPLIT_KEYS - 1) / ATT_SPLIT_KEYS;
    return s < 1 ? 1 : s > ATT_MAX_SPLITS ? ATT_MAX_SPLITS : (int32_t)s;
}

/* The run holding query qi of a per-row table: the last one whose q0 <= qi (runs of no rows share q0
 * with the next). */
__device__ static inline int32_t run_of_query(const struct att_run *runs, int32_t n_runs, int32_t qi) {
    int32_t lo = 0, hi = n_runs - 1;
    while (lo < hi) {
        int32_t mid = (lo + hi + 1) / 2;
        if (runs[mid].q0 <= qi)
            lo = mid;
        else
            hi = mid - 1;
    }
    return lo;
}

/*
 * grid (queries, n_heads, splits), ATT_WARPS warps. DPL = dims per lane (head_dim <= 32 * DPL): lane
 * `lane` holds dims lane, lane + 32, ... of the query and of its share of the output. part NULL: every
 * row has one split and the block writes its output; else block (qi, h, z) writes its split's max, sum
 * and weighted values to part[(qi * n_heads + h) * ATT_MAX_SPLITS + z] (dh + 2 floats) for merge_splits.
 */
template <int DPL>
static __global__ void __launch_bounds__(ATT_WARPS * 32)
    attn_kernel(const float *__restrict__ q, const struct att_run *__restrict__ runs, int32_t n_runs,
                const struct att_span *__restrict__ spans, int32_t n_heads, int32_t n_kv_heads, int32_t dh, float scale,
                float *__restrict__ o, float *__restrict__ part) {
    __shared__ float sm_m[ATT_WARPS], sm_l[ATT_WARPS];
    __shared__ float sm_acc[ATT_WARPS][32 * DPL];
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const int32_t qi = (int32_t)blockIdx.x, h = (int32_t)blockIdx.y, z = (int32_t)blockIdx.z;

    const struct att_run run = runs[run_of_query(runs, n_runs, qi)];
    const int32_t i = qi - run.q0;
    const int64_t row = run.row0 + i;
    const int64_t n_keys = (int64_t)run.n_past + i + 1;
    const int32_t splits = row_splits(n_keys);
    if (z >= splits) /* the launch's z covers its longest row */
        return;
    const int64_t chunk = (n_keys + splits - 1) / splits;
    const int64_t k_begin = (int64_t)z * chunk, k_end = k_begin + chunk < n_keys ? k_begin + chunk : n_keys;
    const int32_t kvh = h / (n_heads / n_kv_heads);
    const int64_t kv_dim = (int64_t)n_kv_heads * dh;

    float qr[DPL], acc[DPL];
    const float *qv = q + (row * n_heads + h) * dh;
#pragma unroll
    for (int t = 0; t < DPL; t++) {
        int d = lane + 32 * t;
        qr[t] = d < dh ? qv[d] : 0.0f;
        acc[t] = 0.0f;
    }
    float m = -INFINITY, l = 0.0f;

    int64_t key0 = 0; /* first key of the span */
    for (int32_t sp = 0; sp < run.n_spans && key0 < k_end; sp++) {
        const struct att_span span = spans[run.span0 + sp];
        /* this split's keys of the span: rows [r0, r1) */
        int64_t r0 = k_begin > key0 ? k_begin - key0 : 0;
        int64_t r1 = span.n < k_end - key0 ? span.n : k_end - key0;
        for (int64_t r = r0 + warp; r < r1; r += ATT_WARPS) {
            const float *kp = span.k + r * kv_dim + (int64_t)kvh * dh;
            const float *vp = span.v + r * kv_dim + (int64_t)kvh * dh;
            float dot = 0.0f;
#pragma unroll
            for (int t = 0; t < DPL; t++) {
                int d = lane + 32 * t;
                if (d < dh)
                    dot += qr[t] * kp[d];
            }
            float s = warp_sum(dot) * scale;
            if (s > m) { /* a new max: rescale what was summed so far (nothing when m was -inf) */
                float corr = m == -INFINITY ? 0.0f : expf(m - s);
                l *= corr;
#pragma unroll
                for (int t = 0; t < DPL; t++)
                    acc[t] *= corr;
                m = s;
            }
            float p = expf(s - m);
            l += p;
#pragma unroll
            for (int t = 0; t < DPL; t++) {
                int d = lane + 32 * t;
                if (d < dh)
                    acc[t] += p * vp[d];
            }
        }
        key0 += span.n;
    }

    /* merge the warps: o = sum_w acc_w * e^(m_w - M) / sum_w l_w * e^(m_w - M) */
    if (lane == 0) {
        sm_m[warp] = m;
        sm_l[warp] = l;
    }
#pragma unroll
    for (int t = 0; t < DPL; t++)
        sm_acc[warp][lane + 32 * t] = acc[t];
    __syncthreads();
    if (threadIdx.x < dh) {
        float mx = -INFINITY;
        for (int w = 0; w < ATT_WARPS; w++)
            mx = fmaxf(mx, sm_m[w]);
        float sum = 0.0f, out = 0.0f;
        for (int w = 0; w < ATT_WARPS; w++) {
            if (sm_m[w] == -INFINITY) /* a warp that saw no key */
                continue;
            float f = expf(sm_m[w] - mx);
            sum += sm_l[w] * f;
            out += sm_acc[w][threadIdx.x] * f;
        }
        if (!part) {
            o[(row * n_heads + h) * dh + threadIdx.x] = out / sum;
            return;
        }
        float *pz = part + ((int64_t)(qi * n_heads + h) * ATT_MAX_SPLITS + z) * (dh + 2);
        if (threadIdx.x == 0) {
            pz[0] = mx;
            pz[1] = sum;
        }
        pz[2 + threadIdx.x] = out;
    }
}

/* grid (queries, n_heads), head_dim threads: a row's splits merged as attn_kernel merges its warps. */
static __global__ void merge_splits(const struct att_run *__restrict__ runs, int32_t n_runs, int32_t n_heads,
                                    int32_t dh, const float *__restrict__ part, float *__restrict__ o) {
    const int32_t qi = (int32_t)blockIdx.x, h = (int32_t)blockIdx.y;
    const struct att_run run = runs[run_of_query(runs, n_runs, qi)];
    const int32_t i = qi - run.q0;
    const int32_t splits = row_splits((int64_t)run.n_past + i + 1);
    const float *p = part + (int64_t)(qi * n_heads + h) * ATT_MAX_SPLITS * (dh + 2);
    float mx = -INFINITY;
    for (int32_t z = 0; z < splits; z++)
        mx = fmaxf(mx, p[z * (dh + 2)]);
    float sum = 0.0f, out = 0.0f;
    for (int32_t z = 0; z < splits; z++) {
        const float *pz = p + z * (dh + 2);
        float f = expf(pz[0] - mx);
        sum += pz[1] * f;
        out += pz[2 + threadIdx.x] * f;
    }
    o[(run.row0 + i) * n_heads * dh + (int64_t)h * dh + threadIdx.x] = out / sum;
}

/*
 * One group of runs: the flattened tables built on the host and staged, then two launches: runs of at
 * least ATT_TILE_MIN_ROWS rows in tiles (cuda-attention-tile.cu, when it takes the shape), the others
 * (decode steps, short pieces) with the per-row kernel, grid (their queries, heads). Each kind has its
 * own run table (the per-row kernel finds a query's run by q0 among its own); both share the spans.
 */
static void attention_group(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                            const struct jev_attn_run *runs, int32_t n_runs, float *o) {
    const bool tiled = !be->attn_per_row && jev_cuda_attention_tiled_fits(be, s);
    const int32_t tile_rows = tiled ? jev_cuda_attention_tile_rows(s) : 1;
    int64_t n_spans = 0, n_tiles = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        n_spans += runs[r].n_spans;
        if (tiled && runs[r].n >= ATT_TILE_MIN_ROWS)
            n_tiles += (runs[r].n + tile_rows - 1) / tile_rows;
    }
    JEV_ASSERT(n_spans <= INT32_MAX && n_tiles <= INT32_MAX);

    size_t run_bytes = (size_t)n_runs * sizeof(struct att_run), span_bytes = (size_t)n_spans * sizeof(struct att_span);
    size_t tile_bytes = (size_t)n_tiles * sizeof(struct att_tile);
    struct att_run *row_runs = (struct att_run *)malloc(run_bytes), *tile_runs = (struct att_run *)malloc(run_bytes);
    struct att_span *hs = (struct att_span *)malloc(span_bytes > 0 ? span_bytes : 1);
    struct att_tile *ht = (struct att_tile *)malloc(tile_bytes > 0 ? tile_bytes : 1);
    JEV_ASSERT(row_runs != NULL && tile_runs != NULL && hs != NULL && ht != NULL);
    int32_t n_row_runs = 0, n_tile_runs = 0, q0 = 0, span0 = 0, t = 0;
    for (int32_t r = 0; r < n_runs; r++) {
        const struct jev_attn_run *a = &runs[r];
        for (int32_t sp = 0; sp < a->n_spans; sp++)
            hs[span0 + sp] = {a->spans[sp].k, a->spans[sp].v, a->spans[sp].n};
        if (tiled && a->n >= ATT_TILE_MIN_ROWS) {
            for (int32_t i0 = 0; i0 < a->n; i0 += tile_rows)
                ht[t++] = {n_tile_runs, i0};
            tile_runs[n_tile_runs++] = {a->row0, a->n, a->n_past, 0, span0, a->n_spans, 0};
        } else if (a->n > 0) {
            row_runs[n_row_runs++] = {a->row0, a->n, a->n_past, q0, span0, a->n_spans, 0};
            q0 += a->n;
        }
        span0 += a->n_spans;
    }
    const int64_t n_queries = q0; /* the per-row kernel's */
    int32_t splits = 1;           /* its longest row's */
    for (int32_t r = 0; r < n_row_runs; r++) {
        int32_t sr = row_splits((int64_t)row_runs[r].n_past + row_runs[r].n);
        splits = sr > splits ? sr : splits;
    }
    jev_cuda_stage_reset(be);
    const struct att_span *ds = (const struct att_span *)jev_cuda_stage(be, hs, span_bytes > 0 ? span_bytes : 1);
    const struct att_run *dr = NULL, *dt_runs = NULL;
    const struct att_tile *dt = NULL;
    if (n_queries > 0)
        dr = (const struct att_run *)jev_cuda_stage(be, row_runs, (size_t)n_row_runs * sizeof(struct att_run));
    if (n_tiles > 0) {
        dt_runs = (const struct att_run *)jev_cuda_stage(be, tile_runs, (size_t)n_tile_runs * sizeof(struct att_run));
        dt = (const struct att_tile *)jev_cuda_stage(be, ht, tile_bytes);
    }
    free(row_runs);
    free(tile_runs);
    free(hs);
    free(ht);

    if (n_tiles > 0)
        jev_cuda_attention_tiled(be, s, q, dt_runs, ds, dt, (int32_t)n_tiles, o);
    if (n_queries == 0)
        return;
    /* the splits' partial results: only when some row splits (a launch of short rows writes o directly) */
    float *part = NULL;
    if (splits > 1) {
        part = jev_cuda_work(be, (size_t)n_queries * (size_t)s->n_heads * ATT_MAX_SPLITS * (size_t)(s->head_dim + 2) *
                                     sizeof(float));
        if (!part) /* jev_cuda_work recorded the failure */
            return;
    }
    dim3 grid((unsigned)n_queries, (unsigned)s->n_heads, (unsigned)splits);
    if (s->head_dim <= 64)
        attn_kernel<2><<<grid, ATT_WARPS * 32, 0, be->stream>>>(q, dr, n_row_runs, ds, s->n_heads, s->n_kv_heads,
                                                                s->head_dim, s->scale, o, part);
    else if (s->head_dim <= 128)
        attn_kernel<4><<<grid, ATT_WARPS * 32, 0, be->stream>>>(q, dr, n_row_runs, ds, s->n_heads, s->n_kv_heads,
                                                                s->head_dim, s->scale, o, part);
    else
        attn_kernel<8><<<grid, ATT_WARPS * 32, 0, be->stream>>>(q, dr, n_row_runs, ds, s->n_heads, s->n_kv_heads,
                                                                s->head_dim, s->scale, o, part);
    jev_cuda_check(be, cudaGetLastError(), "attention");
    if (part) {
        merge_splits<<<dim3((unsigned)n_queries, (unsigned)s->n_heads), (unsigned)s->head_dim, 0, be->stream>>>(
            dr, n_row_runs, s->n_heads, s->head_dim, part, o);
        jev_cuda_check(be, cudaGetLastError(), "attention merge");
    }
}

void jev_cuda_attention(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                        const struct jev_attn_run *runs, int32_t n_runs, float *o) {
    if (n_runs <= 0)
        return;
    JEV_ASSERT(s->head_dim > 0 && s->head_dim <= ATT_MAX_DH);
    JEV_ASSERT(s->n_kv_heads > 0 && s->n_heads % s->n_kv_heads == 0);
    /* runs in groups whose tables fit the staging area (one group unless contexts are very long and many:
     * a run holds ceil(tokens / 64) spans plus its fork depth); each group is one launch, and the stream
     * order lets a group's tables overwrite the previous group's once that launch has run */
    for (int32_t g0 = 0; g0 < n_runs;) {
        int32_t g1 = g0;
        size_t bytes = 0;
        while (g1 < n_runs) {
            /* a run's entry, its spans and at most one tile per row */
            size_t more = sizeof(struct att_run) + (size_t)runs[g1].n_spans * sizeof(struct att_span) +
                          (size_t)runs[g1].n * sizeof(struct att_tile) + 3 * 256;
            if (g1 > g0 && bytes + more + 1024 > JEV_CUDA_STAGE_BYTES)
                break;
            bytes += more;
            g1++;
        }
        attention_group(be, s, q, runs + g0, g1 - g0, o);
        g0 = g1;
    }
}

/* ---- vision attention ---- */

/* The max (is_max) or the sum of v over the block, in every thread; red holds 32 floats. */
__device__ static float block_reduce(float v, bool is_max, float *red) {
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, n_warps = (blockDim.x + 31) >> 5;
    for (int off = 16; off > 0; off >>= 1) {
        float o = __shfl_xor_sync(0xffffffffu, v, off);
        v = is_max ? fmaxf(v, o) : v + o;
    }
    __syncthreads(); /* red may still be read by a previous call */
    if (lane == 0)
        red[warp] = v;
    __syncthreads();
    float r = red[0];
    for (int w = 1; w < n_warps; w++)
        r = is_max ? fmaxf(r, red[w]) : r + red[w];
    return r;
}

/*
 * Row softmax in place, one block per row of n: p = expf(s - max) / sum, the same f32 values in both
 * forms. BF16 (fast mode): p is stored rounded to bf16 (jev_f32_to_bf16) over the first half of the
 * row's own f32 scores, so that row r's bf16 probabilities start at element 2 n r of the buffer as
 * bf16 (P V reads them with ld 2 n) and fast mode needs no second [H][qb][n] array. The last pass
 * goes in chunks of blockDim.x values: chunk c's bf16 stores cover the f32 values
 * [c B / 2, c B / 2 + B / 2) (B = blockDim.x), which chunk c itself reads when c = 0 (hence the
 * barrier between the chunk's loads and its stores) and which lie before chunk c's loads
 * otherwise; no later chunk reads them.
 */
template <bool BF16>
static __global__ void __launch_bounds__(VIS_SOFTMAX_THREADS) softmax_rows_kernel(float *__restrict__ s, int64_t n) {
    __shared__ float red[32];
    float *row = s + (int64_t)blockIdx.x * n;
    float mx = -INFINITY;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
        mx = fmaxf(mx, row[j]);
    mx = block_reduce(mx, true, red);
    float sum = 0.0f;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
        float e = expf(row[j] - mx);
        row[j] = e;
        sum += e;
    }
    sum = block_reduce(sum, false, red);
    if (!BF16) {
        for (int64_t j = threadIdx.x; j < n; j += blockDim.x)
            row[j] = row[j] / sum;
        return;
    }
    uint16_t *ph = (uint16_t *)row;
    for (int64_t c0 = 0; c0 < n; c0 += blockDim.x) { /* the same trip count in every thread: barriers below */
        const int64_t j = c0 + threadIdx.x;
        const float p = j < n ? row[j] / sum : 0.0f; /* this thread's own e_j, stored above */
        __syncthreads();
        if (j < n)
            ph[j] = jev_f32_to_bf16(p);
    }
}

/* cuBLAS statuses are recorded like CUDA errors: cudaErrorUnknown with the call in the where-string. */
static void blas_check(struct jev_backend *be, cublasStatus_t st, const char *where) {
    if (st != CUBLAS_STATUS_SUCCESS)
        jev_cuda_check(be, cudaErrorUnknown, where);
}

/* Fast mode's Q, K, V: qkv[count] rounded to bf16 into be->vh, grown (synchronizing) only past the
 * largest call so far, as cuda-matmul.cu's xh. NULL when it cannot be had (recorded). */
static const uint16_t *vision_qkv_bf16(struct jev_backend *be, const float *qkv, int64_t count) {
    size_t bytes = (size_t)count * sizeof(uint16_t);
    if (bytes > be->vh_bytes) {
        cudaStreamSynchronize(be->stream); /* queued ops may still read the old block */
        jev_cuda_free(be, be->vh);
        size_t want = bytes + bytes / 4;
        be->vh = (uint16_t *)jev_cuda_malloc(be, want);
        be->vh_bytes = be->vh ? want : 0;
        if (!be->vh) {
            jev_cuda_check(be, cudaErrorMemoryAllocation, "vision attention (fast): the bf16 Q, K, V");
            return NULL;
        }
    }
    jev_cuda_to_bf16(be, qkv, count, be->vh);
    return be->vh;
}

void jev_cuda_vision_attention(struct jev_backend *be, const float *qkv, int64_t n, int32_t n_heads, int32_t head_dim,
                               float scale, float *out) {
    if (n <= 0 || n_heads <= 0)
        return;
    const int64_t dim = (int64_t)n_heads * head_dim, ld = 3 * dim;
    const bool fast = be->precision == JEV_PRECISION_FAST;
    JEV_ASSERT(n <= INT32_MAX && ld <= INT32_MAX && (!fast || 2 * n <= INT32_MAX));
    /* queries per block: all of them unless [H][qb][n] scores would pass VIS_SCORE_BYTES */
    int64_t qb = (int64_t)(VIS_SCORE_BYTES / sizeof(float)) / ((int64_t)n_heads * n);
    if (qb < 1)
        qb = 1;
    if (qb > n)
        qb = n;
    float *sc = jev_cuda_work(be, (size_t)n_heads * (size_t)qb * (size_t)n * sizeof(float));
    if (!sc) /* jev_cuda_work recorded the failure; writing through NULL would kill the context */
        return;
    const uint16_t *qkvh = fast ? vision_qkv_bf16(be, qkv, n * ld) : NULL;
    if (fast && !qkvh)
        return;
    const float one = 1.0f, zero = 0.0f;
    for (int64_t q0 = 0; q0 < n; q0 += qb) {
        int64_t nq = n - q0 < qb ? n - q0 : qb;
        cublasStatus_t st;
        if (!fast) {
            const float *qp = qkv + q0 * ld, *kp = qkv + dim, *vp = qkv + 2 * dim;
            /* S^T (n x nq per head) = op_T(K^T) . Q^T, scaled */
            st =
                cublasSgemmStridedBatched(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)nq, head_dim, &scale, kp,
                                          (int)ld, head_dim, qp, (int)ld, head_dim, &zero, sc, (int)n, nq * n, n_heads);
            blas_check(be, st, "cublasSgemmStridedBatched (vision attention scores)");
            softmax_rows_kernel<false><<<(unsigned)(n_heads * nq), VIS_SOFTMAX_THREADS, 0, be->stream>>>(sc, n);
            jev_cuda_check(be, cudaGetLastError(), "vision attention (softmax)");
            /* O^T (hd x nq per head, ld dim) = V^T . P^T */
            st = cublasSgemmStridedBatched(be->blas, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, (int)nq, (int)n, &one, vp,
                                           (int)ld, head_dim, sc, (int)n, nq * n, &zero, out + q0 * dim, (int)dim,
                                           head_dim, n_heads);
            blas_check(be, st, "cublasSgemmStridedBatched (vision attention values)");
            continue;
        }
        /* fast: the same two products on bf16 Q, K, V and P, f32 accumulation on tensor cores, f32 S */
        const uint16_t *qh = qkvh + q0 * ld, *kh = qkvh + dim, *vh = qkvh + 2 * dim;
        st = cublasGemmStridedBatchedEx(be->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)n, (int)nq, head_dim, &scale, kh,
                                        CUDA_R_16BF, (int)ld, head_dim, qh, CUDA_R_16BF, (int)ld, head_dim, &zero, sc,
                                        CUDA_R_32F, (int)n, nq * n, n_heads, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        blas_check(be, st, "cublasGemmStridedBatchedEx bf16 (vision attention scores, fast)");
        softmax_rows_kernel<true><<<(unsigned)(n_heads * nq), VIS_SOFTMAX_THREADS, 0, be->stream>>>(sc, n);
        jev_cuda_check(be, cudaGetLastError(), "vision attention (softmax, fast)");
        /* P as bf16: row r of [H][nq] at element 2 n r of sc (the softmax kernel's layout) */
        const uint16_t *ph = (const uint16_t *)sc;
        st = cublasGemmStridedBatchedEx(be->blas, CUBLAS_OP_N, CUBLAS_OP_N, head_dim, (int)nq, (int)n, &one, vh,
                                        CUDA_R_16BF, (int)ld, head_dim, ph, CUDA_R_16BF, (int)(2 * n), nq * 2 * n,
                                        &zero, out + q0 * dim, CUDA_R_32F, (int)dim, head_dim, n_heads,
                                        CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        blas_check(be, st, "cublasGemmStridedBatchedEx bf16 (vision attention values, fast)");
    }
}

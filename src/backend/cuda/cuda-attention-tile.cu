/*
 * cuda-attention-tile.cu - the LM's causal GQA attention for runs of many query rows (a prefill, a
 * question's suffix), in tiles that share their K/V loads.
 *
 * Why: the per-row kernel (cuda-attention.cu) gives every (query row, query head) its own block,
 * which reads each of the row's keys from memory and reduces every dot product across a warp with
 * shuffles. At 64 decisions (2,304 suffix rows over a 532-token prefix) that took 1.36 ms a layer,
 * 14 % of exact mode's device time (H100, kernel table of run 9). Here one block takes a tile of
 * query rows of one run and the query heads of one K/V head (32 (row, head) pairs: 8 rows for the
 * 0.8B model's 4 query heads per K/V head), loads 32 keys and their values at a time into shared
 * memory once for all 32 pairs, and each lane computes a whole dot product (lane = key), so no
 * shuffle reduction per key.
 *
 * Per warp: 4 pairs. Per key tile: scores s = q . k * scale (lane j: key k0 + j; keys past the row's
 * causal limit or past the run's keys are -inf), then the online softmax per pair: m' = max(m, max_j
 * s_j), l = l e^(m - m') + sum_j e^(s_j - m'), acc = acc e^(m - m') + sum_j e^(s_j - m') v_j (lane
 * holds dims lane + 32 t of acc), and o = acc / l at the end. Mathematically the CPU's two-pass
 * softmax; only the f32 rounding order differs (tests/cuda/test-cuda-attention.c: NMSE 1e-7 against
 * the CPU). A row's sums depend on its own keys and the fixed tile boundaries (multiples of 32 from
 * key 0) only, not on the rows beside it in its tile or batch.
 *
 * Shared memory: the tile's queries [32 pairs][dh], keys [32][dh + 1] (padded: lane j reads row j,
 * column d, conflict-free) and values [32][dh]: 98 KB at dh 256, opted in once per backend.
 */
extern "C" {
#include "base/error.h" // defines: JEV_ASSERT (a C header without its own extern "C")
}
#include "backend/cuda/cuda-attention-int.h" // defines: struct att_run, struct att_span, struct att_tile
#include "backend/cuda/cuda-int.h"           // defines: struct jev_backend, jev_cuda_check

#include <math.h>
#include <stdint.h>

#define TILE_KEYS 32
#define TILE_WARPS 8
#define TILE_THREADS (TILE_WARPS * 32)
#define TILE_PAIRS 32                 /* (query row, query head) pairs per block */
#define PPW (TILE_PAIRS / TILE_WARPS) /* pairs per warp */

/* Floats of dynamic shared memory for head_dim dh. */
static size_t tile_shared_floats(int32_t dh) {
    return (size_t)TILE_PAIRS * dh + (size_t)TILE_KEYS * (dh + 1) + (size_t)TILE_KEYS * dh;
}

__device__ static inline float tile_warp_max(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, off));
    return v;
}

__device__ static inline float tile_warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* grid (tiles, n_kv_heads), TILE_THREADS threads; head_dim = 32 * DPL. */
template <int DPL>
static __global__ void __launch_bounds__(TILE_THREADS)
    attn_tile_kernel(const float *__restrict__ q, const struct att_run *__restrict__ runs,
                     const struct att_span *__restrict__ spans, const struct att_tile *__restrict__ tiles,
                     int32_t n_heads, int32_t n_kv_heads, float scale, float *__restrict__ o) {
    constexpr int DH = 32 * DPL;
    extern __shared__ float4 sm4[];        /* float4: the dynamic area 16-byte aligned */
    float *sq = (float *)sm4;              /* [TILE_PAIRS][DH] */
    float *sk = sq + TILE_PAIRS * DH;      /* [TILE_KEYS][DH + 1] */
    float *sv = sk + TILE_KEYS * (DH + 1); /* [TILE_KEYS][DH], 16-byte aligned: 64 DH + 32 floats in */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    const struct att_tile tile = tiles[blockIdx.x];
    const struct att_run run = runs[tile.run];
    const int32_t kvh = (int32_t)blockIdx.y, group = n_heads / n_kv_heads, rows = TILE_PAIRS / group;
    const int64_t kv_dim = (int64_t)n_kv_heads * DH;
    const struct att_span *rs = spans + run.span0;

    /* keys the tile's last row sees, within the keys the spans hold */
    const int32_t last = (tile.i0 + rows < run.n ? tile.i0 + rows : run.n) - 1;
    int64_t avail = 0;
    for (int32_t s = 0; s < run.n_spans; s++)
        avail += rs[s].n;
    const int64_t n_keys = (int64_t)run.n_past + last + 1 < avail ? (int64_t)run.n_past + last + 1 : avail;

    /* the queries: pair p = (row i0 + p / group, head kvh * group + p % group); rows past the run are 0 */
    for (int idx = threadIdx.x; idx < TILE_PAIRS * DH / 4; idx += TILE_THREADS) {
        const int p = idx / (DH / 4), d4 = idx % (DH / 4);
        const int32_t i = tile.i0 + p / group;
        float4 v = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        if (i < run.n)
            v = *(const float4 *)(q + ((run.row0 + i) * n_heads + kvh * group + p % group) * DH + d4 * 4);
        *(float4 *)(sq + p * DH + d4 * 4) = v;
    }

    float m[PPW], l[PPW], acc[PPW][DPL];
    int64_t lim[PPW]; /* keys pair k sees (0: a row past the run) */
#pragma unroll
    for (int k = 0; k < PPW; k++) {
        const int32_t i = tile.i0 + (warp * PPW + k) / group;
        lim[k] = i < run.n ? (int64_t)run.n_past + i + 1 : 0;
        m[k] = -INFINITY;
        l[k] = 0.0f;
#pragma unroll
        for (int t = 0; t < DPL; t++)
            acc[k][t] = 0.0f;
    }

    int32_t sp = 0;      /* the span holding key k0 ... */
    int64_t sp_base = 0; /* ... and its first key */
    for (int64_t k0 = 0; k0 < n_keys; k0 += TILE_KEYS) {
        __syncthreads(); /* the previous tile's readers are done (the first time: the queries are written) */
        while (sp < run.n_spans - 1 && k0 >= sp_base + rs[sp].n) {
            sp_base += rs[sp].n;
            sp++;
        }
        for (int idx = threadIdx.x; idx < TILE_KEYS * DH / 4; idx += TILE_THREADS) {
            const int j = idx / (DH / 4), d4 = idx % (DH / 4);
            const int64_t kg = k0 + j;
            float4 kv = make_float4(0.0f, 0.0f, 0.0f, 0.0f), vv = kv; /* zeros past the keys: 0 * p stays 0 */
            if (kg < n_keys) {
                int32_t s = sp;
                int64_t base = sp_base;
                while (s < run.n_spans - 1 && kg >= base + rs[s].n) {
                    base += rs[s].n;
                    s++;
                }
                const int64_t off = (kg - base) * kv_dim + (int64_t)kvh * DH + d4 * 4;
                kv = *(const float4 *)(rs[s].k + off);
                vv = *(const float4 *)(rs[s].v + off);
            }
            float *kr = sk + j * (DH + 1) + d4 * 4;
            kr[0] = kv.x;
            kr[1] = kv.y;
            kr[2] = kv.z;
            kr[3] = kv.w;
            *(float4 *)(sv + j * DH + d4 * 4) = vv;
        }
        __syncthreads();

        /* scores: lane = key */
        const int64_t kg = k0 + lane;
        const float *kr = sk + lane * (DH + 1);
        float s[PPW];
#pragma unroll
        for (int k = 0; k < PPW; k++)
            s[k] = 0.0f;
        for (int d = 0; d < DH; d += 4) {
            const float k0v = kr[d], k1v = kr[d + 1], k2v = kr[d + 2], k3v = kr[d + 3];
#pragma unroll
            for (int k = 0; k < PPW; k++) {
                const float4 qv = *(const float4 *)(sq + (warp * PPW + k) * DH + d);
                s[k] += qv.x * k0v;
                s[k] += qv.y * k1v;
                s[k] += qv.z * k2v;
                s[k] += qv.w * k3v;
            }
        }
        /* the online softmax, pair by pair: p = e^(s - m'), the old sums rescaled by e^(m - m') */
        float p[PPW];
#pragma unroll
        for (int k = 0; k < PPW; k++) {
            const float sc = kg < lim[k] && kg < n_keys ? s[k] * scale : -INFINITY;
            const float mn = fmaxf(m[k], tile_warp_max(sc)); /* the same in every lane */
            if (mn == -INFINITY) {                           /* no key of this pair yet */
                p[k] = 0.0f;
                continue;
            }
            const float corr = m[k] == -INFINITY ? 0.0f : expf(m[k] - mn);
            p[k] = sc == -INFINITY ? 0.0f : expf(sc - mn);
            l[k] = l[k] * corr + tile_warp_sum(p[k]);
            m[k] = mn;
#pragma unroll
            for (int t = 0; t < DPL; t++)
                acc[k][t] *= corr;
        }
        /* acc += p . V: each value row read once for the warp's pairs */
        const int jn = n_keys - k0 < TILE_KEYS ? (int)(n_keys - k0) : TILE_KEYS;
        for (int j = 0; j < jn; j++) {
            float vv[DPL];
#pragma unroll
            for (int t = 0; t < DPL; t++)
                vv[t] = sv[j * DH + lane + 32 * t];
#pragma unroll
            for (int k = 0; k < PPW; k++) {
                const float pj = __shfl_sync(0xffffffffu, p[k], j);
#pragma unroll
                for (int t = 0; t < DPL; t++)
                    acc[k][t] += pj * vv[t];
            }
        }
    }

#pragma unroll
    for (int k = 0; k < PPW; k++) {
        if (lim[k] == 0)
            continue;
        const int pair = warp * PPW + k;
        const int64_t row = run.row0 + tile.i0 + pair / group;
        float *op = o + (row * n_heads + kvh * group + pair % group) * DH;
#pragma unroll
        for (int t = 0; t < DPL; t++)
            op[lane + 32 * t] = acc[k][t] / l[k];
    }
}

/* ---- host side ---- */

int32_t jev_cuda_attention_tile_rows(const struct jev_attn_shape *s) {
    return TILE_PAIRS / (s->n_heads / s->n_kv_heads);
}

bool jev_cuda_attention_tiled_fits(const struct jev_backend *be, const struct jev_attn_shape *s) {
    const int32_t dh = s->head_dim;
    if (dh != 64 && dh != 128 && dh != 256)
        return false;
    if (s->n_kv_heads <= 0 || s->n_heads % s->n_kv_heads != 0)
        return false;
    const int32_t group = s->n_heads / s->n_kv_heads;
    return group > 0 && TILE_PAIRS % group == 0 && tile_shared_floats(dh) * sizeof(float) <= be->shared_optin;
}

/* Allows the head size's kernel its shared memory, once per backend and head size. */
static void tile_set_shared(struct jev_backend *be, int which, const void *kernel, size_t bytes) {
    jev_cuda_allow_shared(be, &be->attn_tile_shared[which], kernel, bytes, "attention (tiled) shared memory");
}

void jev_cuda_attention_tiled(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                              const struct att_run *runs, const struct att_span *spans, const struct att_tile *tiles,
                              int32_t n_tiles, float *o) {
    if (n_tiles <= 0)
        return;
    JEV_ASSERT(jev_cuda_attention_tiled_fits(be, s));
    const size_t bytes = tile_shared_floats(s->head_dim) * sizeof(float);
    const dim3 grid((unsigned)n_tiles, (unsigned)s->n_kv_heads);
    cudaStream_t st = be->stream;
    if (s->head_dim == 64) {
        tile_set_shared(be, 0, (const void *)attn_tile_kernel<2>, bytes);
        attn_tile_kernel<2>
            <<<grid, TILE_THREADS, bytes, st>>>(q, runs, spans, tiles, s->n_heads, s->n_kv_heads, s->scale, o);
    } else if (s->head_dim == 128) {
        tile_set_shared(be, 1, (const void *)attn_tile_kernel<4>, bytes);
        attn_tile_kernel<4>
            <<<grid, TILE_THREADS, bytes, st>>>(q, runs, spans, tiles, s->n_heads, s->n_kv_heads, s->scale, o);
    } else {
        tile_set_shared(be, 2, (const void *)attn_tile_kernel<8>, bytes);
        attn_tile_kernel<8>
            <<<grid, TILE_THREADS, bytes, st>>>(q, runs, spans, tiles, s->n_heads, s->n_kv_heads, s->scale, o);
    }
    jev_cuda_check(be, cudaGetLastError(), "attention (tiled)");
}

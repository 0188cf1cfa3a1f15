/*
 * cuda-pointwise.cu - the CUDA forms of the cheap ops: norms, elementwise math, the LM's q/gate split,
 * rotary and DeltaNet gates, the vision rotary and position add, and the embedding lookup.
 *
 * Each op is memory-bound, so the kernels stay plain: one thread per element (or per rotated pair), in
 * grid-stride loops with int64 indices (a prefill's n * d passes 2^31), and one block per row for the
 * norms, whose sums are a tree reduction in f32 (a different order from the CPU's index-order sum: the
 * parity tests allow NMSE 1e-7). Every formula is the CPU scalar reference's, term for term and with
 * the same libm functions (expf, tanhf, erff, log1pf, 1.0f / sqrtf); nothing here uses the fast-math
 * intrinsics. Rounding still differs by the sum order and by nvcc's contraction of a*b + c into one
 * FMA (rope, layernorm, the position add: at most 1 ulp per op); the tanh-form GELU relies on that
 * contraction to match the CPU's AVX2 fmadd.
 *
 * In place: where ops.h lets y be x, each output element is written by the thread that read it (and the
 * norms read the whole row before the reduction's barrier), so aliasing is safe.
 *
 * Host arrays (embed's ids, vision_pos_add's idx and weights) are staged into the backend's staging
 * area at the start of the op (cuda-int.h); n == 0 queues nothing.
 */

#include "backend/cuda/cuda-int.h"         // defines: struct jev_backend, jev_cuda_stage, jev_cuda_check, the launchers
#include "backend/cuda/cuda-weights-int.h" // defines: jev_cuda_wget (embed, vision_pos_add)

#include <math.h>

/* Threads per block of the elementwise kernels. */
#define PW_THREADS 256
/* Most threads per block of the row kernels (the norms). */
#define ROW_THREADS 256

/* ---- launch geometry ---- */

/* Blocks for a grid-stride loop over `count` items: enough to fill the device, capped so that the loop
 * (not the grid) covers the rest of a large tensor. */
static unsigned pw_blocks(const struct jev_backend *be, int64_t count) {
    int64_t want = (count + PW_THREADS - 1) / PW_THREADS;
    int64_t cap = (int64_t)(be->n_sm > 0 ? be->n_sm : 1) * 32;
    return (unsigned)(want < cap ? want : cap);
}

/* Blocks for one-block-per-row kernels (they loop over rows beyond the grid). */
static unsigned row_blocks(int64_t n) { return (unsigned)(n < (1 << 30) ? n : (1 << 30)); }

/* Threads per row block: whole warps (the reduction shuffles full warps), no more than the row needs. */
static unsigned row_threads(int32_t d) {
    int32_t t = (d + 31) / 32 * 32;
    return (unsigned)(t < ROW_THREADS ? t : ROW_THREADS);
}

#define GRID_STRIDE(i, count)                                                                                          \
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < (count); i += (int64_t)gridDim.x * blockDim.x)

/* ---- block reduction ---- */

__device__ static float warp_sum(float v) {
    for (int off = 16; off > 0; off >>= 1)
        v += __shfl_xor_sync(0xffffffffu, v, off);
    return v;
}

/* The sum of v over the block, returned to every thread. blockDim.x is a multiple of 32. Ends with a
 * barrier, so that a second call (layernorm's variance) may reuse the shared slots. */
__device__ static float block_sum(float v) {
    __shared__ float part[ROW_THREADS / 32];
    __shared__ float total;
    const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, n_warps = blockDim.x / 32;
    v = warp_sum(v);
    if (lane == 0)
        part[warp] = v;
    __syncthreads();
    if (warp == 0) {
        v = lane < n_warps ? part[lane] : 0.0f;
        v = warp_sum(v);
        if (lane == 0)
            total = v;
    }
    __syncthreads();
    float t = total;
    __syncthreads();
    return t;
}

/* 1 / sqrt(mean(x^2) + eps) of one row (jev_cpu_rms_inv's formula); every thread of the block gets it. */
__device__ static float row_rms_inv(const float *xr, int32_t d, float eps) {
    float ss = 0.0f;
    for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
        ss += xr[i] * xr[i];
    ss = block_sum(ss);
    return 1.0f / sqrtf(ss / (float)d + eps);
}

/* ---- norms ---- */

__global__ static void rmsnorm_kernel(const float *x, const float *w, int64_t n, int32_t d, float eps, float *y) {
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float inv = row_rms_inv(xr, d, eps);
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = xr[i] * inv * w[i];
    }
}

void jev_cuda_rmsnorm(struct jev_backend *be, const float *x, const float *w, int64_t n, int32_t d, float eps,
                      float *y) {
    if (n <= 0 || d <= 0)
        return;
    rmsnorm_kernel<<<row_blocks(n), row_threads(d), 0, be->stream>>>(x, w, n, d, eps, y);
    jev_cuda_check(be, cudaGetLastError(), "rmsnorm");
}

/* add_kernel's sum per element, written back, then rmsnorm_kernel's arithmetic on the row: each thread
 * re-reads only the elements it wrote (the same strided walk), so no barrier is needed before the sum. */
__global__ static void add_rmsnorm_kernel(float *x, const float *y, const float *w, int64_t n, int32_t d, float eps,
                                          float *h) {
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        float *xr = x + r * d;
        const float *yr = y + r * d;
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
            xr[i] = xr[i] + yr[i];
        float inv = row_rms_inv(xr, d, eps);
        float *hr = h + r * d;
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
            hr[i] = xr[i] * inv * w[i];
    }
}

void jev_cuda_add_rmsnorm(struct jev_backend *be, float *x, const float *y, const float *w, int64_t n, int32_t d,
                          float eps, float *h) {
    if (n <= 0 || d <= 0)
        return;
    add_rmsnorm_kernel<<<row_blocks(n), row_threads(d), 0, be->stream>>>(x, y, w, n, d, eps, h);
    jev_cuda_check(be, cudaGetLastError(), "add_rmsnorm");
}

__global__ static void layernorm_kernel(const float *x, const float *w, const float *b, int64_t n, int32_t d, float eps,
                                        float *y) {
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * d;
        float *yr = y + r * d;
        float s = 0.0f;
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
            s += xr[i];
        float mean = block_sum(s) / (float)d;
        float v = 0.0f;
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
            v += (xr[i] - mean) * (xr[i] - mean);
        float var = block_sum(v) / (float)d;
        float inv = 1.0f / sqrtf(var + eps);
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x)
            yr[i] = (xr[i] - mean) * inv * w[i] + b[i];
    }
}

void jev_cuda_layernorm(struct jev_backend *be, const float *x, const float *w, const float *b, int64_t n, int32_t d,
                        float eps, float *y) {
    if (n <= 0 || d <= 0)
        return;
    layernorm_kernel<<<row_blocks(n), row_threads(d), 0, be->stream>>>(x, w, b, n, d, eps, y);
    jev_cuda_check(be, cudaGetLastError(), "layernorm");
}

/* HF Qwen3_5RMSNormGated: w * (x * inv), then times silu(z), in that order (cpu-lm.c). */
__global__ static void gated_rmsnorm_kernel(const float *x, const float *z, const float *w, int64_t n, int32_t d,
                                            float eps, float *y) {
    for (int64_t r = blockIdx.x; r < n; r += gridDim.x) {
        const float *xr = x + r * d, *zr = z + r * d;
        float *yr = y + r * d;
        float inv = row_rms_inv(xr, d, eps);
        for (int32_t i = threadIdx.x; i < d; i += blockDim.x) {
            float zi = zr[i];
            yr[i] = (w[i] * (xr[i] * inv)) * (zi / (1.0f + expf(-zi)));
        }
    }
}

void jev_cuda_gated_rmsnorm(struct jev_backend *be, const float *x, const float *z, const float *w, int64_t n,
                            int32_t d, float eps, float *y) {
    if (n <= 0 || d <= 0)
        return;
    gated_rmsnorm_kernel<<<row_blocks(n), row_threads(d), 0, be->stream>>>(x, z, w, n, d, eps, y);
    jev_cuda_check(be, cudaGetLastError(), "gated_rmsnorm");
}

/* ---- elementwise ---- */

__global__ static void add_kernel(float *x, const float *y, int64_t n) {
    GRID_STRIDE(i, n) { x[i] += y[i]; }
}

void jev_cuda_add(struct jev_backend *be, float *x, const float *y, int64_t n) {
    if (n <= 0)
        return;
    add_kernel<<<pw_blocks(be, n), PW_THREADS, 0, be->stream>>>(x, y, n);
    jev_cuda_check(be, cudaGetLastError(), "add");
}

__global__ static void add_bias_kernel(float *y, const float *b, int64_t count, int32_t d) {
    GRID_STRIDE(i, count) { y[i] += b[i % d]; }
}

void jev_cuda_add_bias(struct jev_backend *be, float *y, const float *b, int64_t n, int32_t d) {
    int64_t count = n * (int64_t)d;
    if (count <= 0)
        return;
    add_bias_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(y, b, count, d);
    jev_cuda_check(be, cudaGetLastError(), "add_bias");
}

/* silu(g) * up = g / (1 + e^-g) * up, the scalar reference's form. */
__global__ static void swiglu_kernel(const float *gate, const float *up, int64_t n, float *out) {
    GRID_STRIDE(i, n) {
        float g = gate[i];
        out[i] = g / (1.0f + expf(-g)) * up[i];
    }
}

void jev_cuda_swiglu(struct jev_backend *be, const float *gate, const float *up, int64_t n, float *out) {
    if (n <= 0)
        return;
    swiglu_kernel<<<pw_blocks(be, n), PW_THREADS, 0, be->stream>>>(gate, up, n, out);
    jev_cuda_check(be, cudaGetLastError(), "swiglu");
}

/*
 * gelu_pytorch_tanh: 0.5 v (1 + tanh(y)), y = sqrt(2/pi) (v + 0.044715 v^3), computed as the equal v / (1 + e^-2y),
 * the form the CPU table runs (cpu-elementwise.c, AVX2). Not 1 + tanhf(y): for v below about -3 that sum cancels
 * (tanh(y) is -1 + tiny) and keeps only a few bits of the tiny result, 1e-3 relative error where the CPU is within
 * 1e-6 of the exact value (tests/test-ops.c); e^-2y overflows to inf for very negative v and gives -0, as torch.
 */
__global__ static void gelu_tanh_kernel(float *x, int64_t n) {
    const float minus_2k = -2.0f * 0.7978845608028654f; /* -2 sqrt(2/pi) */
    GRID_STRIDE(i, n) {
        float v = x[i];
        float inner = v + 0.044715f * v * (v * v); /* v + 0.044715 v^3 */
        x[i] = v / (1.0f + expf(minus_2k * inner));
    }
}

/* exact GELU: 0.5 v (1 + erf(v / sqrt(2))) */
__global__ static void gelu_erf_kernel(float *x, int64_t n) {
    GRID_STRIDE(i, n) {
        float v = x[i];
        x[i] = 0.5f * v * (1.0f + erff(v * 0.7071067811865476f));
    }
}

void jev_cuda_gelu(struct jev_backend *be, float *x, int64_t n, bool tanh_form) {
    if (n <= 0)
        return;
    if (tanh_form)
        gelu_tanh_kernel<<<pw_blocks(be, n), PW_THREADS, 0, be->stream>>>(x, n);
    else
        gelu_erf_kernel<<<pw_blocks(be, n), PW_THREADS, 0, be->stream>>>(x, n);
    jev_cuda_check(be, cudaGetLastError(), "gelu");
}

/* A device-to-device copy on the stream: the copy engine does this better than a kernel. */
void jev_cuda_copy(struct jev_backend *be, float *dst, const float *src, int64_t n) {
    if (n <= 0 || dst == src)
        return;
    jev_cuda_check(be, cudaMemcpyAsync(dst, src, (size_t)n * sizeof(float), cudaMemcpyDeviceToDevice, be->stream),
                   "copy");
}

/* x[i] *= 1 / (1 + e^-gate[i]) */
__global__ static void sigmoid_mul_kernel(float *x, const float *gate, int64_t n) {
    GRID_STRIDE(i, n) { x[i] = x[i] * (1.0f / (1.0f + expf(-gate[i]))); }
}

void jev_cuda_sigmoid_mul(struct jev_backend *be, float *x, const float *gate, int64_t n) {
    if (n <= 0)
        return;
    sigmoid_mul_kernel<<<pw_blocks(be, n), PW_THREADS, 0, be->stream>>>(x, gate, n);
    jev_cuda_check(be, cudaGetLastError(), "sigmoid_mul");
}

/* ---- language model ---- */

/* Element i of q (and of gate) is element i % dh of (row, head) i / dh; qg holds per head [query dh | gate dh]. */
__global__ static void split_qgate_kernel(const float *qg, int64_t count, int32_t dh, float *q, float *gate) {
    GRID_STRIDE(i, count) {
        int64_t row_head = i / dh;
        int32_t e = (int32_t)(i - row_head * dh);
        const float *src = qg + row_head * 2 * dh;
        q[i] = src[e];
        gate[i] = src[dh + e];
    }
}

void jev_cuda_split_qgate(struct jev_backend *be, const float *qg, int64_t n, int32_t heads, int32_t dh, float *q,
                          float *gate) {
    int64_t count = n * heads * (int64_t)dh;
    if (count <= 0)
        return;
    split_qgate_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(qg, count, dh, q, gate);
    jev_cuda_check(be, cudaGetLastError(), "split_qgate");
}

/* One thread per rotated pair (d, d + n_freq) of one head of one token; dims from 2*n_freq pass through. */
__global__ static void rope_kernel(float *x, int64_t count, int32_t heads, int32_t dh, int32_t n_freq, const float *cos,
                                   const float *sin) {
    GRID_STRIDE(i, count) {
        int64_t row_head = i / n_freq;
        int32_t d = (int32_t)(i - row_head * n_freq);
        int64_t t = row_head / heads;
        float c = cos[t * n_freq + d], s = sin[t * n_freq + d];
        float *v = x + row_head * dh;
        /* HF: q*cos + rotate_half(q)*sin with rotate_half = cat(-x2, x1) */
        float x1 = v[d], x2 = v[d + n_freq];
        v[d] = x1 * c - x2 * s;
        v[d + n_freq] = x2 * c + x1 * s;
    }
}

void jev_cuda_rope(struct jev_backend *be, float *x, int64_t n, int32_t heads, int32_t dh, int32_t n_freq,
                   const float *cos, const float *sin) {
    int64_t count = n * heads * (int64_t)n_freq;
    if (count <= 0)
        return;
    rope_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(x, count, heads, dh, n_freq, cos, sin);
    jev_cuda_check(be, cudaGetLastError(), "rope");
}

/* g = -exp(a_log) * softplus(a + dt_bias) with torch's threshold 20, beta = sigmoid(b); [n][hv]. */
__global__ static void gdn_gates_kernel(const float *a, const float *b, const float *a_log, const float *dt_bias,
                                        int64_t count, int32_t hv, float *g, float *beta) {
    GRID_STRIDE(i, count) {
        int32_t h = (int32_t)(i % hv);
        float x = a[i] + dt_bias[h];
        float sp = x > 20.0f ? x : log1pf(expf(x));
        g[i] = -expf(a_log[h]) * sp;
        beta[i] = 1.0f / (1.0f + expf(-b[i]));
    }
}

void jev_cuda_gdn_gates(struct jev_backend *be, const float *a, const float *b, const float *a_log,
                        const float *dt_bias, int64_t n, int32_t hv, float *g, float *beta) {
    int64_t count = n * (int64_t)hv;
    if (count <= 0)
        return;
    gdn_gates_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(a, b, a_log, dt_bias, count, hv, g, beta);
    jev_cuda_check(be, cudaGetLastError(), "gdn_gates");
}

/* ---- embedding ---- */

/* out[t][c] = w[ids[t]][c] dequantized from the stored form: the CPU's values bit for bit (cuda-weights-int.h). */
__global__ static void embed_kernel(struct jev_matrix w, const int32_t *ids, int64_t count, float *out) {
    GRID_STRIDE(i, count) {
        int64_t t = i / w.cols;
        int32_t c = (int32_t)(i - t * w.cols);
        out[i] = jev_cuda_wget(&w, ids[t], c);
    }
}

void jev_cuda_embed(struct jev_backend *be, const struct jev_matrix *w, const int32_t *ids, int64_t n, float *out) {
    jev_cuda_bind(be);
    int64_t count = n * (int64_t)w->cols;
    if (count <= 0)
        return;
    jev_cuda_stage_reset(be);
    const int32_t *ids_dev = (const int32_t *)jev_cuda_stage(be, ids, (size_t)n * sizeof(int32_t));
    embed_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(*w, ids_dev, count, out);
    jev_cuda_check(be, cudaGetLastError(), "embed");
}

/* ---- vision ---- */

/* One thread per rotated pair (d, d + hd/2) of one head of q or k of one row:
 * x' = x * cos + rotate_half(x) * sin, rotate_half(x) = [-x2, x1], as cpu-vision.c writes it. */
__global__ static void vision_rope_kernel(float *qkv, const float *cos, const float *sin, int64_t count,
                                          int32_t n_heads, int32_t head_dim) {
    const int32_t half = head_dim / 2, dim = n_heads * head_dim;
    const int64_t pairs_per_row = 2 * (int64_t)n_heads * half; /* q and k */
    GRID_STRIDE(i, count) {
        int64_t r = i / pairs_per_row;
        int32_t rem = (int32_t)(i - r * pairs_per_row);
        int32_t part = rem / (n_heads * half); /* 0: q, 1: k */
        rem -= part * (n_heads * half);
        int32_t h = rem / half, d = rem - h * half;
        const float *c = cos + r * head_dim, *s = sin + r * head_dim;
        float *x = qkv + r * 3 * dim + (int64_t)part * dim + (int64_t)h * head_dim;
        float a = x[d], b = x[d + half];
        x[d] = a * c[d] + (-b) * s[d];
        x[d + half] = b * c[d + half] + a * s[d + half];
    }
}

void jev_cuda_vision_rope(struct jev_backend *be, float *qkv, const float *cos, const float *sin, int64_t n,
                          int32_t n_heads, int32_t head_dim) {
    int64_t count = n * 2 * n_heads * (int64_t)(head_dim / 2);
    if (count <= 0)
        return;
    vision_rope_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(qkv, cos, sin, count, n_heads, head_dim);
    jev_cuda_check(be, cudaGetLastError(), "vision_rope");
}

/* x[r][c] += ((t0*w0 + t1*w1) + t2*w2) + t3*w3 with t_k = table[idx[r][k]][c] (dequantized from the stored
 * form): torch sums the 4 taps first. */
__global__ static void vision_pos_add_kernel(struct jev_matrix table, const int32_t *idx, const float *w, int64_t count,
                                             float *x) {
    const int32_t d = table.cols;
    GRID_STRIDE(i, count) {
        int64_t r = i / d;
        int32_t c = (int32_t)(i - r * d);
        const int32_t *ir = idx + r * 4;
        const float *wr = w + r * 4;
        float pe = jev_cuda_wget(&table, ir[0], c) * wr[0];
        for (int k = 1; k < 4; k++)
            pe += jev_cuda_wget(&table, ir[k], c) * wr[k];
        x[i] += pe;
    }
}

void jev_cuda_vision_pos_add(struct jev_backend *be, const struct jev_matrix *table, const int32_t *idx, const float *w,
                             int64_t n, float *x) {
    int64_t count = n * (int64_t)table->cols;
    if (count <= 0)
        return;
    jev_cuda_stage_reset(be);
    const int32_t *idx_dev = (const int32_t *)jev_cuda_stage(be, idx, (size_t)n * 4 * sizeof(int32_t));
    const float *w_dev = (const float *)jev_cuda_stage(be, w, (size_t)n * 4 * sizeof(float));
    vision_pos_add_kernel<<<pw_blocks(be, count), PW_THREADS, 0, be->stream>>>(*table, idx_dev, w_dev, count, x);
    jev_cuda_check(be, cudaGetLastError(), "vision_pos_add");
}

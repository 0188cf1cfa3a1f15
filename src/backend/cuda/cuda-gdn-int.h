/*
 * cuda-gdn-int.h - what the delta rule's two kernel files share (cuda-gdn.cu: the conv and the
 * recurrent form; cuda-gdn-chunk.cu: the chunked form): the column slice width and the warp-level
 * L2 normalisation both forms apply to q and k. Device code, for nvcc only.
 */
#ifndef JEV_BACKEND_CUDA_GDN_INT_H
#define JEV_BACKEND_CUDA_GDN_INT_H

#include "backend/ops.h" // defines: struct jev_gdn_shape, struct jev_gdn_run

struct jev_backend;

#define RULE_COLS 16 /* state columns per block (both forms) */

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

/* The chunked form (cuda-gdn-chunk.cu): whether its kernels take shape s on this device, and the launcher for
 * runs that are all chunked and at least a chunk long (jev_cuda_gdn_rule picks them). */
bool jev_cuda_gdn_chunk_fits(const struct jev_backend *be, const struct jev_gdn_shape *s);
void jev_cuda_gdn_rule_chunked(struct jev_backend *be, const struct jev_gdn_shape *s, const float *u, const float *g,
                               const float *beta, const struct jev_gdn_run *runs, int32_t n_runs, float *o);

#endif

/*
 * cpu-small-gemm.c - matrix products and a triangular solve for the small,
 * fixed shapes inside one pool task (the delta rule's 64-token chunks:
 * 64 x 64 x 128 and 64 x 128 x 128), in AVX2.
 *
 * Why not OpenBLAS: at these sizes a single-threaded sgemm or strsm call
 * costs more in its set-up (buffer allocation under a global lock, packing)
 * than in its arithmetic; with 16 pool threads calling it at once the delta
 * rule ran at 3 GFLOP/s per thread on a 16-core Xeon (measured). These
 * kernels read the operands in place: a register tile of 4 rows x 16
 * columns of C, the inner dimension as the loop, one broadcast of A and two
 * loads of B per step.
 *
 * Numerics: every element of C is one chain of f32 FMAs over k in index
 * order, scaled by alpha and added to beta * C at the end; the solve is
 * forward substitution in index order. Results match BLAS within f32
 * rounding (tests/test-ops.c checks the delta rule against its scalar
 * reference).
 */
#include "backend/cpu/cpu.h" // defines: jev_cpu_small_gemm, jev_cpu_small_trsm_lower_unit

#include "backend/cpu/cpu-simd.h" // defines: the intrinsics (AVX2, or SIMDe on aarch64), JEV_AVX2

/* lanes [0, n) of 8 set, n clamped to 0..8 */
JEV_AVX2 static inline __m256i lane_mask(int n) {
    const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_cmpgt_epi32(_mm256_set1_epi32(n < 0 ? 0 : n > 8 ? 8 : n), idx);
}

/* One tile: rows [0, nr) (nr <= 4) x columns [0, nc) (nc <= 16) of C. Rows past nr repeat row 0 and are not stored. */
JEV_AVX2 static void tile(int nr, int nc, int K, const float *A, int64_t ai, int64_t ak, const float *B, int64_t ldb,
                          float alpha, float beta, float *C, int64_t ldc) {
    const float *a0 = A, *a1 = A + (nr > 1 ? ai : 0), *a2 = A + (nr > 2 ? 2 * ai : 0), *a3 = A + (nr > 3 ? 3 * ai : 0);
    __m256 c00 = _mm256_setzero_ps(), c01 = c00, c10 = c00, c11 = c00, c20 = c00, c21 = c00, c30 = c00, c31 = c00;
    __m256i m0 = lane_mask(nc), m1 = lane_mask(nc - 8);
    const bool full = nc == 16;
    for (int k = 0; k < K; k++) {
        const float *b = B + (int64_t)k * ldb;
        __m256 b0, b1;
        if (full) {
            b0 = _mm256_loadu_ps(b);
            b1 = _mm256_loadu_ps(b + 8);
        } else {
            b0 = _mm256_maskload_ps(b, m0);
            b1 = _mm256_maskload_ps(b + 8, m1);
        }
        int64_t o = (int64_t)k * ak;
        __m256 x0 = _mm256_broadcast_ss(a0 + o), x1 = _mm256_broadcast_ss(a1 + o);
        __m256 x2 = _mm256_broadcast_ss(a2 + o), x3 = _mm256_broadcast_ss(a3 + o);
        c00 = _mm256_fmadd_ps(x0, b0, c00);
        c01 = _mm256_fmadd_ps(x0, b1, c01);
        c10 = _mm256_fmadd_ps(x1, b0, c10);
        c11 = _mm256_fmadd_ps(x1, b1, c11);
        c20 = _mm256_fmadd_ps(x2, b0, c20);
        c21 = _mm256_fmadd_ps(x2, b1, c21);
        c30 = _mm256_fmadd_ps(x3, b0, c30);
        c31 = _mm256_fmadd_ps(x3, b1, c31);
    }
    __m256 acc[4][2] = {{c00, c01}, {c10, c11}, {c20, c21}, {c30, c31}};
    const __m256 va = _mm256_set1_ps(alpha), vb = _mm256_set1_ps(beta);
    for (int r = 0; r < nr; r++) {
        float *c = C + (int64_t)r * ldc;
        for (int h = 0; h < 2; h++) {
            __m256i m = h ? m1 : m0;
            __m256 v = _mm256_mul_ps(acc[r][h], va);
            if (beta != 0.0f) /* beta 0: C is not read (it may hold garbage) */
                v = _mm256_fmadd_ps(vb, full ? _mm256_loadu_ps(c + 8 * h) : _mm256_maskload_ps(c + 8 * h, m), v);
            if (full)
                _mm256_storeu_ps(c + 8 * h, v);
            else
                _mm256_maskstore_ps(c + 8 * h, m, v);
        }
    }
}

JEV_AVX2 void jev_cpu_small_gemm(int M, int N, int K, float alpha, const float *A, int64_t ai, int64_t ak,
                                 const float *B, int64_t ldb, float beta, float *C, int64_t ldc) {
    for (int i = 0; i < M; i += 4)
        for (int n = 0; n < N; n += 16)
            tile(M - i < 4 ? M - i : 4, N - n < 16 ? N - n : 16, K, A + (int64_t)i * ai, ai, ak, B + n, ldb, alpha,
                 beta, C + (int64_t)i * ldc + n, ldc);
}

JEV_AVX2 void jev_cpu_small_trsm_lower_unit(int L, int N, const float *T, int64_t ldt, float *X, int64_t ldx) {
    for (int i = 1; i < L; i++) {
        float *xi = X + (int64_t)i * ldx;
        for (int n = 0; n < N; n += 8) {
            __m256 acc = _mm256_loadu_ps(xi + n);
            for (int m = 0; m < i; m++)
                acc = _mm256_fnmadd_ps(_mm256_set1_ps(T[(int64_t)i * ldt + m]),
                                       _mm256_loadu_ps(X + (int64_t)m * ldx + n), acc);
            _mm256_storeu_ps(xi + n, acc);
        }
    }
}

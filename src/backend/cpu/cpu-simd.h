/*
 * cpu-simd.h - the intrinsics of the fast CPU kernels and the AVX2 helpers
 * they share: horizontal sum and max of 8 lanes, exp and SiLU of 8 lanes.
 * Include only from files whose AVX2 functions carry JEV_AVX2 and check
 * jev_cpu_has_avx2() at run time. The kernels include this, never
 * <immintrin.h>: on x86-64 it is the compiler's intrinsics; elsewhere
 * (aarch64) SIMDe's header-only implementation of the same names, which
 * compiles each to NEON (`make test-arm64` builds and runs them there).
 */
#ifndef JEV_BACKEND_CPU_SIMD_H
#define JEV_BACKEND_CPU_SIMD_H

#include "backend/cpu/cpu.h" // defines: JEV_AVX2, JEV_CPU_X86

#if JEV_CPU_X86
#include <immintrin.h>
#else
#define SIMDE_ENABLE_NATIVE_ALIASES /* the kernels keep the _mm256_* names */
#include <simde/x86/avx2.h>
#include <simde/x86/f16c.h>
#include <simde/x86/fma.h>
#endif

JEV_AVX2 static inline float jev_hsum8(__m256 v) {
    __m128 lo = _mm256_castps256_ps128(v);
    __m128 hi = _mm256_extractf128_ps(v, 1);
    lo = _mm_add_ps(lo, hi);
    lo = _mm_add_ps(lo, _mm_movehl_ps(lo, lo));
    lo = _mm_add_ss(lo, _mm_movehdup_ps(lo));
    return _mm_cvtss_f32(lo);
}

JEV_AVX2 static inline float jev_hmax8(__m256 v) {
    __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    m = _mm_max_ps(m, _mm_movehl_ps(m, m));
    m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
    return _mm_cvtss_f32(m);
}

/* exp(x) for 8 floats: Cephes expf (range reduction by ln 2 in two parts, degree-5 polynomial), within
 * 2 ulp of expf; inputs below -88.38 give 0 (what a softmax wants for far-below-max scores), above 88.38 clamp. */
JEV_AVX2 static inline __m256 jev_exp8(__m256 x) {
    const __m256 hi = _mm256_set1_ps(88.3762626647949f), lo = _mm256_set1_ps(-88.3762626647949f);
    x = _mm256_max_ps(_mm256_min_ps(x, hi), lo);
    __m256 fx = _mm256_floor_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(1.44269504088896341f), _mm256_set1_ps(0.5f)));
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(0.693359375f), x);
    x = _mm256_fnmadd_ps(fx, _mm256_set1_ps(-2.12194440e-4f), x);
    __m256 y = _mm256_set1_ps(1.9875691500E-4f);
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.3981999507E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(8.3334519073E-3f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(4.1665795894E-2f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(1.6666665459E-1f));
    y = _mm256_fmadd_ps(y, x, _mm256_set1_ps(5.0000001201E-1f));
    y = _mm256_fmadd_ps(y, _mm256_mul_ps(x, x), _mm256_add_ps(x, _mm256_set1_ps(1.0f)));
    __m256i e = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(fx), _mm256_set1_epi32(127)), 23);
    return _mm256_mul_ps(y, _mm256_castsi256_ps(e));
}

/* silu(x) = x / (1 + e^-x) for 8 floats, through jev_exp8 (SwiGLU, the DeltaNet conv). */
JEV_AVX2 static inline __m256 jev_silu8(__m256 x) {
    __m256 e = jev_exp8(_mm256_sub_ps(_mm256_setzero_ps(), x));
    return _mm256_div_ps(x, _mm256_add_ps(_mm256_set1_ps(1.0f), e));
}

#endif

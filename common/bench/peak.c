/*
 * peak.c - the f32 FMA peak of peak.h.
 *
 * Each thread keeps 12 independent accumulators of 8 lanes (AVX2) or 16
 * (AVX-512; more than the 2 FMA pipes x 4 cycles of latency need) and
 * multiply-adds them by constants that keep the values finite; the result is
 * stored so the loop cannot be dropped. A short calibration pass sizes the
 * iteration count for the wanted time, then one timed pass runs on all
 * threads at once.
 */
#include "common/bench/peak.h" // defines: struct jev_peak, jev_peak_f32

#include "backend/cpu/cpu-simd.h" // defines: the intrinsics (AVX2, or SIMDe on aarch64)
#include "backend/cpu/cpu.h"      // defines: JEV_AVX2, jev_cpu_has_avx2
#include "base/timing.h"          // defines: jev_now_ms

#include <stdbool.h>

#define ACC 12

struct peak_job {
    int64_t iters;       /* loop iterations per thread */
    volatile float sink; /* keeps the result alive */
};

JEV_AVX2 static void fma_loop(void *arg, int64_t task, int thread) {
    (void)task;
    (void)thread;
    struct peak_job *j = arg;
    __m256 acc[ACC];
    const __m256 m = _mm256_set1_ps(0.999999f), a = _mm256_set1_ps(1e-7f);
    for (int k = 0; k < ACC; k++)
        acc[k] = _mm256_set1_ps((float)k);
    for (int64_t i = 0; i < j->iters; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < ACC; k++)
            acc[k] = _mm256_fmadd_ps(acc[k], m, a);
    }
    __m256 s = acc[0];
    for (int k = 1; k < ACC; k++)
        s = _mm256_add_ps(s, acc[k]);
    float out[8];
    _mm256_storeu_ps(out, s);
    j->sink = out[0];
}

#if JEV_CPU_X86
__attribute__((target("avx512f"))) static void fma_loop_512(void *arg, int64_t task, int thread) {
    (void)task;
    (void)thread;
    struct peak_job *j = arg;
    __m512 acc[ACC];
    const __m512 m = _mm512_set1_ps(0.999999f), a = _mm512_set1_ps(1e-7f);
    for (int k = 0; k < ACC; k++)
        acc[k] = _mm512_set1_ps((float)k);
    for (int64_t i = 0; i < j->iters; i++) {
#pragma GCC unroll 12
        for (int k = 0; k < ACC; k++)
            acc[k] = _mm512_fmadd_ps(acc[k], m, a);
    }
    __m512 s = acc[0];
    for (int k = 1; k < ACC; k++)
        s = _mm512_add_ps(s, acc[k]);
    j->sink = _mm512_reduce_add_ps(s);
}

static bool has_avx512f(void) {
    return __builtin_cpu_supports("avx512f");
}
#else
#define fma_loop_512 fma_loop /* never chosen: has_avx512f is false */

static bool has_avx512f(void) {
    return false;
}
#endif

struct jev_peak jev_peak_f32(struct jev_pool *pool, double seconds) {
    struct jev_peak p = {0};
    if (!jev_cpu_has_avx2())
        return p; /* no AVX2 + FMA: no figure rather than a wrong one */
    const bool wide = has_avx512f();
    void (*loop)(void *, int64_t, int) = wide ? fma_loop_512 : fma_loop;
    const int lanes = wide ? 16 : 8;
    int threads = jev_pool_size(pool);
    /* calibrate on one thread */
    struct peak_job j = {.iters = 1 << 20};
    double t0 = jev_now_ms();
    loop(&j, 0, 0);
    double ms = jev_now_ms() - t0;
    if (ms <= 0)
        ms = 1e-3;
    j.iters = (int64_t)((double)j.iters * (seconds * 1e3) / ms);
    if (j.iters < (1 << 16))
        j.iters = 1 << 16;
    t0 = jev_now_ms();
    jev_pool_run(pool, threads, loop, &j);
    double sec = (jev_now_ms() - t0) * 1e-3;
    p.threads = threads;
    p.seconds = sec;
    p.isa = wide ? "avx512" : "avx2";
    p.gflops = (double)threads * (double)j.iters * ACC * lanes * 2 / sec / 1e9;
    return p;
}

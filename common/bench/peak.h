/*
 * peak.h - the machine's f32 peak, measured: an FMA loop of the widest
 * vectors the processor has (AVX-512 where it has it, else AVX2) on every
 * thread of a pool, reported in GFLOP/s (one FMA = 2 flops per lane).
 *
 * What it is: the number the benchmark puts next to the achieved GFLOP/s of
 * a forward, measured in the same run so that clocks, turbo and other load
 * affect both alike. The large products run in OpenBLAS, whose kernels use
 * AVX-512 where the processor has it, so an AVX2 loop there measured half
 * the machine and the engine's fractions of it passed 100 %. What it is
 * not: a memory-bandwidth figure, or the bf16 (AMX) peak of fast mode.
 */
#ifndef JEV_COMMON_BENCH_PEAK_H
#define JEV_COMMON_BENCH_PEAK_H

#include "base/pool.h" // defines: struct jev_pool

struct jev_peak {
    double gflops;  /* f32 GFLOP/s over all threads */
    int threads;    /* threads that ran the loop */
    double seconds; /* wall time of the measured pass */
    const char *isa; /* the loop's vectors: "avx512", "avx2" (NULL: none measured) */
};

/* Runs the FMA loop for about `seconds` on every thread of pool (NULL = caller only). */
struct jev_peak jev_peak_f32(struct jev_pool *pool, double seconds);

#endif

/*
 * peak.h - the machine's f32 peak, measured: an AVX2 FMA loop on every
 * thread of a pool, reported in GFLOP/s (one FMA = 2 flops per lane).
 *
 * What it is: the number the benchmark puts next to the achieved GFLOP/s of
 * a forward, measured in the same run so that clocks, turbo and other load
 * affect both alike. What it is not: a memory-bandwidth figure, or an
 * AVX-512 peak (the build targets x86-64-v3).
 */
#ifndef JEV_COMMON_BENCH_PEAK_H
#define JEV_COMMON_BENCH_PEAK_H

#include "base/pool.h" // defines: struct jev_pool

struct jev_peak {
    double gflops;  /* f32 GFLOP/s over all threads */
    int threads;    /* threads that ran the loop */
    double seconds; /* wall time of the measured pass */
};

/* Runs the FMA loop for about `seconds` on every thread of pool (NULL = caller only). */
struct jev_peak jev_peak_f32(struct jev_pool *pool, double seconds);

#endif

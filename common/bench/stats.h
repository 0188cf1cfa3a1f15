/*
 * stats.h - what the benchmark programs (the .c files of bench/) share for their samples and inputs: the median of
 * repeated timings and a seeded generator, so that every build of a program sees the same inputs.
 */
#ifndef JEV_COMMON_BENCH_STATS_H
#define JEV_COMMON_BENCH_STATS_H

#include <stdint.h>
#include <stdlib.h>

static inline int jev_bench_cmp_double(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

/* The median of v[0..n) (v sorted in place: v[0] and v[n - 1] are then the extremes). n > 0. */
static inline double jev_bench_median(double *v, int n) {
    qsort(v, (size_t)n, sizeof *v, jev_bench_cmp_double);
    return v[n / 2];
}

/* The next 32 bits of a 64-bit LCG (Knuth's MMIX constants) seeded by *s. */
static inline uint32_t jev_bench_lcg(uint64_t *s) {
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(*s >> 33);
}

#endif

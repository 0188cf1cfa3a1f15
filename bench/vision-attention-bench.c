/*
 * vision-attention-bench.c - the CPU's vision attention at the vision tower's shape (a benchmark, not a
 * test; `make build/bench/vision-attention-bench` builds it):
 *
 *   vision-attention-bench [--threads N] [--repeats N] [--patches N]
 *
 * One layer's bidirectional attention of Qwen3.5-0.8B's vision tower (12 heads of 64, the benchmark
 * photo's 1824 patches by default) through the op table, on seeded random q, k, v: the median time of
 * the repeats, GFLOP/s (two products of 2 x patches^2 x 64 per head) against the same run's FMA peak,
 * and the sha256 of the output's bytes, so that two builds can be compared for their bits as well as
 * their time.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/ops.h"        // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"          // defines: jev_pool_init
#include "base/sha256.h"        // defines: jev_sha256_hex
#include "base/timing.h"        // defines: jev_now_ms
#include "common/bench/peak.h"  // defines: jev_peak_f32
#include "common/bench/stats.h" // defines: jev_bench_lcg, jev_bench_median

#define HEADS 12
#define HEAD_DIM 64

int main(int argc, char **argv) {
    int threads = 0, repeats = 7, patches = 1824;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *dst = !strcmp(a, "--threads")   ? &threads
                   : !strcmp(a, "--repeats") ? &repeats
                   : !strcmp(a, "--patches") ? &patches
                                             : NULL;
        if (!dst || !v || (*dst = atoi(v)) < 0) {
            fprintf(stderr, "usage: vision-attention-bench [--threads N] [--repeats N (1..100)] [--patches N]\n");
            return 2;
        }
        i++;
    }
    if (repeats < 1 || repeats > 100 || patches < 1 || patches > 65536) {
        fprintf(stderr, "vision-attention-bench: --repeats 1..100, --patches 1..65536\n");
        return 2;
    }
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    if (jev_pool_init(&pool, threads, &err) != JEV_OK) {
        fprintf(stderr, "vision-attention-bench: %s\n", err.msg);
        return 1;
    }
    struct jev_backend *be = jev_cpu_backend_new(pool);
    const size_t dim = (size_t)HEADS * HEAD_DIM;
    float *qkv = malloc((size_t)patches * 3 * dim * sizeof(float)),
          *out = malloc((size_t)patches * dim * sizeof(float));
    double *ms = malloc((size_t)repeats * sizeof(double));
    if (!be || !qkv || !out || !ms) {
        fprintf(stderr, "vision-attention-bench: out of memory\n");
        return 1;
    }
    uint64_t seed = 1; /* the same inputs in every build */
    for (size_t i = 0; i < (size_t)patches * 3 * dim; i++)
        qkv[i] = (float)(jev_bench_lcg(&seed) % 2001) / 2000.0f - 0.5f;
    struct jev_peak peak = jev_peak_f32(pool, 0.5);
    const float scale = 0.125f;                                                  /* 64^-0.5 */
    jev_cpu_ops.vision_attention(be, qkv, patches, HEADS, HEAD_DIM, scale, out); /* warm-up */
    for (int r = 0; r < repeats; r++) {
        double t0 = jev_now_ms();
        jev_cpu_ops.vision_attention(be, qkv, patches, HEADS, HEAD_DIM, scale, out);
        ms[r] = jev_now_ms() - t0;
    }
    const double med = jev_bench_median(ms, repeats),
                 gflops = 4.0 * HEADS * (double)patches * patches * HEAD_DIM / med / 1e6;
    char hex[JEV_SHA256_HEX];
    jev_sha256_hex(out, (size_t)patches * dim * sizeof(float), hex);
    printf("vision-attention-bench: %d threads, %d patches, %d heads of %d, FMA peak %.1f GFLOP/s (%s)\n",
           jev_pool_size(pool), patches, HEADS, HEAD_DIM, peak.gflops, peak.isa ? peak.isa : "none");
    printf("median %.2f ms of %d (min %.2f, max %.2f), %.1f GFLOP/s, %.1f%% of peak, output sha256 %.16s\n", med,
           repeats, ms[0], ms[repeats - 1], gflops, peak.gflops > 0 ? 100.0 * gflops / peak.gflops : 0.0, hex);
    free(qkv), free(out), free(ms);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
    return 0;
}

/*
 * gemm-bench.c - exact mode's CPU products side by side at the model's shapes (a benchmark, not a
 * test; `make build/bench/gemm-bench` builds it):
 *
 *   gemm-bench [--threads N] [--repeats N] [--tokens M]
 *
 * For each shape of Qwen3.5-0.8B's products (the language model's 4-bit group-64 projections at a
 * prefill slice of M tokens, default 512, and at 64 suffix tokens; the vision tower's bf16 ones at
 * 1824 patches), the op table's matmul (the backend's own threading, dequantization included) with
 * each kernel this CPU has: "openblas" (cpu-matmul.c: dequantized tiles through single-threaded
 * sgemm) and "avx512" (cpu-gemm-avx512.c). Prints the median time of the repeats, GFLOP/s
 * (multiply-add = 2) and the fraction of the same run's FMA peak (common/bench/peak.c), and the
 * largest difference between the two kernels' outputs relative to the output's largest magnitude.
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"    // defines: jev_cpu_backend_new, jev_cpu_matmul_fast, enum jev_cpu_gemm
#include "backend/matrix.h"     // defines: struct jev_matrix
#include "base/half.h"          // defines: jev_f32_to_bf16
#include "base/pool.h"          // defines: jev_pool_init
#include "base/timing.h"        // defines: jev_now_ms
#include "common/bench/peak.h"  // defines: jev_peak_f32
#include "common/bench/stats.h" // defines: jev_bench_lcg, jev_bench_median

struct shape {
    const char *name;
    int32_t rows, cols;
    int tokens; /* 0: the --tokens value */
    int bf16;   /* bf16 weights (vision), else 4-bit group 64 with bf16 scales */
};

static const struct shape shapes[] = {
    {"lm in_proj_qkv (DeltaNet)", 6144, 1024, 0, 0},
    {"lm mlp gate/up", 3584, 1024, 0, 0},
    {"lm mlp down", 1024, 3584, 0, 0},
    {"lm attn o_proj", 1024, 2048, 0, 0},
    {"lm attn k/v", 512, 1024, 0, 0},
    {"lm mlp gate/up, 64 tokens", 3584, 1024, 64, 0},
    {"vision qkv", 2304, 768, 1824, 1},
    {"vision mlp fc1", 3072, 768, 1824, 1},
    {"vision mlp fc2", 768, 3072, 1824, 1},
};

/* A matrix of the shape's type with pseudo-random values (owned buffers in *bufs). */
static int make(const struct shape *s, struct jev_matrix *m, void *bufs[3]) {
    uint64_t seed = (uint64_t)s->rows * 31u + (uint64_t)s->cols;
    memset(m, 0, sizeof *m);
    m->rows = s->rows;
    m->cols = s->cols;
    m->name = s->name;
    size_t n = (size_t)s->rows * (size_t)s->cols;
    if (s->bf16) {
        uint16_t *d = malloc(n * sizeof *d);
        if (!d)
            return -1;
        for (size_t i = 0; i < n; i++)
            d[i] = jev_f32_to_bf16((float)(jev_bench_lcg(&seed) % 2001) / 1000.0f - 1.0f);
        m->type = JEV_MTYPE_BF16;
        m->data = bufs[0] = d;
        return 0;
    }
    size_t groups = n / 64;
    uint32_t *d = malloc(n / 8 * sizeof *d);
    uint16_t *sc = malloc(groups * sizeof *sc), *bi = malloc(groups * sizeof *bi);
    bufs[0] = d, bufs[1] = sc, bufs[2] = bi;
    if (!d || !sc || !bi)
        return -1;
    for (size_t i = 0; i < n / 8; i++)
        d[i] = jev_bench_lcg(&seed) ^ (jev_bench_lcg(&seed) << 16);
    for (size_t g = 0; g < groups; g++) {
        sc[g] = jev_f32_to_bf16(0.01f + (float)(jev_bench_lcg(&seed) % 100) / 10000.0f);
        bi[g] = jev_f32_to_bf16(-0.08f + (float)(jev_bench_lcg(&seed) % 100) / 10000.0f);
    }
    m->type = JEV_MTYPE_QAFFINE;
    m->bits = 4;
    m->group = 64;
    m->stype = JEV_STYPE_BF16;
    m->data = d, m->scales = sc, m->biases = bi;
    return 0;
}

int main(int argc, char **argv) {
    int threads = 0, repeats = 7, tokens = 512;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        int *dst = !strcmp(a, "--threads")   ? &threads
                   : !strcmp(a, "--repeats") ? &repeats
                   : !strcmp(a, "--tokens")  ? &tokens
                                             : NULL;
        if (!dst || !v || (*dst = atoi(v)) < 0) {
            fprintf(stderr, "usage: gemm-bench [--threads N] [--repeats N (1..100)] [--tokens M]\n");
            return 2;
        }
        i++;
    }
    if (repeats < 1 || repeats > 100 || tokens < 3) {
        fprintf(stderr, "gemm-bench: --repeats 1..100, --tokens 3 or more\n");
        return 2;
    }
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    if (jev_pool_init(&pool, threads, &err) != JEV_OK) {
        fprintf(stderr, "gemm-bench: %s\n", err.msg);
        return 1;
    }
    struct jev_backend *be = jev_cpu_backend_new(pool);
    enum jev_cpu_gemm ours;
    int kernels = jev_cpu_gemm_choose("avx512", &ours, &err) == JEV_OK ? 2 : 1; /* openblas, and avx512 where it runs */
    if (!be) {
        fprintf(stderr, "gemm-bench: no memory for the backend\n");
        return 1;
    }
    struct jev_peak peak = jev_peak_f32(pool, 0.5);
    printf("gemm-bench: %d threads, FMA peak %.1f GFLOP/s (%s), medians of %d\n", jev_pool_size(pool), peak.gflops,
           peak.isa ? peak.isa : "none", repeats);
    printf("%-28s %6s %6s %6s | %9s %7s %6s | %9s %7s %6s | %9s\n", "shape", "tokens", "rows", "cols", "openblas",
           "GF/s", "peak", "avx512", "GF/s", "peak", "max rel d");
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
        const struct shape *sh = &shapes[s];
        int64_t n = sh->tokens ? sh->tokens : tokens;
        struct jev_matrix m;
        void *bufs[3] = {NULL, NULL, NULL};
        float *x = malloc(sizeof(float) * (size_t)n * (size_t)sh->cols);
        float *y[2] = {malloc(sizeof(float) * (size_t)n * (size_t)sh->rows),
                       malloc(sizeof(float) * (size_t)n * (size_t)sh->rows)};
        if (make(sh, &m, bufs) != 0 || !x || !y[0] || !y[1]) {
            fprintf(stderr, "gemm-bench: out of memory\n");
            return 1;
        }
        uint64_t seed = 7;
        for (size_t i = 0; i < (size_t)n * (size_t)sh->cols; i++)
            x[i] = (float)(jev_bench_lcg(&seed) % 2001) / 1000.0f - 1.0f;
        double flops = 2.0 * (double)n * sh->rows * sh->cols, ms[2] = {0, 0};
        for (int k = 0; k < kernels; k++) {
            be->gemm = k == 0 ? JEV_CPU_GEMM_OPENBLAS : JEV_CPU_GEMM_AVX512;
            double t[100];
            jev_cpu_matmul_fast(be, &m, x, n, y[k]); /* warm-up */
            for (int r = 0; r < repeats; r++) {
                double t0 = jev_now_ms();
                jev_cpu_matmul_fast(be, &m, x, n, y[k]);
                t[r] = jev_now_ms() - t0;
            }
            ms[k] = jev_bench_median(t, repeats);
        }
        double big = 0, d = 0;
        for (int64_t i = 0; kernels == 2 && i < n * sh->rows; i++) {
            big = fmax(big, fabs((double)y[0][i]));
            d = fmax(d, fabs((double)y[0][i] - (double)y[1][i]));
        }
        printf("%-28s %6lld %6d %6d | %7.2fms %7.1f %5.1f%% | ", sh->name, (long long)n, sh->rows, sh->cols, ms[0],
               flops / ms[0] / 1e6, 100.0 * flops / ms[0] / 1e6 / peak.gflops);
        if (kernels == 2)
            printf("%7.2fms %7.1f %5.1f%% | %9.2g\n", ms[1], flops / ms[1] / 1e6,
                   100.0 * flops / ms[1] / 1e6 / peak.gflops, big > 0 ? d / big : d);
        else
            printf("%9s %7s %6s | %9s\n", "-", "-", "-", "-");
        fflush(stdout);
        free(x);
        free(y[0]);
        free(y[1]);
        for (int b = 0; b < 3; b++)
            free(bufs[b]);
    }
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
    return 0;
}

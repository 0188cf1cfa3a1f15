/*
 * cpu-scaling.c - how the CPU backend's building blocks scale with threads
 * (a benchmark, not a test; `make build/bench/cpu-scaling` builds it, scripts/device/scaling.sh runs it).
 *
 *   cpu-scaling [--max-threads N] [--tokens M] [--rows R] [--cols K] [--repeats N]
 *
 * For T = 1, 2, 4, ... up to N threads (default: all cores), prints
 * - the f32 FMA peak of T threads (common/bench/peak.c: AVX-512 where the CPU has it),
 * - "pool sgemm": the backend's prefill scheme, y[M][R] = x[M][K] . W^T split
 *   into T row shares of a pool job, each one single-threaded OpenBLAS call,
 * - "openblas":   the same product as one call with OpenBLAS's own T threads,
 * - "empty job":  the cost of one pool job of T no-op tasks (wake + join),
 * each the median of the repeats, in GFLOP/s (multiply-add = 2) or us.
 * Defaults are the LM's MLP up projection at a 512-token prefill.
 */
#include <cblas.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"          // defines: jev_pool_init, jev_pool_run
#include "base/timing.h"        // defines: jev_now_ms
#include "common/bench/peak.h"  // defines: jev_peak_f32
#include "common/bench/stats.h" // defines: jev_bench_median

struct share_job {
    const float *x, *w;
    float *y;
    int m, rows, cols, share;
};

static void share_task(void *arg, int64_t i, int thread) {
    (void)thread;
    const struct share_job *j = arg;
    int r0 = (int)i * j->share, nr = j->rows - r0 < j->share ? j->rows - r0 : j->share;
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, j->m, nr, j->cols, 1.0f, j->x, j->cols,
                j->w + (size_t)r0 * j->cols, j->cols, 0.0f, j->y + r0, j->rows);
}

static void nop_task(void *arg, int64_t i, int thread) {
    (void)arg;
    (void)i;
    (void)thread;
}

int main(int argc, char **argv) {
    int max_threads = jev_cpu_count(), m = 512, rows = 3584, cols = 1024, repeats = 7;
    for (int i = 1; i + 1 < argc; i += 2) {
        int v = atoi(argv[i + 1]);
        if (!strcmp(argv[i], "--max-threads"))
            max_threads = v;
        else if (!strcmp(argv[i], "--tokens"))
            m = v;
        else if (!strcmp(argv[i], "--rows"))
            rows = v;
        else if (!strcmp(argv[i], "--cols"))
            cols = v;
        else if (!strcmp(argv[i], "--repeats"))
            repeats = v;
        else {
            fprintf(stderr, "cpu-scaling: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (max_threads < 1 || m < 1 || rows < 1 || cols < 1 || repeats < 1 || repeats > 100) {
        fprintf(stderr, "cpu-scaling: bad sizes\n");
        return 2;
    }
    float *x = malloc(sizeof(float) * (size_t)m * cols), *w = malloc(sizeof(float) * (size_t)rows * cols),
          *y = malloc(sizeof(float) * (size_t)m * rows);
    if (!x || !w || !y)
        return 1;
    for (size_t i = 0; i < (size_t)m * cols; i++)
        x[i] = (float)(i % 97) / 97.0f - 0.5f;
    for (size_t i = 0; i < (size_t)rows * cols; i++)
        w[i] = (float)(i % 89) / 89.0f - 0.5f;
    double flops = 2.0 * m * (double)rows * cols, t[100];
    printf("cpu-scaling: %d cores online; product %d x %d x %d (%.2f GFLOP); %s\n", jev_cpu_count(), m, rows, cols,
           flops / 1e9, openblas_get_config());
    const char *isa = NULL; /* the peak loop's vectors, named under the table */
    printf("%7s %12s %16s %14s %14s\n", "threads", "peak GF/s", "pool sgemm GF/s", "openblas GF/s", "empty job us");
    for (int threads = 1; threads <= max_threads;
         threads = threads * 2 > max_threads && threads < max_threads ? max_threads : threads * 2) {
        struct jev_error err;
        struct jev_pool *pool = NULL;
        if (jev_pool_init(&pool, threads, &err) != JEV_OK) {
            fprintf(stderr, "cpu-scaling: %s\n", err.msg);
            return 1;
        }
        struct jev_peak peak = jev_peak_f32(pool, 0.3);
        openblas_set_num_threads(1);
        struct share_job j = {x, w, y, m, rows, cols, (rows + threads - 1) / threads};
        jev_pool_run(pool, threads, share_task, &j); /* warm-up */
        for (int r = 0; r < repeats; r++) {
            double t0 = jev_now_ms();
            jev_pool_run(pool, (rows + j.share - 1) / j.share, share_task, &j);
            t[r] = jev_now_ms() - t0;
        }
        double pool_gf = flops / (jev_bench_median(t, repeats) * 1e6);
        openblas_set_num_threads(threads);
        cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, rows, cols, 1.0f, x, cols, w, cols, 0.0f, y, rows);
        for (int r = 0; r < repeats; r++) {
            double t0 = jev_now_ms();
            cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, rows, cols, 1.0f, x, cols, w, cols, 0.0f, y, rows);
            t[r] = jev_now_ms() - t0;
        }
        double blas_gf = flops / (jev_bench_median(t, repeats) * 1e6);
        openblas_set_num_threads(1);
        for (int r = 0; r < 100; r++) {
            double t0 = jev_now_ms();
            jev_pool_run(pool, threads, nop_task, NULL);
            t[r] = (jev_now_ms() - t0) * 1e3;
        }
        printf("%7d %12.1f %16.1f %14.1f %14.1f\n", threads, peak.gflops, pool_gf, blas_gf, jev_bench_median(t, 100));
        fflush(stdout);
        jev_pool_free(pool);
        isa = peak.isa;
    }
    printf("(peak: an FMA loop of %s vectors)\n", isa ? isa : "no");
    free(x);
    free(w);
    free(y);
    return 0;
}

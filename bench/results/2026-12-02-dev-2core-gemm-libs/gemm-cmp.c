/*
 * gemm-cmp.c - one f32 product y[M][R] = x[M][K] . W^T through three Debian-packaged BLAS-like libraries,
 * split over T threads by output rows as the CPU backend's pool does (each thread one single-threaded call),
 * median of 9 runs. A measurement program for this results directory (README.md says how it was built and
 * run), not part of the build. Usage: gemm-cmp M R K T.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#if defined(USE_BLIS)
#include <blis.h>
#define NAME "blis 0.9.0 (serial)"
static void gemm(int m, int n, int k, const float *a, const float *b, float *c, int ldc) {
    float one = 1.0f, zero = 0.0f;
    bli_sgemm(BLIS_NO_TRANSPOSE, BLIS_TRANSPOSE, m, n, k, &one, (float *)a, k, 1, (float *)b, k, 1, &zero, c, ldc, 1);
}
#elif defined(USE_DNNL)
#include <dnnl.h>
#define NAME "oneDNN 2.6.3"
static void gemm(int m, int n, int k, const float *a, const float *b, float *c, int ldc) {
    dnnl_sgemm('N', 'T', m, n, k, 1.0f, a, k, b, k, 0.0f, c, ldc);
}
#else
#include <cblas.h>
#define NAME "OpenBLAS 0.3.21 (1 thread a call)"
static void gemm(int m, int n, int k, const float *a, const float *b, float *c, int ldc) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a, k, b, k, 0.0f, c, ldc);
}
#endif
struct job { int m, n, k, ldc; const float *a, *b; float *c; };
static void *run(void *p) { struct job *j = p; gemm(j->m, j->n, j->k, j->a, j->b, j->c, j->ldc); return NULL; }
static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
static int cmp(const void *x, const void *y) { double a = *(const double *)x, b = *(const double *)y; return a < b ? -1 : a > b; }
int main(int argc, char **argv) {
    int m = atoi(argv[1]), r = atoi(argv[2]), k = atoi(argv[3]), threads = atoi(argv[4]);
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * r * k), *c = malloc(sizeof(float) * m * r);
    for (long i = 0; i < (long)m * k; i++) a[i] = (float)((i * 7) % 13) * 0.1f;
    for (long i = 0; i < (long)r * k; i++) b[i] = (float)((i * 5) % 11) * 0.1f;
    double t[9];
    for (int rep = 0; rep < 9; rep++) {
        pthread_t th[16]; struct job j[16];
        int share = (r + threads - 1) / threads;
        double t0 = now();
        for (int i = 0; i < threads; i++) {
            int r0 = i * share, nr = r - r0 < share ? r - r0 : share;
            j[i] = (struct job){m, nr, k, r, a, b + (size_t)r0 * k, c + r0};
            pthread_create(&th[i], NULL, run, &j[i]);
        }
        for (int i = 0; i < threads; i++) pthread_join(th[i], NULL);
        t[rep] = now() - t0;
    }
    qsort(t, 9, sizeof t[0], cmp);
    printf("%-36s %5d x %5d x %5d, %d threads: %7.1f GFLOP/s (median of 9)\n", NAME, m, r, k, threads, 2.0 * m * r * k / t[4] / 1e9);
    return 0;
}

/*
 * cuda-test.h - what the CUDA op parity tests share (tests/cuda/test-cuda-*.c).
 *
 * Each test runs one op on the CPU backend (the reference: the same table
 * tests/test-ops.c checks against the scalar forms) and on the CUDA backend
 * over the same inputs, downloads the result and compares with NMSE, as
 * tests/test-ops.c does. The CUDA backend comes from the registry
 * (backend/registry.h, entry "cuda"), as the engine gets it. These binaries
 * are built with `make CUDA=1 cuda-tests` and run on the GPU machine
 * (scripts/device/cuda-check.sh): CI has
 * no GPU, so they are not part of `make test`.
 *
 * Header-only on purpose: each test binary is one translation unit.
 */
#ifndef JEV_TESTS_CUDA_TEST_H
#define JEV_TESTS_CUDA_TEST_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <execinfo.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "backend/cpu/cpu.h"  // defines: jev_cpu_ops, jev_cpu_backend_new
#include "backend/registry.h" // defines: jev_backend_find, struct jev_backend_reg
#include "base/pool.h"        // defines: jev_pool_init
#include "../test-matrices.h" // defines: mat_nmse (and the host matrices)

#define CT_NMSE_F32 1e-7

static struct jev_pool *ct_pool;
static struct jev_backend *ct_cpu;           /* reference */
static struct jev_backend *ct_gpu;           /* under test */
static const struct jev_backend_reg *ct_reg; /* the registry's CUDA entry */
static const struct jev_ops *ct_ops;         /* its op table */

/* The GPU machine has no gdb (cuda-gdb is there, and debugs host code too): a crash prints its
 * address and the stack (module+offset pairs for addr2line against the unstripped binary). Run
 * with CMOCKA_TEST_ABORT=1 so that cmocka leaves SIGSEGV to this handler instead of catching it
 * per test (it cannot catch a fault in another thread). */
static void ct_crash(int sig, siginfo_t *info, void *ctx) {
    (void)ctx;
    char line[96];
    int n = snprintf(line, sizeof line, "\ncrash: signal %d at address %p, stack:\n", sig, info->si_addr);
    if (write(2, line, (size_t)n) < 0) { /* nothing better to do in a signal handler */
    }
    void *frames[48];
    backtrace_symbols_fd(frames, backtrace(frames, 48), 2);
    _exit(128 + sig);
}

static int ct_setup(void **state) {
    (void)state;
    struct sigaction sa = {0};
    sa.sa_sigaction = ct_crash;
    sa.sa_flags = SA_SIGINFO;
    sigaction(SIGSEGV, &sa, NULL);
    sigaction(SIGBUS, &sa, NULL);
    struct jev_error err = {0};
    if (jev_pool_init(&ct_pool, 4, &err) != JEV_OK)
        return -1;
    ct_cpu = jev_cpu_backend_new(ct_pool);
    if (!(ct_reg = jev_backend_find("cuda"))) {
        fprintf(stderr, "cuda backend: not in the registry (these tests are built with make CUDA=1)\n");
        return -1;
    }
    ct_ops = ct_reg->ops;
    if (ct_reg->create(0, ct_pool, &ct_gpu, &err) != JEV_OK) {
        fprintf(stderr, "cuda backend: %s\n", err.msg);
        return -1;
    }
    return ct_cpu ? 0 : -1;
}

static int ct_teardown(void **state) {
    (void)state;
    ct_reg->destroy(ct_gpu);
    jev_cpu_backend_free(ct_cpu);
    jev_pool_free(ct_pool);
    return 0;
}

/* Deterministic data, as tests/test-ops.c: 0.1 + 2 cos(i), scaled. */
static inline float ct_det(int64_t i) { return 0.1f + 2.0f * (float)cos((double)i); }

static inline void ct_fill(float *x, int64_t n, int64_t seed, float scale) {
    for (int64_t i = 0; i < n; i++)
        x[i] = ct_det(i * 7 + seed) * scale;
}

/* Host float buffer of n (zeroed); freed with free(). */
static inline float *ct_host(int64_t n) {
    float *p = calloc((size_t)(n > 0 ? n : 1), sizeof(float));
    assert_non_null(p);
    return p;
}

/* A device copy of n host floats (or zeroed device floats when host is NULL). */
static inline float *ct_up(const float *host, int64_t n) {
    float *d = ct_ops->alloc(ct_gpu, (size_t)(n > 0 ? n : 1) * sizeof(float));
    assert_non_null(d);
    if (host)
        ct_ops->upload(ct_gpu, d, host, (size_t)n * sizeof(float));
    return d;
}

/* No queued op has failed so far (a launch error would otherwise show only as wrong numbers). */
static inline void ct_status_ok(const char *what) {
    struct jev_error err = {0};
    if (ct_ops->status(ct_gpu, &err) != JEV_OK)
        fail_msg("%s: %s", what, err.msg);
}

/* n device floats -> a new host buffer (freed with free()), after every queued op ran without a fault. */
static inline float *ct_down(const float *dev, int64_t n) {
    float *h = ct_host(n);
    ct_ops->download(ct_gpu, h, dev, (size_t)n * sizeof(float));
    ct_status_ok("a queued op");
    return h;
}

static inline void ct_free(void *dev) { ct_ops->free(ct_gpu, dev); }

/* Fails the test with the op's description when NMSE exceeds limit (or a value is not finite). */
static inline void ct_check(const char *what, const float *ref, const float *got, int64_t n, double limit) {
    for (int64_t i = 0; i < n; i++)
        if (!isfinite(got[i]) && isfinite(ref[i])) {
            fail_msg("%s: element %lld is %g on CUDA, %g on CPU", what, (long long)i, (double)got[i], (double)ref[i]);
        }
    double e = mat_nmse(ref, got, n);
    if (!(e <= limit))
        fail_msg("%s: NMSE %.3g above %.1g", what, e, limit);
}

/* The same check on a device result: downloads, compares, frees the host copy. */
static inline void ct_check_dev(const char *what, const float *ref, const float *dev, int64_t n, double limit) {
    float *got = ct_down(dev, n);
    ct_check(what, ref, got, n, limit);
    free(got);
}

/* The CUDA backend's mirror of a host matrix (its stored form on the device). */
static inline struct jev_matrix ct_mirror(const struct jev_matrix *host) {
    struct jev_matrix m;
    struct jev_error err = {0};
    if (ct_ops->matrix_mirror(ct_gpu, host, &m, &err) != JEV_OK)
        fail_msg("matrix_mirror %s: %s", host->name ? host->name : "?", err.msg);
    return m;
}

#endif

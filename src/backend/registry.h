/*
 * registry.h - the backends this build carries, between the engine and the
 * backends themselves (after ggml's ggml-backend-impl.h: a registry entry per
 * backend kind, an instance per engine).
 *
 * An entry names its backend ("cpu", "cuda"), gives its op table, and makes
 * and frees instances; it may describe an instance for the benchmark record.
 * The CPU entry is always there; the CUDA entry when the library was built
 * with `make CUDA=1`. Only registry.c (and the CUDA backend itself) know
 * which: every caller asks the registry (jev_backend_parse, jev_backend_find,
 * jev_backend_count / jev_backend_at), so no caller carries a build flag.
 *
 * Names: "cpu"; "cuda" or "cuda:N" (N = 0..255, the device ordinal). A name
 * the source tree knows but this build left out is JEV_ERR_UNSUPPORTED with
 * the build flag in the message ("build with make CUDA=1"); anything else is
 * JEV_ERR_INVALID_ARG listing the names.
 *
 * What it is not: the op contract (ops.h) or a plug-in loader: entries are
 * compiled in, the table is constant, and lookups are safe from any thread.
 */
#ifndef JEV_BACKEND_REGISTRY_H
#define JEV_BACKEND_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "backend/ops.h" // defines: struct jev_ops, struct jev_backend
#include "base/error.h"  // defines: enum jev_status, struct jev_error

struct jev_pool;

#define JEV_BACKEND_MAX_LIBS 4 /* libraries one backend reports (describe) */

/* What an instance runs on, for the benchmark's environment record. */
struct jev_backend_info {
    char device[256];                            /* the device's name ("NVIDIA H200"); "" = the host's CPU */
    char driver[64];                             /* the driver's version ("CUDA driver 13.0"); "" = none */
    int64_t memory_bytes;                        /* device memory; -1 = the backend uses host memory */
    int32_t n_libs;                              /* entries below */
    char lib_names[JEV_BACKEND_MAX_LIBS][32];    /* "cuda runtime", "cublas" */
    char lib_versions[JEV_BACKEND_MAX_LIBS][32]; /* "13.0", "13.1.0" */
};

/* One backend kind. Every slot is required unless it says what NULL means. */
struct jev_backend_reg {
    const char *name;          /* "cpu", "cuda": the name (and prefix of "cuda:N") */
    const struct jev_ops *ops; /* its op table (every instance shares it) */
    /* A new instance on device `device` (0 for a backend without devices) using pool's workers
     * (the engine's, not owned; a device backend may ignore it). Fails with a message naming the
     * device or what could not be allocated; *out is NULL then. */
    enum jev_status (*create)(int32_t device, struct jev_pool *pool, struct jev_backend **out, struct jev_error *err);
    /* Frees an instance made by create; NULL is a no-op. */
    void (*destroy)(struct jev_backend *be);
    /* Fills info with the instance's device, driver, memory and libraries. NULL: the backend runs
     * on the host and has nothing to add (jev_backend_describe leaves the defaults: "", "", -1,
     * no libraries). */
    void (*describe)(struct jev_backend *be, struct jev_backend_info *info);
};

/* The entries the backends define (cpu/cpu.c; cuda/cuda.c in a CUDA build). Use the lookups below:
 * only they know which entries this build has. */
extern const struct jev_backend_reg jev_backend_reg_cpu;
extern const struct jev_backend_reg jev_backend_reg_cuda;

/* Registered backends (at least 1: the CPU is entry 0), and entry i of them (NULL out of range). */
int32_t jev_backend_count(void);
const struct jev_backend_reg *jev_backend_at(int32_t i);

/* The registered entry called name ("cpu", "cuda"; no device suffix); NULL when this build has none. */
const struct jev_backend_reg *jev_backend_find(const char *name);

/* "cpu", "cuda" or "cuda:N" (NULL = "cpu") -> the entry and the device ordinal (0 unless ":N"). */
enum jev_status jev_backend_parse(const char *spec, const struct jev_backend_reg **reg, int32_t *device,
                                  struct jev_error *err);

/* info = the defaults, then the entry's describe (when it has one) of instance be. */
void jev_backend_describe(const struct jev_backend_reg *reg, struct jev_backend *be, struct jev_backend_info *info);

/* The build's backends as a line for `jev --version`: "cpu, cuda", or "cpu; make CUDA=1 adds cuda". */
void jev_backend_summary(char *out, size_t size);

/* "exact" or "fast" (jev_precision_name's names) -> *out; anything else is JEV_ERR_INVALID_ARG
 * naming the two (NULL = "exact"). */
enum jev_status jev_precision_parse(const char *name, enum jev_precision *out, struct jev_error *err);

#endif

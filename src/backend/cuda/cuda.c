/*
 * cuda.c - the CUDA backend: instance lifetime, memory, staging and the op
 * table. The kernels live in cuda-*.cu (cuda-int.h lists them).
 *
 * Why one stream per instance: the forward is a strict sequence of ops, so
 * one in-order stream gives their dependencies for free; the host only waits
 * where it reads results (download) and the profiler's sync. An engine is one
 * instance, as on the CPU.
 *
 * Errors: ops are queued and cannot fail one by one (ops.h); the first CUDA
 * error any of them sees is kept and reported by ops->status, which the model
 * layer asks after each forward. Creation, allocation and the weight mirror
 * fail directly with a message naming the device, the size or the tensor.
 */
#include "backend/cuda/cuda-int.h" // defines: struct jev_backend (CUDA), the launchers

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/registry.h" // defines: struct jev_backend_reg, struct jev_backend_info
#include "base/error.h"       // defines: jev_fail, JEV_ASSERT

static const char *blas_text(cublasStatus_t s) {
    switch (s) {
    case CUBLAS_STATUS_NOT_INITIALIZED: return "not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "allocation failed";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "architecture mismatch";
    default: return "error";
    }
}

enum jev_status jev_cuda_backend_new(int device, struct jev_backend **out, struct jev_error *err) {
    *out = NULL;
    int n_dev = 0;
    cudaError_t e = cudaGetDeviceCount(&n_dev);
    if (e != cudaSuccess)
        return jev_fail(err, JEV_ERR_CUDA, "cuda: no usable device (%s)", cudaGetErrorString(e));
    if (device < 0 || device >= n_dev)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "cuda: device %d does not exist (%d found)", device, n_dev);
    struct jev_backend *be = calloc(1, sizeof *be);
    if (!be)
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: cannot allocate the backend");
    be->device = device;
    be->precision = JEV_PRECISION_EXACT; /* ops.h: every instance starts exact */
    be->first_error = cudaSuccess;
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(be);
        return jev_fail(err, JEV_ERR_CUDA, "cuda: device %d: %s", device, cudaGetErrorString(e));
    }
    be->n_sm = prop.multiProcessorCount;
    be->shared_optin = prop.sharedMemPerBlockOptin; /* what a kernel may ask for (227 KiB on the H200) */
    const char *sync = getenv("JEV_CUDA_SYNC");
    be->debug_sync = sync && *sync && strcmp(sync, "0") != 0;
    const char *tiles = getenv("JEV_CUDA_ATTN_TILES"); /* 0: every LM attention run per row (A/B timing) */
    be->attn_per_row = tiles && strcmp(tiles, "0") == 0;
    cublasStatus_t bs = cublasCreate(&be->blas);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetStream(be->blas, be->stream);
    /* sgemm is f32 FMA math, never TF32 tensor cores (exact mode; fast mode's bf16 GemmEx uses tensor
     * cores under this math mode, as cuBLAS does for 16-bit inputs) */
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(be->blas, CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        if (be->blas)
            cublasDestroy(be->blas);
        cudaStreamDestroy(be->stream);
        free(be);
        return jev_fail(err, JEV_ERR_CUDA, "cuda: cuBLAS on device %d: %s", device, blas_text(bs));
    }
    enum jev_status gs = jev_cuda_gemm_init(be, err);
    if (gs != JEV_OK) {
        jev_cuda_backend_free(be);
        return gs;
    }
    if (!(be->stage = jev_cuda_malloc(be, JEV_CUDA_STAGE_BYTES))) {
        jev_cuda_backend_free(be);
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: device %d: cannot allocate %zu staging bytes", device,
                        (size_t)JEV_CUDA_STAGE_BYTES);
    }
    *out = be;
    return JEV_OK;
}

void jev_cuda_backend_free(struct jev_backend *be) {
    if (!be)
        return;
    jev_cuda_bind(be);
    if (be->stream)
        cudaStreamSynchronize(be->stream);
    jev_cuda_free(be, be->stage);
    jev_cuda_free(be, be->work);
    jev_cuda_free(be, be->dq);
    jev_cuda_free(be, be->xh);
    jev_cuda_free(be, be->vh);
    jev_cuda_gemm_free(be);
    free(be->blocks);
    if (be->blas)
        cublasDestroy(be->blas);
    if (be->stream)
        cudaStreamDestroy(be->stream);
    free(be);
}

/* The registry's describe: the device's name and memory, the driver API's version ("CUDA driver
 * X.Y"; the benchmark records the kernel module's version instead when /proc has it), and the CUDA
 * runtime's and cuBLAS's versions ("13.0", "13.1.0") as the record's libraries. */
static void cuda_describe(struct jev_backend *be, struct jev_backend_info *info) {
    struct cudaDeviceProp prop;
    memset(&prop, 0, sizeof prop);
    cudaGetDeviceProperties(&prop, be->device);
    snprintf(info->device, sizeof info->device, "%s", prop.name);
    info->memory_bytes = (int64_t)prop.totalGlobalMem;
    int v = 0;
    if (cudaDriverGetVersion(&v) == cudaSuccess)
        snprintf(info->driver, sizeof info->driver, "CUDA driver %d.%d", v / 1000, (v % 1000) / 10);
    char *rt = info->lib_versions[info->n_libs];
    snprintf(info->lib_names[info->n_libs++], sizeof info->lib_names[0], "cuda runtime");
    snprintf(rt, sizeof info->lib_versions[0], "unknown");
    if (cudaRuntimeGetVersion(&v) == cudaSuccess)
        snprintf(rt, sizeof info->lib_versions[0], "%d.%d", v / 1000, (v % 1000) / 10);
    char *blas = info->lib_versions[info->n_libs];
    snprintf(info->lib_names[info->n_libs++], sizeof info->lib_names[0], "cublas");
    snprintf(blas, sizeof info->lib_versions[0], "unknown");
    if (cublasGetVersion(be->blas, &v) == CUBLAS_STATUS_SUCCESS) /* e.g. 130100 = 13.1.0 */
        snprintf(blas, sizeof info->lib_versions[0], "%d.%d.%d", v / 10000, v / 100 % 100, v % 100);
}

/* The device this thread last bound (-1: none yet). */
static _Thread_local int bound_device = -1;

void jev_cuda_bind(struct jev_backend *be) {
    if (bound_device != be->device && cudaSetDevice(be->device) == cudaSuccess)
        bound_device = be->device;
}

void jev_cuda_check(struct jev_backend *be, cudaError_t e, const char *where) {
    if (e == cudaSuccess && be->debug_sync)
        e = cudaStreamSynchronize(be->stream);
    if (e != cudaSuccess && be->first_error == cudaSuccess) {
        be->first_error = e;
        be->first_error_where = where;
    }
}

/* ---- counted device memory ---- */

void *jev_cuda_malloc(struct jev_backend *be, size_t bytes) {
    if (be->n_blocks == be->cap_blocks) {
        int32_t cap = be->cap_blocks ? 2 * be->cap_blocks : 256;
        struct jev_cuda_block *b = realloc(be->blocks, (size_t)cap * sizeof *b);
        if (!b)
            return NULL;
        be->blocks = b;
        be->cap_blocks = cap;
    }
    void *p = NULL;
    if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess) {
        (void)cudaGetLastError(); /* not sticky: a later launch check must not report it as its own */
        return NULL;
    }
    be->blocks[be->n_blocks++] = (struct jev_cuda_block){p, bytes};
    be->mem_now += (int64_t)bytes;
    if (be->mem_now > be->mem_peak)
        be->mem_peak = be->mem_now;
    return p;
}

void jev_cuda_free(struct jev_backend *be, void *p) {
    if (!p)
        return;
    for (int32_t i = be->n_blocks - 1; i >= 0; i--)
        if (be->blocks[i].p == p) {
            be->mem_now -= (int64_t)be->blocks[i].bytes;
            be->blocks[i] = be->blocks[--be->n_blocks];
            break;
        }
    cudaFree(p);
}

static void cuda_memory(struct jev_backend *be, int64_t *now, int64_t *peak, bool reset_peak) {
    if (now)
        *now = be->mem_now;
    if (peak)
        *peak = be->mem_peak;
    if (reset_peak)
        be->mem_peak = be->mem_now;
}

/* ---- staging and scratch ---- */

void jev_cuda_allow_shared(struct jev_backend *be, size_t *allowed, const void *kernel, size_t bytes,
                           const char *where) {
    if (bytes <= *allowed)
        return;
    jev_cuda_check(be, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)bytes), where);
    *allowed = bytes;
}

void jev_cuda_stage_reset(struct jev_backend *be) { be->stage_used = 0; }

void *jev_cuda_stage(struct jev_backend *be, const void *host, size_t bytes) {
    size_t at = (be->stage_used + 255) & ~(size_t)255;
    JEV_ASSERT(at + bytes <= JEV_CUDA_STAGE_BYTES);
    char *dst = be->stage + at;
    be->stage_used = at + bytes;
    if (bytes > 0)
        jev_cuda_check(be, cudaMemcpyAsync(dst, host, bytes, cudaMemcpyHostToDevice, be->stream), "stage");
    return dst;
}

float *jev_cuda_work(struct jev_backend *be, size_t bytes) {
    if (bytes <= be->work_bytes)
        return be->work;
    /* growing: queued ops may still read the old block */
    cudaStreamSynchronize(be->stream);
    jev_cuda_free(be, be->work);
    be->work = NULL;
    be->work_bytes = 0;
    size_t want = bytes + bytes / 4; /* headroom, so that slowly growing requests do not reallocate each time */
    be->work = jev_cuda_malloc(be, want);
    if (!be->work) {
        jev_cuda_check(be, cudaErrorMemoryAllocation, "scratch allocation");
        return NULL;
    }
    be->work_bytes = want;
    return be->work;
}

/* ---- memory ops ---- */

static void *cuda_alloc(struct jev_backend *be, size_t bytes) {
    jev_cuda_bind(be);
    void *p = jev_cuda_malloc(be, bytes);
    if (!p)
        return NULL;
    /* cudaMalloc is 256-byte aligned; zeroing is part of the contract (fresh states start at 0) */
    if (cudaMemsetAsync(p, 0, bytes, be->stream) != cudaSuccess) {
        jev_cuda_free(be, p);
        return NULL;
    }
    return p;
}

static void cuda_free(struct jev_backend *be, void *p) {
    if (!p)
        return;
    jev_cuda_bind(be);
    cudaStreamSynchronize(be->stream);
    jev_cuda_free(be, p);
}

static void cuda_upload(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    jev_cuda_bind(be);
    if (bytes > 0)
        jev_cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream), "upload");
}

static void cuda_download(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    jev_cuda_bind(be);
    if (bytes > 0)
        jev_cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, be->stream), "download");
    jev_cuda_check(be, cudaStreamSynchronize(be->stream), "download");
}

static void cuda_zero(struct jev_backend *be, void *dst, size_t bytes) {
    jev_cuda_bind(be);
    if (bytes > 0)
        jev_cuda_check(be, cudaMemsetAsync(dst, 0, bytes, be->stream), "zero");
}

static void cuda_sync(struct jev_backend *be) {
    jev_cuda_bind(be);
    jev_cuda_check(be, cudaStreamSynchronize(be->stream), "sync");
}

/* Waits for the queued ops first: a fault inside a kernel shows only at a synchronization, and a
 * forward that downloads nothing (a prefill) must still report its own. Then tells the two kinds
 * of fault apart: one that leaves the context usable (an allocation that failed) is reported
 * once and cleared, so the next forward may succeed; a sticky one (an illegal address, a kernel
 * that trapped) makes every later call fail, so the device is lost until the process makes a
 * new context: JEV_ERR_DEVICE_LOST, and it stays so. */
static enum jev_status cuda_status(struct jev_backend *be, struct jev_error *err) {
    jev_cuda_bind(be);
    jev_cuda_check(be, cudaStreamSynchronize(be->stream), "a queued op (JEV_CUDA_SYNC=1 names it)");
    if (be->first_error == cudaSuccess)
        return JEV_OK;
    if (!be->lost) {
        (void)cudaGetLastError();
        be->lost = cudaStreamSynchronize(be->stream) != cudaSuccess || cudaGetLastError() != cudaSuccess;
    }
    enum jev_status st =
        jev_fail(err, be->lost ? JEV_ERR_DEVICE_LOST : JEV_ERR_CUDA, "cuda: device %d: %s failed: %s%s", be->device,
                 be->first_error_where ? be->first_error_where : "an op", cudaGetErrorString(be->first_error),
                 be->lost ? " (the device's context is lost: restart the process)" : "");
    if (!be->lost) {
        be->first_error = cudaSuccess;
        be->first_error_where = NULL;
    }
    return st;
}

/* Every matrix stays in its stored form on the device (4-bit weights 4-bit: the file's bytes), and the
 * kernels dequantize as they read, to the CPU's values bit for bit (cuda-weights.cu,
 * tests/cuda/test-cuda-matmul.c); the mirror also sizes the dequantization scratch, once per engine. */
static enum jev_status cuda_matrix_mirror(struct jev_backend *be, const struct jev_matrix *host,
                                          struct jev_matrix *mirror, struct jev_error *err) {
    jev_cuda_bind(be);
    return jev_cuda_matrix_upload(be, host, mirror, err);
}

static void cuda_matrix_release(struct jev_backend *be, struct jev_matrix *mirror) { jev_cuda_matrix_free(be, mirror); }

/* Both modes run here (cuda-matmul.cu); the mirror and the scratch serve both, so the engine may switch
 * between forwards. */
static enum jev_status cuda_set_precision(struct jev_backend *be, enum jev_precision p, struct jev_error *err) {
    if (p != JEV_PRECISION_EXACT && p != JEV_PRECISION_FAST)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "cuda: precision %d is not a mode", (int)p);
    be->precision = p;
    return JEV_OK;
}

const struct jev_ops jev_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
    .min_batched_tokens = JEV_CUDA_DIRECT_MAX_N + 1,
    .step_tokens = JEV_CUDA_STEP_TOKENS,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .matrix_mirror = cuda_matrix_mirror,
    .matrix_release = cuda_matrix_release,
    .status = cuda_status,
    .memory = cuda_memory,
    .set_precision = cuda_set_precision,
    .set_batch_invariant = jev_cuda_gemm_batch_invariant,
    .matmul = jev_cuda_matmul,
    .matmul_rows = jev_cuda_matmul_rows,
    .embed = jev_cuda_embed,
    .rmsnorm = jev_cuda_rmsnorm,
    .add_rmsnorm = jev_cuda_add_rmsnorm,
    .layernorm = jev_cuda_layernorm,
    .add = jev_cuda_add,
    .add_bias = jev_cuda_add_bias,
    .swiglu = jev_cuda_swiglu,
    .gelu = jev_cuda_gelu,
    .copy = jev_cuda_copy,
    .split_qgate = jev_cuda_split_qgate,
    .rope = jev_cuda_rope,
    .sigmoid_mul = jev_cuda_sigmoid_mul,
    .attention = jev_cuda_attention,
    .gdn_conv = jev_cuda_gdn_conv,
    .gdn_gates = jev_cuda_gdn_gates,
    .gdn_rule = jev_cuda_gdn_rule,
    .gated_rmsnorm = jev_cuda_gated_rmsnorm,
    .vision_rope = jev_cuda_vision_rope,
    .vision_attention = jev_cuda_vision_attention,
    .vision_pos_add = jev_cuda_vision_pos_add,
};

/* ---- the registry entry (backend/registry.h) ---- */

/* One device per instance; the engine's CPU pool is not used (the host only queues work). */
static enum jev_status cuda_create(int32_t device, struct jev_pool *pool, struct jev_backend **out,
                                   struct jev_error *err) {
    (void)pool;
    return jev_cuda_backend_new(device, out, err);
}

const struct jev_backend_reg jev_backend_reg_cuda = {
    .name = "cuda",
    .ops = &jev_cuda_ops,
    .create = cuda_create,
    .destroy = jev_cuda_backend_free,
    .describe = cuda_describe,
};

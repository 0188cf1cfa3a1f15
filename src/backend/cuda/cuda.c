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

#include <stdlib.h>
#include <string.h>

#include "base/error.h" // defines: jev_fail, JEV_ASSERT

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
    be->first_error = cudaSuccess;
    struct cudaDeviceProp prop;
    if ((e = cudaSetDevice(device)) != cudaSuccess || (e = cudaGetDeviceProperties(&prop, device)) != cudaSuccess ||
        (e = cudaStreamCreateWithFlags(&be->stream, cudaStreamNonBlocking)) != cudaSuccess) {
        free(be);
        return jev_fail(err, JEV_ERR_CUDA, "cuda: device %d: %s", device, cudaGetErrorString(e));
    }
    be->n_sm = prop.multiProcessorCount;
    cublasStatus_t bs = cublasCreate(&be->blas);
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetStream(be->blas, be->stream);
    /* exact mode: f32 FMA math, never TF32 tensor cores (DESIGN.md, Numerics) */
    if (bs == CUBLAS_STATUS_SUCCESS)
        bs = cublasSetMathMode(be->blas, CUBLAS_DEFAULT_MATH);
    if (bs != CUBLAS_STATUS_SUCCESS) {
        if (be->blas)
            cublasDestroy(be->blas);
        cudaStreamDestroy(be->stream);
        free(be);
        return jev_fail(err, JEV_ERR_CUDA, "cuda: cuBLAS on device %d: %s", device, blas_text(bs));
    }
    if ((e = cudaMalloc((void **)&be->stage, JEV_CUDA_STAGE_BYTES)) != cudaSuccess) {
        jev_cuda_backend_free(be);
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: device %d: cannot allocate %zu staging bytes (%s)", device,
                        (size_t)JEV_CUDA_STAGE_BYTES, cudaGetErrorString(e));
    }
    *out = be;
    return JEV_OK;
}

void jev_cuda_backend_free(struct jev_backend *be) {
    if (!be)
        return;
    cudaSetDevice(be->device);
    if (be->stream)
        cudaStreamSynchronize(be->stream);
    cudaFree(be->stage);
    cudaFree(be->work);
    if (be->blas)
        cublasDestroy(be->blas);
    if (be->stream)
        cudaStreamDestroy(be->stream);
    free(be);
}

void jev_cuda_check(struct jev_backend *be, cudaError_t e, const char *where) {
    if (e != cudaSuccess && be->first_error == cudaSuccess) {
        be->first_error = e;
        be->first_error_where = where;
    }
}

/* ---- staging and scratch ---- */

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
    cudaFree(be->work);
    be->work = NULL;
    be->work_bytes = 0;
    size_t want = bytes + bytes / 4; /* headroom, so that slowly growing requests do not reallocate each time */
    cudaError_t e = cudaMalloc((void **)&be->work, want);
    if (e != cudaSuccess) {
        jev_cuda_check(be, e, "scratch allocation");
        return NULL;
    }
    be->work_bytes = want;
    return be->work;
}

/* ---- memory ops ---- */

static void *cuda_alloc(struct jev_backend *be, size_t bytes) {
    void *p = NULL;
    if (cudaMalloc(&p, bytes > 0 ? bytes : 1) != cudaSuccess)
        return NULL;
    /* cudaMalloc is 256-byte aligned; zeroing is part of the contract (fresh states start at 0) */
    if (cudaMemsetAsync(p, 0, bytes, be->stream) != cudaSuccess) {
        cudaFree(p);
        return NULL;
    }
    return p;
}

static void cuda_free(struct jev_backend *be, void *p) {
    if (!p)
        return;
    cudaStreamSynchronize(be->stream);
    cudaFree(p);
}

static void cuda_upload(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes > 0)
        jev_cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, be->stream), "upload");
}

static void cuda_download(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    if (bytes > 0)
        jev_cuda_check(be, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, be->stream), "download");
    jev_cuda_check(be, cudaStreamSynchronize(be->stream), "download");
}

static void cuda_zero(struct jev_backend *be, void *dst, size_t bytes) {
    if (bytes > 0)
        jev_cuda_check(be, cudaMemsetAsync(dst, 0, bytes, be->stream), "zero");
}

static void cuda_sync(struct jev_backend *be) { jev_cuda_check(be, cudaStreamSynchronize(be->stream), "sync"); }

static enum jev_status cuda_status(struct jev_backend *be, struct jev_error *err) {
    if (be->first_error == cudaSuccess)
        return JEV_OK;
    return jev_fail(err, JEV_ERR_CUDA, "cuda: device %d: %s failed: %s", be->device,
                    be->first_error_where ? be->first_error_where : "an op", cudaGetErrorString(be->first_error));
}

/* Exact mode keeps every matrix as f32 on the device: cuBLAS sgemm reads it directly, and the
 * values are the CPU's dequantized ones bit for bit (tests/cuda/test-cuda-matmul.c). */
static enum jev_status cuda_matrix_mirror(struct jev_backend *be, const struct jev_matrix *host,
                                          struct jev_matrix *mirror, struct jev_error *err) {
    memset(mirror, 0, sizeof *mirror);
    size_t bytes = (size_t)host->rows * (size_t)host->cols * sizeof(float);
    float *dst = NULL;
    cudaError_t e = cudaMalloc((void **)&dst, bytes > 0 ? bytes : 1);
    if (e != cudaSuccess)
        return jev_fail(err, JEV_ERR_NOMEM, "cuda: device %d: no room for %s (%d x %d f32, %zu bytes): %s", be->device,
                        host->name ? host->name : "a matrix", host->rows, host->cols, bytes, cudaGetErrorString(e));
    enum jev_status s = jev_cuda_dequantize_upload(be, host, dst, err);
    if (s != JEV_OK) {
        cudaFree(dst);
        return s;
    }
    mirror->type = JEV_MTYPE_F32;
    mirror->rows = host->rows;
    mirror->cols = host->cols;
    mirror->data = dst;
    mirror->name = host->name;
    return JEV_OK;
}

static void cuda_matrix_release(struct jev_backend *be, struct jev_matrix *mirror) {
    if (mirror->data) {
        /* the mirror's data is this backend's own allocation (const only to the ops that read it) */
        void *p;
        memcpy(&p, &mirror->data, sizeof p);
        cudaStreamSynchronize(be->stream);
        cudaFree(p);
    }
    memset(mirror, 0, sizeof *mirror);
}

const struct jev_ops jev_cuda_ops = {
    .name = "cuda",
    .host_memory = false,
    .alloc = cuda_alloc,
    .free = cuda_free,
    .upload = cuda_upload,
    .download = cuda_download,
    .zero = cuda_zero,
    .sync = cuda_sync,
    .matrix_mirror = cuda_matrix_mirror,
    .matrix_release = cuda_matrix_release,
    .status = cuda_status,
    .matmul = jev_cuda_matmul,
    .matmul_rows = jev_cuda_matmul_rows,
    .embed = jev_cuda_embed,
    .rmsnorm = jev_cuda_rmsnorm,
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

/*
 * cpu.c - the CPU backend: instance lifetime and the op table.
 */
#include "backend/cpu/cpu.h" // defines: struct jev_backend, jev_cpu_* ops

#include "backend/registry.h" // defines: struct jev_backend_reg

#include <cblas.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct jev_backend *jev_cpu_backend_new(struct jev_pool *pool) {
    struct jev_backend *be = calloc(1, sizeof *be);
    if (!be)
        return NULL;
    be->pool = pool;
    be->n_threads = jev_pool_size(pool);
    be->scratch = malloc((size_t)be->n_threads * JEV_CPU_SCRATCH_FLOATS * sizeof(float));
    /* weight tiles: untouched pages cost nothing until a prefill uses them */
    be->wbuf = malloc((size_t)be->n_threads * JEV_CPU_WBUF_FLOATS * sizeof(float));
    if (!be->scratch || !be->wbuf) {
        free(be->scratch);
        free(be->wbuf);
        free(be);
        return NULL;
    }
    be->gemm = JEV_CPU_GEMM_OPENBLAS; /* until told: cpu_create applies JEV_CPU_GEMM (auto when unset) */
    /* sgemm runs inside pool tasks, one call per thread (cpu-matmul.c explains why) */
    openblas_set_num_threads(1);
    return be;
}

void jev_cpu_backend_free(struct jev_backend *be) {
    if (!be)
        return;
    free(be->scratch);
    free(be->wbuf);
    free(be->xh);
    free(be);
}

struct rows_job {
    jev_cpu_rows_fn fn;
    void *arg;
    int64_t n, block;
};

static void rows_task(void *arg, int64_t task, int thread) {
    const struct rows_job *j = arg;
    int64_t r0 = task * j->block, r1 = r0 + j->block < j->n ? r0 + j->block : j->n;
    j->fn(j->arg, r0, r1, thread);
}

void jev_cpu_for_rows(struct jev_backend *be, int64_t n, int64_t elems_per_row, jev_cpu_rows_fn fn, void *arg) {
    if (n <= 0)
        return;
    if (!be || be->n_threads <= 1 || n * elems_per_row < JEV_CPU_PAR_MIN_ELEMS || n == 1) {
        fn(arg, 0, n, 0);
        return;
    }
    /* two blocks per thread, so that a thread that starts late does not hold the job up */
    int64_t blocks = 2 * (int64_t)be->n_threads;
    struct rows_job j = {fn, arg, n, (n + blocks - 1) / blocks};
    jev_pool_run(be->pool, (n + j.block - 1) / j.block, rows_task, &j);
}

struct jev_pool *jev_cpu_backend_pool(struct jev_backend *be) {
    return be ? be->pool : NULL;
}

/* ---- memory: plain host memory ---- */

/* calloc keeps the lazy zero pages of large blocks (a state pool touches only what it uses);
 * the block's own address is kept in the 64 bytes of padding before the aligned pointer. */
static void *cpu_alloc(struct jev_backend *be, size_t bytes) {
    (void)be;
    if (bytes > SIZE_MAX - 128)
        return NULL;
    unsigned char *raw = calloc(1, bytes + 128);
    if (!raw)
        return NULL;
    unsigned char *p = raw + 64 + (64 - (uintptr_t)(raw + 64) % 64) % 64;
    memcpy(p - sizeof raw, &raw, sizeof raw);
    return p;
}

static void cpu_free(struct jev_backend *be, void *p) {
    (void)be;
    if (!p)
        return;
    unsigned char *raw;
    memcpy(&raw, (unsigned char *)p - sizeof raw, sizeof raw);
    free(raw);
}

static void cpu_copy_bytes(struct jev_backend *be, void *dst, const void *src, size_t bytes) {
    (void)be;
    if (bytes > 0 && dst != src)
        memcpy(dst, src, bytes);
}

static void cpu_zero(struct jev_backend *be, void *dst, size_t bytes) {
    (void)be;
    if (bytes > 0)
        memset(dst, 0, bytes);
}

static void cpu_sync(struct jev_backend *be) { (void)be; }

/* The CPU kernels read every matrix type where the model mapped it: the mirror is the matrix. */
static enum jev_status cpu_matrix_mirror(struct jev_backend *be, const struct jev_matrix *host,
                                         struct jev_matrix *mirror, struct jev_error *err) {
    (void)be;
    (void)err;
    *mirror = *host;
    return JEV_OK;
}

static void cpu_matrix_release(struct jev_backend *be, struct jev_matrix *mirror) {
    (void)be;
    memset(mirror, 0, sizeof *mirror);
}

const struct jev_ops jev_cpu_ops = {
    .name = "cpu",
    .host_memory = true,
    .min_batched_tokens = JEV_CPU_GEMM_MIN_N,
    .step_tokens = 512,
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy_bytes,
    .download = cpu_copy_bytes,
    .zero = cpu_zero,
    .sync = cpu_sync,
    .matrix_mirror = cpu_matrix_mirror,
    .matrix_release = cpu_matrix_release,
    .status = NULL,
    .set_precision = jev_cpu_set_precision, /* cpu-matmul-bf16.c: fast where the CPU has AVX512-BF16 */
    .matmul = jev_cpu_matmul_op,
    .matmul_rows = jev_cpu_matmul_rows_fast,
    .embed = jev_cpu_embed_fast,
    .rmsnorm = jev_cpu_rmsnorm,
    .layernorm = jev_cpu_layernorm,
    .add = jev_cpu_add,
    .add_rmsnorm = jev_cpu_add_rmsnorm,
    .add_bias = jev_cpu_add_bias,
    .swiglu = jev_cpu_swiglu,
    .gelu = jev_cpu_gelu,
    /* LM-OPS */
    .copy = jev_cpu_copy,
    .split_qgate = jev_cpu_split_qgate,
    .rope = jev_cpu_rope,
    .sigmoid_mul = jev_cpu_sigmoid_mul,
    .attention = jev_cpu_attention_fast,
    .gdn_conv = jev_cpu_gdn_conv_fast,
    .gdn_gates = jev_cpu_gdn_gates,
    .gdn_rule = jev_cpu_gdn_rule_fast,
    .gated_rmsnorm = jev_cpu_gated_rmsnorm,

    /* VISION-OPS */
    .vision_rope = jev_cpu_vision_rope,
    .vision_attention = jev_cpu_vision_attention,
    .vision_pos_add = jev_cpu_vision_pos_add,
};

/* ---- the registry entry (backend/registry.h) ---- */

/* One CPU: the device number is always 0 (the parser gives "cpu" no ":N"). */
static enum jev_status cpu_create(int32_t device, struct jev_pool *pool, struct jev_backend **out,
                                  struct jev_error *err) {
    (void)device;
    *out = NULL;
    enum jev_cpu_gemm gemm;
    JEV_TRY(jev_cpu_gemm_choose(getenv("JEV_CPU_GEMM"), &gemm, err));
    *out = jev_cpu_backend_new(pool);
    if (!*out)
        return jev_fail(err, JEV_ERR_NOMEM, "cpu: cannot allocate the backend's scratch for %d threads",
                        jev_pool_size(pool));
    (*out)->gemm = gemm;
    return JEV_OK;
}

/* No describe: the benchmark's host facts (CPU model, cores, BLAS) already say what it runs on. */
const struct jev_backend_reg jev_backend_reg_cpu = {
    .name = "cpu",
    .ops = &jev_cpu_ops,
    .create = cpu_create,
    .destroy = jev_cpu_backend_free,
    .describe = NULL,
};

/*
 * cpu.c - the CPU backend: instance lifetime and the op table.
 */
#include "backend/cpu/cpu.h" // defines: struct jev_backend, jev_cpu_* ops

#include <cblas.h>
#include <stdlib.h>

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
    /* sgemm runs inside pool tasks, one call per thread (cpu-matmul.c explains why) */
    openblas_set_num_threads(1);
    return be;
}

void jev_cpu_backend_free(struct jev_backend *be) {
    if (!be)
        return;
    free(be->scratch);
    free(be->wbuf);
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

struct jev_pool *jev_cpu_backend_pool(struct jev_backend *be) { return be ? be->pool : NULL; }

const struct jev_ops jev_cpu_ops = {
    .name = "cpu",
    .matmul = jev_cpu_matmul_fast,
    .matmul_rows = jev_cpu_matmul_rows_fast,
    .embed = jev_cpu_embed_fast,
    .rmsnorm = jev_cpu_rmsnorm,
    .layernorm = jev_cpu_layernorm,
    .add = jev_cpu_add,
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

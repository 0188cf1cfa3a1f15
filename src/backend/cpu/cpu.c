/*
 * cpu.c - the CPU backend: instance lifetime and the op table.
 */
#include "backend/cpu/cpu.h" // defines: struct jev_backend, jev_cpu_* ops

#include <stdlib.h>

struct jev_backend *jev_cpu_backend_new(struct jev_pool *pool) {
    struct jev_backend *be = calloc(1, sizeof *be);
    if (!be)
        return NULL;
    be->pool = pool;
    be->n_threads = jev_pool_size(pool);
    be->scratch = malloc((size_t)be->n_threads * JEV_CPU_SCRATCH_FLOATS * sizeof(float));
    if (!be->scratch) {
        free(be);
        return NULL;
    }
    return be;
}

void jev_cpu_backend_free(struct jev_backend *be) {
    if (!be)
        return;
    free(be->scratch);
    free(be);
}

struct jev_pool *jev_cpu_backend_pool(struct jev_backend *be) { return be ? be->pool : NULL; }

const struct jev_ops jev_cpu_ops = {
    .name = "cpu",
    .matmul = jev_cpu_matmul,
    .matmul_rows = jev_cpu_matmul_rows,
    .embed = jev_cpu_embed,
    .rmsnorm = jev_cpu_rmsnorm,
    .layernorm = jev_cpu_layernorm,
    .add = jev_cpu_add,
    .add_bias = jev_cpu_add_bias,
    .swiglu = jev_cpu_swiglu,
    .gelu = jev_cpu_gelu,
    /* LM-OPS */

    /* VISION-OPS */
    .vision_rope = jev_cpu_vision_rope,
    .vision_attention = jev_cpu_vision_attention,
    .vision_pos_add = jev_cpu_vision_pos_add,
};

/*
 * cuda-attention-int.h - what the LM attention's two kernel files share (cuda-attention.cu: the
 * tables, the per-row kernel and the dispatch; cuda-attention-tile.cu: the tiled kernel for runs of
 * many rows). For nvcc only.
 */
#ifndef JEV_BACKEND_CUDA_ATTENTION_INT_H
#define JEV_BACKEND_CUDA_ATTENTION_INT_H

#include <stdbool.h>
#include <stdint.h>

#include "backend/ops.h" // defines: struct jev_attn_shape

struct jev_backend;

/* One run as the kernels see it. */
struct att_run {
    int64_t row0;    /* first batch row */
    int32_t n;       /* query rows */
    int32_t n_past;  /* query i sees keys 0..n_past+i */
    int32_t q0;      /* index of the run's first query among its table's queries (the per-row kernel's blockIdx.x) */
    int32_t span0;   /* first entry of the span table */
    int32_t n_spans; /* entries */
    int32_t pad;
};

/* One K/V span (device rows of kv_dim floats). */
struct att_span {
    const float *k, *v;
    int64_t n;
};

/* One block of the tiled kernel: rows [i0, i0 + rows per tile) of run `run` of its table. */
struct att_tile {
    int32_t run;
    int32_t i0;
};

/* Runs of at least this many rows take the tiled kernel; shorter ones (decode steps) the per-row
 * kernel. The choice is the run's own, never its company's: a run's outputs are the same bits alone
 * and in any batch (each kernel's sums for a row depend on that row's keys only). */
#define ATT_TILE_MIN_ROWS 4

/* Whether the tiled kernel takes shape s on this device: head_dim 64, 128 or 256, a query-head group
 * (n_heads / n_kv_heads) that divides 32, and its shared memory within the device's opt-in limit. */
bool jev_cuda_attention_tiled_fits(const struct jev_backend *be, const struct jev_attn_shape *s);
/* Queues the tiled kernel: tiles[n_tiles] over runs (device tables, staged by the caller). */
void jev_cuda_attention_tiled(struct jev_backend *be, const struct jev_attn_shape *s, const float *q,
                              const struct att_run *runs, const struct att_span *spans, const struct att_tile *tiles,
                              int32_t n_tiles, float *o);
/* Query rows one tile of the tiled kernel holds for shape s (32 / the head group). */
int32_t jev_cuda_attention_tile_rows(const struct jev_attn_shape *s);

#endif

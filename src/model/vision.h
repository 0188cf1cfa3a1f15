/*
 * vision.h - the Qwen3.5 vision tower: pixel_values of one image -> its
 * merged image-token embeddings (spec/qwen35.md §6; transformers
 * Qwen3_5VisionModel).
 *
 *   x   = patches [N][patch_dim] . W_pe^T + b_pe           (Conv3d as a matmul)
 *   x  += bilinear(pos_embed, grid)                        (align_corners = True)
 *   cos, sin = 2-D rotary of (row, col) per patch          (theta 10000, head_dim/4 freqs per axis)
 *   for each block: x += proj(attn(rope(qkv(LN1(x)))))     (bidirectional, scale 1/sqrt(hd))
 *                   x += fc2(gelu_tanh(fc1(LN2(x))))
 *   y   = fc2(gelu_erf(fc1(LN(x) viewed [N/4][4*Dv])))     (the 2x2 merger) -> [N/4][out_hidden]
 *
 * What it is: the forward written once against the op table, on one image
 * (one attention segment) at a time, with every activation sized at init for
 * a patch capacity and taken from one arena: the forward itself allocates
 * nothing. Counters: forwards run and their time.
 * What it is not: preprocessing (vision-preprocess.c) or placing the
 * embeddings into the prompt (the LM's embedding override rows).
 */
#ifndef JEV_MODEL_VISION_H
#define JEV_MODEL_VISION_H

#include <stdint.h>

#include "backend/ops.h"   // defines: struct jev_ops, struct jev_backend
#include "base/arena.h"    // defines: struct jev_arena
#include "base/error.h"    // defines: struct jev_error
#include "model/config.h"  // defines: struct jev_vision_config
#include "model/weights.h" // defines: struct jev_vision_weights

#define JEV_VISION_MAX_HEAD_DIM 256   /* rotary tables hold head_dim / 4 frequencies */
#define JEV_VISION_ROPE_THETA 10000.0 /* the axial rope base (transformers' default_theta; not in config.json) */

/* Called after each step with the tensor just computed (tests, dumps); may be NULL. */
typedef void (*jev_vision_hook_fn)(void *arg, const char *name, int layer, const float *t, int64_t rows, int64_t cols);

/* The tower's runtime: weights (not owned), ops, and activations for up to max_patches patches. */
struct jev_vision {
    const struct jev_vision_config *cfg;         /* sizes (not owned) */
    const struct jev_vision_weights *w;          /* weights (not owned) */
    const struct jev_ops *ops;                   /* backend op table */
    struct jev_backend *be;                      /* backend instance (not owned) */
    int32_t max_patches;                         /* capacity N of every buffer below */
    struct jev_arena arena;                      /* the float buffers x .. sin, in backend memory (ops->alloc) */
    void *arena_block;                           /* its block */
    struct jev_arena host_arena;                 /* pos_idx, pos_w and a device backend's host tables */
    float *x;                                    /* [N][Dv] residual stream */
    float *h;                                    /* [N][Dv] normed input of a sub-layer; merger input [N/4][4Dv] */
    float *qkv;                                  /* [N][3Dv] q | k | v */
    float *att;                                  /* [N][Dv] attention output (heads concatenated) */
    float *mlp;                                  /* [N][max(I, Dv)] MLP hidden; merger hidden [N/4][4Dv] */
    float *cos, *sin;                            /* [N][head_dim] rotary tables */
    int32_t *pos_idx;                            /* [N][4] bilinear taps into the pos_embed table */
    float *pos_w;                                /* [N][4] their weights */
    float *host_cos, *host_sin;                  /* device backend: the tables built here, then uploaded; else NULL */
    float *host_rows;                            /* device backend: a hook's view [N][Dv]; else NULL */
    float inv_freq[JEV_VISION_MAX_HEAD_DIM / 4]; /* head_dim / 4 inverse frequencies (f32, as torch) */
    int32_t n_freq;                              /* entries of inv_freq */
    int64_t n_forwards;                          /* counter: forwards run */
    double forward_ms;                           /* counter: their total wall time */
    jev_vision_hook_fn hook;                     /* debug hook (NULL: none) */
    void *hook_arg;                              /* its argument */
};

/*
 * Sizes the activations for max_patches (a multiple of merge^2) and
 * allocates them once. cfg and w must outlive v.
 */
enum jev_status jev_vision_init(struct jev_vision *v, const struct jev_vision_config *cfg,
                                const struct jev_vision_weights *w, const struct jev_ops *ops, struct jev_backend *be,
                                int32_t max_patches, struct jev_error *err);
void jev_vision_free(struct jev_vision *v);

/* Bytes jev_vision_init allocates for a capacity (the memory figure of the benchmark). */
size_t jev_vision_arena_bytes(const struct jev_vision_config *cfg, int32_t max_patches);

/*
 * One image: pixels [grid_h*grid_w][patch_dim] in the processor's
 * block-major order -> out [grid_h*grid_w / merge^2][out_hidden], the image
 * tokens in row-major order over the merged grid.
 */
enum jev_status jev_vision_forward(struct jev_vision *v, const float *pixels, int32_t grid_h, int32_t grid_w,
                                   float *out, struct jev_error *err);

/* The rotary inverse frequencies torch computes: 1 / theta^(2i / (head_dim/2)), i < head_dim/4, in f32. */
int32_t jev_vision_inv_freq(int32_t head_dim, double theta, float *out);

/* FLOPs of one forward over n patches (multiply-add = 2), for GFLOP/s figures. */
double jev_vision_flops(const struct jev_vision_config *cfg, int64_t n);

#endif

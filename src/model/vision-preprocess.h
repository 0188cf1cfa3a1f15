/*
 * vision-preprocess.h - from a decoded RGB image to the vision tower's input:
 * target size, one antialiased bicubic resample, rescale + normalise, the
 * temporal duplicate, and the block-major patch layout.
 *
 * The reference is transformers 5.17's Qwen2VLImageProcessor (the
 * torchvision backend, the v5 default) on a PIL image (spec/qwen35.md §7):
 *   1. target size: an optional bound B first (the benchmark's "resized
 *      within 768x768"; not part of the processor): s = min(1, B / max(h, w)),
 *      h' = round(h*s), w' = round(w*s) with Python's round (half to even) of
 *      the double product; then smart_resize(h', w') with factor =
 *      patch*merge and min/max pixels from preprocessor_config.json (Python
 *      round half-to-even, floor/ceil as the reference) -> (H, W).
 *   2. resample the ORIGINAL image once to (H, W): torchvision's
 *      resize(uint8 tensor, BICUBIC, antialias=True) on the CPU runs torch's
 *      native uint8 kernel (torchvision _do_native_uint8_resize_on_cpu is
 *      true for BICUBIC), which this file reproduces bit for bit: PIL-style
 *      separable Keys cubic (a = -0.5), support 2*max(in/out, 1), weights in
 *      double normalised per output sample, then rounded to int16 fixed
 *      point at one precision per axis (the largest that keeps the largest
 *      weight below 2^15, at most 22 bits), the horizontal pass first into a
 *      uint8 image, then the vertical pass; each output = (sum + 2^(p-1)) >> p
 *      clamped to 0..255; a pass whose size does not change is skipped.
 *      (torch ATen UpSampleKernel.cpp: _compute_indices_min_size_weights_aa,
 *      _compute_index_ranges_int16_weights, basic_loop_aa_horizontal/
 *      vertical<uint8_t>, separable_upsample_generic_Nd_kernel_impl.)
 *   3. rescale and normalise fused as TorchvisionBackend does:
 *      mean' = f32(f32(mean) * f32(1/rescale_factor)), std' likewise, value
 *      = (f32(p) - mean') / std' in f32 (0.5/0.5 gives (p - 127.5) / 127.5).
 *   4. the frame repeated temporal_patch times; patches block-major over
 *      merge x merge blocks; within a row c*T*P*P + t*P*P + y*P + x.
 *
 * Not here: decoding (io/image.c), the tower (model/vision.c).
 */
#ifndef JEV_MODEL_VISION_PREPROCESS_H
#define JEV_MODEL_VISION_PREPROCESS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error
#include "io/image.h"   // defines: struct jev_image

struct jev_pool;

/* preprocessor_config.json, as the processor reads it. */
struct jev_preprocess_config {
    int32_t patch;          /* patch_size (16) */
    int32_t temporal_patch; /* temporal_patch_size (2) */
    int32_t merge;          /* merge_size (2) */
    int64_t min_pixels;     /* size.shortest_edge or min_pixels (65536) */
    int64_t max_pixels;     /* size.longest_edge or max_pixels (16777216) */
    double mean[3];         /* image_mean */
    double std[3];          /* image_std */
    double rescale_factor;  /* rescale_factor (1/255) */
    bool do_resize;         /* do_resize (true) */
    bool do_rescale;        /* do_rescale (true) */
    bool do_normalize;      /* do_normalize (true) */
};

/* The Qwen3.5 values (configs/preprocessor_config.json). */
struct jev_preprocess_config jev_preprocess_config_qwen35(void);

/*
 * Parses preprocessor_config.json text. Missing keys take the processor
 * class's defaults (Qwen2VLImageProcessor: patch 14, merge 2, temporal 2,
 * min 56*56, max 28*28*1280, OpenAI CLIP mean/std, rescale 1/255); a key of
 * the wrong type or range is an error naming it; resample other than 3
 * (bicubic) is JEV_ERR_UNSUPPORTED. `name` is used in messages.
 */
enum jev_status jev_preprocess_config_parse(const char *text, size_t len, const char *name,
                                            struct jev_preprocess_config *out, struct jev_error *err);

/* Reads and parses path, a file of at most JEV_PREPROCESS_CONFIG_MAX_BYTES. */
#define JEV_PREPROCESS_CONFIG_MAX_BYTES ((size_t)64 << 10)
enum jev_status jev_preprocess_config_load(const char *path, struct jev_preprocess_config *out, struct jev_error *err);

/* Where an image goes: the resized size, its patch grid and token count. */
struct jev_vision_size {
    int32_t height, width;  /* resized pixels (H, W) */
    int32_t grid_h, grid_w; /* patches: H / patch, W / patch */
    int32_t n_patches;      /* grid_h * grid_w (rows of pixel_values) */
    int32_t n_tokens;       /* n_patches / merge^2 (image pads in the prompt) */
    int32_t patch_dim;      /* 3 * temporal_patch * patch * patch */
};

/* Python's round(): half to even, on the exact double value. */
double jev_round_half_even(double x);

/* The processor's smart_resize(h, w) -> (H, W); errors on aspect > 200. */
enum jev_status jev_smart_resize(int64_t h, int64_t w, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                                 int32_t *out_h, int32_t *out_w, struct jev_error *err);

/* Step 1: the target size of an h x w image; bound <= 0 means no bound. */
enum jev_status jev_vision_target_size(const struct jev_preprocess_config *cfg, int32_t h, int32_t w, int32_t bound,
                                       struct jev_vision_size *out, struct jev_error *err);

/*
 * Step 2: resamples RGB8 src [h][w][3] to dst [H][W][3] exactly as torch's
 * uint8 antialiased bicubic. pool may be NULL. Allocates its plan and the
 * intermediate image (freed before return).
 */
enum jev_status jev_vision_resize(const uint8_t *src, int32_t h, int32_t w, uint8_t *dst, int32_t H, int32_t W,
                                  struct jev_pool *pool, struct jev_error *err);

/* The vision tower's input for one image. */
struct jev_vision_input {
    struct jev_vision_size size; /* grid and counts */
    float *pixels;               /* [n_patches][patch_dim] pixel_values, owned */
    uint8_t *resized;            /* [height][width][3] the resampled image, owned */
};

/* Options of one preprocess. */
struct jev_preprocess_params {
    int32_t bound;       /* resize within bound x bound first; <= 0: none (benchmark: 768) */
    int32_t max_patches; /* refuse a grid larger than this (JEV_ERR_CONTEXT_FULL); <= 0: no cap */
};

/* Steps 1-4 on one decoded image. On failure *out is zeroed. */
enum jev_status jev_vision_preprocess(const struct jev_preprocess_config *cfg, const struct jev_image *img,
                                      const struct jev_preprocess_params *params, struct jev_pool *pool,
                                      struct jev_vision_input *out, struct jev_error *err);

/* Steps 3-4 alone, from an already resized RGB8 image (H and W multiples of patch*merge). */
void jev_vision_patchify(const struct jev_preprocess_config *cfg, const uint8_t *rgb, int32_t H, int32_t W,
                         float *pixels);
/* The same, one grid row of patches per task on pool (NULL: the calling thread); the same bytes. */
void jev_vision_patchify_on(const struct jev_preprocess_config *cfg, const uint8_t *rgb, int32_t H, int32_t W,
                            float *pixels, struct jev_pool *pool);

void jev_vision_input_free(struct jev_vision_input *in);

#endif

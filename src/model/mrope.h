/*
 * mrope.h - the language model's 3-axis (t, h, w) positions for a prompt
 * with images: Qwen3_5Model.get_rope_index (spec/qwen35.md §5.3).
 *
 * Walking the token ids in runs: a text run of n tokens takes positions
 * cur .. cur+n-1 on all three axes (cur += n); a run of image-pad tokens is
 * one image, whose merged grid (Mh = grid_h / merge, Mw = grid_w / merge)
 * is laid out row-major: token k = r*Mw + c gets t = cur, h = cur + r,
 * w = cur + c, and then cur += max(Mh, Mw) - not the token count.
 * rope_delta = (largest position on any axis + 1) - T; a token decoded at
 * cache index p later gets t = h = w = p + rope_delta. A text-only prompt
 * has t = h = w = index and delta 0.
 *
 * Not here: the rotary angles (model/rope.c), video (frames with time
 * stamps; the engine takes images only, video pads count as text).
 */
#ifndef JEV_MODEL_MROPE_H
#define JEV_MODEL_MROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error

/* One image of a prompt: its patch grid (image_grid_thw with t = 1), in unmerged patches. */
struct jev_mrope_image {
    int32_t grid_h; /* patch rows */
    int32_t grid_w; /* patch columns */
};

/*
 * Fills pos [3][n] (row 0 = t, row 1 = h, row 2 = w) for ids[n], where the
 * i-th run of `image_pad` tokens is images[i]. Every run must hold exactly
 * (grid_h/merge)*(grid_w/merge) tokens and every image must be used, else
 * JEV_ERR_INVALID_ARG naming the run. rope_delta may be NULL.
 */
enum jev_status jev_mrope_positions(const int32_t *ids, int32_t n, int32_t image_pad,
                                    const struct jev_mrope_image *images, int32_t n_images, int32_t merge, int32_t *pos,
                                    int32_t *rope_delta, struct jev_error *err);

/* The same with the per-token layout pos [n][3] (t, h, w per token), the one jev_lm_batch.pos takes. */
enum jev_status jev_mrope_positions_t3(const int32_t *ids, int32_t n, int32_t image_pad,
                                       const struct jev_mrope_image *images, int32_t n_images, int32_t merge,
                                       int32_t *pos, int32_t *rope_delta, struct jev_error *err);

/* Text after a prefill (decode, suffixes): token i of n at cache index start+i gets start + i + delta;
 * pos [3][n] (jev_lm_text_positions fills the [n][3] layout from a sequence). */
void jev_mrope_text_positions(int32_t start, int32_t n, int32_t rope_delta, int32_t *pos);

#endif

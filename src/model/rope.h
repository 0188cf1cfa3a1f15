/*
 * rope.h - the text model's rotary position embedding (M-RoPE), as HF's
 * Qwen3_5TextRotaryEmbedding + apply_rotary_pos_emb compute it.
 *
 * What it is:
 * - The f32 inverse frequencies `1 / base ** (arange(0, dim, 2) / dim)` for
 *   dim = rotary_dim (partial rotary: only the first rotary_dim dims of a head
 *   turn), bit-exact to torch's table (checked against a dumped golden).
 * - The axis of each frequency pair: every token has three positions (t, h,
 *   w); frequency i takes its angle from one of them. Interleaved (Qwen3.5):
 *   T H W T H W ..., H owning i = 1, 4, ... < 3*section[1] and W owning
 *   i = 2, 5, ... < 3*section[2]; sectioned (Qwen2-VL style): the first
 *   section[0] pairs T, the next section[1] H, the rest W.
 * - cos/sin per token and frequency: angle = (float)pos[axis] * inv_freq, in f32.
 *   The rotation itself (NeoX rotate_half pairing d with d + rotary_dim/2) is
 *   the backend op `rope` (backend/ops.h).
 *
 * What it is not: the vision tower's 2-D rotary (model/vision.c) or the
 * multimodal position walk over image runs (model/mrope.c); this file only
 * turns given 3-axis positions into angles.
 */
#ifndef JEV_MODEL_ROPE_H
#define JEV_MODEL_ROPE_H

#include <stdbool.h>
#include <stdint.h>

#include "model/config.h" // defines: struct jev_text_config

#define JEV_ROPE_MAX_FREQ 256 /* rotary_dim / 2 limit (head_dim <= 512) */

enum jev_rope_axis { JEV_ROPE_T = 0, JEV_ROPE_H = 1, JEV_ROPE_W = 2 };

struct jev_rope {
    int32_t rot_dim;                   /* rotated dims per head (even) */
    int32_t n_freq;                    /* rot_dim / 2 frequency pairs */
    float inv_freq[JEV_ROPE_MAX_FREQ]; /* [n_freq] f32 inverse frequencies, torch's values */
    uint8_t axis[JEV_ROPE_MAX_FREQ];   /* [n_freq] enum jev_rope_axis of each pair */
};

/* Fills r from the text config (rotary_dim, rope_theta, mrope_section, interleaving). */
enum jev_status jev_rope_init(struct jev_rope *r, const struct jev_text_config *t, struct jev_error *err);

/* out[i] = f32(1 / f32(base ** f32(2i / dim))) for i < dim / 2, as torch rounds it. */
void jev_rope_inv_freq(double base, int32_t dim, float *out);

/* The axis of each of n_freq pairs from mrope_section (see the file comment). */
void jev_rope_axes(const int32_t section[3], bool interleaved, int32_t n_freq, uint8_t *axis);

/*
 * cos[t][i], sin[t][i] (i < n_freq) for n tokens with positions pos[t][3]
 * (t, h, w). The tables are not duplicated to rot_dim: the rope op pairs
 * dim d and d + n_freq with the same angle.
 */
void jev_rope_cos_sin(const struct jev_rope *r, const int32_t *pos, int64_t n, float *cos_out, float *sin_out);

/* Text positions: pos[i] = (p, p, p) with p = start + i + rope_delta. */
void jev_rope_text_positions(int32_t start, int32_t rope_delta, int64_t n, int32_t *pos);

#endif

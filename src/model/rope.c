/*
 * rope.c - inverse frequencies, axis assignment and cos/sin tables of the
 * text M-RoPE (rope.h).
 *
 * Numerics: torch builds the table as
 *     inv_freq = 1.0 / (base ** (torch.arange(0, dim, 2, dtype=float32) / dim))
 * on the CPU in f32: the exponent 2i/dim is one correctly rounded f32
 * division, the power is f32 (Sleef's powf, which is within 1 ulp and in
 * practice correctly rounded), the reciprocal is one correctly rounded f32
 * division. We form the power in double and round it once to f32, which is
 * the correctly rounded f32 power; the golden test compares the whole table
 * bit for bit with torch's dumped values. A 1-ulp error in inv_freq would
 * turn into angle errors that grow with the position, which is why this is
 * not left to a platform powf.
 */
#include "model/rope.h" // defines: struct jev_rope

#include <math.h>

void jev_rope_inv_freq(double base, int32_t dim, float *out) {
    for (int32_t i = 0; i < dim / 2; i++) {
        /* f32 arange value 2i is exact; the division rounds once to f32. */
        float expo = (float)(2 * i) / (float)dim;
        /* base ** expo, rounded once to f32 from a double power. */
        float p = (float)pow(base, (double)expo);
        out[i] = 1.0f / p;
    }
}

void jev_rope_axes(const int32_t section[3], bool interleaved, int32_t n_freq, uint8_t *axis) {
    if (interleaved) {
        /* HF: start from T everywhere, then overwrite slice(1, 3*s_h, 3) with H
         * and slice(2, 3*s_w, 3) with W. */
        for (int32_t i = 0; i < n_freq; i++)
            axis[i] = JEV_ROPE_T;
        for (int32_t i = 1; i < 3 * section[1] && i < n_freq; i += 3)
            axis[i] = JEV_ROPE_H;
        for (int32_t i = 2; i < 3 * section[2] && i < n_freq; i += 3)
            axis[i] = JEV_ROPE_W;
        return;
    }
    /* Sectioned: contiguous runs T..., H..., W... */
    for (int32_t i = 0; i < n_freq; i++)
        axis[i] = i < section[0] ? JEV_ROPE_T : i < section[0] + section[1] ? JEV_ROPE_H : JEV_ROPE_W;
}

enum jev_status jev_rope_init(struct jev_rope *r, const struct jev_text_config *t, struct jev_error *err) {
    if (t->rotary_dim <= 0 || t->rotary_dim % 2 != 0 || t->rotary_dim / 2 > JEV_ROPE_MAX_FREQ)
        return jev_fail(err, JEV_ERR_UNSUPPORTED, "rope: rotary dim %d must be even and at most %d", t->rotary_dim,
                        2 * JEV_ROPE_MAX_FREQ);
    r->rot_dim = t->rotary_dim;
    r->n_freq = t->rotary_dim / 2;
    jev_rope_inv_freq(t->rope_theta, r->rot_dim, r->inv_freq);
    jev_rope_axes(t->mrope_section, t->mrope_interleaved, r->n_freq, r->axis);
    return JEV_OK;
}

void jev_rope_cos_sin(const struct jev_rope *r, const int32_t *pos, int64_t n, float *cos_out, float *sin_out) {
    for (int64_t t = 0; t < n; t++) {
        for (int32_t i = 0; i < r->n_freq; i++) {
            /* torch: (inv_freq @ position.float()) is a K = 1 product: one f32
             * multiply of the f32 position (exact below 2^24) by inv_freq. */
            float angle = (float)pos[t * 3 + r->axis[i]] * r->inv_freq[i];
            cos_out[t * r->n_freq + i] = cosf(angle);
            sin_out[t * r->n_freq + i] = sinf(angle);
        }
    }
}

void jev_rope_text_positions(int32_t start, int32_t rope_delta, int64_t n, int32_t *pos) {
    for (int64_t i = 0; i < n; i++) {
        int32_t p = start + (int32_t)i + rope_delta;
        pos[i * 3 + 0] = p;
        pos[i * 3 + 1] = p;
        pos[i * 3 + 2] = p;
    }
}

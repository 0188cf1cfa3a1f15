/*
 * mrope.c - get_rope_index: 3-axis positions and rope_delta for prompts
 * with image-pad runs (see mrope.h for the rule and its source).
 */
#include "model/mrope.h" // defines: jev_mrope_positions

/* The walk, writing axis a of token k at pos[a * as + k * ts] (as/ts: the strides of either layout). */
static enum jev_status positions(const int32_t *ids, int32_t n, int32_t image_pad, const struct jev_mrope_image *images,
                                 int32_t n_images, int32_t merge, int32_t *pos, int64_t as, int64_t ts,
                                 int32_t *rope_delta, struct jev_error *err) {
    if (n < 0 || n_images < 0 || merge < 1)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "mrope: bad sizes (%d tokens, %d images, merge %d)", n, n_images,
                        merge);
#define pt(k) pos[(int64_t)(k)*ts]
#define ph(k) pos[as + (int64_t)(k)*ts]
#define pw(k) pos[2 * as + (int64_t)(k)*ts]
    int64_t cur = 0, maxp = -1;
    int32_t img = 0;
    for (int32_t i = 0; i < n;) {
        int32_t j = i;
        bool is_image = ids[i] == image_pad;
        while (j < n && (ids[j] == image_pad) == is_image)
            j++;
        if (!is_image) { /* text: the same position on all three axes */
            for (int32_t k = i; k < j; k++) {
                pt(k) = ph(k) = pw(k) = (int32_t)(cur + (k - i));
            }
            cur += j - i;
            if (cur - 1 > maxp)
                maxp = cur - 1;
        } else {
            if (img >= n_images)
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "mrope: image-pad run %d (tokens %d..%d) has no image (%d given)", img, i, j - 1,
                                n_images);
            const struct jev_mrope_image *g = &images[img];
            if (g->grid_h < merge || g->grid_w < merge || g->grid_h % merge || g->grid_w % merge)
                return jev_fail(err, JEV_ERR_INVALID_ARG, "mrope: image %d grid %dx%d is not a multiple of merge %d",
                                img, g->grid_h, g->grid_w, merge);
            int32_t mh = g->grid_h / merge, mw = g->grid_w / merge;
            if ((int64_t)(j - i) != (int64_t)mh * mw)
                return jev_fail(err, JEV_ERR_INVALID_ARG,
                                "mrope: image-pad run %d has %d tokens but image %d (grid %dx%d) needs %d", img, j - i,
                                img, g->grid_h, g->grid_w, mh * mw);
            for (int32_t k = i; k < j; k++) { /* row-major over the merged grid */
                int32_t r = (k - i) / mw, c = (k - i) % mw;
                pt(k) = (int32_t)cur;
                ph(k) = (int32_t)(cur + r);
                pw(k) = (int32_t)(cur + c);
            }
            int64_t top = cur + (mh > mw ? mh : mw) - 1; /* the largest h or w position of this image */
            if (top > maxp)
                maxp = top;
            cur += mh > mw ? mh : mw;
            img++;
        }
        i = j;
    }
    if (img != n_images)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "mrope: %d images given but the prompt has %d image-pad runs",
                        n_images, img);
#undef pt
#undef ph
#undef pw
    if (rope_delta)
        *rope_delta = (int32_t)(maxp + 1 - n);
    return JEV_OK;
}

enum jev_status jev_mrope_positions(const int32_t *ids, int32_t n, int32_t image_pad,
                                    const struct jev_mrope_image *images, int32_t n_images, int32_t merge, int32_t *pos,
                                    int32_t *rope_delta, struct jev_error *err) {
    return positions(ids, n, image_pad, images, n_images, merge, pos, n, 1, rope_delta, err);
}

enum jev_status jev_mrope_positions_t3(const int32_t *ids, int32_t n, int32_t image_pad,
                                       const struct jev_mrope_image *images, int32_t n_images, int32_t merge,
                                       int32_t *pos, int32_t *rope_delta, struct jev_error *err) {
    return positions(ids, n, image_pad, images, n_images, merge, pos, 1, 3, rope_delta, err);
}

void jev_mrope_text_positions(int32_t start, int32_t n, int32_t rope_delta, int32_t *pos) {
    for (int32_t i = 0; i < n; i++)
        pos[i] = pos[n + i] = pos[2 * n + i] = start + i + rope_delta;
}

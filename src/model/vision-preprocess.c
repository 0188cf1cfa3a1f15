/*
 * vision-preprocess.c - preprocessor_config.json, the target size
 * (bound + smart_resize), torch's uint8 antialiased bicubic resample (bit
 * exact), rescale + normalise and the block-major patch layout.
 *
 * See vision-preprocess.h for the reference chain. What matters for bit
 * exactness is written where it happens: the double-precision weight
 * formula and its evaluation order, the truncating casts, the per-axis
 * fixed-point precision, the half-LSB rounding and the uint8 intermediate.
 * Compiled as ISO C11 (-std=c11), so gcc does not contract a*b+c into FMA
 * here, which keeps the double weights identical to torch's scalar code.
 */
#include "model/vision-preprocess.h" // defines: struct jev_preprocess_config, jev_vision_resize

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "base/pool.h"      // defines: jev_pool_run
#include "base/read-file.h" // defines: jev_read_file

/* ---- preprocessor_config.json ---- */

struct jev_preprocess_config jev_preprocess_config_qwen35(void) {
    struct jev_preprocess_config c = {
        .patch = 16,
        .temporal_patch = 2,
        .merge = 2,
        .min_pixels = 65536,
        .max_pixels = 16777216,
        .mean = {0.5, 0.5, 0.5},
        .std = {0.5, 0.5, 0.5},
        .rescale_factor = 1.0 / 255.0,
        .do_resize = true,
        .do_rescale = true,
        .do_normalize = true,
    };
    return c;
}

/* The class defaults of Qwen2VLImageProcessor, for keys the file leaves out. */
static struct jev_preprocess_config class_defaults(void) {
    struct jev_preprocess_config c = jev_preprocess_config_qwen35();
    c.patch = 14;
    c.min_pixels = 56 * 56;
    c.max_pixels = 28 * 28 * 1280;
    const double mean[3] = {0.48145466, 0.4578275, 0.40821073}; /* OPENAI_CLIP_MEAN */
    const double std[3] = {0.26862954, 0.26130258, 0.27577711}; /* OPENAI_CLIP_STD */
    memcpy(c.mean, mean, sizeof mean);
    memcpy(c.std, std, sizeof std);
    return c;
}

/* An optional positive integer field; absent keeps *v. */
static enum jev_status get_int(json_t *obj, const char *key, const char *where, const char *name, int64_t lo,
                               int64_t hi, int64_t *v, struct jev_error *err) {
    json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j))
        return JEV_OK;
    if (!json_is_integer(j) || json_integer_value(j) < lo || json_integer_value(j) > hi)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: field '%s%s' must be an integer in %lld..%lld", name, where, key,
                        (long long)lo, (long long)hi);
    *v = json_integer_value(j);
    return JEV_OK;
}

static enum jev_status get_bool(json_t *obj, const char *key, const char *name, bool *v, struct jev_error *err) {
    json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j))
        return JEV_OK;
    if (!json_is_boolean(j))
        return jev_fail(err, JEV_ERR_FORMAT, "%s: field '%s' must be true or false", name, key);
    *v = json_is_true(j);
    return JEV_OK;
}

/* image_mean / image_std: three numbers, or one number for all channels. */
static enum jev_status get_triple(json_t *obj, const char *key, const char *name, bool positive, double v[3],
                                  struct jev_error *err) {
    json_t *j = json_object_get(obj, key);
    if (!j || json_is_null(j))
        return JEV_OK;
    double t[3];
    if (json_is_number(j)) {
        t[0] = t[1] = t[2] = json_number_value(j);
    } else if (json_is_array(j) && json_array_size(j) == 3) {
        for (int c = 0; c < 3; c++) {
            json_t *e = json_array_get(j, (size_t)c);
            if (!json_is_number(e))
                return jev_fail(err, JEV_ERR_FORMAT, "%s: field '%s' must hold 3 numbers", name, key);
            t[c] = json_number_value(e);
        }
    } else {
        return jev_fail(err, JEV_ERR_FORMAT, "%s: field '%s' must be a number or an array of 3 numbers", name, key);
    }
    for (int c = 0; c < 3; c++)
        if (!isfinite(t[c]) || (positive && !(t[c] > 0.0)))
            return jev_fail(err, JEV_ERR_FORMAT, "%s: field '%s' must hold finite%s numbers", name, key,
                            positive ? " positive" : "");
    memcpy(v, t, sizeof t);
    return JEV_OK;
}

enum jev_status jev_preprocess_config_parse(const char *text, size_t len, const char *name,
                                            struct jev_preprocess_config *out, struct jev_error *err) {
    if (!name)
        name = "preprocessor_config.json";
    json_error_t jerr;
    json_t *root = json_loadb(text, len, JSON_REJECT_DUPLICATES, &jerr);
    if (!root)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: invalid JSON at line %d: %s", name, jerr.line, jerr.text);
    enum jev_status st = JEV_OK;
    struct jev_preprocess_config c = class_defaults();
    int64_t patch = c.patch, tpatch = c.temporal_patch, merge = c.merge;
    int64_t minp = c.min_pixels, maxp = c.max_pixels, resample = 3;
    if (!json_is_object(root)) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: the top level must be a JSON object", name);
        goto done;
    }
    json_t *size = json_object_get(root, "size");
    if (size && !json_is_null(size)) {
        if (!json_is_object(size)) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: field 'size' must be an object", name);
            goto done;
        }
        /* v5 names (shortest_edge = min pixels, longest_edge = max pixels), and the older min/max_pixels */
        if ((st = get_int(size, "shortest_edge", "size.", name, 1, (int64_t)1 << 40, &minp, err)) ||
            (st = get_int(size, "longest_edge", "size.", name, 1, (int64_t)1 << 40, &maxp, err)) ||
            (st = get_int(size, "min_pixels", "size.", name, 1, (int64_t)1 << 40, &minp, err)) ||
            (st = get_int(size, "max_pixels", "size.", name, 1, (int64_t)1 << 40, &maxp, err)))
            goto done;
    }
    /* top-level min_pixels / max_pixels override size (Qwen2VLImageProcessor.__init__) */
    if ((st = get_int(root, "min_pixels", "", name, 1, (int64_t)1 << 40, &minp, err)) ||
        (st = get_int(root, "max_pixels", "", name, 1, (int64_t)1 << 40, &maxp, err)) ||
        (st = get_int(root, "patch_size", "", name, 1, 1024, &patch, err)) ||
        (st = get_int(root, "temporal_patch_size", "", name, 1, 64, &tpatch, err)) ||
        (st = get_int(root, "merge_size", "", name, 1, 64, &merge, err)) ||
        (st = get_int(root, "resample", "", name, 0, 5, &resample, err)) ||
        (st = get_bool(root, "do_resize", name, &c.do_resize, err)) ||
        (st = get_bool(root, "do_rescale", name, &c.do_rescale, err)) ||
        (st = get_bool(root, "do_normalize", name, &c.do_normalize, err)) ||
        (st = get_triple(root, "image_mean", name, false, c.mean, err)) ||
        (st = get_triple(root, "image_std", name, true, c.std, err)))
        goto done;
    json_t *rf = json_object_get(root, "rescale_factor");
    if (rf && !json_is_null(rf)) {
        if (!json_is_number(rf) || !(json_number_value(rf) > 0.0) || !isfinite(json_number_value(rf))) {
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: field 'rescale_factor' must be a positive number", name);
            goto done;
        }
        c.rescale_factor = json_number_value(rf);
    }
    if (resample != 3) {
        st = jev_fail(err, JEV_ERR_UNSUPPORTED, "%s: field 'resample' is %lld; only 3 (bicubic) is supported", name,
                      (long long)resample);
        goto done;
    }
    if (minp > maxp) {
        st = jev_fail(err, JEV_ERR_FORMAT, "%s: min pixels %lld exceeds max pixels %lld", name, (long long)minp,
                      (long long)maxp);
        goto done;
    }
    c.patch = (int32_t)patch;
    c.temporal_patch = (int32_t)tpatch;
    c.merge = (int32_t)merge;
    c.min_pixels = minp;
    c.max_pixels = maxp;
    *out = c;
done:
    json_decref(root);
    return st;
}

enum jev_status jev_preprocess_config_load(const char *path, struct jev_preprocess_config *out, struct jev_error *err) {
    char *buf = NULL;
    size_t n = 0;
    JEV_TRY(jev_read_file(path, JEV_PREPROCESS_CONFIG_MAX_BYTES, &buf, &n, err));
    enum jev_status st = jev_preprocess_config_parse(buf, n, path, out, err);
    free(buf);
    return st;
}

/* ---- target size ---- */

double jev_round_half_even(double x) {
    /* nearbyint rounds in the current mode; the default (and only one the library uses) is to-nearest-even */
    return nearbyint(x);
}

enum jev_status jev_smart_resize(int64_t h, int64_t w, int64_t factor, int64_t min_pixels, int64_t max_pixels,
                                 int32_t *out_h, int32_t *out_w, struct jev_error *err) {
    if (h < 1 || w < 1)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "image: %lldx%lld has no pixels", (long long)w, (long long)h);
    double hd = (double)h, wd = (double)w, f = (double)factor;
    double ratio = (double)(h > w ? h : w) / (double)(h > w ? w : h);
    if (ratio > 200.0)
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "image: %lldx%lld: absolute aspect ratio must be smaller than 200, got %g", (long long)w,
                        (long long)h, ratio);
    int64_t hb = (int64_t)jev_round_half_even(hd / f) * factor;
    int64_t wb = (int64_t)jev_round_half_even(wd / f) * factor;
    if (hb * wb > max_pixels) {
        /* Python: (height * width) / max_pixels is exact-integer true division, correctly rounded; so is
         * IEEE division of two integers below 2^53 */
        double beta = sqrt((double)(h * w) / (double)max_pixels);
        hb = (int64_t)floor(hd / beta / f) * factor;
        wb = (int64_t)floor(wd / beta / f) * factor;
        if (hb < factor)
            hb = factor;
        if (wb < factor)
            wb = factor;
    } else if (hb * wb < min_pixels) {
        double beta = sqrt((double)min_pixels / (double)(h * w));
        hb = (int64_t)ceil(hd * beta / f) * factor;
        wb = (int64_t)ceil(wd * beta / f) * factor;
    }
    if (hb < factor || wb < factor || hb > 1 << 20 || wb > 1 << 20)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "image: %lldx%lld resizes to an unusable %lldx%lld", (long long)w,
                        (long long)h, (long long)wb, (long long)hb);
    *out_h = (int32_t)hb;
    *out_w = (int32_t)wb;
    return JEV_OK;
}

enum jev_status jev_vision_target_size(const struct jev_preprocess_config *cfg, int32_t h, int32_t w, int32_t bound,
                                       struct jev_vision_size *out, struct jev_error *err) {
    memset(out, 0, sizeof *out);
    int32_t factor = cfg->patch * cfg->merge;
    int32_t H = h, W = w;
    if (cfg->do_resize) {
        int64_t hb = h, wb = w;
        if (bound > 0 && h > 0 && w > 0) {
            /* the bounding box: s = min(1, B / max(h, w)); h' = round(h * s), w' = round(w * s) */
            double s = (double)bound / (double)(h > w ? h : w);
            if (s < 1.0) {
                hb = (int64_t)jev_round_half_even((double)h * s);
                wb = (int64_t)jev_round_half_even((double)w * s);
                if (hb < 1)
                    hb = 1;
                if (wb < 1)
                    wb = 1;
            }
        }
        JEV_TRY(jev_smart_resize(hb, wb, factor, cfg->min_pixels, cfg->max_pixels, &H, &W, err));
    } else if (h % factor != 0 || w % factor != 0) {
        return jev_fail(err, JEV_ERR_INVALID_ARG,
                        "image: %dx%d is not a multiple of %d on both sides and do_resize is false", w, h, factor);
    }
    out->height = H;
    out->width = W;
    out->grid_h = H / cfg->patch;
    out->grid_w = W / cfg->patch;
    out->n_patches = out->grid_h * out->grid_w;
    out->n_tokens = out->n_patches / (cfg->merge * cfg->merge);
    out->patch_dim = 3 * cfg->temporal_patch * cfg->patch * cfg->patch;
    return JEV_OK;
}

/* ---- torch's uint8 antialiased bicubic ---- */

/* HelperInterpCubic::aa_filter<double, true>: Keys cubic, a = -0.5, in ATen's evaluation order
 * (cubic_convolution1 / cubic_convolution2 of UpSample.h). */
static double aa_cubic(double x) {
    const double a = -0.5;
    x = fabs(x);
    if (x < 1.0)
        return ((a + 2.0) * x - (a + 3.0)) * x * x + 1.0;
    if (x < 2.0)
        return ((a * x - 5.0 * a) * x + 8.0 * a) * x - 4.0 * a;
    return 0.0;
}

/* One axis of the resample: per output sample, its first input sample, its tap count and int16 weights. */
struct aa_axis {
    int32_t taps;       /* weights per output sample (max_interp_size) */
    unsigned precision; /* fixed-point bits of the weights */
    int32_t *first;     /* [out] first input sample */
    int32_t *count;     /* [out] taps used (<= taps) */
    int16_t *w;         /* [out][taps] weights * 2^precision */
};

static void aa_axis_free(struct aa_axis *a) {
    free(a->first);
    free(a->count);
    free(a->w);
    memset(a, 0, sizeof *a);
}

/* _compute_index_ranges_weights (antialias) + _compute_index_ranges_int16_weights, align_corners false,
 * no explicit scale factor (torchvision passes a size): scale = in / out. */
static enum jev_status aa_axis_init(struct aa_axis *a, int32_t in, int32_t out, struct jev_error *err) {
    memset(a, 0, sizeof *a);
    double scale = (double)in / (double)out;
    double support = scale >= 1.0 ? (4 * 0.5) * scale : 4 * 0.5; /* interp_size 4 for cubic */
    int32_t taps = (int32_t)ceil(support) * 2 + 1;
    double invscale = scale >= 1.0 ? 1.0 / scale : 1.0;
    a->taps = taps;
    a->first = malloc((size_t)out * sizeof *a->first);
    a->count = malloc((size_t)out * sizeof *a->count);
    a->w = malloc((size_t)out * (size_t)taps * sizeof *a->w);
    double *wf = malloc((size_t)out * (size_t)taps * sizeof *wf);
    if (!a->first || !a->count || !a->w || !wf) {
        free(wf);
        aa_axis_free(a);
        return jev_fail(err, JEV_ERR_NOMEM, "image resize: out of memory for %d x %d weights", out, taps);
    }
    double wt_max = 0.0;
    for (int64_t i = 0; i < out; i++) {
        double *wi = wf + i * taps;
        double center = scale * ((double)i + 0.5);
        double total = 0.0;
        /* static_cast<int64_t> truncates toward zero, as here */
        int64_t xmin = (int64_t)(center - support + 0.5);
        if (xmin < 0)
            xmin = 0;
        int64_t xmax = (int64_t)(center + support + 0.5);
        if (xmax > in)
            xmax = in;
        int64_t xsize = xmax - xmin;
        if (xsize < 0)
            xsize = 0;
        if (xsize > taps) /* rare precision cases, clipped as ATen does */
            xsize = taps;
        int64_t j = 0;
        for (; j < xsize; j++) {
            double wj = aa_cubic(((double)(j + xmin) - center + 0.5) * invscale);
            wi[j] = wj;
            total += wj;
        }
        double wmax_i = 0.0;
        if (total != 0.0) {
            for (j = 0; j < xsize; j++) {
                wi[j] /= total;
                if (wi[j] > wmax_i)
                    wmax_i = wi[j];
            }
        }
        for (; j < taps; j++)
            wi[j] = 0.0;
        if (wmax_i > wt_max)
            wt_max = wmax_i;
        a->first[i] = (int32_t)xmin;
        a->count[i] = (int32_t)xsize;
    }
    /* the largest precision (< 22) at which the largest weight, doubled, still rounds below 2^15 */
    unsigned p;
    for (p = 0; p < 22; ++p) {
        int next = (int)(0.5 + wt_max * (double)(1 << (p + 1)));
        if (next >= (1 << 15))
            break;
    }
    a->precision = p;
    for (int64_t k = 0; k < (int64_t)out * taps; k++) {
        double v = wf[k] * (double)(1 << p);
        a->w[k] = (int16_t)(v < 0 ? (int)(-0.5 + v) : (int)(0.5 + v)); /* round half away from zero */
    }
    free(wf);
    if (p == 0) { /* ATen asserts weights_precision > 0 */
        aa_axis_free(a);
        return jev_fail(err, JEV_ERR_INVALID_ARG, "image resize: %d -> %d has no usable weight precision", in, out);
    }
    return JEV_OK;
}

struct resize_job {
    const uint8_t *src;       /* [rows][in_w][3] */
    uint8_t *dst;             /* [rows'][out_w][3] */
    int32_t in_w, out_w;      /* row lengths in pixels */
    const struct aa_axis *ax; /* the axis being resampled */
};

/* One output sample's integer dot product (+ half an LSB, basic_loop_aa_*<uint8_t>), shifted down and
 * clamped. ATen: clamp(acc >> p, 0, 255) with an arithmetic shift; a negative sum clamps to 0 either way. */
static inline uint8_t aa_clamp(int32_t acc, unsigned p) {
    if (acc < 0)
        return 0;
    acc >>= p;
    return (uint8_t)(acc > 255 ? 255 : acc);
}

/* Horizontal pass: one input row -> one output row. The three channels of a pixel in one walk over
 * its taps (one loop, not three strided ones): the same integer sums, so the same bytes. */
static void resize_row_h(void *arg, int64_t y, int thread) {
    (void)thread;
    const struct resize_job *j = arg;
    const uint8_t *s = j->src + (size_t)y * (size_t)j->in_w * 3;
    uint8_t *d = j->dst + (size_t)y * (size_t)j->out_w * 3;
    const struct aa_axis *a = j->ax;
    const int32_t half = (int32_t)1 << (a->precision - 1);
    for (int32_t x = 0; x < j->out_w; x++) {
        const int16_t *w = a->w + (size_t)x * (size_t)a->taps;
        const uint8_t *p = s + (size_t)a->first[x] * 3;
        int32_t r = half, g = half, b = half;
        for (int32_t t = 0; t < a->count[x]; t++) {
            r += (int32_t)p[3 * t] * (int32_t)w[t];
            g += (int32_t)p[3 * t + 1] * (int32_t)w[t];
            b += (int32_t)p[3 * t + 2] * (int32_t)w[t];
        }
        d[x * 3] = aa_clamp(r, a->precision);
        d[x * 3 + 1] = aa_clamp(g, a->precision);
        d[x * 3 + 2] = aa_clamp(b, a->precision);
    }
}

#define AA_SPAN 1024 /* bytes of an output row the vertical pass sums at once (int32 sums on the stack) */

/* Vertical pass: output row y from a column window of the (horizontally resampled) rows. Tap by tap
 * over a span of the row (contiguous bytes: the compiler's vectors), the same integer sums as one dot
 * product per byte, so the same bytes: integer addition does not depend on its order (and no partial
 * sum overflows: 255 x the weights' absolute sum stays far below 2^31). */
static void resize_row_v(void *arg, int64_t y, int thread) {
    (void)thread;
    const struct resize_job *j = arg;
    const struct aa_axis *a = j->ax;
    const int16_t *w = a->w + (size_t)y * (size_t)a->taps;
    ptrdiff_t stride = (ptrdiff_t)j->out_w * 3;
    const uint8_t *s = j->src + (size_t)a->first[y] * (size_t)stride;
    uint8_t *d = j->dst + (size_t)y * (size_t)stride;
    const int32_t half = (int32_t)1 << (a->precision - 1);
    int32_t acc[AA_SPAN];
    for (ptrdiff_t k0 = 0; k0 < stride; k0 += AA_SPAN) {
        const ptrdiff_t n = stride - k0 < AA_SPAN ? stride - k0 : AA_SPAN;
        for (ptrdiff_t k = 0; k < n; k++)
            acc[k] = half;
        for (int32_t t = 0; t < a->count[y]; t++) {
            const uint8_t *row = s + (ptrdiff_t)t * stride + k0;
            const int32_t wt = w[t];
            for (ptrdiff_t k = 0; k < n; k++)
                acc[k] += (int32_t)row[k] * wt;
        }
        for (ptrdiff_t k = 0; k < n; k++)
            d[k0 + k] = aa_clamp(acc[k], a->precision);
    }
}

enum jev_status jev_vision_resize(const uint8_t *src, int32_t h, int32_t w, uint8_t *dst, int32_t H, int32_t W,
                                  struct jev_pool *pool, struct jev_error *err) {
    if (h < 1 || w < 1 || H < 1 || W < 1)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "image resize: %dx%d -> %dx%d", w, h, W, H);
    if (h == H && w == W) { /* torchvision returns the image itself */
        memcpy(dst, src, (size_t)h * (size_t)w * 3);
        return JEV_OK;
    }
    enum jev_status st = JEV_OK;
    struct aa_axis ax = {0}, ay = {0};
    uint8_t *mid = NULL;
    const uint8_t *cur = src;
    /* horizontal first (the contiguous dimension), into a uint8 image unless it is the last pass */
    if (W != w) {
        if ((st = aa_axis_init(&ax, w, W, err)) != JEV_OK)
            goto done;
        uint8_t *to = dst;
        if (H != h) {
            mid = malloc((size_t)h * (size_t)W * 3);
            if (!mid) {
                st = jev_fail(err, JEV_ERR_NOMEM, "image resize: out of memory for a %dx%d intermediate", W, h);
                goto done;
            }
            to = mid;
        }
        struct resize_job j = {cur, to, w, W, &ax};
        jev_pool_run(pool, h, resize_row_h, &j);
        cur = to;
    }
    if (H != h) {
        if ((st = aa_axis_init(&ay, h, H, err)) != JEV_OK)
            goto done;
        struct resize_job j = {cur, dst, W, W, &ay};
        jev_pool_run(pool, H, resize_row_v, &j);
    }
done:
    aa_axis_free(&ax);
    aa_axis_free(&ay);
    free(mid);
    return st;
}

/* ---- rescale, normalise, patches ---- */

/* One row of patches (grid row `row`, every column) of the patchify: the tasks write disjoint rows of
 * pixel_values, each element the same table value whichever thread writes it. */
struct patch_job {
    const uint8_t *rgb;      /* [H][W][3] the resized image */
    float *pixels;           /* [n_patches][dim] */
    int32_t W, P, T, M;      /* image width, patch, temporal patch, merge */
    int32_t bw;              /* merge blocks per grid row */
    size_t dim;              /* 3 * T * P * P */
    const float (*lut)[256]; /* [3][256] every uint8 value of every channel, normalised */
};

static void patch_row(void *arg, int64_t row, int thread) {
    (void)thread;
    const struct patch_job *j = arg;
    const int32_t P = j->P, T = j->T, M = j->M;
    const size_t plane = (size_t)P * (size_t)P, frames = (size_t)T * plane;
    const int32_t br = (int32_t)row / M, ir = (int32_t)row % M;
    for (int32_t col = 0; col < j->bw * M; col++) {
        /* block-major: 2x2 (merge x merge) blocks in row-major order, patches inside a block row-major */
        const int32_t bc = col / M, ic = col % M;
        const int64_t p = (((int64_t)br * j->bw + bc) * M + ir) * M + ic;
        float *o = j->pixels + (size_t)p * j->dim;
        for (int32_t y = 0; y < P; y++) {
            const uint8_t *src = j->rgb + ((size_t)((int64_t)row * P + y) * (size_t)j->W + (size_t)col * (size_t)P) * 3;
            float *d = o + (size_t)y * (size_t)P;
            /* the three channels in one walk over the row's interleaved bytes; element c*T*P*P + y*P + x */
            for (int32_t x = 0; x < P; x++) {
                d[x] = j->lut[0][src[3 * x]];
                d[frames + (size_t)x] = j->lut[1][src[3 * x + 1]];
                d[2 * frames + (size_t)x] = j->lut[2][src[3 * x + 2]];
            }
            for (int c = 0; c < 3; c++) /* the still image is every frame */
                for (int32_t t = 1; t < T; t++)
                    memcpy(d + (size_t)c * frames + (size_t)t * plane, d + (size_t)c * frames, (size_t)P * sizeof *d);
        }
    }
}

void jev_vision_patchify_on(const struct jev_preprocess_config *cfg, const uint8_t *rgb, int32_t H, int32_t W,
                            float *pixels, struct jev_pool *pool) {
    const int32_t P = cfg->patch, T = cfg->temporal_patch, M = cfg->merge;
    /* The fused constants of TorchvisionBackend._fuse_mean_std_and_rescale_factor: torch.tensor(mean) is f32,
     * times the Python float 1/rescale_factor, which the CPU kernel casts to f32. */
    float mean[3], stdv[3], scale = (float)cfg->rescale_factor;
    for (int c = 0; c < 3; c++) {
        mean[c] = (float)cfg->mean[c];
        stdv[c] = (float)cfg->std[c];
        if (cfg->do_rescale && cfg->do_normalize) {
            mean[c] = mean[c] * (float)(1.0 / cfg->rescale_factor);
            stdv[c] = stdv[c] * (float)(1.0 / cfg->rescale_factor);
        }
    }
    float lut[3][256]; /* every uint8 value of every channel, computed once */
    for (int c = 0; c < 3; c++)
        for (int v = 0; v < 256; v++) {
            float x = (float)v;
            if (cfg->do_normalize)
                x = (x - mean[c]) / stdv[c];
            else if (cfg->do_rescale)
                x = x * scale;
            lut[c][v] = x;
        }
    struct patch_job j = {.rgb = rgb,
                          .pixels = pixels,
                          .W = W,
                          .P = P,
                          .T = T,
                          .M = M,
                          .bw = W / P / M,
                          .dim = (size_t)3 * (size_t)T * (size_t)P * (size_t)P,
                          .lut = (const float(*)[256])lut};
    /* one task per grid row: 38 for the benchmark photo, 11 MB of f32 written (and first touched) spread
     * over the pool's threads instead of the caller's alone */
    jev_pool_run(pool, H / P, patch_row, &j);
}

void jev_vision_patchify(const struct jev_preprocess_config *cfg, const uint8_t *rgb, int32_t H, int32_t W,
                         float *pixels) {
    jev_vision_patchify_on(cfg, rgb, H, W, pixels, NULL);
}

enum jev_status jev_vision_preprocess(const struct jev_preprocess_config *cfg, const struct jev_image *img,
                                      const struct jev_preprocess_params *params, struct jev_pool *pool,
                                      struct jev_vision_input *out, struct jev_error *err) {
    memset(out, 0, sizeof *out);
    struct jev_preprocess_params p = params ? *params : (struct jev_preprocess_params){0};
    if (!img || !img->rgb || img->width < 1 || img->height < 1)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "image: no pixels to preprocess");
    struct jev_vision_size sz;
    JEV_TRY(jev_vision_target_size(cfg, img->height, img->width, p.bound, &sz, err));
    if (p.max_patches > 0 && sz.n_patches > p.max_patches)
        return jev_fail(err, JEV_ERR_CONTEXT_FULL, "image: %dx%d resizes to %dx%d = %d patches, above the limit of %d",
                        img->width, img->height, sz.width, sz.height, sz.n_patches, p.max_patches);
    out->resized = malloc((size_t)sz.height * (size_t)sz.width * 3);
    out->pixels = malloc((size_t)sz.n_patches * (size_t)sz.patch_dim * sizeof(float));
    if (!out->resized || !out->pixels) {
        jev_vision_input_free(out);
        return jev_fail(err, JEV_ERR_NOMEM, "image: out of memory for %d patches", sz.n_patches);
    }
    enum jev_status st =
        jev_vision_resize(img->rgb, img->height, img->width, out->resized, sz.height, sz.width, pool, err);
    if (st != JEV_OK) {
        jev_vision_input_free(out);
        return st;
    }
    jev_vision_patchify_on(cfg, out->resized, sz.height, sz.width, out->pixels, pool);
    out->size = sz;
    return JEV_OK;
}

void jev_vision_input_free(struct jev_vision_input *in) {
    if (!in)
        return;
    free(in->pixels);
    free(in->resized);
    memset(in, 0, sizeof *in);
}

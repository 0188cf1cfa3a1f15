/*
 * test-vision-golden.c - the image path against transformers/PIL/torch
 * goldens (tests/golden/vision-*.json, written by
 * scripts/reference/vision_goldens.py; see its header for the command).
 * These tests fail, naming the missing file, until the goldens are committed.
 *
 *   decode:     every test PNG and the dog JPEG decode to PIL's
 *               convert("RGB") bytes (sha256; pixels listed on mismatch);
 *               the EXIF files with orientation applied = exif_transpose.
 *   preprocess: the dog (bounded to 608x768) and the alpha PNG (224x320):
 *               the same target and grid; the resized uint8 image against
 *               the processor's (pixel-exact is the aim: the test prints how
 *               many samples differ and requires >= 99.9% identical and
 *               none off by more than one step); pixel_values samples and
 *               row sums.
 *   tower:      the tiny synthetic model (hf and mlx4; the synthesized
 *               weights must hash as the goldens' did): torch's inv_freq bit
 *               for bit; the formula image's embeddings and per-stage
 *               slices, and the dog's, within max|a-b|/max|b| <= 1e-4.
 *   mm:         jev_mrope_positions = get_rope_index (positions, rope_delta)
 *               for the goldens' multimodal prompts; then the whole
 *               multimodal forward of the tiny model (vision tower ->
 *               image embeddings at the pad tokens -> language model with
 *               the M-RoPE positions): logits at the goldens' positions,
 *               top-5 identical, max|a-b|/max|b| <= 1e-4 on the slices.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jansson.h>

#include "backend/cpu/cpu.h"         // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"               // defines: jev_pool_init
#include "base/sha256.h"             // defines: jev_sha256_hex
#include "io/image.h"                // defines: jev_image_load
#include "model/engine.h"            // defines: struct jev_engine
#include "model/lm.h"                // defines: jev_lm_forward
#include "model/model.h"             // defines: jev_model_weights_sha256
#include "model/state.h"             // defines: jev_seq_new
#include "model/mrope.h"             // defines: jev_mrope_positions
#include "model/vision-preprocess.h" // defines: jev_vision_preprocess
#include "model/vision.h"            // defines: jev_vision_forward
#include "vision-ref.h"              // defines: vref_open_tiny

/* ---- golden files ---- */

static json_t *golden(const char *name) {
    char path[512];
    snprintf(path, sizeof path, "tests/golden/%s", name);
    json_error_t e;
    json_t *j = json_load_file(path, 0, &e);
    if (!j)
        fail_msg("%s: %s (the goldens come from scripts/reference/vision_goldens.py, run by the lead with "
                 "transformers; see that script's header)",
                 path, e.text);
    return j;
}

static json_t *need(json_t *o, const char *key) {
    json_t *v = json_object_get(o, key);
    if (!v)
        fail_msg("golden: missing key '%s'", key);
    return v;
}

static double num(json_t *o, const char *key) { return json_number_value(need(o, key)); }

/* max |a - b| / max |b| over n values, b from a JSON array of numbers */
static double rel_err(const float *a, json_t *b, size_t n) {
    assert_int_equal(json_array_size(b), n);
    double md = 0, mb = 0;
    for (size_t i = 0; i < n; i++) {
        double bv = json_number_value(json_array_get(b, i));
        md = fmax(md, fabs((double)a[i] - bv));
        mb = fmax(mb, fabs(bv));
    }
    return mb > 0 ? md / mb : md;
}

/* ---- decode ---- */

static void check_decode(const char *path, bool exif, json_t *want) {
    struct jev_image img;
    struct jev_error err = {0};
    struct jev_image_params p = jev_image_default_params();
    p.apply_exif_orientation = exif;
    if (jev_image_load(path, &p, &img, &err) != JEV_OK)
        fail_msg("%s: %s", path, err.msg);
    assert_int_equal(img.width, (int)num(want, "width"));
    assert_int_equal(img.height, (int)num(want, "height"));
    char hex[JEV_SHA256_HEX];
    jev_sha256_hex(img.rgb, (size_t)img.width * (size_t)img.height * 3, hex);
    if (strcmp(hex, json_string_value(need(want, "sha256"))) != 0) {
        json_t *rgb = json_object_get(want, "rgb"), *rows = need(want, "row_sums");
        for (int y = 0; y < img.height; y++) {
            long s = 0;
            for (int i = 0; i < img.width * 3; i++)
                s += img.rgb[(size_t)y * (size_t)img.width * 3 + (size_t)i];
            if (s != (long)json_integer_value(json_array_get(rows, (size_t)y)))
                print_message("%s: row %d sums to %ld, PIL %lld\n", path, y, s,
                              (long long)json_integer_value(json_array_get(rows, (size_t)y)));
        }
        for (size_t i = 0; rgb && i < json_array_size(rgb); i++)
            if (img.rgb[i] != json_integer_value(json_array_get(rgb, i)))
                print_message("%s: sample %zu is %d, PIL %lld\n", path, i, img.rgb[i],
                              (long long)json_integer_value(json_array_get(rgb, i)));
        fail_msg("%s%s: RGB differs from PIL's convert(\"RGB\")", path, exif ? " (EXIF applied)" : "");
    }
    jev_image_free(&img);
}

static void test_decode_matches_pil(void **state) {
    (void)state;
    json_t *g = golden("vision-decode.json"), *files = need(g, "files");
    const char *name;
    json_t *want;
    int n = 0;
    json_object_foreach(files, name, want) {
        char path[512];
        snprintf(path, sizeof path, strcmp(name, "dog.jpg") == 0 ? "assets/%s" : "tests/data/%s", name);
        check_decode(path, false, want);
        json_t *ex = json_object_get(want, "exif_transposed");
        if (ex)
            check_decode(path, true, ex);
        n++;
    }
    assert_true(n >= 19);
    json_decref(g);
}

/* ---- preprocess ---- */

static void check_preprocess(json_t *want, const char *src, int bound) {
    struct jev_preprocess_config cfg;
    struct jev_error err = {0};
    assert_int_equal(jev_preprocess_config_load("configs/preprocessor_config.json", &cfg, &err), JEV_OK);
    struct jev_image img, ref;
    assert_int_equal(jev_image_load(src, NULL, &img, &err), JEV_OK);
    struct jev_preprocess_params p = {.bound = bound, .max_patches = 0};
    struct jev_vision_input in;
    if (jev_vision_preprocess(&cfg, &img, &p, NULL, &in, &err) != JEV_OK)
        fail_msg("%s: %s", src, err.msg);
    json_t *target = need(want, "target"), *grid = need(want, "grid");
    assert_int_equal(in.size.height, json_integer_value(json_array_get(target, 0)));
    assert_int_equal(in.size.width, json_integer_value(json_array_get(target, 1)));
    assert_int_equal(in.size.grid_h, json_integer_value(json_array_get(grid, 1)));
    assert_int_equal(in.size.grid_w, json_integer_value(json_array_get(grid, 2)));
    /* the resized uint8 image against the processor's (a lossless PNG next to the JSON) */
    char path[512];
    snprintf(path, sizeof path, "tests/golden/%s", json_string_value(need(want, "resized_png")));
    if (jev_image_load(path, NULL, &ref, &err) != JEV_OK)
        fail_msg("%s: %s", path, err.msg);
    assert_int_equal(ref.width, in.size.width);
    assert_int_equal(ref.height, in.size.height);
    size_t n = (size_t)ref.width * (size_t)ref.height * 3, differ = 0;
    int maxd = 0;
    for (size_t i = 0; i < n; i++) {
        int d = abs((int)in.resized[i] - (int)ref.rgb[i]);
        differ += d != 0;
        maxd = d > maxd ? d : maxd;
    }
    print_message("%s -> %dx%d: %zu of %zu resized samples differ from torch's (max %d)\n", src, ref.width, ref.height,
                  differ, n, maxd);
    assert_true(maxd <= 1);
    assert_true(differ * 1000 <= n);
    /* pixel_values: strided samples (one uint8 step = 2/255 after normalisation where the images differ) and
     * per-row sums */
    json_t *pv = need(want, "pixel_values"), *samples = need(pv, "samples"), *rows = need(pv, "row_sums");
    assert_int_equal((size_t)num(pv, "rows"), (size_t)in.size.n_patches);
    assert_int_equal((size_t)num(pv, "cols"), (size_t)in.size.patch_dim);
    size_t exact = 0;
    for (size_t i = 0; i < json_array_size(samples); i++) {
        json_t *s = json_array_get(samples, i);
        size_t k = (size_t)json_integer_value(json_array_get(s, 0));
        double v = json_number_value(json_array_get(s, 1));
        double d = fabs((double)in.pixels[k] - v);
        assert_true(d <= 2.0 / 255.0 + 1e-6);
        exact += d == 0.0;
    }
    if (differ == 0)
        assert_int_equal(exact, json_array_size(samples));
    for (int r = 0; r < in.size.n_patches; r++) {
        double s = 0;
        for (int c = 0; c < in.size.patch_dim; c++)
            s += (double)in.pixels[(size_t)r * (size_t)in.size.patch_dim + (size_t)c];
        double w = json_number_value(json_array_get(rows, (size_t)r));
        assert_true(fabs(s - w) <= 1e-3 + (differ ? 0.05 * (double)in.size.patch_dim / 255.0 : 0.0));
    }
    jev_image_free(&ref);
    jev_image_free(&img);
    jev_vision_input_free(&in);
}

static void test_preprocess_matches_processor(void **state) {
    (void)state;
    json_t *g = golden("vision-preprocess.json"), *images = need(g, "images");
    json_t *dog = need(images, "dog"), *bounded = need(dog, "bounded");
    /* the bound's intermediate size (Python round of the double product) */
    assert_int_equal(json_integer_value(json_array_get(bounded, 0)), 603);
    assert_int_equal(json_integer_value(json_array_get(bounded, 1)), 768);
    check_preprocess(dog, "assets/dog.jpg", 768);
    check_preprocess(need(images, "alpha"), "tests/data/alpha-257x181.png", 0);
    json_decref(g);
}

/* ---- tower ---- */

struct stage_capture {
    json_t *stages; /* the golden's per-stage slices */
    int checked;    /* stages compared */
};

static void stage_hook(void *arg, const char *name, int layer, const float *t, int64_t rows, int64_t cols) {
    struct stage_capture *c = arg;
    char key[32];
    if (layer >= 0)
        snprintf(key, sizeof key, "%s%d", name, layer);
    else
        snprintf(key, sizeof key, "%s", name);
    json_t *st = json_object_get(c->stages, key);
    if (!st)
        return;
    json_t *first = need(st, "first"), *sums = need(st, "row_sums");
    assert_int_equal(json_array_size(sums), (size_t)rows);
    double scale = 0;
    for (size_t r = 0; r < json_array_size(first); r++) {
        json_t *row = json_array_get(first, r);
        double e = rel_err(t + r * (size_t)cols, row, json_array_size(row));
        if (!(e <= 1e-4))
            fail_msg("stage %s row %zu: relative error %g", key, r, e);
    }
    for (int64_t r = 0; r < rows; r++)
        scale = fmax(scale, fabs(json_number_value(json_array_get(sums, (size_t)r))));
    for (int64_t r = 0; r < rows; r++) {
        double s = 0;
        for (int64_t k = 0; k < cols; k++)
            s += (double)t[r * cols + k];
        double d = fabs(s - json_number_value(json_array_get(sums, (size_t)r)));
        if (!(d <= 1e-4 * scale + 1e-5))
            fail_msg("stage %s: row %lld sums to %g, torch %g", key, (long long)r, s,
                     json_number_value(json_array_get(sums, (size_t)r)));
    }
    c->checked++;
}

/* The formula image of the goldens (vision_goldens.py formula_image). */
static void formula_rgb(uint8_t *rgb, int h, int w) {
    for (int y = 0; y < h; y++)
        for (int x = 0; x < w; x++)
            for (int c = 0; c < 3; c++)
                rgb[((size_t)y * (size_t)w + (size_t)x) * 3 + (size_t)c] =
                    (uint8_t)((x * 7 + y * 13 + c * 50 + (x * y) % 17) % 256);
}

static void check_tower(const char *layout) {
    char name[64];
    snprintf(name, sizeof name, "vision-tower-%s.json", layout);
    json_t *g = golden(name);
    struct jev_model *m = vref_open_tiny(layout);
    struct jev_error err = {0};
    char hex[JEV_SHA256_HEX];
    assert_int_equal(jev_model_weights_sha256(m, hex, &err), JEV_OK);
    const char *want_sha = json_string_value(need(need(g, "weights_sha256"), "model.safetensors"));
    if (strcmp(hex, want_sha) != 0)
        fail_msg("%s: this machine's `jev synth` wrote weights %s, the goldens were made from %s", layout, hex,
                 want_sha);
    const struct jev_vision_config *c = &m->config.vision;

    /* torch's inv_freq, bit for bit */
    float f[JEV_VISION_MAX_HEAD_DIM / 4];
    int32_t nf = jev_vision_inv_freq(c->head_dim, JEV_VISION_ROPE_THETA, f);
    json_t *bits = need(g, "inv_freq_bits");
    assert_int_equal(json_array_size(bits), (size_t)nf);
    for (int32_t i = 0; i < nf; i++) {
        uint32_t u;
        memcpy(&u, &f[i], 4);
        char b[9];
        snprintf(b, sizeof b, "%02x%02x%02x%02x", u & 0xFF, (u >> 8) & 0xFF, (u >> 16) & 0xFF, u >> 24);
        if (strcmp(b, json_string_value(json_array_get(bits, (size_t)i))) != 0)
            fail_msg("inv_freq[%d] = %.9g (%s), torch %s", i, (double)f[i], b,
                     json_string_value(json_array_get(bits, (size_t)i)));
    }

    struct jev_pool *pool = NULL;
    assert_int_equal(jev_pool_init(&pool, 2, &err), JEV_OK);
    struct jev_backend *be = jev_cpu_backend_new(pool);
    struct jev_vision v;
    assert_int_equal(jev_vision_init(&v, c, &m->weights.vision, &jev_cpu_ops, be, 1824, &err), JEV_OK);
    struct jev_preprocess_config pc;
    assert_int_equal(jev_preprocess_config_load("configs/preprocessor_config.json", &pc, &err), JEV_OK);

    /* the formula image, no resize */
    json_t *fo = need(g, "formula");
    uint8_t *rgb = malloc(96 * 128 * 3);
    formula_rgb(rgb, 96, 128);
    float *pix = malloc((size_t)48 * (size_t)c->patch_dim * sizeof(float));
    jev_vision_patchify(&pc, rgb, 96, 128, pix);
    double s = 0;
    for (size_t i = 0; i < (size_t)48 * (size_t)c->patch_dim; i++)
        s += (double)pix[i];
    assert_true(fabs(s - num(fo, "pixel_values_sum")) <= 1e-6 * 48 * c->patch_dim);
    struct stage_capture cap = {need(fo, "stages"), 0};
    v.hook = stage_hook;
    v.hook_arg = &cap;
    float *emb = malloc((size_t)12 * (size_t)c->out_hidden * sizeof(float));
    assert_int_equal(jev_vision_forward(&v, pix, 6, 8, emb, &err), JEV_OK);
    assert_int_equal(cap.checked, 3 + c->depth);
    double e = rel_err(emb, need(need(fo, "embeddings"), "values"), (size_t)12 * (size_t)c->out_hidden);
    print_message("%s formula image: embeddings relative error %.3g\n", layout, e);
    assert_true(e <= 1e-4);
    v.hook = NULL;

    /* the dog, through this engine's own preprocessing */
    struct jev_image img;
    struct jev_vision_input in;
    struct jev_preprocess_params pp = {.bound = 768, .max_patches = 0};
    assert_int_equal(jev_image_load("assets/dog.jpg", NULL, &img, &err), JEV_OK);
    assert_int_equal(jev_vision_preprocess(&pc, &img, &pp, pool, &in, &err), JEV_OK);
    float *dog = malloc((size_t)in.size.n_tokens * (size_t)c->out_hidden * sizeof(float));
    assert_int_equal(jev_vision_forward(&v, in.pixels, in.size.grid_h, in.size.grid_w, dog, &err), JEV_OK);
    json_t *jd = need(g, "dog"), *rows = need(jd, "rows"), *sums = need(jd, "row_sums");
    const char *key;
    json_t *row;
    double worst = 0;
    json_object_foreach(rows, key, row) {
        int r = atoi(key);
        worst = fmax(worst, rel_err(dog + (size_t)r * (size_t)c->out_hidden, row, (size_t)c->out_hidden));
    }
    print_message("%s dog: strided rows relative error %.3g\n", layout, worst);
    assert_true(worst <= 1e-4);
    assert_int_equal(json_array_size(sums), (size_t)in.size.n_tokens);
    free(dog);
    free(emb);
    free(pix);
    free(rgb);
    jev_image_free(&img);
    jev_vision_input_free(&in);
    jev_vision_free(&v);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
    jev_model_free(m);
    json_decref(g);
}

static void test_tower_hf(void **state) {
    (void)state;
    check_tower("hf");
}

static void test_tower_mlx4(void **state) {
    (void)state;
    check_tower("mlx4");
}

/* ---- M-RoPE positions ---- */

static void test_mrope_matches_get_rope_index(void **state) {
    (void)state;
    json_t *g = golden("vision-mm-hf.json"), *cases = need(g, "cases");
    int32_t pad = (int32_t)num(g, "image_token_id");
    const char *name;
    json_t *cs;
    int n = 0;
    json_object_foreach(cases, name, cs) {
        json_t *ids = need(cs, "ids"), *grid = need(cs, "grid"), *pos = need(cs, "positions");
        int32_t T = (int32_t)json_array_size(ids);
        int32_t *tok = malloc((size_t)T * sizeof *tok), *p = malloc((size_t)T * 3 * sizeof *p), delta = 0;
        for (int32_t i = 0; i < T; i++)
            tok[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
        struct jev_mrope_image im = {(int32_t)json_integer_value(json_array_get(grid, 1)),
                                     (int32_t)json_integer_value(json_array_get(grid, 2))};
        struct jev_error err = {0};
        assert_int_equal(jev_mrope_positions(tok, T, pad, &im, 1, 2, p, &delta, &err), JEV_OK);
        for (int a = 0; a < 3; a++)
            for (int32_t i = 0; i < T; i++)
                if (p[a * T + i] != json_integer_value(json_array_get(json_array_get(pos, (size_t)a), (size_t)i)))
                    fail_msg("%s: axis %d token %d: %d, get_rope_index %lld", name, a, i, p[a * T + i],
                             (long long)json_integer_value(json_array_get(json_array_get(pos, (size_t)a), (size_t)i)));
        assert_int_equal(delta, (int32_t)num(cs, "rope_delta"));
        free(tok);
        free(p);
        n++;
    }
    assert_int_equal(n, 2);
    json_decref(g);
}

/* ---- the multimodal forward ---- */

static void check_mm_logits(const char *layout) {
    char name[64];
    snprintf(name, sizeof name, "vision-mm-%s.json", layout);
    json_t *g = golden(name), *cases = need(g, "cases");
    struct jev_model *m = vref_open_tiny(layout);
    struct jev_error err = {0};
    struct jev_engine_params ep = {.max_tokens = 1024, .max_batch = 4, .prefill_chunk = 512};
    struct jev_engine *e = NULL;
    if (jev_engine_init(m, &ep, &e) != JEV_OK)
        fail_msg("engine: %s", jev_engine_last_error(e));
    const struct jev_config *cfg = &m->config;
    const int32_t D = cfg->text.hidden, V = m->weights.text.lm_head.rows, pad = (int32_t)num(g, "image_token_id");
    struct jev_vision v;
    assert_int_equal(jev_vision_init(&v, &cfg->vision, &m->weights.vision, e->ops, e->be, 1824, &err), JEV_OK);
    struct jev_preprocess_config pc;
    assert_int_equal(jev_preprocess_config_load("configs/preprocessor_config.json", &pc, &err), JEV_OK);
    const char *cname;
    json_t *cs;
    json_object_foreach(cases, cname, cs) {
        /* the image: the formula image unresized, or the dog through this engine's preprocessing */
        struct jev_vision_input in = {0};
        uint8_t *rgb = NULL;
        float *pix;
        int32_t gh, gw;
        if (strcmp(cname, "formula") == 0) {
            rgb = malloc(96 * 128 * 3);
            formula_rgb(rgb, 96, 128);
            pix = malloc((size_t)48 * (size_t)cfg->vision.patch_dim * sizeof(float));
            jev_vision_patchify(&pc, rgb, 96, 128, pix);
            gh = 6;
            gw = 8;
        } else {
            struct jev_image img;
            struct jev_preprocess_params pp = {.bound = 768, .max_patches = 0};
            assert_int_equal(jev_image_load("assets/dog.jpg", NULL, &img, &err), JEV_OK);
            assert_int_equal(jev_vision_preprocess(&pc, &img, &pp, e->pool, &in, &err), JEV_OK);
            jev_image_free(&img);
            pix = in.pixels;
            gh = in.size.grid_h;
            gw = in.size.grid_w;
        }
        json_t *grid = need(cs, "grid");
        assert_int_equal(gh, json_integer_value(json_array_get(grid, 1)));
        assert_int_equal(gw, json_integer_value(json_array_get(grid, 2)));
        int32_t n_img = gh * gw / 4;
        float *emb = malloc((size_t)n_img * (size_t)D * sizeof(float));
        assert_int_equal(jev_vision_forward(&v, pix, gh, gw, emb, &err), JEV_OK);

        /* the prompt: ids, M-RoPE positions per token, image rows at the pads (in order) */
        json_t *ids = need(cs, "ids");
        int32_t T = (int32_t)json_array_size(ids), k = 0, delta = 0;
        int32_t *tok = malloc((size_t)T * sizeof *tok), *pos = malloc((size_t)T * 3 * sizeof *pos);
        const float **rows = calloc((size_t)T, sizeof *rows);
        for (int32_t i = 0; i < T; i++) {
            tok[i] = (int32_t)json_integer_value(json_array_get(ids, (size_t)i));
            if (tok[i] == pad)
                rows[i] = emb + (size_t)(k++) * (size_t)D;
        }
        assert_int_equal(k, n_img);
        struct jev_mrope_image im = {gh, gw};
        assert_int_equal(jev_mrope_positions_t3(tok, T, pad, &im, 1, cfg->vision.merge, pos, &delta, &err), JEV_OK);
        assert_int_equal(delta, (int32_t)num(cs, "rope_delta"));
        json_t *want = need(cs, "logits");
        int32_t out[16], n_out = 0;
        const char *key;
        json_t *val;
        json_object_foreach(want, key, val) { out[n_out++] = atoi(key); }
        for (int32_t a = 1; a < n_out; a++) /* strictly increasing rows */
            for (int32_t b = a; b > 0 && out[b - 1] > out[b]; b--) {
                int32_t t = out[b];
                out[b] = out[b - 1];
                out[b - 1] = t;
            }
        float *logits = malloc((size_t)n_out * (size_t)V * sizeof(float));
        struct jev_seq *seq;
        assert_int_equal(jev_seq_new(&e->state, &seq, &err), JEV_OK);
        struct jev_lm_batch b = {.n_tokens = T,
                                 .ids = tok,
                                 .pos = pos,
                                 .embd_rows = rows,
                                 .n_runs = 1,
                                 .seqs = &seq,
                                 .seq_len = &T,
                                 .n_out = n_out,
                                 .out_idx = out,
                                 .logits = logits};
        if (jev_lm_forward(&e->lm, &b, &err) != JEV_OK)
            fail_msg("%s %s: %s", layout, cname, err.msg);
        double worst = 0;
        for (int32_t i = 0; i < n_out; i++) {
            char q[16];
            snprintf(q, sizeof q, "%d", out[i]);
            json_t *w = need(want, q), *top = need(w, "top10_ids");
            const float *l = logits + (size_t)i * (size_t)V;
            for (int r = 0; r < 5; r++) { /* top-5 identical: the largest logits, in order */
                int32_t best = -1;
                for (int32_t t = 0; t < V; t++) {
                    bool taken = false;
                    for (int s2 = 0; s2 < r; s2++)
                        taken |= json_integer_value(json_array_get(top, (size_t)s2)) == t;
                    if (!taken && (best < 0 || l[t] > l[best]))
                        best = t;
                }
                if (best != json_integer_value(json_array_get(top, (size_t)r)))
                    fail_msg("%s %s row %d: top-%d is %d, transformers %lld", layout, cname, out[i], r + 1, best,
                             (long long)json_integer_value(json_array_get(top, (size_t)r)));
            }
            worst = fmax(worst, rel_err(l, need(w, "slice0_16"), 16));
            float tv[10];
            for (int r = 0; r < 10; r++)
                tv[r] = l[json_integer_value(json_array_get(top, (size_t)r))];
            worst = fmax(worst, rel_err(tv, need(w, "top10"), 10));
            double s = 0;
            for (int32_t t = 0; t < V; t++)
                s += (double)l[t];
            assert_true(fabs(s - num(w, "sum")) <= 1e-4 * (fabs(num(w, "sum")) + sqrt(num(w, "sum_sq"))));
        }
        print_message("%s %s (%d tokens, %d image): logits relative error %.3g\n", layout, cname, T, n_img, worst);
        assert_true(worst <= 1e-4);
        jev_seq_free(seq);
        free(logits);
        free(rows);
        free(pos);
        free(tok);
        free(emb);
        if (rgb) {
            free(rgb);
            free(pix);
        }
        jev_vision_input_free(&in);
    }
    jev_vision_free(&v);
    jev_engine_free(e);
    jev_model_free(m);
    json_decref(g);
}

static void test_mm_logits_hf(void **state) {
    (void)state;
    check_mm_logits("hf");
}

static void test_mm_logits_mlx4(void **state) {
    (void)state;
    check_mm_logits("mlx4");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_matches_pil),
        cmocka_unit_test(test_preprocess_matches_processor),
        cmocka_unit_test(test_tower_hf),
        cmocka_unit_test(test_tower_mlx4),
        cmocka_unit_test(test_mrope_matches_get_rope_index),
        cmocka_unit_test(test_mm_logits_hf),
        cmocka_unit_test(test_mm_logits_mlx4),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}

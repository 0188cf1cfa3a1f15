/*
 * fuzz-image.c - libFuzzer target: any bytes -> jev_image_decode (the format
 * chosen by the magic bytes, JPEG or PNG); when that succeeds, the whole
 * preprocessing (bound, smart_resize, the uint8 antialiased resample,
 * normalise, patches) on a small configuration so that each input runs fast.
 * Limits are lowered (2048 per side, 1 Mpx) to keep memory and time bounded;
 * the low bit of the size toggles EXIF orientation. Each input is decoded and
 * preprocessed on a 3-thread pool too (the JPEG strips, the pooled resize and
 * patchify), which must give the same status and message, and the same bytes
 * wherever the strips decode the file.
 * Seeds: fuzz/corpus/image/ (tiny PNGs of every colour type and depth,
 * interlaced, EXIF; tiny JPEGs: baseline 4:4:4/4:2:0, progressive, grey).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/pool.h"               // defines: jev_pool_init
#include "io/image-int.h"            // defines: jev_jpeg_decode_strips
#include "io/image.h"                // defines: jev_image_decode
#include "model/vision-preprocess.h" // defines: jev_vision_preprocess

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_image_params p = jev_image_default_params();
    p.max_side = 2048;
    p.max_pixels = 1 << 20;
    p.apply_exif_orientation = size & 1;
    static struct jev_pool *pool; /* one for the process: the fuzzer calls from one thread */
    struct jev_error perr = {0};
    if (!pool && jev_pool_init(&pool, 3, &perr) != JEV_OK)
        abort();
    struct jev_image img, on;
    struct jev_error err = {0}, err_on = {0};
    enum jev_status st = jev_image_decode(data, size, "fuzz", &p, &img, &err);
    p.pool = pool;
    if (jev_image_decode(data, size, "fuzz", &p, &on, &err_on) != st || strcmp(err.msg, err_on.msg) != 0)
        abort();
    if (st != JEV_OK) {
        if (img.rgb || err.msg[0] == 0) /* a failure leaves no pixels and always says why */
            abort();
        return 0;
    }
    /* The bytes: the pooled decode equals the one-thread decode on every accepted file (rows a corrupt file
     * leaves unwritten are zero in both), and where the strips decode a file on their own (a clean
     * single-scan JPEG) so do they. */
    if (on.width != img.width || on.height != img.height ||
        memcmp(on.rgb, img.rgb, (size_t)img.width * (size_t)img.height * 3) != 0)
        abort();
    if (size >= 3 && data[0] == 0xFF && data[1] == 0xD8) {
        struct jev_image plain;
        p.pool = NULL;
        p.apply_exif_orientation = false;
        if (jev_image_decode(data, size, "fuzz", &p, &plain, &err_on) != JEV_OK)
            abort();
        size_t n = (size_t)plain.width * (size_t)plain.height * 3;
        uint8_t *strips = malloc(n);
        if (!strips)
            abort();
        if (jev_jpeg_decode_strips(data, size, plain.width, plain.height, strips, pool) &&
            memcmp(strips, plain.rgb, n) != 0)
            abort();
        free(strips);
        jev_image_free(&plain);
    }
    jev_image_free(&on);
    struct jev_preprocess_config cfg = jev_preprocess_config_qwen35();
    cfg.patch = 4;
    cfg.merge = 2;
    cfg.min_pixels = 64;
    cfg.max_pixels = 4096;
    struct jev_preprocess_params pp = {.bound = 64, .max_patches = 0};
    struct jev_vision_input in;
    jev_error_clear(&err);
    if (jev_vision_preprocess(&cfg, &img, &pp, NULL, &in, &err) == JEV_OK) {
        if (in.size.height % 8 || in.size.width % 8 || in.size.n_patches * 4 != in.size.n_tokens * 16)
            abort();
        struct jev_vision_input in_on;
        if (jev_vision_preprocess(&cfg, &img, &pp, pool, &in_on, &err) != JEV_OK ||
            memcmp(in.pixels, in_on.pixels,
                   (size_t)in.size.n_patches * (size_t)in.size.patch_dim * sizeof *in.pixels) != 0)
            abort();
        jev_vision_input_free(&in_on);
        jev_vision_input_free(&in);
    }
    jev_image_free(&img);
    return 0;
}

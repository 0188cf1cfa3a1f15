/*
 * fuzz-image.c - libFuzzer target: any bytes -> jev_image_decode (the format
 * chosen by the magic bytes, JPEG or PNG); when that succeeds, the whole
 * preprocessing (bound, smart_resize, the uint8 antialiased resample,
 * normalise, patches) on a small configuration so that each input runs fast.
 * Limits are lowered (2048 per side, 1 Mpx) to keep memory and time bounded;
 * the low bit of the size toggles EXIF orientation.
 * Seeds: fuzz/corpus/image/ (tiny PNGs of every colour type and depth,
 * interlaced, EXIF; tiny JPEGs: baseline 4:4:4/4:2:0, progressive, grey).
 */
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include "io/image.h"                // defines: jev_image_decode
#include "model/vision-preprocess.h" // defines: jev_vision_preprocess

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_image_params p = jev_image_default_params();
    p.max_side = 2048;
    p.max_pixels = 1 << 20;
    p.apply_exif_orientation = size & 1;
    struct jev_image img;
    struct jev_error err = {0};
    if (jev_image_decode(data, size, "fuzz", &p, &img, &err) != JEV_OK) {
        if (img.rgb || err.msg[0] == 0) /* a failure leaves no pixels and always says why */
            abort();
        return 0;
    }
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
        jev_vision_input_free(&in);
    }
    jev_image_free(&img);
    return 0;
}

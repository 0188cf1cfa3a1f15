/*
 * image-bench.c - the host's time on one image before the vision tower (a
 * benchmark, not a test): decode (on the pool, as the decider runs it, and
 * on one thread), the bounded resample and the patchify/normalise, each
 * timed on its own, as jev_image_decode and jev_vision_preprocess run them.
 *
 *   image-bench IMAGE [--threads N] [--repeats R] [--bound B]
 *
 * Prints the median, min and max of R samples (after one warm-up) per step
 * in ms (the preprocess as a whole, with its fresh buffers, then its resize
 * and patchify again into the same buffers), and, for comparison only, a
 * DCT-scaled JPEG decode (the smallest libjpeg scale that still covers the
 * target size), which the exact path does not use: its pixels differ.
 * -DIMAGE_BENCH_BASE builds it against a tree from before the pool took the
 * decode and the patchify (jev_image_params.pool, jev_vision_patchify_on),
 * for before/after figures from one program.
 * Not here: the tower (bench/vision-bench.c), the whole request (jev bench).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <turbojpeg.h>

#include "base/pool.h"               // defines: jev_pool_init
#include "base/read-file.h"          // defines: jev_read_file
#include "base/timing.h"             // defines: jev_now_ms
#include "common/bench/stats.h"      // defines: jev_bench_median
#include "io/image.h"                // defines: jev_image_decode
#include "model/vision-preprocess.h" // defines: jev_vision_preprocess

#define MAX_REPEATS 200

static void report(const char *what, double *ms, int n) {
    const double med = jev_bench_median(ms, n);
    printf("%-28s median %7.2f ms  min %7.2f  max %7.2f  (%d samples)\n", what, med, ms[0], ms[n - 1], n);
}

/* A decode at the smallest of libjpeg's DCT scales (tjGetScalingFactors) whose output still covers the
 * target, timed; returns 0 when only the full size does. */
static int scaled_decode(const uint8_t *data, size_t n, int32_t th, int32_t tw, int repeats, double *ms) {
    tjhandle tj = tjInitDecompress();
    int w = 0, h = 0, ss = 0, cs = 0, nf = 0, found = 0;
    tjscalingfactor *f = tjGetScalingFactors(&nf), best = {1, 1};
    if (!tj || !f || tjDecompressHeader3(tj, data, (unsigned long)n, &w, &h, &ss, &cs) != 0)
        return 0;
    for (int i = 0; i < nf; i++) {
        int sw = TJSCALED(w, f[i]), sh = TJSCALED(h, f[i]);
        if (sw >= tw && sh >= th && sw < w && (long)sw * sh < (long)TJSCALED(w, best) * TJSCALED(h, best)) {
            best = f[i];
            found = 1;
        }
    }
    if (found) {
        int sw = TJSCALED(w, best), sh = TJSCALED(h, best);
        uint8_t *buf = malloc((size_t)sw * (size_t)sh * 3);
        for (int r = -1; buf && r < repeats; r++) {
            double t0 = jev_now_ms();
            tjDecompress2(tj, data, (unsigned long)n, buf, sw, 0, sh, TJPF_RGB, TJFLAG_ACCURATEDCT);
            if (r >= 0)
                ms[r] = jev_now_ms() - t0;
        }
        printf("DCT scale %d/%d: %dx%d -> %dx%d (target %dx%d)\n", best.num, best.denom, w, h, sw, sh, tw, th);
        free(buf);
    }
    tjDestroy(tj);
    return found;
}

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: image-bench IMAGE [--threads N] [--repeats R] [--bound B]\n");
        return 2;
    }
    int threads = 0, repeats = 21, bound = 768;
    for (int i = 2; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bound"))
            bound = atoi(argv[i + 1]);
    }
    if (repeats < 1 || repeats > MAX_REPEATS)
        repeats = 21;
    struct jev_error err = {0};
    struct jev_pool *pool = NULL;
    char *data = NULL;
    size_t n = 0;
    if (jev_pool_init(&pool, threads, &err) != JEV_OK || jev_read_file(argv[1], (size_t)64 << 20, &data, &n, &err)) {
        fprintf(stderr, "image-bench: %s\n", err.msg);
        return 1;
    }
    struct jev_preprocess_config cfg = jev_preprocess_config_qwen35();
    struct jev_preprocess_params pp = {.bound = bound};
    static double dec[MAX_REPEATS], dec1[MAX_REPEATS], tot[MAX_REPEATS], pre[MAX_REPEATS], rs[MAX_REPEATS],
        pf[MAX_REPEATS], sc[MAX_REPEATS];
    struct jev_vision_size sz = {0};
    struct jev_image one = {0}; /* the one-thread decode: its time, and the bytes the pool's must equal */
    for (int r = -1; r < repeats; r++) {
        jev_image_free(&one);
        double t0 = jev_now_ms();
        if (jev_image_decode(data, n, argv[1], NULL, &one, &err) != JEV_OK) {
            fprintf(stderr, "image-bench: %s\n", err.msg);
            return 1;
        }
        if (r >= 0)
            dec1[r] = jev_now_ms() - t0;
    }
    for (int r = -1; r < repeats; r++) { /* as the decider runs it: decode, preprocess */
        struct jev_image img;
        struct jev_vision_input vin;
        struct jev_image_params ip = jev_image_default_params();
#ifndef IMAGE_BENCH_BASE
        ip.pool = pool; /* strips on the pool where the file suits them */
#endif
        double t0 = jev_now_ms();
        if (jev_image_decode(data, n, argv[1], &ip, &img, &err) != JEV_OK) {
            fprintf(stderr, "image-bench: %s\n", err.msg);
            return 1;
        }
        double t1 = jev_now_ms();
        if (jev_vision_preprocess(&cfg, &img, &pp, pool, &vin, &err) != JEV_OK) {
            fprintf(stderr, "image-bench: %s\n", err.msg);
            return 1;
        }
        double t2 = jev_now_ms();
        if (memcmp(one.rgb, img.rgb, (size_t)img.width * (size_t)img.height * 3) != 0) {
            fprintf(stderr, "image-bench: the pool's decode differs from the one-thread decode\n");
            return 1;
        }
        sz = vin.size;
        /* the two steps of the preprocess on their own, again, into its (now mapped) buffers */
        jev_vision_resize(img.rgb, img.height, img.width, vin.resized, sz.height, sz.width, pool, &err);
        double t3 = jev_now_ms();
#ifndef IMAGE_BENCH_BASE
        jev_vision_patchify_on(&cfg, vin.resized, sz.height, sz.width, vin.pixels, pool);
#else
        jev_vision_patchify(&cfg, vin.resized, sz.height, sz.width, vin.pixels);
#endif
        double t4 = jev_now_ms();
        if (r >= 0) {
            dec[r] = t1 - t0;
            pre[r] = t2 - t1;
            tot[r] = t2 - t0;
            rs[r] = t3 - t2;
            pf[r] = t4 - t3;
        }
        jev_vision_input_free(&vin);
        jev_image_free(&img);
    }
    jev_image_free(&one);
    printf("%s -> %dx%d (%d patches), %d threads\n", argv[1], sz.width, sz.height, sz.n_patches, jev_pool_size(pool));
    report("decode, one thread", dec1, repeats);
    report("decode, on the pool", dec, repeats);
    report("preprocess (resize+patch)", pre, repeats);
    report("decode + preprocess", tot, repeats);
    report("  resize", rs, repeats);
    report("  patchify/normalise", pf, repeats);
    if (scaled_decode((const uint8_t *)data, n, sz.height, sz.width, repeats, sc))
        report("decode, DCT-scaled (inexact)", sc, repeats);
    free(data);
    jev_pool_free(pool);
    return 0;
}

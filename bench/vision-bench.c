/*
 * vision-bench.c - the vision tower's speed on one image (a benchmark, not a
 * test; scripts/bench-vision.sh builds and runs it).
 *
 *   vision-bench MODEL_DIR IMAGE [--threads N] [--repeats R] [--bound B]
 *
 * Decodes and preprocesses the image (bounded within B x B, default 768),
 * runs one warm-up forward and R timed forwards of the tower (CPU backend),
 * and prints the median and every sample in ms, the achieved GFLOP/s
 * (jev_vision_flops: multiply-add = 2) and, measured in the same run, the
 * machine's f32 peak (common/bench/peak.c: an FMA loop of the widest vectors on every thread).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "backend/cpu/cpu.h"         // defines: jev_cpu_ops, jev_cpu_backend_new
#include "base/pool.h"               // defines: jev_pool_init
#include "common/bench/peak.h"       // defines: jev_peak_f32
#include "common/bench/stats.h"      // defines: jev_bench_median
#include "base/timing.h"             // defines: jev_now_ms
#include "io/image.h"                // defines: jev_image_load
#include "model/model.h"             // defines: jev_model_open
#include "model/vision-preprocess.h" // defines: jev_vision_preprocess
#include "model/vision.h"            // defines: jev_vision_forward

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: vision-bench MODEL_DIR IMAGE [--threads N] [--repeats R] [--bound B]\n");
        return 2;
    }
    int threads = 0, repeats = 3, bound = 768;
    for (int i = 3; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--threads"))
            threads = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--repeats"))
            repeats = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--bound"))
            bound = atoi(argv[i + 1]);
    }
    if (repeats < 1 || repeats > 100)
        repeats = 3;
    struct jev_error err = {0};
    struct jev_model *m = NULL;
    if (jev_model_open(argv[1], NULL, &m, &err) != JEV_OK) {
        fprintf(stderr, "vision-bench: %s\n", err.msg);
        return 1;
    }
    struct jev_pool *pool = NULL;
    if (jev_pool_init(&pool, threads, &err) != JEV_OK) {
        fprintf(stderr, "vision-bench: %s\n", err.msg);
        return 1;
    }
    struct jev_backend *be = jev_cpu_backend_new(pool);
    char pc_path[4096];
    snprintf(pc_path, sizeof pc_path, "%s/preprocessor_config.json", argv[1]);
    struct jev_preprocess_config pc;
    if (jev_preprocess_config_load(pc_path, &pc, &err) != JEV_OK)
        pc = jev_preprocess_config_qwen35();
    jev_error_clear(&err);
    double t0 = jev_now_ms();
    struct jev_image img;
    struct jev_vision_input in;
    struct jev_preprocess_params pp = {.bound = bound, .max_patches = 0};
    if (jev_image_load(argv[2], NULL, &img, &err) != JEV_OK ||
        jev_vision_preprocess(&pc, &img, &pp, pool, &in, &err) != JEV_OK) {
        fprintf(stderr, "vision-bench: %s\n", err.msg);
        return 1;
    }
    double prep_ms = jev_now_ms() - t0;
    const struct jev_vision_config *c = &m->config.vision;
    struct jev_vision v;
    if (jev_vision_init(&v, c, &m->weights.vision, &jev_cpu_ops, be, in.size.n_patches, &err) != JEV_OK) {
        fprintf(stderr, "vision-bench: %s\n", err.msg);
        return 1;
    }
    float *out = malloc((size_t)in.size.n_tokens * (size_t)c->out_hidden * sizeof(float));
    double samples[100];
    for (int r = -1; r < repeats; r++) { /* r = -1: the warm-up */
        double s = jev_now_ms();
        if (jev_vision_forward(&v, in.pixels, in.size.grid_h, in.size.grid_w, out, &err) != JEV_OK) {
            fprintf(stderr, "vision-bench: %s\n", err.msg);
            return 1;
        }
        if (r >= 0)
            samples[r] = jev_now_ms() - s;
    }
    double sorted[100];
    memcpy(sorted, samples, sizeof(double) * (size_t)repeats);
    double med = jev_bench_median(sorted, repeats);
    double flops = jev_vision_flops(c, in.size.n_patches);
    struct jev_peak pk = jev_peak_f32(pool, 1.0);
    double peak = pk.gflops;
    printf("vision: %s, %dx%d -> %dx%d, grid %dx%d, %d patches, %d tokens, depth %d, hidden %d, threads %d\n", argv[2],
           img.width, img.height, in.size.width, in.size.height, in.size.grid_h, in.size.grid_w, in.size.n_patches,
           in.size.n_tokens, c->depth, c->hidden, jev_pool_size(pool));
    printf("preprocess (decode + resize + patches): %.1f ms\n", prep_ms);
    printf("forward ms: median %.1f, samples", med);
    for (int r = 0; r < repeats; r++)
        printf(" %.1f", samples[r]);
    printf("\nforward: %.1f GFLOP, %.1f GFLOP/s; f32 FMA peak (%s, same run, %d threads): %.1f GFLOP/s (%.0f%%)\n",
           flops / 1e9, flops / (med * 1e6), pk.isa ? pk.isa : "none", jev_pool_size(pool), peak,
           100.0 * flops / (med * 1e6) / peak);
    printf("activations: %.1f MiB\n", (double)jev_vision_arena_bytes(c, in.size.n_patches) / (1 << 20));
    free(out);
    jev_vision_free(&v);
    jev_vision_input_free(&in);
    jev_image_free(&img);
    jev_cpu_backend_free(be);
    jev_pool_free(pool);
    jev_model_free(m);
    return 0;
}

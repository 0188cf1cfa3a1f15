/*
 * tiny-model.h - the tiny synthetic test model (configs/tiny.json, seed 1) for
 * tests that need a whole model directory. Header-only (static functions) so each
 * test binary takes what it needs. Tests run from the repository root.
 */
#ifndef JEV_TESTS_TINY_MODEL_H
#define JEV_TESTS_TINY_MODEL_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "jev.h"         // defines: jev_model_load, jev_engine_init, jev_decider_open
#include "common/synth/synth.h" // defines: jev_synth_write

/* $JEV_TEST_DIR/SUB/LEAF into out, with SUB created: a folder of the test's own. LEAF itself
 * is left to synth, which creates it next to its temporary folder. */
static inline void tiny_test_dir(const char *sub, const char *leaf, char *out, size_t size) {
    const char *root = getenv("JEV_TEST_DIR");
    snprintf(out, size, "%s/%s", root ? root : "build/test-data", sub);
    mkdir(out, 0755);
    snprintf(out, size, "%s/%s/%s", root ? root : "build/test-data", sub, leaf);
}

/* Writes the tiny model in `layout` to dir (replacing it); 0, or -1 with the reason on stderr. */
static inline int tiny_model_write(const char *dir, enum jev_synth_layout layout) {
    struct jev_synth_params sp = jev_synth_default_params();
    sp.config_path = "configs/tiny.json";
    sp.seed = 1;
    sp.layout = layout;
    sp.out_dir = dir;
    sp.force = true;
    struct jev_synth_report rep;
    struct jev_error err = {0};
    if (jev_synth_write(&sp, &rep, &err) != JEV_OK) {
        fprintf(stderr, "synth %s: %s\n", dir, err.msg);
        return -1;
    }
    return 0;
}

/* The tiny model written to $JEV_TEST_DIR/SUB/tiny-hf (path into dir) and loaded with n_threads
 * compute threads. 0, or -1 with the reason on stderr. */
static inline int tiny_model_open(const char *sub, int32_t n_threads, char *dir, size_t dir_size,
                                  struct jev_model **model) {
    tiny_test_dir(sub, "tiny-hf", dir, dir_size);
    if (tiny_model_write(dir, JEV_SYNTH_HF) != 0)
        return -1;
    struct jev_model_params mp = jev_model_default_params();
    mp.n_threads = n_threads;
    char msg[512];
    if (jev_model_load(dir, &mp, model, msg, sizeof msg) != JEV_OK) {
        fprintf(stderr, "load %s: %s\n", dir, msg);
        return -1;
    }
    return 0;
}

/*
 * The tiny model (tiny_model_open), an engine (ep NULL = the defaults) and a decider over it: what
 * the public-API and HTTP tests answer directly. 0, or -1 with the reason on stderr.
 */
static inline int tiny_decider_open(const char *sub, int32_t n_threads, const struct jev_engine_params *ep,
                                    char *dir, size_t dir_size, struct jev_model **model, struct jev_engine **engine,
                                    struct jev_decider **decider) {
    if (tiny_model_open(sub, n_threads, dir, dir_size, model) != 0)
        return -1;
    struct jev_engine_params def = jev_engine_default_params();
    if (jev_engine_init(*model, ep ? ep : &def, engine) != JEV_OK) {
        fprintf(stderr, "engine: %s\n", jev_engine_last_error(*engine));
        return -1;
    }
    if (jev_decider_open(*model, *engine, decider) != JEV_OK) {
        fprintf(stderr, "decider: %s\n", jev_engine_last_error(*engine));
        return -1;
    }
    return 0;
}

#endif

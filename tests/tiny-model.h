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

#include "model/synth.h" // defines: jev_synth_write

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

#endif

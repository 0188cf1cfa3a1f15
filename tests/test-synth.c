/*
 * test-synth.c - the synthetic model writer: its deterministic log against
 * libm, the normal generator's moments, the quantizer on hand-computed cases
 * (and its packing against the reference unpacker of weights.c), byte-
 * identical output for the same seed, different output for another seed, a
 * committed sha256 of the tiny model in both layouts, the CLI, and that a
 * failed run leaves no directory behind.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>

#include "base/half.h"          // defines: jev_f32_to_bf16
#include "base/sha256.h"        // defines: jev_sha256_file
#include "common/synth/synth.h" // defines: jev_synth_write
#include "model/weights.h"      // defines: jev_matrix_get

/*
 * Golden sha256 of model.safetensors of
 *   jev synth --config configs/tiny.json --seed 1 --layout hf|mlx4
 * computed by this program once (commit of the synth format) and kept here
 * to guard determinism across machines, compilers and commits: a change of
 * these values means every synthetic model (and every golden computed from
 * one) changed. Update them deliberately, together with the goldens, when the
 * synth format changes on purpose.
 */
#define GOLDEN_TINY_HF "12da1ed6b3e3487a15851de8ef881958e5e9e5559d53735e2bc7a41f2f4445c0"
#define GOLDEN_TINY_MLX4 "407d08654ee5a2a9b10448afbc221c0642a1d16846629a91aa09f106fe25490f"

static char root[256];
static char d_hf1[512], d_hf2[512], d_mlx1[512], d_mlx2[512], d_seed2[512];

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

static enum jev_status synth(const char *out, enum jev_synth_layout layout, uint64_t seed, const char *tokenizer,
                             struct jev_error *err) {
    struct jev_synth_params p = jev_synth_default_params();
    p.config_path = "configs/tiny.json";
    p.seed = seed;
    p.layout = layout;
    p.out_dir = out;
    p.tokenizer_dir = tokenizer;
    p.force = true;
    struct jev_synth_report r;
    return jev_synth_write(&p, &r, err);
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("JEV_TEST_DIR");
    snprintf(root, sizeof root, "%s/synth", d ? d : "build/test-data");
    sh("rm -rf '%s' && mkdir -p '%s'", root, root);
    snprintf(d_hf1, sizeof d_hf1, "%s/hf-1", root);
    snprintf(d_hf2, sizeof d_hf2, "%s/hf-1-again", root);
    snprintf(d_mlx1, sizeof d_mlx1, "%s/mlx4-1", root);
    snprintf(d_mlx2, sizeof d_mlx2, "%s/mlx4-1-again", root);
    snprintf(d_seed2, sizeof d_seed2, "%s/hf-2", root);
    struct jev_error err = {0};
    const char *dirs[] = {d_hf1, d_hf2, d_mlx1, d_mlx2, d_seed2};
    const enum jev_synth_layout lay[] = {JEV_SYNTH_HF, JEV_SYNTH_HF, JEV_SYNTH_MLX4, JEV_SYNTH_MLX4, JEV_SYNTH_HF};
    const uint64_t seeds[] = {1, 1, 1, 1, 2};
    for (int i = 0; i < 5; i++)
        if (synth(dirs[i], lay[i], seeds[i], NULL, &err) != JEV_OK) {
            fprintf(stderr, "synth %s: %s\n", dirs[i], err.msg);
            return -1;
        }
    return 0;
}

static void file_sha(const char *dir, const char *name, char out[JEV_SHA256_HEX]) {
    char path[700];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    struct jev_error err = {0};
    assert_int_equal(jev_sha256_file(path, out, &err), JEV_OK);
}

/* ---- pieces ---- */

static void test_log_matches_libm(void **state) {
    (void)state;
    /* an independent reference: glibc's log (within 2 ulp of ln) */
    uint64_t s = 12345;
    for (int i = 0; i < 200000; i++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        double x = ldexp((double)(s >> 11) * 0x1.0p-53 + 0x1.0p-60, (int)(s % 200) - 100);
        double a = jev_synth_log(x), b = log(x);
        double tol = 4e-16 * (fabs(b) > 1.0 ? fabs(b) : 1.0);
        if (fabs(a - b) > tol)
            fail_msg("log(%.17g): %.17g vs libm %.17g", x, a, b);
    }
    assert_true(jev_synth_log(1.0) == 0.0);
}

static void test_normal_moments(void **state) {
    (void)state;
    const int n = 200000;
    double sum = 0, sq = 0;
    int tail = 0;
    for (int i = 0; i < n; i++) {
        double z = jev_synth_normal(7, "some.tensor", (uint64_t)i);
        sum += z;
        sq += z * z;
        tail += fabs(z) > 3.0;
    }
    double mean = sum / n, var = sq / n - mean * mean;
    assert_true(fabs(mean) < 0.01);
    assert_true(fabs(var - 1.0) < 0.02);
    assert_true(tail > 0.0015 * n && tail < 0.004 * n); /* 0.27% beyond 3 sigma */
    /* a pure function of (seed, name, index) */
    assert_true(jev_synth_normal(7, "some.tensor", 12345) == jev_synth_normal(7, "some.tensor", 12345));
    assert_true(jev_synth_normal(7, "some.tensor", 12345) != jev_synth_normal(8, "some.tensor", 12345));
    assert_true(jev_synth_normal(7, "some.tensor", 12345) != jev_synth_normal(7, "other.tensor", 12345));
}

static void test_quantize_hand_cases(void **state) {
    (void)state;
    /* values (k % 16) * 0.25 - 1: min -1, max 2.75, scale 3.75 / 15 = 0.25, all exact in bf16 */
    float w[128];
    for (int k = 0; k < 128; k++)
        w[k] = (float)(k % 16) * 0.25f - 1.0f;
    uint32_t codes[16];
    uint16_t sc[2], bi[2];
    jev_synth_quantize(w, 128, 4, 64, codes, sc, bi);
    assert_int_equal(codes[0], 0x76543210u);
    assert_int_equal(codes[1], 0xfedcba98u);
    assert_int_equal(sc[0], 0x3e80); /* bf16 0.25 */
    assert_int_equal(bi[0], 0xbf80); /* bf16 -1 */
    struct jev_matrix m = {.type = JEV_MTYPE_QAFFINE,
                           .rows = 1,
                           .cols = 128,
                           .data = codes,
                           .scales = sc,
                           .biases = bi,
                           .stype = JEV_STYPE_BF16,
                           .bits = 4,
                           .group = 64,
                           .name = "t"};
    for (int k = 0; k < 128; k++)
        assert_true(jev_matrix_get(&m, 0, k) == w[k]);

    /* 3-bit codes straddle u32 words: k % 8 * 0.5 - 2 gives codes k % 8 */
    for (int k = 0; k < 64; k++)
        w[k] = (float)(k % 8) * 0.5f - 2.0f;
    uint32_t c3[6];
    jev_synth_quantize(w, 64, 3, 64, c3, sc, bi);
    m.data = c3;
    m.bits = 3;
    m.cols = 64;
    for (int k = 0; k < 64; k++)
        assert_true(jev_matrix_get(&m, 0, k) == w[k]);
    assert_int_equal(c3[0] & 0x3fu, 0x08u); /* codes 0, 1 -> bits 000 001 */

    /* a constant group: scale 0, every code 0, value = bias exactly */
    for (int k = 0; k < 64; k++)
        w[k] = 0.375f;
    jev_synth_quantize(w, 64, 4, 64, codes, sc, bi);
    assert_int_equal(sc[0], 0);
    assert_int_equal(codes[0], 0u);
    assert_true(jev_bf16_to_f32(bi[0]) == 0.375f);

    /* codes are chosen against the rounded scale: never out of range, error within one step */
    uint64_t s = 99;
    for (int k = 0; k < 64; k++) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        w[k] = (float)((double)(s >> 11) * 0x1.0p-53 - 0.5) * 0.1f;
    }
    jev_synth_quantize(w, 64, 4, 64, codes, sc, bi);
    m.data = codes;
    m.bits = 4;
    float step = jev_bf16_to_f32(sc[0]);
    for (int k = 0; k < 64; k++)
        assert_true(fabsf(jev_matrix_get(&m, 0, k) - w[k]) <= step * 1.01f);
}

/* ---- whole directories ---- */

static void assert_files_equal(const char *a, const char *b, const char *name) {
    char x[JEV_SHA256_HEX], y[JEV_SHA256_HEX];
    file_sha(a, name, x);
    file_sha(b, name, y);
    assert_string_equal(x, y);
}

static void test_same_seed_identical(void **state) {
    (void)state;
    static const char *files[] = {"model.safetensors",        "config.json",
                                  "tokenizer.json",           "tokenizer_config.json",
                                  "preprocessor_config.json", "chat_template.jinja"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++) {
        assert_files_equal(d_hf1, d_hf2, files[i]);
        assert_files_equal(d_mlx1, d_mlx2, files[i]);
    }
}

static void test_different_seed_differs(void **state) {
    (void)state;
    char a[JEV_SHA256_HEX], b[JEV_SHA256_HEX];
    file_sha(d_hf1, "model.safetensors", a);
    file_sha(d_seed2, "model.safetensors", b);
    assert_string_not_equal(a, b);
    assert_files_equal(d_hf1, d_seed2, "config.json"); /* only the weights depend on the seed */
}

static void test_golden_sha256(void **state) {
    (void)state;
    char a[JEV_SHA256_HEX];
    file_sha(d_hf1, "model.safetensors", a);
    assert_string_equal(a, GOLDEN_TINY_HF);
    file_sha(d_mlx1, "model.safetensors", a);
    assert_string_equal(a, GOLDEN_TINY_MLX4);
}

/* Runs a shell command, returns its exit status and its output (both streams). */
static int run(char *out, size_t size, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int run(char *out, size_t size, const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    FILE *p = popen(cmd, "r");
    assert_non_null(p);
    size_t n = fread(out, 1, size - 1, p);
    out[n] = '\0';
    int st = pclose(p);
    return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void test_cli(void **state) {
    (void)state;
    const char *bin = getenv("JEV_JEV_BIN");
    if (!bin)
        bin = "build/jev";
    char out[8192], dir[600];
    snprintf(dir, sizeof dir, "%s/cli", root);
    assert_int_equal(
        run(out, sizeof out, "%s synth --config configs/tiny.json --seed 1 --layout mlx4 --out %s 2>&1", bin, dir), 0);
    assert_non_null(strstr(out, "sha256 model.safetensors " GOLDEN_TINY_MLX4));
    assert_non_null(strstr(out, "layout mlx4, seed 1"));
    /* an existing directory is not replaced without --force */
    assert_int_equal(run(out, sizeof out, "%s synth --config configs/tiny.json --out %s 2>&1", bin, dir), 1);
    assert_non_null(strstr(out, "exists (pass --force to replace it)"));
    assert_int_equal(
        run(out, sizeof out, "%s synth --config configs/tiny.json --out %s --force --shard-mb 1 2>&1", bin, dir), 0);
    assert_non_null(strstr(out, "model-00001-of-0000"));
    assert_int_equal(run(out, sizeof out, "%s synth --config configs/tiny.json --layout gguf --out %s 2>&1", bin, dir),
                     2);
    assert_int_equal(
        run(out, sizeof out, "%s synth --config configs/tiny.json --out %s --force --bits 7 2>&1", bin, dir), 1);
    assert_non_null(strstr(out, "--bits 7 is not one of 2, 3, 4, 5, 6, 8"));
    /* jev info reads it back */
    assert_int_equal(run(out, sizeof out, "%s info %s 2>&1", bin, dir), 0);
    assert_non_null(strstr(out, "layout:    hf"));
    assert_non_null(strstr(out, "(model.safetensors.index.json)"));
}

/* Counts entries of root whose name contains s. */
static int count_entries(const char *s) {
    DIR *d = opendir(root);
    assert_non_null(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)) != NULL)
        n += strstr(e->d_name, s) != NULL;
    closedir(d);
    return n;
}

static void test_failure_leaves_nothing(void **state) {
    (void)state;
    char dir[600], tok[600];
    snprintf(dir, sizeof dir, "%s/never", root);
    snprintf(tok, sizeof tok, "%s/no-tokenizer-here", root);
    struct jev_error err = {0};
    assert_int_equal(synth(dir, JEV_SYNTH_HF, 1, tok, &err), JEV_ERR_IO);
    char want[1400];
    snprintf(want, sizeof want, "%s/tokenizer.json: cannot open: No such file or directory", tok);
    assert_string_equal(err.msg, want);
    struct stat sb;
    assert_int_not_equal(stat(dir, &sb), 0);
    assert_int_equal(count_entries(".tmp-"), 0);
    /* a failed replacement keeps the old directory intact */
    char a[JEV_SHA256_HEX], b[JEV_SHA256_HEX];
    file_sha(d_seed2, "model.safetensors", a);
    jev_error_clear(&err);
    assert_int_equal(synth(d_seed2, JEV_SYNTH_MLX4, 5, tok, &err), JEV_ERR_IO);
    file_sha(d_seed2, "model.safetensors", b);
    assert_string_equal(a, b);
    assert_int_equal(count_entries(".tmp-"), 0);
    assert_int_equal(count_entries(".old-"), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_log_matches_libm),
        cmocka_unit_test(test_normal_moments),
        cmocka_unit_test(test_quantize_hand_cases),
        cmocka_unit_test(test_same_seed_identical),
        cmocka_unit_test(test_different_seed_differs),
        cmocka_unit_test(test_golden_sha256),
        cmocka_unit_test(test_cli),
        cmocka_unit_test(test_failure_leaves_nothing),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

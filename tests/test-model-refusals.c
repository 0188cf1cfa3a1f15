/*
 * test-model-refusals.c - every refusal of a malformed model directory's tensors, through the
 * public jev_model_load: a missing tensor (matrix, vector, conv taps, patch embedding, an
 * untied head), a wrong dtype, a wrong shape (each kind), data not aligned to its elements
 * (float and quantized), float weights next to .scales, and the quantized triples' own rules
 * (a missing .biases, codes that do not pack the expected shape, scales of a wrong dtype or
 * shape, biases unlike the scales), and a directory whose names follow neither layout.
 *
 * Each case breaks one thing in a copy of a small synthetic model (configs/tiny.json with a
 * 2048-token vocabulary, seed 1, hf or mlx4) and checks the status and the key parts of the
 * message: the tensor's name, the expected shape or the offending dtype. Not the exact wording:
 * the loader's walk may change, its messages' contents may not. tests/test-model-dir.c keeps
 * the exact messages of the first refusals and the layouts' agreement; config.json's refusals
 * are in tests/test-config-refusals.c.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "jev.h"                // defines: jev_model_load
#include "common/synth/synth.h" // defines: jev_synth_write

static char base[PATH_MAX];        /* $JEV_TEST_DIR/model-refusals */
static char dir_hf[PATH_MAX + 32]; /* the small model, hf */
static char dir_mx[PATH_MAX + 32]; /* the small model, mlx4 */
static char dir_bk[PATH_MAX + 32]; /* the broken copy of the running case */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[4 * PATH_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

static int setup(void **state) {
    (void)state;
    const char *t = getenv("JEV_TEST_DIR");
    snprintf(base, sizeof base, "%s/model-refusals", t ? t : "build/test-data");
    sh("rm -rf '%s' && mkdir -p '%s'", base, base);
    /* tiny.json with a small vocabulary (the embedding is most of the file) and ids inside it */
    json_t *c = json_load_file("configs/tiny.json", 0, NULL);
    if (!c)
        return -1;
    json_object_set_new(json_object_get(c, "text_config"), "vocab_size", json_integer(2048));
    json_object_set_new(json_object_get(c, "text_config"), "eos_token_id", json_integer(2047));
    const char *ids[] = {"image_token_id", "video_token_id", "vision_start_token_id", "vision_end_token_id"};
    for (int i = 0; i < 4; i++)
        json_object_set_new(c, ids[i], json_integer(2040 + i));
    char cfg[PATH_MAX + 16];
    snprintf(cfg, sizeof cfg, "%s/small.json", base);
    int rc = json_dump_file(c, cfg, JSON_INDENT(2));
    json_decref(c);
    if (rc != 0)
        return -1;
    snprintf(dir_hf, sizeof dir_hf, "%s/small-hf", base);
    snprintf(dir_mx, sizeof dir_mx, "%s/small-mlx4", base);
    snprintf(dir_bk, sizeof dir_bk, "%s/broken", base);
    for (int k = 0; k < 2; k++) {
        struct jev_synth_params p = jev_synth_default_params();
        p.config_path = cfg;
        p.seed = 1;
        p.layout = k ? JEV_SYNTH_MLX4 : JEV_SYNTH_HF;
        p.out_dir = k ? dir_mx : dir_hf;
        p.force = true;
        struct jev_synth_report r;
        struct jev_error err = {0};
        if (jev_synth_write(&p, &r, &err) != JEV_OK) {
            fprintf(stderr, "synth: %s\n", err.msg);
            return -1;
        }
    }
    return 0;
}

/* ---- a safetensors file as a header and its data, edited in memory ---- */

struct st {
    json_t *hdr;         /* the header object */
    unsigned char *data; /* the data section */
    size_t size;         /* its bytes */
};

static void st_load(const char *dir, struct st *s) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    FILE *f = fopen(path, "rb");
    assert_non_null(f);
    unsigned char lb[8];
    assert_int_equal(fread(lb, 1, 8, f), 8);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | lb[i];
    char *h = malloc(hl);
    assert_non_null(h);
    assert_int_equal(fread(h, 1, hl, f), hl);
    s->hdr = json_loadb(h, hl, 0, NULL);
    free(h);
    assert_non_null(s->hdr);
    fseek(f, 0, SEEK_END);
    s->size = (size_t)ftell(f) - 8 - hl;
    s->data = malloc(s->size + 64);
    assert_non_null(s->data);
    fseek(f, (long)(8 + hl), SEEK_SET);
    assert_int_equal(fread(s->data, 1, s->size, f), s->size);
    fclose(f);
}

/* Writes s as dir/model.safetensors (header padded to 8 bytes, so the data stays aligned) and frees it. */
static void st_save(const char *dir, struct st *s) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    char *h = json_dumps(s->hdr, JSON_COMPACT);
    size_t hn = strlen(h), pad = (8 - hn % 8) % 8;
    uint64_t len = hn + pad;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(len >> (8 * i));
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fwrite(lb, 1, 8, f);
    fwrite(h, 1, hn, f);
    fwrite("        ", 1, pad, f);
    fwrite(s->data, 1, s->size, f);
    assert_int_equal(fclose(f), 0);
    free(h);
    free(s->data);
    json_decref(s->hdr);
}

static json_t *entry(struct st *s, const char *name) {
    json_t *e = json_object_get(s->hdr, name);
    if (!e)
        fail_msg("the synthetic model has no tensor '%s' (update this test)", name);
    return e;
}

static void st_rename(struct st *s, const char *from, const char *to) {
    json_t *e = entry(s, from);
    json_object_set(s->hdr, to, e);
    json_object_del(s->hdr, from);
}

static void st_dtype(struct st *s, const char *name, const char *dtype) {
    json_object_set_new(entry(s, name), "dtype", json_string(dtype));
}

/* A new shape of the same element count (the data offsets stay valid). */
static void st_shape(struct st *s, const char *name, const char *shape_json) {
    json_object_set_new(entry(s, name), "shape", json_loads(shape_json, 0, NULL));
}

/* Moves the tensor's bytes to the end of the data, at an offset that is `rem` past a multiple of
 * 8; the old place becomes a gap (allowed). */
static void st_move(struct st *s, const char *name, size_t rem) {
    json_t *off = json_object_get(entry(s, name), "data_offsets");
    size_t b = (size_t)json_integer_value(json_array_get(off, 0)),
           e = (size_t)json_integer_value(json_array_get(off, 1));
    size_t at = (s->size + 7) / 8 * 8 + rem, n = e - b;
    s->data = realloc(s->data, at + n + 64);
    assert_non_null(s->data);
    memset(s->data + s->size, 0, at - s->size);
    memcpy(s->data + at, s->data + b, n);
    s->size = at + n;
    json_object_set_new(entry(s, name), "data_offsets", json_pack("[I,I]", (json_int_t)at, (json_int_t)(at + n)));
}

/* Adds a tensor of `bytes` zero bytes at the end of the data. */
static void st_add(struct st *s, const char *name, const char *dtype, const char *shape_json, size_t bytes) {
    size_t at = (s->size + 7) / 8 * 8;
    s->data = realloc(s->data, at + bytes + 64);
    assert_non_null(s->data);
    memset(s->data + s->size, 0, at + bytes - s->size);
    s->size = at + bytes;
    json_object_set_new(s->hdr, name,
                        json_pack("{s:s,s:o,s:[I,I]}", "dtype", dtype, "shape", json_loads(shape_json, 0, NULL),
                                  "data_offsets", (json_int_t)at, (json_int_t)(at + bytes)));
}

/* ---- the cases ---- */

#define HF "model.language_model."
#define MX "language_model.model."

static void e_missing_matrix(struct st *s) { st_rename(s, HF "layers.3.mlp.gate_proj.weight", "x.gate_proj.weight"); }
static void e_missing_vector(struct st *s) { st_rename(s, HF "layers.1.post_attention_layernorm.weight", "x.norm"); }
static void e_missing_conv(struct st *s) { st_rename(s, HF "layers.4.linear_attn.conv1d.weight", "x.conv"); }
static void e_missing_patch(struct st *s) { st_rename(s, "model.visual.patch_embed.proj.weight", "x.patch"); }
static void e_vector_shape(struct st *s) { st_shape(s, HF "layers.4.input_layernorm.weight", "[8, 8]"); }
static void e_vector_dtype(struct st *s) { st_dtype(s, HF "layers.0.linear_attn.A_log", "I32"); }
static void e_matrix_dtype(struct st *s) { st_dtype(s, HF "layers.0.linear_attn.in_proj_z.weight", "I16"); }
static void e_matrix_shape(struct st *s) { st_shape(s, "model.visual.merger.linear_fc2.weight", "[256, 64]"); }
static void e_conv_shape(struct st *s) { st_shape(s, HF "layers.0.linear_attn.conv1d.weight", "[256, 4, 1]"); }
static void e_conv_dtype(struct st *s) { st_dtype(s, HF "layers.1.linear_attn.conv1d.weight", "I16"); }
static void e_patch_shape(struct st *s) { st_shape(s, "model.visual.patch_embed.proj.weight", "[64, 2, 16, 16, 3]"); }
static void e_patch_dtype(struct st *s) { st_dtype(s, "model.visual.patch_embed.proj.weight", "I16"); }
static void e_float_misaligned(struct st *s) { st_move(s, HF "layers.0.mlp.gate_proj.weight", 1); }
static void e_float_with_scales(struct st *s) { st_add(s, HF "layers.1.mlp.up_proj.scales", "BF16", "[128, 1]", 256); }
static void e_no_layout(struct st *s) {
    json_decref(s->hdr);
    s->hdr = json_object();
    st_add(s, "encoder.layer.0.weight", "F32", "[4]", 16);
}
static void e_untied_head(struct st *s) { (void)s; /* config.json unties the head; no lm_head.weight is there */ }
static void e_missing_biases(struct st *s) { st_rename(s, MX "layers.2.self_attn.k_proj.biases", "x.biases"); }
static void e_codes_no_pack(struct st *s) { st_shape(s, MX "layers.2.self_attn.v_proj.weight", "[256, 4]"); }
static void e_scales_dtype(struct st *s) { st_dtype(s, MX "layers.0.mlp.up_proj.scales", "I16"); }
static void e_scales_shape(struct st *s) { st_shape(s, MX "layers.0.mlp.gate_proj.scales", "[1, 128]"); }
static void e_biases_unlike(struct st *s) { st_dtype(s, MX "layers.0.mlp.gate_proj.biases", "F16"); }
static void e_codes_misaligned(struct st *s) { st_move(s, MX "layers.0.linear_attn.in_proj_qkv.weight", 2); }

static const struct refusal {
    const char *what;           /* the case */
    bool mlx;                   /* from the mlx4 copy (else hf) */
    void (*edit)(struct st *s); /* the one thing broken */
    enum jev_status status;     /* expected */
    const char *parts[4];       /* pieces the message must contain */
} cases[] = {
    {"missing matrix",
     false,
     e_missing_matrix,
     JEV_ERR_FORMAT,
     {HF "layers.3.mlp.gate_proj.weight", "missing", "[128, 64]"}},
    {"missing vector",
     false,
     e_missing_vector,
     JEV_ERR_FORMAT,
     {HF "layers.1.post_attention_layernorm.weight", "missing", "[64]"}},
    {"missing conv taps",
     false,
     e_missing_conv,
     JEV_ERR_FORMAT,
     {HF "layers.4.linear_attn.conv1d.weight", "missing", "[256, 1, 4]"}},
    {"missing patch embedding",
     false,
     e_missing_patch,
     JEV_ERR_FORMAT,
     {"model.visual.patch_embed.proj.weight", "missing", "[64, 3, 2, 16, 16]"}},
    {"vector shape", false, e_vector_shape, JEV_ERR_FORMAT, {HF "layers.4.input_layernorm.weight", "[8, 8]", "[64]"}},
    {"vector dtype", false, e_vector_dtype, JEV_ERR_FORMAT, {HF "layers.0.linear_attn.A_log", "I32"}},
    {"matrix dtype", false, e_matrix_dtype, JEV_ERR_FORMAT, {HF "layers.0.linear_attn.in_proj_z.weight", "I16"}},
    {"matrix shape",
     false,
     e_matrix_shape,
     JEV_ERR_FORMAT,
     {"model.visual.merger.linear_fc2.weight", "[256, 64]", "[64, 256]"}},
    {"conv shape (MLX's in an HF directory)",
     false,
     e_conv_shape,
     JEV_ERR_FORMAT,
     {HF "layers.0.linear_attn.conv1d.weight", "[256, 4, 1]", "[256, 1, 4]"}},
    {"conv dtype", false, e_conv_dtype, JEV_ERR_FORMAT, {HF "layers.1.linear_attn.conv1d.weight", "I16"}},
    {"patch embedding shape (MLX's channels-last in an HF directory)",
     false,
     e_patch_shape,
     JEV_ERR_FORMAT,
     {"model.visual.patch_embed.proj.weight", "[64, 2, 16, 16, 3]", "[64, 3, 2, 16, 16]"}},
    {"patch embedding dtype", false, e_patch_dtype, JEV_ERR_FORMAT, {"model.visual.patch_embed.proj.weight", "I16"}},
    {"float matrix misaligned",
     false,
     e_float_misaligned,
     JEV_ERR_UNSUPPORTED,
     {HF "layers.0.mlp.gate_proj.weight", "aligned"}},
    {"float matrix with .scales",
     false,
     e_float_with_scales,
     JEV_ERR_FORMAT,
     {HF "layers.1.mlp.up_proj.weight", HF "layers.1.mlp.up_proj.scales", "U32"}},
    {"names of neither layout", false, e_no_layout, JEV_ERR_FORMAT, {"model.language_model.", "language_model.model."}},
    {"untied head missing", false, e_untied_head, JEV_ERR_FORMAT, {"lm_head.weight", "missing", "[2048, 64]"}},
    {"quantized without .biases",
     true,
     e_missing_biases,
     JEV_ERR_FORMAT,
     {MX "layers.2.self_attn.k_proj.weight", MX "layers.2.self_attn.k_proj.biases", "missing"}},
    {"codes that do not pack the shape",
     true,
     e_codes_no_pack,
     JEV_ERR_FORMAT,
     {MX "layers.2.self_attn.v_proj.weight", "[256, 4]", "[128, 64]"}},
    {"scales dtype", true, e_scales_dtype, JEV_ERR_FORMAT, {MX "layers.0.mlp.up_proj.scales", "I16"}},
    {"scales shape",
     true,
     e_scales_shape,
     JEV_ERR_FORMAT,
     {MX "layers.0.mlp.gate_proj.scales", "[1, 128]", "[128, 64]"}},
    {"biases unlike the scales",
     true,
     e_biases_unlike,
     JEV_ERR_FORMAT,
     {MX "layers.0.mlp.gate_proj.biases", MX "layers.0.mlp.gate_proj.scales"}},
    {"quantized codes misaligned",
     true,
     e_codes_misaligned,
     JEV_ERR_UNSUPPORTED,
     {MX "layers.0.linear_attn.in_proj_qkv.weight", "aligned"}},
};

static void test_each_refusal(void **state) {
    (void)state;
    struct jev_model_params p = jev_model_default_params();
    p.n_threads = 1;
    int bad = 0; /* every case runs; the failures are listed, then counted */
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct refusal *c = &cases[i];
        sh("rm -rf '%s' && cp -r '%s' '%s'", dir_bk, c->mlx ? dir_mx : dir_hf, dir_bk);
        struct st s;
        st_load(dir_bk, &s);
        c->edit(&s);
        st_save(dir_bk, &s);
        if (c->edit == e_untied_head) {
            char cfg[PATH_MAX + 64];
            snprintf(cfg, sizeof cfg, "%s/config.json", dir_bk);
            json_t *d = json_load_file(cfg, 0, NULL);
            assert_non_null(d);
            json_object_set_new(d, "tie_word_embeddings", json_false());
            assert_int_equal(json_dump_file(d, cfg, JSON_INDENT(2)), 0);
            json_decref(d);
        }
        struct jev_model *m = NULL;
        char err[1024] = "";
        enum jev_status st = jev_model_load(dir_bk, &p, &m, err, sizeof err);
        printf("  %-64s -> %d: %s\n", c->what, st, err);
        const char *lack = NULL;
        if (!strstr(err, dir_bk))
            lack = dir_bk;
        for (int k = 0; k < 4 && c->parts[k]; k++)
            if (!strstr(err, c->parts[k]))
                lack = c->parts[k];
        if (st != c->status || m || lack) {
            print_error("%s: status %d (expected %d)%s%s\n", c->what, st, c->status, lack ? ", the message lacks " : "",
                        lack ? lack : "");
            bad++;
        }
        jev_model_free(m);
    }
    if (bad)
        fail_msg("%d of %zu refusals wrong (listed above)", bad, sizeof cases / sizeof cases[0]);
}

/* The unbroken copies load, so each refusal above comes from its one edit. */
static void test_unbroken_copies_load(void **state) {
    (void)state;
    struct jev_model_params p = jev_model_default_params();
    p.n_threads = 1;
    for (int k = 0; k < 2; k++) {
        sh("rm -rf '%s' && cp -r '%s' '%s'", dir_bk, k ? dir_mx : dir_hf, dir_bk);
        struct st s;
        st_load(dir_bk, &s);
        st_save(dir_bk, &s); /* through the same load and save as every case */
        struct jev_model *m = NULL;
        char err[1024] = "";
        if (jev_model_load(dir_bk, &p, &m, err, sizeof err) != JEV_OK)
            fail_msg("%s copy: %s", k ? "mlx4" : "hf", err);
        jev_model_free(m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_unbroken_copies_load),
        cmocka_unit_test(test_each_refusal),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

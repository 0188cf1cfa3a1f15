/*
 * test-tensors.c - the tensor table of model/tensors.h against real model
 * directories and against its own check.
 *
 * Synthetic models of every layout (tied and untied, with and without the
 * MTP head, with and without the vision tower) are loaded and the table is
 * walked over them: every entry must name a tensor of the directory with the
 * table's file shape, land where the loader put that tensor (the matrix
 * pointing at its data, the vector holding its first value, shifted for an
 * HF (1 + w) norm), and every tensor of the directory must be claimed by
 * exactly one entry (mtp.* by none in the loader's walk, by one in synth's).
 * The check must refuse a table with an entry left without destination or
 * shape, a slot of struct jev_weights that no entry fills, two entries on one
 * slot, an MTP entry with a destination, and a missing synth dtype. The
 * vision FLOP count walked from the table must equal its closed form.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"          // defines: jev_bf16_to_f32
#include "common/synth/synth.h" // defines: jev_synth_write
#include "model/model.h"        // defines: jev_model_open
#include "model/tensors.h"      // defines: jev_tensor_table, jev_tensor_walk_next
#include "model/vision.h"       // defines: jev_vision_flops

/* ---- fixtures ---- */

static char root[256];
static char cfg_mtp[512], cfg_text[512];                                       /* variants of configs/tiny.json */
static char d_hf[600], d_mlx[600], d_mtp_hf[600], d_mtp_mlx[600], d_text[600]; /* synthetic models */

/* A copy of configs/tiny.json: untied with 2 MTP layers (mtp), or its bare text config (text). */
static int write_config(const char *path, bool text_only) {
    json_t *d = json_load_file("configs/tiny.json", 0, NULL);
    if (!d)
        return -1;
    json_t *t = json_object_get(d, "text_config");
    if (text_only) {
        json_incref(t);
        json_decref(d);
        d = t;
    } else {
        json_object_set_new(d, "tie_word_embeddings", json_false());
        json_object_set_new(t, "tie_word_embeddings", json_false());
        json_object_set_new(t, "mtp_num_hidden_layers", json_integer(2));
    }
    int rc = json_dump_file(d, path, JSON_INDENT(2));
    json_decref(d);
    return rc;
}

static int synth(const char *config, enum jev_synth_layout layout, const char *out) {
    struct jev_synth_params p = jev_synth_default_params();
    p.config_path = config;
    p.layout = layout;
    p.out_dir = out;
    p.force = true;
    struct jev_synth_report r;
    struct jev_error err = {0};
    if (jev_synth_write(&p, &r, &err) != JEV_OK) {
        fprintf(stderr, "synth %s: %s\n", out, err.msg);
        return -1;
    }
    return 0;
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("JEV_TEST_DIR");
    snprintf(root, sizeof root, "%s/tensors", d ? d : "build/test-data");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf '%s' && mkdir -p '%s'", root, root);
    if (system(cmd) != 0)
        return -1;
    snprintf(cfg_mtp, sizeof cfg_mtp, "%s/tiny-mtp-untied.json", root);
    snprintf(cfg_text, sizeof cfg_text, "%s/tiny-text.json", root);
    snprintf(d_hf, sizeof d_hf, "%s/tiny-hf", root);
    snprintf(d_mlx, sizeof d_mlx, "%s/tiny-mlx4", root);
    snprintf(d_mtp_hf, sizeof d_mtp_hf, "%s/mtp-hf", root);
    snprintf(d_mtp_mlx, sizeof d_mtp_mlx, "%s/mtp-mlx4", root);
    snprintf(d_text, sizeof d_text, "%s/text-hf", root);
    if (write_config(cfg_mtp, false) != 0 || write_config(cfg_text, true) != 0)
        return -1;
    return synth("configs/tiny.json", JEV_SYNTH_HF, d_hf) || synth("configs/tiny.json", JEV_SYNTH_MLX4, d_mlx) ||
           synth(cfg_mtp, JEV_SYNTH_HF, d_mtp_hf) || synth(cfg_mtp, JEV_SYNTH_MLX4, d_mtp_mlx) ||
           synth(cfg_text, JEV_SYNTH_HF, d_text);
}

/* ---- the table against loaded models ---- */

/* Element 0 of a float tensor as f32 (synth stores F32 or BF16). */
static float first_value(const struct jev_st_tensor *t) {
    if (t->dtype == JEV_DTYPE_F32) {
        float f;
        memcpy(&f, t->data, 4);
        return f;
    }
    assert_int_equal(t->dtype, JEV_DTYPE_BF16);
    uint16_t h;
    memcpy(&h, t->data, 2);
    return jev_bf16_to_f32(h);
}

/* Marks tensor `name` as claimed once more (it must exist) and returns it. */
static const struct jev_st_tensor *claim(const struct jev_model *m, int32_t *claims, const char *name) {
    const struct jev_st_tensor *t = jev_st_set_find(&m->tensors, name);
    if (!t)
        fail_msg("table entry names '%s', which the directory does not hold", name);
    for (int32_t i = 0; i < m->tensors.n_tensors; i++)
        if (m->tensors.by_name[i] == t)
            claims[i]++;
    return t;
}

/* One tensor of the walk: present with the table's shape, and where the loader put it (outside the MTP head). */
static void check_tensor(struct jev_model *m, int32_t *claims, const struct jev_tensor_at *at) {
    char name[JEV_TENSOR_NAME_MAX], full[JEV_TENSOR_NAME_MAX + 16];
    jev_tensor_name(at, m->layout, name);
    const void *slot = jev_tensor_slot_const(at, &m->weights);
    assert_true((slot == NULL) == (at->k->part >= JEV_PART_MTP_IN || at->mtp));
    if (at->k->form == JEV_TFORM_MATRIX) {
        snprintf(full, sizeof full, "%s.weight", name);
        const struct jev_st_tensor *w = claim(m, claims, full);
        if (w->dtype == JEV_DTYPE_U32) {
            snprintf(full, sizeof full, "%s.scales", name);
            claim(m, claims, full);
            snprintf(full, sizeof full, "%s.biases", name);
            claim(m, claims, full);
        } else {
            assert_int_equal(w->ndim, 2);
            assert_int_equal(w->shape[0], at->rows);
            assert_int_equal(w->shape[1], at->cols);
        }
        if (slot) {
            const struct jev_matrix *mx = slot;
            assert_ptr_equal(mx->data, w->data);
            assert_string_equal(mx->name, w->name);
            assert_int_equal(mx->rows, at->rows);
            assert_int_equal(mx->cols, at->cols);
        }
        return;
    }
    const struct jev_st_tensor *t = claim(m, claims, name);
    int64_t want[5];
    int32_t nd = jev_tensor_file_shape(at, &m->config, m->layout, want);
    assert_int_equal(t->ndim, nd);
    for (int32_t d = 0; d < nd; d++)
        assert_int_equal(t->shape[d], want[d]);
    if (slot) {
        const float *v = *(float *const *)slot;
        assert_non_null(v);
        float x = first_value(t); /* element 0 is element 0 in both patch orders */
        if (at->k->form == JEV_TFORM_NORM1P && m->layout == JEV_LAYOUT_HF)
            x = 1.0f + x;
        if (v[0] != x)
            fail_msg("%s: loaded %.9g, the file's first value gives %.9g", name, (double)v[0], (double)x);
    }
}

/* Walks the table over dir (the loader's walk, then synth's with n_mtp MTP layers) and checks every claim. */
static void check_dir(const char *dir, int32_t n_mtp) {
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    if (jev_model_open(dir, NULL, &m, &err) != JEV_OK)
        fail_msg("load %s: %s", dir, err.msg);
    int32_t n = m->tensors.n_tensors;
    int32_t *claims = calloc((size_t)n, sizeof *claims);
    assert_non_null(claims);
    for (int pass = 0; pass < 2; pass++) {
        memset(claims, 0, (size_t)n * sizeof *claims);
        struct jev_tensor_walk w;
        struct jev_tensor_at at;
        jev_tensor_walk_init(&w, &m->config, m->config.has_vision, pass ? n_mtp : 0);
        while (jev_tensor_walk_next(&w, &at))
            check_tensor(m, claims, &at);
        for (int32_t i = 0; i < n; i++) {
            const char *name = m->tensors.by_name[i]->name;
            int32_t want = pass == 0 && strncmp(name, "mtp.", 4) == 0 ? 0 : 1;
            if (claims[i] != want)
                fail_msg("%s: tensor '%s' claimed by %d table entries, expected %d (%s walk)", dir, name, claims[i],
                         want, pass ? "synth's" : "the loader's");
        }
    }
    free(claims);
    jev_model_free(m);
}

static void test_walk_claims_every_tensor(void **state) {
    (void)state;
    check_dir(d_hf, 0);
    check_dir(d_mlx, 0);
    check_dir(d_mtp_hf, 2); /* untied head, the MTP head */
    check_dir(d_mtp_mlx, 0);
    check_dir(d_text, 0); /* no vision tower */
}

/* The walk visits the text model, the tower and the MTP head in table order, layer by layer. */
static void test_walk_order(void **state) {
    (void)state;
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_model_open(d_mtp_hf, NULL, &m, &err), JEV_OK);
    struct jev_tensor_walk w;
    struct jev_tensor_at at;
    char name[JEV_TENSOR_NAME_MAX];
    const char *want[] = {"model.language_model.embed_tokens", "model.language_model.layers.0.input_layernorm.weight",
                          "model.language_model.layers.0.linear_attn.in_proj_qkv"};
    jev_tensor_walk_init(&w, &m->config, true, 2);
    for (int i = 0; i < 3; i++) {
        assert_true(jev_tensor_walk_next(&w, &at));
        assert_string_equal(jev_tensor_name(&at, JEV_LAYOUT_HF, name), want[i]);
    }
    int32_t count = 0;
    char prev[JEV_TENSOR_NAME_MAX] = "";
    jev_tensor_walk_init(&w, &m->config, true, 2);
    while (jev_tensor_walk_next(&w, &at)) {
        jev_tensor_name(&at, JEV_LAYOUT_MLX, name);
        if (strcmp(name, "language_model.lm_head") == 0)
            assert_string_equal(prev, "language_model.model.norm.weight"); /* the untied head follows the norm */
        snprintf(prev, sizeof prev, "%s", name);
        count++;
    }
    assert_string_equal(prev, "mtp.norm.weight");
    /* one step per tensor of the (unquantized) hf file, MTP head included */
    assert_int_equal(count, m->tensors.n_tensors);
    jev_model_free(m);
}

/* ---- the check ---- */

static struct jev_tensor_kind table[128];

/* A copy of the real table; returns its length. */
static int32_t copy_table(void) {
    assert_true(jev_tensor_count <= 128);
    memcpy(table, jev_tensor_table, (size_t)jev_tensor_count * sizeof table[0]);
    return jev_tensor_count;
}

static int32_t find(int32_t n, const char *name, enum jev_tensor_part part) {
    for (int32_t i = 0; i < n; i++)
        if (strcmp(table[i].name, name) == 0 && table[i].part == part)
            return i;
    fail_msg("no entry '%s'", name);
    return -1;
}

static void expect_refused(int32_t n, const char *msg) {
    struct jev_error err = {0};
    assert_int_equal(jev_tensor_table_check(table, n, &err), JEV_ERR_INVALID_ARG);
    assert_string_equal(err.msg, msg);
}

static void test_real_table_passes(void **state) {
    (void)state;
    struct jev_error err = {0};
    if (jev_tensor_table_check(jev_tensor_table, jev_tensor_count, &err) != JEV_OK)
        fail_msg("%s", err.msg);
}

static void test_check_refuses_broken_tables(void **state) {
    (void)state;
    int32_t n = copy_table();
    table[find(n, "mlp.down_proj", JEV_PART_LAYER)].dest = JEV_TENSOR_NO_DEST;
    expect_refused(n, "tensor table: 'mlp.down_proj' has no destination in struct jev_layer_weights");

    n = copy_table();
    table[find(n, "self_attn.q_norm.weight", JEV_PART_LAYER_FULL)].cols = JEV_DIM_NONE;
    expect_refused(n, "tensor table: 'self_attn.q_norm.weight' has no shape (rows and cols are config sizes)");

    n = copy_table();
    table[find(n, "attn.qkv", JEV_PART_BLOCK)].rows = JEV_DIM_NONE;
    expect_refused(n, "tensor table: 'attn.qkv' has no shape (rows and cols are config sizes)");

    /* an entry dropped: its slot is left empty */
    n = copy_table();
    int32_t i = find(n, "merger.linear_fc2.bias", JEV_PART_VISION_OUT);
    memmove(&table[i], &table[i + 1], (size_t)(n - i - 1) * sizeof table[0]);
    char want[256];
    size_t at = offsetof(struct jev_vision_weights, merger_fc2_b);
    snprintf(want, sizeof want,
             "tensor table: bytes %zu..%zu of struct jev_vision_weights are a slot that no entry fills", at,
             at + sizeof(float *) - 1);
    expect_refused(n - 1, want);

    n = copy_table();
    table[find(n, "self_attn.k_norm.weight", JEV_PART_LAYER_FULL)].dest =
        table[find(n, "self_attn.q_norm.weight", JEV_PART_LAYER_FULL)].dest;
    expect_refused(n, "tensor table: 'self_attn.q_norm.weight' and 'self_attn.k_norm.weight' land on the same slot of "
                      "struct jev_layer_weights");

    /* a layer's kind is not a tensor */
    n = copy_table();
    table[find(n, "input_layernorm.weight", JEV_PART_LAYER)].dest = 0;
    expect_refused(n,
                   "tensor table: 'input_layernorm.weight' lands on byte 0 of struct jev_layer_weights, which is not "
                   "a tensor slot");

    n = copy_table();
    table[find(n, "fc", JEV_PART_MTP_IN)].dest = 0;
    expect_refused(n, "tensor table: 'fc' (MTP head) has a destination, but the loader keeps no MTP tensor");

    n = copy_table();
    table[find(n, "linear_attn.A_log", JEV_PART_LAYER_LINEAR)].mlx_dtype = JEV_DTYPE_F64;
    expect_refused(n, "tensor table: 'linear_attn.A_log': synth's mlx4 dtype F64 is not F32 or BF16");

    n = copy_table();
    table[find(n, "norm2.bias", JEV_PART_BLOCK)].name = "norm1.bias";
    expect_refused(n, "tensor table: 'norm1.bias' is listed twice for struct jev_vision_block_weights");

    n = copy_table();
    table[find(n, "norm.weight", JEV_PART_TEXT_OUT)].form = JEV_TFORM_MATRIX;
    expect_refused(n, "tensor table: 'norm.weight': rows must be JEV_DIM_ONE exactly for a vector");
}

/* ---- FLOPs ---- */

/* The vision tower's FLOPs from the table equal the closed form (2 per multiply-add). */
static void test_vision_flops(void **state) {
    (void)state;
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_model_open(d_hf, NULL, &m, &err), JEV_OK);
    const struct jev_vision_config *c = &m->config.vision;
    for (int64_t n = 4; n <= 4096; n *= 4) {
        double N = (double)n, D = c->hidden, I = c->intermediate, M = c->merge_in;
        double block = 2 * N * D * 3 * D + 4 * N * N * D + 2 * N * D * D + 4 * N * D * I;
        double merger = 2 * (N / (c->merge * c->merge)) * M * (M + c->out_hidden);
        double want = 2 * N * c->patch_dim * D + c->depth * block + merger;
        assert_true(jev_vision_flops(c, n) == want);
    }
    jev_model_free(m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_real_table_passes),
        cmocka_unit_test(test_check_refuses_broken_tables),
        cmocka_unit_test(test_walk_claims_every_tensor),
        cmocka_unit_test(test_walk_order),
        cmocka_unit_test(test_vision_flops),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

/*
 * test-model-dir.c - config.json parsing and the weight mapping of both
 * layouts: the tiny synthetic model (configs/tiny.json) written as hf and as
 * mlx4 from the same seed must load to the SAME weights where they should
 * (norms after the shift, conv taps, gated norm, A_log, patch embedding) and
 * to exactly our quantizer's dequantized values for every quantized matrix;
 * a sharded copy must equal the single file; broken configs and tensors must
 * fail with messages naming the field or tensor.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/half.h"          // defines: jev_bf16_to_f32
#include "model/config-json.h"  // defines: jev_config_parse
#include "model/model-dir.h"    // defines: jev_layout_detect
#include "model/model.h"        // defines: jev_model_open
#include "common/synth/synth.h" // defines: jev_synth_write, jev_synth_quantize

/* ---- fixtures ---- */

static char root[256];    /* $JEV_TEST_DIR/model-dir */
static char dir_hf[512];  /* tiny, seed 1, hf */
static char dir_mlx[512]; /* tiny, seed 1, mlx4 */
static char dir_shd[512]; /* tiny, seed 1, hf, sharded */

static void sh(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void sh(const char *fmt, ...) {
    char cmd[4096];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(cmd, sizeof cmd, fmt, ap);
    va_end(ap);
    assert_int_equal(system(cmd), 0);
}

static void synth(const char *out, enum jev_synth_layout layout, int64_t shard_bytes) {
    struct jev_synth_params p = jev_synth_default_params();
    p.config_path = "configs/tiny.json";
    p.seed = 1;
    p.layout = layout;
    p.out_dir = out;
    p.shard_bytes = shard_bytes;
    p.force = true;
    struct jev_synth_report r;
    struct jev_error err = {0};
    if (jev_synth_write(&p, &r, &err) != JEV_OK)
        fail_msg("synth %s: %s", out, err.msg);
}

static int setup(void **state) {
    (void)state;
    const char *d = getenv("JEV_TEST_DIR");
    snprintf(root, sizeof root, "%s/model-dir", d ? d : "build/test-data");
    sh("rm -rf '%s' && mkdir -p '%s'", root, root);
    snprintf(dir_hf, sizeof dir_hf, "%s/tiny-hf", root);
    snprintf(dir_mlx, sizeof dir_mlx, "%s/tiny-mlx4", root);
    snprintf(dir_shd, sizeof dir_shd, "%s/tiny-hf-sharded", root);
    synth(dir_hf, JEV_SYNTH_HF, 0);
    synth(dir_mlx, JEV_SYNTH_MLX4, 0);
    synth(dir_shd, JEV_SYNTH_HF, 256 << 10);
    return 0;
}

static struct jev_model *load(const char *dir) {
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    if (jev_model_open(dir, NULL, &m, &err) != JEV_OK)
        fail_msg("load %s: %s", dir, err.msg);
    return m;
}

/* Expects loading dir to fail with status st and exactly msg after "DIR: " (when prefixed) or as is. */
static void expect_load_error(const char *dir, enum jev_status st, const char *msg) {
    struct jev_model *m = NULL;
    struct jev_error err = {0};
    assert_int_equal(jev_model_open(dir, NULL, &m, &err), st);
    assert_null(m);
    assert_string_equal(err.msg, msg);
}

/* ---- both layouts agree ---- */

static void assert_vec_equal(const float *a, const float *b, int64_t n, const char *what) {
    for (int64_t i = 0; i < n; i++)
        if (a[i] != b[i])
            fail_msg("%s[%lld]: %.9g != %.9g", what, (long long)i, (double)a[i], (double)b[i]);
}

/* mlx == our quantizer applied to the hf row, exactly; and within one quantization step of it. */
static void assert_quantized_from(const struct jev_matrix *hf, const struct jev_matrix *q) {
    assert_int_equal(hf->type, JEV_MTYPE_BF16);
    assert_int_equal(q->type, JEV_MTYPE_QAFFINE);
    assert_int_equal(q->bits, 4);
    assert_int_equal(q->group, 64);
    assert_int_equal(hf->rows, q->rows);
    assert_int_equal(hf->cols, q->cols);
    int64_t n = hf->cols, ng = n / 64;
    float *w = malloc((size_t)n * sizeof *w), *d = malloc((size_t)n * sizeof *d);
    uint32_t *codes = malloc((size_t)n / 2);
    uint16_t *sc = malloc((size_t)ng * 2), *bi = malloc((size_t)ng * 2);
    for (int64_t r = 0; r < hf->rows; r++) {
        jev_matrix_row(hf, r, w);
        jev_matrix_row(q, r, d);
        jev_synth_quantize(w, n, 4, 64, codes, sc, bi);
        for (int64_t k = 0; k < n; k++) {
            float s = jev_bf16_to_f32(sc[k / 64]), b = jev_bf16_to_f32(bi[k / 64]);
            uint32_t code = (codes[k / 8] >> (4 * (k % 8))) & 15u;
            float want = s * (float)code + b;
            if (d[k] != want)
                fail_msg("%s [%lld][%lld]: %.9g, expected %.9g", q->name, (long long)r, (long long)k, (double)d[k],
                         (double)want);
            if (fabsf(d[k] - w[k]) > s * 1.01f + 1e-7f)
                fail_msg("%s [%lld][%lld]: |%.9g - %.9g| exceeds one step %.9g", q->name, (long long)r, (long long)k,
                         (double)d[k], (double)w[k], (double)s);
        }
    }
    free(w);
    free(d);
    free(codes);
    free(sc);
    free(bi);
}

static void test_layouts_agree(void **state) {
    (void)state;
    struct jev_model *h = load(dir_hf), *x = load(dir_mlx);
    assert_int_equal(h->layout, JEV_LAYOUT_HF);
    assert_int_equal(x->layout, JEV_LAYOUT_MLX);
    const struct jev_config *c = &h->config;
    assert_int_equal(c->text.n_layers, 6);
    assert_int_equal(c->text.n_full_layers, 2);
    assert_int_equal(x->config.quant.bits, 4);
    assert_false(h->config.quant.present);
    const struct jev_text_config *t = &c->text;
    const struct jev_text_weights *a = &h->weights.text, *b = &x->weights.text;
    assert_vec_equal(a->final_norm, b->final_norm, t->hidden, "final_norm");
    assert_quantized_from(&a->embed, &b->embed);
    assert_ptr_equal(a->lm_head.data, a->embed.data); /* tied */
    assert_ptr_equal(b->lm_head.data, b->embed.data);
    /* the 1 + w norms are really shifted: near 1, not near 0 */
    assert_true(fabsf(a->final_norm[0] - 1.0f) < 0.2f);
    for (int i = 0; i < t->n_layers; i++) {
        const struct jev_layer_weights *la = &a->layers[i], *lb = &b->layers[i];
        assert_vec_equal(la->in_norm, lb->in_norm, t->hidden, "in_norm");
        assert_vec_equal(la->post_norm, lb->post_norm, t->hidden, "post_norm");
        assert_quantized_from(&la->gate, &lb->gate);
        assert_quantized_from(&la->up, &lb->up);
        assert_quantized_from(&la->down, &lb->down);
        if (t->layer_kind[i] == JEV_LAYER_LINEAR) {
            assert_vec_equal(la->lin.conv, lb->lin.conv, (int64_t)t->conv_dim * t->conv_kernel, "conv");
            assert_vec_equal(la->lin.dt_bias, lb->lin.dt_bias, t->lin_v_heads, "dt_bias");
            assert_vec_equal(la->lin.a_log, lb->lin.a_log, t->lin_v_heads, "A_log");
            assert_vec_equal(la->lin.norm, lb->lin.norm, t->lin_v_dim, "linear_attn.norm");
            assert_true(la->lin.a_log[0] >= 0.0f && la->lin.a_log[0] < 2.78f); /* log(U(1, 16)) */
            assert_true(fabsf(la->lin.norm[0] - 1.0f) < 0.2f);                 /* plain multiplier near 1 */
            assert_quantized_from(&la->lin.in_qkv, &lb->lin.in_qkv);
            assert_quantized_from(&la->lin.in_z, &lb->lin.in_z);
            assert_quantized_from(&la->lin.in_b, &lb->lin.in_b);
            assert_quantized_from(&la->lin.in_a, &lb->lin.in_a);
            assert_quantized_from(&la->lin.out, &lb->lin.out);
        } else {
            assert_vec_equal(la->full.q_norm, lb->full.q_norm, t->head_dim, "q_norm");
            assert_vec_equal(la->full.k_norm, lb->full.k_norm, t->head_dim, "k_norm");
            assert_quantized_from(&la->full.q, &lb->full.q);
            assert_quantized_from(&la->full.k, &lb->full.k);
            assert_quantized_from(&la->full.v, &lb->full.v);
            assert_quantized_from(&la->full.o, &lb->full.o);
        }
    }
    const struct jev_vision_config *v = &c->vision;
    const struct jev_vision_weights *va = &h->weights.vision, *vb = &x->weights.vision;
    assert_vec_equal(va->patch_w, vb->patch_w, (int64_t)v->hidden * v->patch_dim, "patch_w (channels-last undone)");
    assert_vec_equal(va->patch_b, vb->patch_b, v->hidden, "patch_b");
    assert_quantized_from(&va->pos_embed, &vb->pos_embed);
    for (int j = 0; j < v->depth; j++) {
        const struct jev_vision_block_weights *ka = &va->blocks[j], *kb = &vb->blocks[j];
        assert_vec_equal(ka->norm1_w, kb->norm1_w, v->hidden, "norm1_w");
        assert_vec_equal(ka->norm2_b, kb->norm2_b, v->hidden, "norm2_b");
        assert_vec_equal(ka->qkv_b, kb->qkv_b, 3 * v->hidden, "qkv_b");
        assert_vec_equal(ka->fc1_b, kb->fc1_b, v->intermediate, "fc1_b");
        assert_quantized_from(&ka->qkv, &kb->qkv);
        assert_quantized_from(&ka->proj, &kb->proj);
        assert_quantized_from(&ka->fc1, &kb->fc1);
        assert_quantized_from(&ka->fc2, &kb->fc2);
    }
    assert_vec_equal(va->merger_norm_w, vb->merger_norm_w, v->hidden, "merger_norm_w");
    assert_vec_equal(va->merger_fc2_b, vb->merger_fc2_b, v->out_hidden, "merger_fc2_b");
    assert_quantized_from(&va->merger_fc1, &vb->merger_fc1);
    assert_quantized_from(&va->merger_fc2, &vb->merger_fc2);
    jev_model_free(h);
    jev_model_free(x);
}

/* The HF norm file values are offsets (w), the loader forms 1 + w; the MLX file stores 1 + w itself. */
static void test_norm_conventions_in_files(void **state) {
    (void)state;
    struct jev_model *h = load(dir_hf), *x = load(dir_mlx);
    const struct jev_st_tensor *th = jev_st_set_find(&h->tensors, "model.language_model.norm.weight");
    const struct jev_st_tensor *tx = jev_st_set_find(&x->tensors, "language_model.model.norm.weight");
    assert_non_null(th);
    assert_non_null(tx);
    assert_int_equal(th->dtype, JEV_DTYPE_BF16);
    uint16_t u;
    memcpy(&u, th->data, 2);
    float w = jev_bf16_to_f32(u);
    memcpy(&u, tx->data, 2);
    assert_true(jev_bf16_to_f32(u) == 1.0f + w);
    assert_true(h->weights.text.final_norm[0] == 1.0f + w);
    /* A_log f32 in both; linear_attn.norm f32 in HF, bf16 in MLX; conv layouts differ */
    assert_int_equal(jev_st_set_find(&h->tensors, "model.language_model.layers.0.linear_attn.A_log")->dtype,
                     JEV_DTYPE_F32);
    assert_int_equal(jev_st_set_find(&x->tensors, "language_model.model.layers.0.linear_attn.A_log")->dtype,
                     JEV_DTYPE_F32);
    assert_int_equal(jev_st_set_find(&h->tensors, "model.language_model.layers.0.linear_attn.norm.weight")->dtype,
                     JEV_DTYPE_F32);
    const struct jev_st_tensor *ch =
        jev_st_set_find(&h->tensors, "model.language_model.layers.0.linear_attn.conv1d.weight");
    const struct jev_st_tensor *cx =
        jev_st_set_find(&x->tensors, "language_model.model.layers.0.linear_attn.conv1d.weight");
    assert_int_equal(ch->shape[1], 1);
    assert_int_equal(ch->shape[2], 4);
    assert_int_equal(cx->shape[1], 4);
    assert_int_equal(cx->shape[2], 1);
    assert_int_equal(jev_st_set_find(&x->tensors, "vision_tower.patch_embed.proj.weight")->shape[4], 3);
    assert_null(jev_st_set_find(&h->tensors, "lm_head.weight")); /* tied: not written */
    jev_model_free(h);
    jev_model_free(x);
}

static void test_sharded_equals_single(void **state) {
    (void)state;
    struct jev_model *a = load(dir_hf), *b = load(dir_shd);
    assert_true(b->tensors.sharded);
    assert_true(b->tensors.n_files > 3);
    assert_int_equal(a->tensors.n_tensors, b->tensors.n_tensors);
    for (int32_t i = 0; i < a->tensors.n_tensors; i++) {
        const struct jev_st_tensor *x = a->tensors.by_name[i], *y = b->tensors.by_name[i];
        assert_string_equal(x->name, y->name);
        assert_int_equal(x->dtype, y->dtype);
        assert_int_equal(x->nbytes, y->nbytes);
        assert_memory_equal(x->data, y->data, x->nbytes);
    }
    assert_vec_equal(a->weights.text.layers[2].full.q_norm, b->weights.text.layers[2].full.q_norm,
                     a->config.text.head_dim, "q_norm");
    assert_vec_equal(a->weights.vision.patch_w, b->weights.vision.patch_w,
                     (int64_t)a->config.vision.hidden * a->config.vision.patch_dim, "patch_w");
    jev_model_free(a);
    jev_model_free(b);
}

static void test_public_load_api(void **state) {
    (void)state;
    struct jev_model_params p = jev_model_default_params();
    p.no_vision = true;
    struct jev_model *m = NULL;
    char err[512] = "untouched";
    assert_int_equal(jev_model_load(dir_mlx, &p, &m, err, sizeof err), JEV_OK);
    assert_non_null(m);
    assert_false(m->config.has_vision);
    assert_null(m->weights.vision.blocks);
    jev_model_free(m);
    char missing[600];
    snprintf(missing, sizeof missing, "%s/nope", root);
    assert_int_equal(jev_model_load(missing, NULL, &m, err, sizeof err), JEV_ERR_IO);
    assert_null(m);
    char want[700];
    snprintf(want, sizeof want, "%s/config.json: cannot open: No such file or directory", missing);
    assert_string_equal(err, want);
}

/* An untied head (micro config with tie_word_embeddings false) in both layouts, and generation_config.json. */
static void test_untied_head_and_generation_config(void **state) {
    (void)state;
    char cfg[600], dh[600], dm[600];
    snprintf(cfg, sizeof cfg, "%s/micro-untied.json", root);
    json_t *d = json_load_file("configs/micro.json", 0, NULL);
    assert_non_null(d);
    json_object_set_new(d, "tie_word_embeddings", json_false());
    assert_int_equal(json_dump_file(d, cfg, JSON_INDENT(2)), 0);
    json_decref(d);
    snprintf(dh, sizeof dh, "%s/micro-untied-hf", root);
    snprintf(dm, sizeof dm, "%s/micro-untied-mlx4", root);
    for (int k = 0; k < 2; k++) {
        struct jev_synth_params p = jev_synth_default_params();
        p.config_path = cfg;
        p.layout = k ? JEV_SYNTH_MLX4 : JEV_SYNTH_HF;
        p.group = 32;
        p.out_dir = k ? dm : dh;
        p.force = true;
        struct jev_synth_report r;
        struct jev_error err = {0};
        if (jev_synth_write(&p, &r, &err) != JEV_OK)
            fail_msg("synth: %s", err.msg);
    }
    char gp[700];
    snprintf(gp, sizeof gp, "%s/generation_config.json", dh);
    FILE *g = fopen(gp, "w");
    assert_non_null(g);
    fputs("{\"eos_token_id\": [3, 1, 2]}", g);
    fclose(g);
    struct jev_model *h = load(dh), *x = load(dm);
    assert_false(h->config.text.tie_embeddings);
    assert_non_null(jev_st_set_find(&h->tensors, "lm_head.weight"));
    assert_non_null(jev_st_set_find(&x->tensors, "language_model.lm_head.scales"));
    assert_ptr_not_equal(h->weights.text.lm_head.data, h->weights.text.embed.data);
    assert_int_equal(x->weights.text.lm_head.group, 32);
    /* the hf head quantized with group 32 is the mlx4 head */
    const struct jev_matrix *a = &h->weights.text.lm_head, *b = &x->weights.text.lm_head;
    float w[32], q[32], dq[32];
    uint32_t codes[4];
    uint16_t sc[1], bi[1];
    for (int32_t r = 0; r < a->rows; r++) {
        jev_matrix_row(a, r, w);
        jev_matrix_row(b, r, q);
        jev_synth_quantize(w, 32, 4, 32, codes, sc, bi);
        for (int k = 0; k < 32; k++)
            dq[k] = jev_bf16_to_f32(sc[0]) * (float)((codes[k / 8] >> (4 * (k % 8))) & 15u) + jev_bf16_to_f32(bi[0]);
        assert_memory_equal(q, dq, sizeof q);
    }
    /* eos: text_config's 1, then generation_config's 3 and 2 (1 not repeated) */
    assert_int_equal(h->config.ids.n_eos, 3);
    assert_int_equal(h->config.ids.eos[0], 1);
    assert_int_equal(h->config.ids.eos[1], 3);
    assert_int_equal(h->config.ids.eos[2], 2);
    assert_int_equal(x->config.ids.n_eos, 1);
    jev_model_free(h);
    jev_model_free(x);
}

/* ---- config.json ---- */

static json_t *tiny_doc(void) {
    json_error_t je;
    json_t *d = json_load_file("configs/tiny.json", 0, &je);
    assert_non_null(d);
    return d;
}

/* Parses doc (label "config.json") and expects status st with message msg (or OK when msg is NULL). */
static void expect_config(json_t *doc, enum jev_status st, const char *msg, struct jev_config *out) {
    char *s = json_dumps(doc, 0);
    struct jev_config c;
    struct jev_quant_overrides q;
    struct jev_error err = {0};
    enum jev_status got = jev_config_parse(s, strlen(s), "config.json", &c, &q, &err);
    free(s);
    jev_quant_overrides_free(&q);
    if (got != st)
        fail_msg("status %d (%s), expected %d", got, err.msg, st);
    if (msg)
        assert_string_equal(err.msg, msg);
    if (out)
        *out = c;
    json_decref(doc);
}

static json_t *text_of(json_t *d) { return json_object_get(d, "text_config"); }

static void test_config_errors(void **state) {
    (void)state;
    json_t *d = tiny_doc();
    json_object_del(text_of(d), "hidden_size");
    expect_config(d, JEV_ERR_FORMAT, "config.json: text_config.hidden_size: missing", NULL);

    d = tiny_doc();
    json_object_set_new(text_of(d), "num_hidden_layers", json_string("6"));
    expect_config(d, JEV_ERR_FORMAT, "config.json: text_config.num_hidden_layers: expected an integer, got a string",
                  NULL);

    d = tiny_doc();
    json_object_set_new(text_of(d), "vocab_size", json_integer(0));
    expect_config(d, JEV_ERR_FORMAT, "config.json: text_config.vocab_size: 0 is outside 1..1073741824", NULL);

    d = tiny_doc();
    json_array_remove(json_object_get(text_of(d), "layer_types"), 0);
    expect_config(d, JEV_ERR_FORMAT,
                  "config.json: text_config.layer_types: expected an array of 6 layer types (num_hidden_layers)", NULL);

    d = tiny_doc();
    json_array_set_new(json_object_get(text_of(d), "layer_types"), 1, json_string("sliding_attention"));
    expect_config(d, JEV_ERR_FORMAT,
                  "config.json: text_config.layer_types: entry 1 is not \"linear_attention\" or \"full_attention\"",
                  NULL);

    d = tiny_doc();
    json_object_del(d, "text_config");
    expect_config(d, JEV_ERR_FORMAT, "config.json: text_config: missing", NULL);

    d = tiny_doc();
    json_object_set_new(d, "model_type", json_string("qwen3_5_moe"));
    expect_config(d, JEV_ERR_UNSUPPORTED,
                  "config.json: model_type 'qwen3_5_moe' is not supported (expected \"qwen3_5\" or \"qwen3_5_text\")",
                  NULL);

    d = tiny_doc();
    json_object_set_new(json_object_get(text_of(d), "rope_parameters"), "mrope_section", json_pack("[i,i,i]", 3, 3, 3));
    expect_config(d, JEV_ERR_FORMAT,
                  "config.json: text_config.rope_parameters.mrope_section must sum to rotary_dim / 2", NULL);

    d = tiny_doc();
    json_object_set_new(json_object_get(text_of(d), "rope_parameters"), "rope_type", json_string("yarn"));
    expect_config(d, JEV_ERR_UNSUPPORTED,
                  "config.json: text_config.rope_parameters.rope_type 'yarn' is not supported (only \"default\")",
                  NULL);

    d = tiny_doc();
    json_object_set_new(json_object_get(d, "vision_config"), "depth", json_real(2.0));
    expect_config(d, JEV_ERR_FORMAT, "config.json: vision_config.depth: expected an integer, got a number", NULL);

    d = tiny_doc();
    json_object_set_new(d, "image_token_id", json_integer(151936));
    expect_config(d, JEV_ERR_FORMAT, "config.json: image_token_id: 151936 is outside 0..151935", NULL);

    d = tiny_doc();
    json_object_set_new(d, "quantization", json_pack("{s:i,s:i,s:s}", "bits", 4, "group_size", 64, "mode", "mxfp4"));
    expect_config(d, JEV_ERR_UNSUPPORTED, "config.json: quantization.mode 'mxfp4' is not supported (only \"affine\")",
                  NULL);

    d = tiny_doc();
    json_object_set_new(d, "quantization_config", json_pack("{s:i}", "bits", 4));
    expect_config(d, JEV_ERR_FORMAT, "config.json: quantization_config.group_size: missing", NULL);

    d = tiny_doc();
    json_object_set_new(text_of(d), "eos_token_id", json_pack("[i,s]", 1, "x"));
    expect_config(d, JEV_ERR_FORMAT,
                  "config.json: text_config.eos_token_id: expected an id or a list of ids in 0..151935", NULL);

    /* not JSON at all */
    struct jev_config c;
    struct jev_error err = {0};
    assert_int_equal(jev_config_parse("{\"model_type\":", 14, "config.json", &c, NULL, &err), JEV_ERR_FORMAT);
    assert_non_null(strstr(err.msg, "config.json: not valid JSON: "));
}

static void test_config_variants(void **state) {
    (void)state;
    struct jev_config c;
    /* the tiny config as it is */
    expect_config(tiny_doc(), JEV_OK, NULL, &c);
    assert_true(c.has_vision);
    assert_int_equal(c.text.rotary_dim, 16);
    assert_true(c.text.mrope_interleaved);
    assert_true(c.text.tie_embeddings);
    assert_int_equal(c.ids.n_eos, 1);
    assert_int_equal(c.ids.eos[0], 151645);
    assert_int_equal(c.vision.pos_side, 48);
    assert_true(c.text.rope_theta == 1e7);

    /* no layer_types: full attention every full_attention_interval layers */
    json_t *d = tiny_doc();
    json_object_del(text_of(d), "layer_types");
    json_object_set_new(text_of(d), "full_attention_interval", json_integer(3));
    expect_config(d, JEV_OK, NULL, &c);
    assert_int_equal(c.text.layer_kind[1], JEV_LAYER_LINEAR);
    assert_int_equal(c.text.layer_kind[2], JEV_LAYER_FULL);
    assert_int_equal(c.text.layer_kind[5], JEV_LAYER_FULL);
    assert_int_equal(c.text.n_full_layers, 2);

    /* legacy rope keys: top-level rope_theta and partial_rotary_factor, rope_scaling with the sections */
    d = tiny_doc();
    json_t *t = text_of(d);
    json_object_del(t, "rope_parameters");
    json_object_set_new(t, "rope_theta", json_real(5e6));
    json_object_set_new(t, "partial_rotary_factor", json_real(0.5));
    json_object_set_new(
        t, "rope_scaling",
        json_pack("{s:s,s:[i,i,i],s:b}", "type", "mrope", "mrope_section", 6, 6, 4, "mrope_interleaved", 0));
    expect_config(d, JEV_OK, NULL, &c);
    assert_true(c.text.rope_theta == 5e6);
    assert_int_equal(c.text.rotary_dim, 32);
    assert_int_equal(c.text.mrope_section[2], 4);
    assert_false(c.text.mrope_interleaved);

    /* a bare text config: fields at the top level, no vision */
    json_t *full = tiny_doc();
    d = json_deep_copy(text_of(full));
    json_decref(full);
    expect_config(d, JEV_OK, NULL, &c);
    assert_false(c.has_vision);
    assert_int_equal(c.ids.image_pad, -1);
    assert_int_equal(c.text.hidden, 64);

    /* tie: the top level decides */
    d = tiny_doc();
    json_object_set_new(d, "tie_word_embeddings", json_false());
    expect_config(d, JEV_OK, NULL, &c);
    assert_false(c.text.tie_embeddings);

    /* quantization with per-module overrides */
    d = tiny_doc();
    json_object_set_new(d, "quantization",
                        json_pack("{s:i,s:i,s:s,s:{s:i,s:i},s:b}", "group_size", 64, "bits", 4, "mode", "affine",
                                  "language_model.model.layers.0.mlp.down_proj", "bits", 8, "group_size", 32,
                                  "vision_tower.merger.linear_fc2", 0));
    char *s = json_dumps(d, 0);
    struct jev_quant_overrides q;
    struct jev_error err = {0};
    assert_int_equal(jev_config_parse(s, strlen(s), "config.json", &c, &q, &err), JEV_OK);
    free(s);
    json_decref(d);
    assert_int_equal(q.n, 2);
    const struct jev_quant_override *o = jev_quant_overrides_find(&q, "language_model.model.layers.0.mlp.down_proj");
    assert_non_null(o);
    assert_true(o->quantized);
    assert_int_equal(o->bits, 8);
    assert_int_equal(o->group, 32);
    o = jev_quant_overrides_find(&q, "vision_tower.merger.linear_fc2");
    assert_false(o->quantized);
    assert_null(jev_quant_overrides_find(&q, "language_model.model.layers.1.mlp.down_proj"));
    jev_quant_overrides_free(&q);

    /* generation_config.json adds its stop tokens without duplicates */
    expect_config(tiny_doc(), JEV_OK, NULL, &c);
    const char *gen = "{\"eos_token_id\": [151645, 151643]}";
    assert_int_equal(jev_config_add_generation(gen, strlen(gen), "generation_config.json", &c, &err), JEV_OK);
    assert_int_equal(c.ids.n_eos, 2);
    assert_int_equal(c.ids.eos[1], 151643);
}

/* ---- broken model directories ---- */

/* Copies src to dst (every file), then rewrites dst's model.safetensors through edit(header). */
static void copy_with_header(const char *src, const char *dst, void (*edit)(json_t *hdr)) {
    sh("rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
    char path[700];
    snprintf(path, sizeof path, "%s/model.safetensors", src);
    struct jev_st_file f;
    struct jev_error err = {0};
    assert_int_equal(jev_st_file_open(&f, path, &err), JEV_OK);
    json_t *hdr = json_loadb((const char *)f.bytes + 8, f.header_len, 0, NULL);
    assert_non_null(hdr);
    edit(hdr);
    char *h = json_dumps(hdr, JSON_COMPACT);
    size_t hn = strlen(h), pad = (8 - (hn % 8)) % 8;
    snprintf(path, sizeof path, "%s/model.safetensors", dst);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    uint64_t len = hn + pad;
    unsigned char lb[8];
    for (int i = 0; i < 8; i++)
        lb[i] = (unsigned char)(len >> (8 * i));
    fwrite(lb, 1, 8, fp);
    fwrite(h, 1, hn, fp);
    fwrite("        ", 1, pad, fp);
    fwrite(f.data, 1, f.data_size, fp);
    fclose(fp);
    free(h);
    json_decref(hdr);
    jev_st_file_close(&f);
}

static void rename_key(json_t *o, const char *from, const char *to) {
    json_t *v = json_object_get(o, from);
    assert_non_null(v);
    json_object_set(o, to, v);
    json_object_del(o, from);
}

static void edit_drop_conv(json_t *h) {
    rename_key(h, "model.language_model.layers.1.linear_attn.conv1d.weight", "unused.conv1d.weight");
}

static void edit_transpose_down(json_t *h) {
    json_t *s = json_object_get(json_object_get(h, "model.language_model.layers.4.mlp.down_proj.weight"), "shape");
    json_array_set_new(s, 0, json_integer(128));
    json_array_set_new(s, 1, json_integer(64));
}

static void edit_qnorm_dtype(json_t *h) {
    /* 64 bf16 = 32 f32 = 128 bytes: the byte size still matches, the element count does not */
    json_t *e = json_object_get(h, "model.language_model.layers.2.self_attn.q_norm.weight");
    json_object_set_new(e, "dtype", json_string("I16"));
}

static void edit_mix_layouts(json_t *h) {
    rename_key(h, "language_model.model.norm.weight", "model.language_model.norm.weight");
}

static void edit_drop_scales(json_t *h) {
    rename_key(h, "language_model.model.layers.0.mlp.up_proj.scales", "x.scales");
}

static void test_missing_and_misshaped(void **state) {
    (void)state;
    char d[700], want[1400];
    snprintf(d, sizeof d, "%s/broken", root);

    copy_with_header(dir_hf, d, edit_drop_conv);
    snprintf(
        want, sizeof want,
        "%s: tensor 'model.language_model.layers.1.linear_attn.conv1d.weight' missing (expected a float [256, 1, 4])",
        d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_header(dir_hf, d, edit_transpose_down);
    snprintf(want, sizeof want,
             "%s: tensor 'model.language_model.layers.4.mlp.down_proj.weight': shape [128, 64], expected [64, 128]", d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_header(dir_hf, d, edit_qnorm_dtype);
    snprintf(want, sizeof want,
             "%s: tensor 'model.language_model.layers.2.self_attn.q_norm.weight': dtype I16, expected F32, BF16 or F16",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_header(dir_mlx, d, edit_mix_layouts);
    snprintf(want, sizeof want,
             "%s: tensor names mix the HF (model.language_model.*: 1) and MLX (language_model.model.*: 228) layouts",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_header(dir_mlx, d, edit_drop_scales);
    snprintf(want, sizeof want,
             "%s: tensor 'language_model.model.layers.0.mlp.up_proj.weight' is U32 (quantized) but "
             "'language_model.model.layers.0.mlp.up_proj.scales' is missing",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);
}

/* Rewrites dst/config.json from src's with its "quantization" object replaced (NULL: removed). */
static void copy_with_quant(const char *src, const char *dst, json_t *quant) {
    sh("rm -rf '%s' && cp -r '%s' '%s'", dst, src, dst);
    char path[700];
    snprintf(path, sizeof path, "%s/config.json", dst);
    json_t *d = json_load_file(path, 0, NULL);
    assert_non_null(d);
    json_object_del(d, "quantization_config");
    if (quant)
        json_object_set_new(d, "quantization", quant);
    else
        json_object_del(d, "quantization");
    assert_int_equal(json_dump_file(d, path, JSON_INDENT(2)), 0);
    json_decref(d);
}

static void test_quant_mismatch(void **state) {
    (void)state;
    char d[700], want[1400];
    snprintf(d, sizeof d, "%s/quant", root);

    copy_with_quant(dir_mlx, d, json_pack("{s:i,s:i}", "group_size", 64, "bits", 8));
    snprintf(want, sizeof want,
             "%s: tensor 'language_model.model.embed_tokens.weight': quantized with 4 bits, group size 64 (from its "
             "shapes), but config.json says 8 bits, group size 64",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_quant(dir_mlx, d,
                    json_pack("{s:i,s:i,s:{s:i}}", "group_size", 64, "bits", 4,
                              "language_model.model.layers.3.mlp.down_proj", "group_size", 32));
    snprintf(want, sizeof want,
             "%s: tensor 'language_model.model.layers.3.mlp.down_proj.weight': quantized with 4 bits, group size 64 "
             "(from its shapes), but config.json says 4 bits, group size 32",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_quant(dir_mlx, d,
                    json_pack("{s:i,s:i,s:b}", "group_size", 64, "bits", 4, "vision_tower.blocks.1.attn.proj", 0));
    snprintf(want, sizeof want,
             "%s: tensor 'vision_tower.blocks.1.attn.proj.weight' is quantized (4 bits, group 64), but config.json "
             "marks this module as not quantized",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    copy_with_quant(dir_mlx, d, NULL);
    snprintf(want, sizeof want,
             "%s: tensor 'language_model.model.embed_tokens.weight' is quantized (4 bits, group 64), but config.json "
             "has no \"quantization\"",
             d);
    expect_load_error(d, JEV_ERR_FORMAT, want);

    /* an override that agrees with the shapes loads */
    copy_with_quant(dir_mlx, d,
                    json_pack("{s:i,s:i,s:{s:i,s:i}}", "group_size", 64, "bits", 4,
                              "language_model.model.layers.3.mlp.down_proj", "bits", 4, "group_size", 64));
    jev_model_free(load(d));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_layouts_agree),
        cmocka_unit_test(test_norm_conventions_in_files),
        cmocka_unit_test(test_sharded_equals_single),
        cmocka_unit_test(test_public_load_api),
        cmocka_unit_test(test_config_errors),
        cmocka_unit_test(test_config_variants),
        cmocka_unit_test(test_missing_and_misshaped),
        cmocka_unit_test(test_quant_mismatch),
        cmocka_unit_test(test_untied_head_and_generation_config),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

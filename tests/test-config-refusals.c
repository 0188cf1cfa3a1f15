/*
 * test-config-refusals.c - every refusal of a malformed config.json (and generation_config.json)
 * through jev_model_dir_read_config, the loader's entry for a model directory's config files:
 * wrong JSON types of each reader (number, boolean, string, object), values out of range, sizes
 * that do not fit together (heads, rotary, vision), features this engine does not implement
 * (other activations, attention bias, experts, DeepStack, other rope types, code widths),
 * quantization fields, too many stop tokens, duplicate keys, a file over the size limit, and
 * generation_config.json's own.
 *
 * Each case changes one or two fields of configs/tiny.json (or writes the file whole) and checks
 * the status and the key parts of the message: the field's path and what is wrong with it, not
 * the exact wording. jev_model_load reports the same message (one case checks that). Not here:
 * the tensors (tests/test-model-refusals.c) and the exact messages tests/test-model-dir.c keeps.
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
#include <sys/stat.h>
#include <unistd.h>

#include "jev.h"               // defines: jev_model_load
#include "model/config-json.h" // defines: jev_quant_overrides_free, JEV_CONFIG_MAX_BYTES
#include "model/model-dir.h"   // defines: jev_model_dir_read_config

static char dir[PATH_MAX]; /* $JEV_TEST_DIR/config-refusals: config.json written per case */

static int setup(void **state) {
    (void)state;
    const char *t = getenv("JEV_TEST_DIR");
    snprintf(dir, sizeof dir, "%s/config-refusals", t ? t : "build/test-data");
    mkdir(dir, 0755);
    return 0;
}

/* dir/name with text (or removed when text is NULL). */
static void put(const char *name, const char *text) {
    char path[PATH_MAX + 64];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    if (!text) {
        unlink(path);
        return;
    }
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    assert_int_equal(fwrite(text, 1, strlen(text), f), strlen(text));
    assert_int_equal(fclose(f), 0);
}

/* Sets (value JSON text) or deletes (value NULL) the field at a dotted path of doc. */
static void patch(json_t *doc, const char *path, const char *value) {
    char buf[256];
    snprintf(buf, sizeof buf, "%s", path);
    json_t *o = doc;
    char *key = buf;
    for (char *dot; (dot = strchr(key, '.'));) {
        *dot = '\0';
        o = json_object_get(o, key);
        if (!json_is_object(o))
            fail_msg("configs/tiny.json has no object at '%s' (update this test)", path);
        key = dot + 1;
    }
    if (!value) {
        json_object_del(o, key);
        return;
    }
    json_error_t je;
    json_t *v = json_loads(value, JSON_DECODE_ANY, &je);
    if (!v)
        fail_msg("bad JSON in this test's case: %s", value);
    json_object_set_new(o, key, v);
}

static const struct refusal {
    const char *what;     /* the case */
    const char *path[2];  /* fields of configs/tiny.json to change */
    const char *value[2]; /* their new JSON values; NULL deletes the field */
    enum jev_status st;   /* expected */
    const char *parts[3]; /* pieces the message must contain */
} cases[] = {
    {"a number of the wrong type",
     {"text_config.rms_norm_eps"},
     {"\"small\""},
     JEV_ERR_FORMAT,
     {"text_config.rms_norm_eps", "expected a number, got a string"}},
    {"a boolean of the wrong type",
     {"text_config.attention_bias"},
     {"\"no\""},
     JEV_ERR_FORMAT,
     {"text_config.attention_bias", "expected a boolean, got a string"}},
    {"a string of the wrong type",
     {"model_type"},
     {"5"},
     JEV_ERR_FORMAT,
     {"model_type", "expected a string, got an integer"}},
    {"an object of the wrong type",
     {"text_config.rope_parameters"},
     {"[1]"},
     JEV_ERR_FORMAT,
     {"text_config.rope_parameters", "expected an object, got an array"}},
    {"text_config not an object",
     {"text_config"},
     {"5"},
     JEV_ERR_FORMAT,
     {"text_config", "expected an object, got an integer"}},
    {"a required id missing", {"vision_start_token_id"}, {NULL}, JEV_ERR_FORMAT, {"vision_start_token_id", "missing"}},
    {"partial_rotary_factor out of range",
     {"text_config.rope_parameters.partial_rotary_factor"},
     {"1.5"},
     JEV_ERR_FORMAT,
     {"partial_rotary_factor", "(0, 1]"}},
    {"a rotary width that is not whole",
     {"text_config.rope_parameters.partial_rotary_factor"},
     {"0.3"},
     JEV_ERR_FORMAT,
     {"partial_rotary_factor", "not an integer"}},
    {"an odd rotary width",
     {"text_config.rope_parameters.partial_rotary_factor"},
     {"0.015625"},
     JEV_ERR_FORMAT,
     {"partial_rotary_factor", "even"}},
    {"mrope_section of two",
     {"text_config.rope_parameters.mrope_section"},
     {"[3, 3]"},
     JEV_ERR_FORMAT,
     {"text_config.rope_parameters.mrope_section", "3 integers"}},
    {"mrope_section out of range",
     {"text_config.rope_parameters.mrope_section"},
     {"[3, 3, -1]"},
     JEV_ERR_FORMAT,
     {"text_config.rope_parameters.mrope_section", "0..4096"}},
    {"rope_theta zero", {"text_config.rope_parameters.rope_theta"}, {"0"}, JEV_ERR_FORMAT, {"rope_theta", "positive"}},
    {"a legacy rope type",
     {"text_config.rope_parameters", "text_config.rope_scaling"},
     {NULL, "{\"type\": \"yarn\"}"},
     JEV_ERR_UNSUPPORTED,
     {"text_config.rope_scaling.", "yarn"}},
    {"rms_norm_eps out of range",
     {"text_config.rms_norm_eps"},
     {"1.5"},
     JEV_ERR_FORMAT,
     {"text_config.rms_norm_eps", "(0, 1)"}},
    {"full_attention_interval out of range",
     {"text_config.layer_types", "text_config.full_attention_interval"},
     {NULL, "0"},
     JEV_ERR_FORMAT,
     {"text_config.full_attention_interval", "0 is outside"}},
    {"implausibly large attention",
     {"text_config.num_attention_heads", "text_config.head_dim"},
     {"4096", "4096"},
     JEV_ERR_FORMAT,
     {"text_config.", "implausibly large"}},
    {"query heads not a multiple of K/V heads",
     {"text_config.num_attention_heads"},
     {"3"},
     JEV_ERR_FORMAT,
     {"num_attention_heads", "multiple of num_key_value_heads"}},
    {"value heads not a multiple of key heads",
     {"text_config.linear_num_value_heads"},
     {"3"},
     JEV_ERR_FORMAT,
     {"linear_num_value_heads", "multiple of linear_num_key_heads"}},
    {"another activation",
     {"text_config.hidden_act"},
     {"\"gelu\""},
     JEV_ERR_UNSUPPORTED,
     {"text_config.hidden_act", "gelu"}},
    {"attention bias", {"text_config.attention_bias"}, {"true"}, JEV_ERR_UNSUPPORTED, {"text_config.attention_bias"}},
    {"experts", {"text_config.num_experts"}, {"8"}, JEV_ERR_UNSUPPORTED, {"text_config.num_experts"}},
    {"another vision activation",
     {"vision_config.hidden_act"},
     {"\"relu\""},
     JEV_ERR_UNSUPPORTED,
     {"vision_config.hidden_act", "relu"}},
    {"DeepStack",
     {"vision_config.deepstack_visual_indexes"},
     {"[1]"},
     JEV_ERR_UNSUPPORTED,
     {"vision_config.deepstack_visual_indexes"}},
    {"vision heads that do not divide the width",
     {"vision_config.num_heads"},
     {"3"},
     JEV_ERR_FORMAT,
     {"vision_config", "multiple of heads"}},
    {"a vision head too narrow for the 2-D rotary",
     {"vision_config.num_heads"},
     {"32"},
     JEV_ERR_FORMAT,
     {"vision_config", "multiple of 4"}},
    {"vision output width unlike the text's",
     {"vision_config.out_hidden_size"},
     {"32"},
     JEV_ERR_FORMAT,
     {"vision_config.out_hidden_size", "hidden_size"}},
    {"position embeddings not a square",
     {"vision_config.num_position_embeddings"},
     {"2300"},
     JEV_ERR_FORMAT,
     {"vision_config.num_position_embeddings", "square"}},
    {"a code width affine mlx has not",
     {"quantization"},
     {"{\"bits\": 7, \"group_size\": 64}"},
     JEV_ERR_UNSUPPORTED,
     {"quantization.bits", "7"}},
    {"a module's code width",
     {"quantization"},
     {"{\"bits\": 4, \"group_size\": 64, \"vision_tower.blocks.0.attn.qkv\": {\"bits\": 7}}"},
     JEV_ERR_UNSUPPORTED,
     {"quantization.vision_tower.blocks.0.attn.qkv.bits", "7"}},
    {"a module's field of the wrong type",
     {"quantization"},
     {"{\"bits\": 4, \"group_size\": 64, \"vision_tower.blocks.0.attn.qkv\": {\"group_size\": \"32\"}}"},
     JEV_ERR_FORMAT,
     {"quantization.vision_tower.blocks.0.attn.qkv.group_size", "expected an integer, got a string"}},
    {"quantization_config without bits",
     {"quantization_config"},
     {"{\"group_size\": 64}"},
     JEV_ERR_FORMAT,
     {"quantization_config.bits", "missing"}},
    {"more stop tokens than kept",
     {"text_config.eos_token_id"},
     {"[1, 2, 3, 4, 5, 6, 7, 8, 9]"},
     JEV_ERR_FORMAT,
     {"text_config.eos_token_id", "more than 8"}},
    {"a stop token outside the vocabulary",
     {"eos_token_id"},
     {"151936"},
     JEV_ERR_FORMAT,
     {"eos_token_id", "0..151935"}},
};

/* Reads dir's config files; expects status st and every part in the message. */
static void expect(const char *what, enum jev_status st, const char *const parts[3]) {
    struct jev_config c;
    struct jev_quant_overrides q;
    struct jev_error err = {0};
    enum jev_status got = jev_model_dir_read_config(dir, &c, &q, &err);
    jev_quant_overrides_free(&q);
    printf("  %-48s -> %d: %s\n", what, got, err.msg);
    if (got != st)
        fail_msg("%s: status %d, expected %d (%s)", what, got, st, err.msg);
    /* the file, by its full path (the parser's messages and the size checks after it alike) */
    char path[PATH_MAX + 32];
    snprintf(path, sizeof path, "%s/%sconfig.json: ", dir, strstr(what, "generation_config") ? "generation_" : "");
    if (strncmp(err.msg, path, strlen(path)) != 0)
        fail_msg("%s: the message does not begin with the file's path %s: %s", what, path, err.msg);
    for (int k = 0; k < 3 && parts[k]; k++)
        if (!strstr(err.msg, parts[k]))
            fail_msg("%s: the message lacks '%s': %s", what, parts[k], err.msg);
}

static void test_fields(void **state) {
    (void)state;
    put("generation_config.json", NULL);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const struct refusal *c = &cases[i];
        json_t *doc = json_load_file("configs/tiny.json", 0, NULL);
        assert_non_null(doc);
        for (int k = 0; k < 2 && c->path[k]; k++)
            patch(doc, c->path[k], c->value[k]);
        char *text = json_dumps(doc, JSON_INDENT(2));
        put("config.json", text);
        free(text);
        json_decref(doc);
        expect(c->what, c->st, c->parts);
    }
}

static void test_whole_files(void **state) {
    (void)state;
    put("generation_config.json", NULL);
    put("config.json", "[1, 2]");
    expect("not an object", JEV_ERR_FORMAT, (const char *const[]){"config.json", "not a JSON object", NULL});
    put("config.json", "{\"model_type\": \"qwen3_5\", \"model_type\": \"qwen3_5_text\"}");
    expect("a key twice", JEV_ERR_FORMAT, (const char *const[]){"config.json", "duplicate", "model_type"});
    /* over the size limit: refused before it is parsed, as a size limit hit (jev.h: JEV_ERR_NOMEM) */
    size_t big = JEV_CONFIG_MAX_BYTES + 1;
    char *text = malloc(big + 1);
    assert_non_null(text);
    memset(text, ' ', big);
    text[0] = '{';
    text[big - 1] = '}';
    text[big] = '\0';
    put("config.json", text);
    free(text);
    expect("over the size limit", JEV_ERR_NOMEM, (const char *const[]){"config.json", "limit", NULL});

    /* generation_config.json next to a good config.json */
    json_t *doc = json_load_file("configs/tiny.json", 0, NULL);
    assert_non_null(doc);
    char *good = json_dumps(doc, 0);
    json_decref(doc);
    put("config.json", good);
    free(good);
    put("generation_config.json", "{\"eos_token_id\": ");
    expect("generation_config.json not JSON", JEV_ERR_FORMAT,
           (const char *const[]){"generation_config.json", "not valid JSON", NULL});
    put("generation_config.json", "[151645]");
    expect("generation_config.json not an object", JEV_ERR_FORMAT,
           (const char *const[]){"generation_config.json", "not a JSON object", NULL});
    put("generation_config.json", "{\"eos_token_id\": [1, \"2\"]}");
    expect("generation_config.json stop token", JEV_ERR_FORMAT,
           (const char *const[]){"generation_config.json", "eos_token_id", NULL});
    put("generation_config.json", NULL);
}

/* jev_model_load gives a refused config's message as is. */
static void test_public_load(void **state) {
    (void)state;
    json_t *doc = json_load_file("configs/tiny.json", 0, NULL);
    assert_non_null(doc);
    patch(doc, "vision_config.num_position_embeddings", "2300");
    char *text = json_dumps(doc, 0);
    json_decref(doc);
    put("config.json", text);
    free(text);
    struct jev_model_params p = jev_model_default_params();
    p.n_threads = 1;
    struct jev_model *m = NULL;
    char err[1024] = "";
    assert_int_equal(jev_model_load(dir, &p, &m, err, sizeof err), JEV_ERR_FORMAT);
    assert_null(m);
    assert_non_null(strstr(err, "vision_config.num_position_embeddings"));
    assert_non_null(strstr(err, "square"));
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_fields),
        cmocka_unit_test(test_whole_files),
        cmocka_unit_test(test_public_load),
    };
    return cmocka_run_group_tests(tests, setup, NULL);
}

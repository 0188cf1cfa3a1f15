/*
 * fuzz-safetensors.c - any bytes -> the safetensors parser (from memory),
 * the shard-index parser, and, when a file parses, the HF/MLX weight mapping
 * for the micro config (configs/micro.json, embedded below), after which
 * every mapped matrix row and vector is read in full so that ASan sees any
 * read the validation let through. Seeds: fuzz/corpus/safetensors/ (micro
 * models of both layouts, small hand-made files, an index).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/arena.h"      // defines: struct jev_arena
#include "model/config-json.h"  // defines: jev_config_parse
#include "model/model-dir.h"    // defines: jev_weights_map
#include "io/safetensors.h"  // defines: jev_st_file_open_memory

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* configs/micro.json, plus the quantization an mlx4 micro model has (group 32). */
static const char micro_config[] =
    "{\"model_type\":\"qwen3_5\",\"tie_word_embeddings\":true,%s\"text_config\":{\"eos_token_id\":1,"
    "\"head_dim\":32,\"hidden_size\":32,\"intermediate_size\":32,\"layer_types\":[\"linear_attention\","
    "\"full_attention\"],\"linear_conv_kernel_dim\":4,\"linear_key_head_dim\":16,\"linear_num_key_heads\":1,"
    "\"linear_num_value_heads\":2,\"linear_value_head_dim\":16,\"num_attention_heads\":1,\"num_hidden_layers\":2,"
    "\"num_key_value_heads\":1,\"vocab_size\":32,\"rope_parameters\":{\"mrope_section\":[2,1,1],"
    "\"rope_theta\":10000000,\"partial_rotary_factor\":0.25}}}";

static enum jev_status count_entry(const char *name, const char *shard, void *arg, struct jev_error *err) {
    (void)err;
    *(size_t *)arg += strlen(name) + strlen(shard);
    return JEV_OK;
}

static volatile float sink;

static void touch_matrix(const struct jev_matrix *m, float *row) {
    if (!m->data)
        return;
    jev_matrix_row(m, 0, row);
    jev_matrix_row(m, m->rows - 1, row);
    sink += row[0] + row[m->cols - 1];
}

static void map_weights(const struct jev_st_file *f) {
    struct jev_st_set s = {0};
    s.dir = (char *)"fuzz";
    s.files = (struct jev_st_file *)(uintptr_t)f;
    s.n_files = 1;
    s.n_tensors = f->n_tensors;
    s.by_name = malloc(((size_t)f->n_tensors + 1) * sizeof *s.by_name);
    if (!s.by_name)
        return;
    for (int32_t i = 0; i < f->n_tensors; i++)
        s.by_name[i] = &f->tensors[i];
    struct jev_error err = {0};
    enum jev_layout layout;
    if (jev_layout_detect(&s, &layout, &err) == JEV_OK) {
        char cfg[2048];
        snprintf(cfg, sizeof cfg, micro_config,
                 layout == JEV_LAYOUT_MLX ? "\"quantization\":{\"bits\":4,\"group_size\":32},"
                                          : "");
        struct jev_config c;
        struct jev_quant_overrides q;
        struct jev_arena a;
        if (jev_config_parse(cfg, strlen(cfg), "micro", &c, &q, &err) == JEV_OK &&
            jev_arena_init(&a, jev_weights_arena_bytes(&c), &err) == JEV_OK) {
            struct jev_weights w;
            if (jev_weights_map(&s, layout, &c, &q, &a, &w, &err) == JEV_OK) {
                float row[64];
                touch_matrix(&w.text.embed, row);
                for (int i = 0; i < c.text.n_layers; i++) {
                    const struct jev_layer_weights *l = &w.text.layers[i];
                    touch_matrix(&l->gate, row);
                    touch_matrix(&l->down, row);
                    touch_matrix(&l->lin.in_qkv, row);
                    touch_matrix(&l->lin.out, row);
                    touch_matrix(&l->full.q, row);
                    touch_matrix(&l->full.o, row);
                }
            }
            jev_arena_free(&a);
        }
        jev_quant_overrides_free(&q);
    }
    free(s.by_name);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_st_file f;
    struct jev_error err = {0};
    if (jev_st_file_open_memory(&f, data, size, "fuzz.safetensors", &err) == JEV_OK) {
        /* every tensor's bytes are inside the buffer: read its first and last byte */
        unsigned acc = 0;
        for (int32_t i = 0; i < f.n_tensors; i++) {
            const struct jev_st_tensor *t = &f.tensors[i];
            if (t->nbytes > 0)
                acc += ((const uint8_t *)t->data)[0] + ((const uint8_t *)t->data)[t->nbytes - 1];
            if (jev_st_file_find(&f, t->name) != t)
                abort(); /* lookup must find every tensor */
        }
        sink += (float)acc;
        map_weights(&f);
        jev_st_file_close(&f);
    }
    size_t n = 0;
    jev_error_clear(&err);
    jev_st_index_parse((const char *)data, size, "fuzz.index.json", count_entry, &n, &err);
    return 0;
}

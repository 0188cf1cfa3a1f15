/*
 * fuzz-config.c - any bytes -> config.json parsing (with per-module
 * quantization overrides) + jev_config_derive, and generation_config.json's
 * eos merge. Seeds: fuzz/corpus/config/ (the repository's configs and
 * variants: bare text config, legacy rope keys, MLX quantization).
 */
#include <stdint.h>
#include <string.h>

#include "model/config-json.h" // defines: jev_config_parse

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_config c;
    struct jev_quant_overrides q;
    struct jev_error err = {0};
    if (jev_config_parse((const char *)data, size, "fuzz.json", &c, &q, &err) == JEV_OK) {
        if (c.text.n_layers < 1 || c.text.n_layers > JEV_MAX_LAYERS || c.ids.n_eos > JEV_MAX_EOS)
            __builtin_trap();
        for (int32_t i = 0; i < q.n; i++)
            if (jev_quant_overrides_find(&q, q.items[i].path) != &q.items[i])
                __builtin_trap();
        jev_error_clear(&err);
        jev_config_add_generation((const char *)data, size, "fuzz-gen.json", &c, &err);
        if (c.ids.n_eos > JEV_MAX_EOS)
            __builtin_trap();
    }
    jev_quant_overrides_free(&q);
    return 0;
}

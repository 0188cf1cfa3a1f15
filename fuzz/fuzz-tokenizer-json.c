/*
 * fuzz-tokenizer-json.c - any bytes as a tokenizer.json: the loader must
 * either fail with a status and a message or give a tokenizer that encodes
 * and decodes a fixed text without a crash.
 *
 * Seeds (fuzz/corpus/tokenizer-json/) are the tiny tokenizers of
 * tests/data/tokenizers/, which cover every supported component.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "text/tokenizer.h" // defines: jev_tokenizer_*

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    struct jev_error err = {0};
    struct jev_tokenizer *tok = NULL;
    enum jev_status st = jev_tokenizer_load_buffer((const char *)data, size, "fuzz.json", &tok, &err);
    if (st != JEV_OK) {
        if (tok != NULL || err.msg[0] == '\0')
            abort();
        return 0;
    }
    static const char text[] = "Hello, world! the quick fox 123 \xe4\xbd\xa0\xe5\xa5\xbd <s> [CLS] \xff\n\n  x";
    for (unsigned flags = 0; flags < 2; flags++) {
        struct jev_tokens ids = {0};
        if (jev_tokenizer_encode(tok, text, sizeof text - 1, flags, &ids, &err) == JEV_OK) {
            char *out;
            size_t len;
            if (jev_tokenizer_decode(tok, ids.ids, ids.n, JEV_DECODE_SKIP_SPECIAL, &out, &len, &err) == JEV_OK)
                free(out);
        }
        jev_tokens_free(&ids);
    }
    jev_tokenizer_free(tok);
    return 0;
}

/*
 * fuzz-tokenizer.c - any bytes -> encode (added tokens on and off) -> decode,
 * on the stand-in tokenizer, plus the prompt builder's user-text path.
 *
 * The tokenizer is loaded once, from $JEV_TOKENIZER or
 * .cache/tokenizer-qwen3/tokenizer.json under the current directory (make
 * fuzz runs from the repository root). Checked: no crash, no sanitizer
 * report, every id in range, and decode(encode(x)) reproduces x exactly
 * whenever x is ASCII and encoded as user text (byte-level BPE and NFC are
 * lossless there).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"    // defines: jev_chat_*
#include "text/tokenizer.h" // defines: jev_tokenizer_*

static struct jev_tokenizer *tok;

static void load_once(void) {
    if (tok != NULL)
        return;
    const char *path = getenv("JEV_TOKENIZER");
    if (path == NULL || !*path)
        path = ".cache/tokenizer-qwen3/tokenizer.json";
    struct jev_error err = {0};
    if (jev_tokenizer_load(path, &tok, &err) != JEV_OK) {
        fprintf(stderr, "fuzz-tokenizer: %s\n", err.msg);
        abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    load_once();
    const char *text = (const char *)data;
    bool ascii = true;
    for (size_t i = 0; i < size; i++)
        ascii = ascii && data[i] < 0x80;
    for (unsigned flags = 0; flags < 2; flags++) {
        struct jev_tokens ids = {0};
        struct jev_error err = {0};
        if (jev_tokenizer_encode(tok, text, size, flags ? JEV_TOK_NO_ADDED : 0, &ids, &err) != JEV_OK)
            abort(); /* encode has no failure mode for in-limit input */
        for (size_t i = 0; i < ids.n; i++)
            if (ids.ids[i] < 0 || ids.ids[i] >= jev_tokenizer_vocab_size(tok))
                abort();
        char *out;
        size_t len;
        if (jev_tokenizer_decode(tok, ids.ids, ids.n, 0, &out, &len, &err) != JEV_OK)
            abort();
        if (ascii && flags == 1 && (len != size || memcmp(out, text, size) != 0))
            abort();
        free(out);
        jev_tokens_free(&ids);
    }
    /* the builder's user-text path with a frame around it */
    struct jev_chat p;
    struct jev_error err = {0};
    jev_chat_init(&p, tok);
    if (jev_chat_chat_user(&p, size % 3, text, size, &err) != JEV_OK || jev_chat_finish(&p, &err) != JEV_OK)
        abort();
    jev_chat_free(&p);
    return 0;
}

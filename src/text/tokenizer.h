/*
 * tokenizer.h - a Hugging Face `tokenizers` tokenizer.json loaded into C:
 * byte-level BPE with added tokens, normalizers and regex pre-tokenizers,
 * giving exactly the ids of tokenizers' encode(text, add_special_tokens=False).
 *
 * What it is: the loader (file or memory buffer), encode, decode and the id
 * <-> piece lookups. Everything comes from the file; nothing about Qwen (ids,
 * regex, special tokens) is written here.
 * What it is not: a chat template engine (text/chat.h builds prompts), a
 * trainer, or a full tokenizers port: the supported components are listed in
 * docs/tokenizer.md, and any other component is a load error naming the JSON
 * path ("pre_tokenizer.pretokenizers[1].type: \"Metaspace\" is not supported").
 *
 * Usage:
 *
 *     struct jev_error err = {0};
 *     struct jev_tokenizer *tok;
 *     if (jev_tokenizer_load("tokenizer.json", &tok, &err) != JEV_OK) ... err.msg ...
 *     struct jev_tokens ids = {0};
 *     jev_tokenizer_encode(tok, text, strlen(text), JEV_TOK_NO_ADDED, &ids, &err);
 *     ... ids.ids[0 .. ids.n) ...
 *     jev_tokens_free(&ids);
 *     jev_tokenizer_free(tok);
 *
 * Contracts:
 * - Input text is bytes. Ill-formed UTF-8 is not an error: each maximal
 *   ill-formed subpart becomes U+FFFD first (Python's errors="replace"), and
 *   the result is what tokenizers gives for that str.
 * - A loaded tokenizer is immutable; encode and decode may run on any number
 *   of threads at once on one tokenizer. Each call allocates its own scratch
 *   (a few buffers sized to the text), never inside the per-word loop.
 * - Encoding never merges across added tokens, so text split at added-token
 *   boundaries encodes to the concatenation of the parts' ids.
 */
#ifndef JEV_TEXT_TOKENIZER_H
#define JEV_TEXT_TOKENIZER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "base/error.h" // defines: struct jev_error, enum jev_status
#include "jev.h"        // defines: jev_token

struct jev_tokenizer;

/* A growable array of ids. Zero-initialise it; encode appends to it; free it
 * with jev_tokens_free. */
struct jev_tokens {
    jev_token *ids; /* (cap) ids; [0, n) are valid */
    size_t n;       /* ids in use */
    size_t cap;     /* allocated slots */
};

/* Appends one id (grows the array). */
enum jev_status jev_tokens_push(struct jev_tokens *t, jev_token id, struct jev_error *err);
/* Makes room for `more` further ids without reallocating later. */
enum jev_status jev_tokens_reserve(struct jev_tokens *t, size_t more, struct jev_error *err);
void jev_tokens_free(struct jev_tokens *t);

/* encode flags */
enum {
    /* Do not match added tokens (special or not) in the text: every byte goes
     * through normalizer, pre-tokenizer and BPE. Use this for all text that
     * comes from a user, so that "<|im_start|>" typed by someone never becomes
     * the control token. Equals tokenizers with an empty added_tokens list. */
    JEV_TOK_NO_ADDED = 1u << 0,
};

/* decode flags */
enum {
    JEV_DECODE_SKIP_SPECIAL = 1u << 0, /* drop added tokens marked special (skip_special_tokens=True) */
};

/* Loads tokenizer.json from a path. The largest file accepted is 1 GiB. */
enum jev_status jev_tokenizer_load(const char *path, struct jev_tokenizer **out, struct jev_error *err);

/* Loads tokenizer.json from memory (fuzzing, tests, derived variants). name
 * only labels error messages (NULL = "tokenizer.json"). */
enum jev_status jev_tokenizer_load_buffer(const char *json, size_t len, const char *name, struct jev_tokenizer **out,
                                          struct jev_error *err);

void jev_tokenizer_free(struct jev_tokenizer *tok);

/* Encodes text[0..len) and appends the ids to out (add_special_tokens=False:
 * no BOS/EOS, post-processor templates are not applied). On failure out keeps
 * its length from before the call. */
enum jev_status jev_tokenizer_encode(const struct jev_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                     struct jev_tokens *out, struct jev_error *err);

/* Receives the pieces of jev_tokenizer_split_added: text (id -1) or an
 * added token (id >= 0, s/n its matched text). */
typedef enum jev_status (*jev_added_span_fn)(void *ctx, const char *s, size_t n, jev_token id, struct jev_error *err);

/* Splits trusted text at the added tokens that encode would match on the raw
 * text (non-normalized ones, leftmost-longest, with lstrip/rstrip/single_word)
 * and calls fn for each piece in order. Ill-formed UTF-8 is replaced first, as
 * in encode. For builders that join text from several sources before BPE
 * (text/chat.h). */
enum jev_status jev_tokenizer_split_added(const struct jev_tokenizer *tok, const char *text, size_t len,
                                          jev_added_span_fn fn, void *ctx, struct jev_error *err);

/* Decodes ids to UTF-8 text exactly like tokenizers' decode: pieces through
 * the decoder (ByteLevel: back to bytes), then ill-formed UTF-8 -> U+FFFD.
 * *out is malloc'd and NUL-terminated (free() it); *out_len excludes the NUL.
 * An id without a piece is JEV_ERR_INVALID_ARG. */
enum jev_status jev_tokenizer_decode(const struct jev_tokenizer *tok, const jev_token *ids, size_t n, unsigned flags,
                                     char **out, size_t *out_len, struct jev_error *err);

/* The number of id slots: highest id + 1 over vocabulary and added tokens. */
int32_t jev_tokenizer_vocab_size(const struct jev_tokenizer *tok);

/* The token string of an id as tokenizers' id_to_token gives it (a byte-level
 * piece such as "Ġthe", or an added token's content - normalized when the
 * token is marked normalized), not NUL-terminated, owned by the tokenizer;
 * NULL when the id has no token. */
const char *jev_tokenizer_piece(const struct jev_tokenizer *tok, jev_token id, size_t *len);

/* The bytes one id decodes to on its own, before the U+FFFD rule (a byte-level
 * piece may be part of a multi-byte character); owned by the tokenizer; NULL
 * when the id has no token. Meant for streaming output. */
const char *jev_tokenizer_piece_bytes(const struct jev_tokenizer *tok, jev_token id, size_t *len);

/* tokenizers' token_to_id: an added token's id by content, else the model
 * vocabulary's id of the piece; -1 when neither has it. */
jev_token jev_tokenizer_piece_to_id(const struct jev_tokenizer *tok, const char *piece, size_t len);

/* The id of the added token whose content is the NUL-terminated `content`
 * (special or not); -1 when there is none. */
jev_token jev_tokenizer_added_id(const struct jev_tokenizer *tok, const char *content);

/* True when id is an added token marked special. */
bool jev_tokenizer_is_special(const struct jev_tokenizer *tok, jev_token id);

#endif

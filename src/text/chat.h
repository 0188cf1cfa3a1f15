/*
 * chat.h - building Qwen3.5 prompts as token ids: a token builder that
 * keeps user text from ever becoming control tokens, and the chat frame of
 * one user turn (optionally with an image).
 *
 * What it is: the part of the chat template jev needs (spec/qwen35.md §8):
 *
 *   <|im_start|>user\n[<|vision_start|><|image_pad|>xN<|vision_end|>]TEXT<|im_end|>\n
 *   <|im_start|>assistant\n<think>\n\n</think>\n\n
 *
 * (non-thinking mode, no system turn, no BOS). Special tokens are looked up
 * by their content in the tokenizer, never by id.
 * What it is not: a Jinja engine, the question/option layout of a decision
 * or the rendering of its JSON state (src/decide/prompt-render.c, with
 * io/jsonw.h's writer).
 *
 * How the builder tokenizes. Text is collected into a "stretch" until the
 * next added token; the stretch is encoded in one piece when a token id is
 * appended, at a mark, or at finish. So the ids equal those of the whole
 * rendered string encoded by tokenizers, as long as user text holds no
 * added-token text (which the builder never matches, on purpose: that is the
 * point of user text). Trusted template text is split at added tokens
 * ("<think>" in it becomes the token).
 *
 * Usage:
 *
 *     struct jev_chat p;
 *     jev_chat_init(&p, tok);
 *     jev_chat_chat_user(&p, n_pad, text, len, &err);   // or the pieces below
 *     jev_chat_finish(&p, &err);
 *     ... p.ids.ids[0 .. p.ids.n) ...
 *     jev_chat_free(&p);
 */
#ifndef JEV_TEXT_PROMPT_H
#define JEV_TEXT_PROMPT_H

#include <stdbool.h>
#include <stddef.h>

#include "base/buf.h"       // defines: struct jev_buf
#include "text/tokenizer.h" // defines: struct jev_tokenizer, struct jev_tokens

/* The most text one stretch, or one rendered state, holds. Generous: the
 * text of the largest request (32 MiB) with the indentation of its JSON
 * fits many times; past it a prompt fails (JEV_ERR_NOMEM naming the limit)
 * instead of growing without bound. */
#define JEV_CHAT_MAX_BYTES ((size_t)256 << 20)

struct jev_chat {
    const struct jev_tokenizer *tok; /* the tokenizer (not owned) */
    struct jev_tokens ids;           /* ids of everything before the open stretch */
    struct jev_buf stretch;          /* text since the last added token, not yet encoded */
    bool stretch_has_user;           /* user text is in the stretch: encode it without added tokens */
};

void jev_chat_init(struct jev_chat *p, const struct jev_tokenizer *tok);
void jev_chat_free(struct jev_chat *p);

/* ---- the builder ---- */

/* Appends the added token whose content is `content` (e.g. "<|im_start|>");
 * JEV_ERR_INVALID_ARG naming the content when the tokenizer has none. */
enum jev_status jev_chat_special(struct jev_chat *p, const char *content, struct jev_error *err);

/* Appends `count` copies of an added token (image pads). */
enum jev_status jev_chat_special_n(struct jev_chat *p, const char *content, size_t count, struct jev_error *err);

/* Appends text from a user or a document: bytes, ill-formed UTF-8 replaced
 * by U+FFFD; added tokens in it are never matched. */
enum jev_status jev_chat_user_text(struct jev_chat *p, const char *text, size_t len, struct jev_error *err);

/* Appends trusted template text (NUL-terminated): added tokens in it are
 * matched, as the chat template's own markup. Never pass user data here. */
enum jev_status jev_chat_template(struct jev_chat *p, const char *text, struct jev_error *err);

/* Encodes the open stretch and returns the number of ids so far: a fork
 * point for a shared prefix. Only place a mark where the whole string would
 * also break (after an added token, or after a newline that is followed by a
 * non-space character), or the ids may differ from the whole string's. */
enum jev_status jev_chat_mark(struct jev_chat *p, size_t *n_ids, struct jev_error *err);

/* Encodes the open stretch; p->ids then holds the whole prompt. */
enum jev_status jev_chat_finish(struct jev_chat *p, struct jev_error *err);

/* ---- the chat frame ---- */

/* "<|im_start|>user\n" */
enum jev_status jev_chat_user_begin(struct jev_chat *p, struct jev_error *err);
/* "<|vision_start|>" + n_pad x "<|image_pad|>" + "<|vision_end|>" */
enum jev_status jev_chat_image(struct jev_chat *p, size_t n_pad, struct jev_error *err);
/* "<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n" (non-thinking mode) */
enum jev_status jev_chat_assistant_begin(struct jev_chat *p, struct jev_error *err);

/* One whole user turn and the assistant prefix. n_pad = 0: no image. The
 * turn's content is trimmed like the template's `|trim` (Python str.strip):
 * with an image only the text's right end can be trimmed, since the content
 * then starts with <|vision_start|>. */
enum jev_status jev_chat_chat_user(struct jev_chat *p, size_t n_pad, const char *text, size_t len,
                                   struct jev_error *err);

#endif

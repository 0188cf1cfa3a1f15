/*
 * chat.c - the prompt builder and the Qwen3.5 chat frame (contracts in
 * chat.h).
 *
 * The frame strings below are the Qwen3.5 chat template's own markup
 * (spec/qwen35.md §8); every special token in them is resolved by content
 * through the tokenizer, so a tokenizer without "<|image_pad|>" is an error
 * naming it, not a wrong id.
 */
#include "text/chat.h" // defines: struct jev_chat, jev_chat_*

#include <stdlib.h>
#include <string.h>

#include "text/utf8.h" // defines: jev_utf8_sanitize, jev_unicode_is_py_space

/* ---- builder ---- */

void jev_chat_init(struct jev_chat *p, const struct jev_tokenizer *tok) {
    memset(p, 0, sizeof *p);
    p->tok = tok;
    jev_buf_init(&p->stretch, JEV_CHAT_MAX_BYTES);
}

void jev_chat_free(struct jev_chat *p) {
    jev_tokens_free(&p->ids);
    jev_buf_free(&p->stretch);
    memset(p, 0, sizeof *p);
}

/* The stretch is capped at JEV_CHAT_MAX_BYTES; a failure names the cap. */
static enum jev_status stretch_append(struct jev_chat *p, const char *s, size_t n, struct jev_error *err) {
    struct jev_error inner = {0};
    if (jev_buf_add(&p->stretch, s, n, &inner) != JEV_OK)
        return jev_fail(err, inner.status, "prompt: %s", inner.msg);
    return JEV_OK;
}

/* Encodes the open stretch. Trusted-only stretches were split at added
 * tokens already; a stretch with user text is encoded without any. */
static enum jev_status flush(struct jev_chat *p, struct jev_error *err) {
    if (p->stretch.len == 0)
        return JEV_OK;
    /* a trusted-only stretch keeps added-token matching on, so normalized
     * added tokens (which the raw split leaves in place) still match */
    unsigned flags = p->stretch_has_user ? JEV_TOK_NO_ADDED : 0;
    JEV_TRY(jev_tokenizer_encode(p->tok, p->stretch.data, p->stretch.len, flags, &p->ids, err));
    jev_buf_reset(&p->stretch);
    p->stretch_has_user = false;
    return JEV_OK;
}

/* An id ends the stretch: text on both sides of an added token never merges
 * in tokenizers either. */
static enum jev_status push_id(struct jev_chat *p, jev_token id, struct jev_error *err) {
    JEV_TRY(flush(p, err));
    return jev_tokens_push(&p->ids, id, err);
}

/* Looked up by content every call: a few string compares, and it keeps the
 * builder free of any cached id that could go stale with another tokenizer. */
enum jev_status jev_chat_special_n(struct jev_chat *p, const char *content, size_t count, struct jev_error *err) {
    jev_token id = jev_tokenizer_added_id(p->tok, content);
    if (id < 0)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "prompt: the tokenizer has no added token \"%.60s\"", content);
    JEV_TRY(flush(p, err));
    JEV_TRY(jev_tokens_reserve(&p->ids, count, err));
    for (size_t i = 0; i < count; i++)
        p->ids.ids[p->ids.n++] = id;
    return JEV_OK;
}

enum jev_status jev_chat_special(struct jev_chat *p, const char *content, struct jev_error *err) {
    return jev_chat_special_n(p, content, 1, err);
}

/* User text joins the stretch as is (after the U+FFFD rule) and marks it, so
 * the flush encodes it with added-token matching off. */
enum jev_status jev_chat_user_text(struct jev_chat *p, const char *text, size_t len, struct jev_error *err) {
    if (len == 0)
        return JEV_OK;
    if (text == NULL)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "prompt: user text is NULL");
    if (jev_utf8_valid(text, len)) {
        JEV_TRY(stretch_append(p, text, len, err));
    } else {
        /* bytes -> str per part, as a caller rendering strings would see it */
        char *clean = malloc(3 * len);
        if (clean == NULL)
            return jev_fail(err, JEV_ERR_NOMEM, "prompt: out of memory for %zu bytes of text", len);
        size_t n = jev_utf8_sanitize(text, len, clean);
        enum jev_status st = stretch_append(p, clean, n, err);
        free(clean);
        JEV_TRY(st);
    }
    p->stretch_has_user = true;
    return JEV_OK;
}

static enum jev_status on_template_span(void *ctx, const char *s, size_t n, jev_token id, struct jev_error *err) {
    struct jev_chat *p = ctx;
    if (id >= 0)
        return push_id(p, id, err);
    return stretch_append(p, s, n, err);
}

/* Template text is split at added tokens now; its text parts join the
 * stretch like user text, but do not mark it. */
enum jev_status jev_chat_template(struct jev_chat *p, const char *text, struct jev_error *err) {
    return jev_tokenizer_split_added(p->tok, text, strlen(text), on_template_span, p, err);
}

enum jev_status jev_chat_mark(struct jev_chat *p, size_t *n_ids, struct jev_error *err) {
    JEV_TRY(flush(p, err));
    *n_ids = p->ids.n;
    return JEV_OK;
}

enum jev_status jev_chat_finish(struct jev_chat *p, struct jev_error *err) { return flush(p, err); }

/* ---- chat frame ---- */

enum jev_status jev_chat_user_begin(struct jev_chat *p, struct jev_error *err) {
    JEV_TRY(jev_chat_special(p, "<|im_start|>", err));
    return jev_chat_template(p, "user\n", err);
}

enum jev_status jev_chat_image(struct jev_chat *p, size_t n_pad, struct jev_error *err) {
    JEV_TRY(jev_chat_special(p, "<|vision_start|>", err));
    JEV_TRY(jev_chat_special_n(p, "<|image_pad|>", n_pad, err));
    return jev_chat_special(p, "<|vision_end|>", err);
}

enum jev_status jev_chat_assistant_begin(struct jev_chat *p, struct jev_error *err) {
    JEV_TRY(jev_chat_special(p, "<|im_end|>", err));
    JEV_TRY(jev_chat_template(p, "\n", err));
    JEV_TRY(jev_chat_special(p, "<|im_start|>", err));
    /* <think> and </think> are added tokens the template text matches */
    return jev_chat_template(p, "assistant\n<think>\n\n</think>\n\n", err);
}

/* The length of the leading / trailing run of Python whitespace. */
/* Python's str.strip() whitespace (str.isspace), which Jinja's trim uses;
 * the text is valid UTF-8 here only after sanitizing, so ill-formed bytes
 * simply stop the scan (they are not whitespace). */
static size_t py_space_prefix(const char *s, size_t n) {
    size_t i = 0;
    while (i < n) {
        size_t bad = 0, k = jev_utf8_next((const unsigned char *)s + i, n - i, &bad);
        uint32_t cp;
        if (k == 0 || (jev_utf8_decode((const unsigned char *)s + i, &cp), !jev_unicode_is_py_space(cp)))
            break;
        i += k;
    }
    return i;
}

static size_t py_space_suffix(const char *s, size_t n) {
    size_t end = n;
    while (end > 0) {
        size_t start = jev_utf8_prev((const unsigned char *)s, end);
        size_t bad = 0;
        uint32_t cp;
        if (jev_utf8_next((const unsigned char *)s + start, end - start, &bad) != end - start ||
            (jev_utf8_decode((const unsigned char *)s + start, &cp), !jev_unicode_is_py_space(cp)))
            break;
        end = start;
    }
    return n - end;
}

/* The template renders content = [image markup] + text and trims the whole
 * content; with an image the leading end is markup, so only the text's end
 * is trimmed. */
enum jev_status jev_chat_chat_user(struct jev_chat *p, size_t n_pad, const char *text, size_t len,
                                   struct jev_error *err) {
    JEV_TRY(jev_chat_user_begin(p, err));
    if (n_pad > 0)
        JEV_TRY(jev_chat_image(p, n_pad, err));
    /* |trim on the whole content: the leading end is the text's only
     * without an image */
    size_t lead = n_pad > 0 ? 0 : py_space_prefix(text, len);
    size_t trail = len > lead ? py_space_suffix(text + lead, len - lead) : 0;
    JEV_TRY(jev_chat_user_text(p, text + lead, len - lead - trail, err));
    return jev_chat_assistant_begin(p, err);
}

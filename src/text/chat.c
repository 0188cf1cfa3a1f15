/*
 * prompt.c - the prompt builder, the Qwen3.5 chat frame and the state
 * renderer (contracts in chat.h).
 *
 * The frame strings below are the Qwen3.5 chat template's own markup
 * (spec/qwen35.md §8); every special token in them is resolved by content
 * through the tokenizer, so a tokenizer without "<|image_pad|>" is an error
 * naming it, not a wrong id.
 *
 * State rendering follows CPython's json encoder (Lib/json/encoder.py with
 * indent=2, ensure_ascii=False): "{\n  \"key\": value,\n ...\n}", empty
 * containers as {} and [], strings escaped with \" \\ \n \r \t \b \f and
 * \u00XX for other control characters, floats as float.__repr__ (shortest
 * round-trip digits, exponent form below 1e-4 and from 1e16 on).
 */
#include "text/chat.h" // defines: struct jev_chat, jev_chat_*

#include <stdio.h>
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

/* ---- state rendering ---- */

/* The rendered text, capped at JEV_CHAT_MAX_BYTES. */
struct out {
    struct jev_buf b; /* the text; its first failure sticks and is reported at the end */
    bool deep;        /* nesting went past JEV_STATE_MAX_DEPTH */
};

/* Deeper states are refused rather than risking the stack (jansson's own
 * parser stops at 2048). */
#define JEV_STATE_MAX_DEPTH 2048

/* Appends n bytes; a failure is remembered by the buffer and reported once
 * at the end instead of at every call. */
static void out_put(struct out *o, const char *s, size_t n) { jev_buf_add(&o->b, s, n, NULL); }

static void out_str(struct out *o, const char *s) { out_put(o, s, strlen(s)); }

static void out_indent(struct out *o, int level) {
    out_put(o, "\n", 1);
    for (int i = 0; i < level; i++)
        out_put(o, "  ", 2);
}

/* A JSON string as json.dumps(ensure_ascii=False) writes it: CPython's
 * ESCAPE set is exactly the control characters, '"' and '\\'; everything
 * else, DEL and U+2028 included, is copied through. Plain runs are copied
 * in one piece. */
static void out_json_string(struct out *o, const char *s, size_t n) {
    out_put(o, "\"", 1);
    size_t run = 0; /* start of the pending run of plain bytes */
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char buf[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) {
                snprintf(buf, sizeof buf, "\\u%04x", c);
                esc = buf;
            }
        }
        if (esc != NULL) {
            out_put(o, s + run, i - run);
            out_str(o, esc);
            run = i + 1;
        }
    }
    out_put(o, s + run, n - run);
    out_put(o, "\"", 1);
}

/* float.__repr__: the shortest digit string that reads back as x. The digits
 * come from the first %.Ne that round-trips through strtod (correctly
 * rounded on glibc); the layout is CPython's format_float_short for 'r':
 * scientific when the decimal point would sit more than 16 digits right or
 * 4 or more zeros left, else positional with at least one decimal. */
static void out_double(struct out *o, double x) {
    char tmp[40];
    for (int prec = 1; prec <= 17; prec++) {
        snprintf(tmp, sizeof tmp, "%.*e", prec - 1, x);
        if (strtod(tmp, NULL) == x)
            break;
    }
    /* tmp is [-]d[.ddd]e(+|-)XX: take the sign, the digits and the exponent */
    const char *q = tmp;
    bool neg = *q == '-';
    if (neg)
        q++;
    char digits[24];
    int nd = 0;
    for (; *q && *q != 'e'; q++)
        if (*q != '.')
            digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    while (nd > 1 && digits[nd - 1] == '0') /* %.Ne pads with zeros; repr does not */
        nd--;
    digits[nd] = '\0';
    int decpt = exp10 + 1; /* x = 0.digits x 10^decpt */
    if (x == 0)
        decpt = 1;
    char buf[64];
    size_t m = 0;
    if (neg)
        buf[m++] = '-';
    if (decpt > 16 || decpt <= -4) {
        buf[m++] = digits[0];
        if (nd > 1) {
            buf[m++] = '.';
            memcpy(buf + m, digits + 1, (size_t)nd - 1);
            m += (size_t)nd - 1;
        }
        m += (size_t)snprintf(buf + m, sizeof buf - m, "e%c%02d", exp10 < 0 ? '-' : '+', exp10 < 0 ? -exp10 : exp10);
    } else if (decpt <= 0) {
        buf[m++] = '0';
        buf[m++] = '.';
        for (int i = 0; i < -decpt; i++)
            buf[m++] = '0';
        memcpy(buf + m, digits, (size_t)nd);
        m += (size_t)nd;
    } else if (decpt >= nd) {
        memcpy(buf + m, digits, (size_t)nd);
        m += (size_t)nd;
        for (int i = nd; i < decpt; i++)
            buf[m++] = '0';
        buf[m++] = '.';
        buf[m++] = '0';
    } else {
        memcpy(buf + m, digits, (size_t)decpt);
        m += (size_t)decpt;
        buf[m++] = '.';
        memcpy(buf + m, digits + decpt, (size_t)(nd - decpt));
        m += (size_t)(nd - decpt);
    }
    out_put(o, buf, m);
}

/* CPython's _iterencode with indent=2: a container opens, each item goes on
 * its own line one level deeper, items are separated by "," (no trailing
 * space since Python 3.4 when indenting), the closer goes on its own line at
 * the container's level; empty containers stay on one line. */
static void render(struct out *o, const json_t *v, int level) {
    char buf[32];
    if (level > JEV_STATE_MAX_DEPTH) {
        o->deep = true;
        return;
    }
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        if (json_object_size(v) == 0) {
            out_str(o, "{}");
            return;
        }
        out_str(o, "{");
        bool first = true;
        for (void *it = json_object_iter((json_t *)(uintptr_t)v); it;
             it = json_object_iter_next((json_t *)(uintptr_t)v, it)) {
            if (!first)
                out_str(o, ",");
            first = false;
            out_indent(o, level + 1);
            out_json_string(o, json_object_iter_key(it), json_object_iter_key_len(it));
            out_str(o, ": ");
            render(o, json_object_iter_value(it), level + 1);
        }
        out_indent(o, level);
        out_str(o, "}");
        return;
    }
    case JSON_ARRAY: {
        if (json_array_size(v) == 0) {
            out_str(o, "[]");
            return;
        }
        out_str(o, "[");
        for (size_t i = 0; i < json_array_size(v); i++) {
            if (i)
                out_str(o, ",");
            out_indent(o, level + 1);
            render(o, json_array_get(v, i), level + 1);
        }
        out_indent(o, level);
        out_str(o, "]");
        return;
    }
    case JSON_STRING: out_json_string(o, json_string_value(v), json_string_length(v)); return;
    case JSON_INTEGER:
        snprintf(buf, sizeof buf, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        out_str(o, buf);
        return;
    case JSON_REAL: out_double(o, json_real_value(v)); return;
    case JSON_TRUE: out_str(o, "true"); return;
    case JSON_FALSE: out_str(o, "false"); return;
    case JSON_NULL: out_str(o, "null"); return;
    }
}

/* A string state is used verbatim (not JSON-quoted): that is what the
 * reference renderers do with a plain-text context. */
enum jev_status jev_chat_render_state(const json_t *state, char **out, size_t *len, struct jev_error *err) {
    *out = NULL;
    *len = 0;
    if (state == NULL)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "prompt: state is NULL");
    struct out o = {0};
    jev_buf_init(&o.b, JEV_CHAT_MAX_BYTES);
    /* json_string_length: a state may hold U+0000 */
    if (json_is_string(state))
        out_put(&o, json_string_value(state), json_string_length(state));
    else
        render(&o, state, 0);
    if (o.deep) {
        jev_buf_free(&o.b);
        return jev_fail(err, JEV_ERR_INVALID_ARG, "prompt: state nests deeper than %d levels", JEV_STATE_MAX_DEPTH);
    }
    struct jev_error inner = {0};
    if (jev_buf_take(&o.b, out, len, &inner) != JEV_OK) /* an empty state still gets its "" */
        return jev_fail(err, inner.status, "prompt: rendering the state: %s", inner.msg);
    return JEV_OK;
}

enum jev_status jev_chat_state(struct jev_chat *p, const json_t *state, struct jev_error *err) {
    char *text;
    size_t len;
    JEV_TRY(jev_chat_render_state(state, &text, &len, err));
    enum jev_status st = jev_chat_user_text(p, text, len, err);
    free(text);
    return st;
}

/*
 * tokenizer.c - encode, decode and lookups over a loaded tokenizer (the
 * pipeline is described in tokenizer-impl.h; loading is tokenizer-load.c).
 *
 * Encode walks the text depth-first: added-token split -> normalize ->
 * normalized added-token split -> pre-tokenizer steps -> BPE, each stage
 * calling the next for every piece it produces. That gives the same pieces in
 * the same order as tokenizers' breadth-first PreTokenizedString, without
 * materialising the lists. All scratch lives in one struct enc per call.
 */
#include "text/tokenizer.h" // defines: jev_tokenizer_encode, jev_tokenizer_decode

#include <stdlib.h>
#include <string.h>

#include "text/tokenizer-impl.h" // defines: struct jev_tokenizer, jev_bpe_word, jev_split_run
#include "text/utf8.h"           // defines: jev_utf8_valid, jev_utf8_sanitize

/* The longest text one encode call takes (ids and offsets stay in int32). */
#define JEV_TOK_MAX_TEXT ((size_t)1 << 28)

/* ---- id arrays ---- */

/* Doubling growth: encode reserves per word, so appends stay amortised O(1). */
enum jev_status jev_tokens_reserve(struct jev_tokens *t, size_t more, struct jev_error *err) {
    if (t->n + more <= t->cap)
        return JEV_OK;
    size_t cap = t->cap ? t->cap : 64;
    while (cap < t->n + more)
        cap *= 2;
    jev_token *ids = realloc(t->ids, cap * sizeof *ids);
    if (ids == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for %zu token ids", cap);
    t->ids = ids;
    t->cap = cap;
    return JEV_OK;
}

enum jev_status jev_tokens_push(struct jev_tokens *t, jev_token id, struct jev_error *err) {
    JEV_TRY(jev_tokens_reserve(t, 1, err));
    t->ids[t->n++] = id;
    return JEV_OK;
}

void jev_tokens_free(struct jev_tokens *t) {
    free(t->ids);
    memset(t, 0, sizeof *t);
}

/* ---- encode ---- */

/* Per-call state. */
struct enc {
    const struct jev_tokenizer *t;  /* the tokenizer */
    struct jev_tokens *out;         /* ids are appended here */
    bool no_added;                  /* JEV_TOK_NO_ADDED */
    struct jev_split_scratch split; /* regex match data */
    struct jev_bpe_scratch bpe;     /* merge-loop arrays */
    char *prefix;                   /* ByteLevel add_prefix_space copy of a piece */
    size_t prefix_cap;              /* bytes allocated in prefix */
};

/* The continuation of one stage: where its pieces go next. */
struct stage {
    struct enc *e;    /* call state */
    int step;         /* pre-tokenizer step that produced the pieces */
    const char *base; /* the text the piece offsets refer to */
};

static enum jev_status pretok_from(struct enc *e, int k, const char *s, size_t n, struct jev_error *err);

static enum jev_status on_piece(void *ctx, size_t a, size_t b, struct jev_error *err) {
    struct stage *st = ctx;
    return pretok_from(st->e, st->step + 1, st->base + a, b - a, err);
}

/* Runs pre-tokenizer steps k.. on s[0..n), then BPE on every final piece. */
static enum jev_status pretok_from(struct enc *e, int k, const char *s, size_t n, struct jev_error *err) {
    const struct jev_tokenizer *t = e->t;
    if (n == 0)
        return JEV_OK;
    if (k >= t->n_pretok)
        return jev_bpe_word(&t->bpe, (const unsigned char *)s, n, &e->bpe, e->out, err);
    const struct jev_pretok *step = &t->pretok[k];
    if (step->kind == JEV_PRETOK_SPLIT) {
        struct stage st = {e, k, s};
        return jev_split_run(step, s, n, &e->split, on_piece, &st, err);
    }
    /* ByteLevel, always the last step: the optional prefix space, the
     * optional GPT-2 split; the byte mapping itself is implicit (BPE works
     * on raw bytes). */
    if (step->add_prefix_space && s[0] != ' ') {
        if (e->prefix_cap < n + 1) {
            char *p = realloc(e->prefix, n + 1);
            if (p == NULL)
                return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for a piece of %zu bytes", n);
            e->prefix = p;
            e->prefix_cap = n + 1;
        }
        e->prefix[0] = ' ';
        memcpy(e->prefix + 1, s, n);
        s = e->prefix;
        n++;
    }
    if (step->re == NULL)
        return jev_bpe_word(&t->bpe, (const unsigned char *)s, n, &e->bpe, e->out, err);
    struct jev_pretok iso = {.kind = JEV_PRETOK_SPLIT, .re = step->re, .behavior = JEV_SPLIT_ISOLATED};
    struct stage st = {e, k, s}; /* k + 1 == n_pretok: pieces go to BPE */
    return jev_split_run(&iso, s, n, &e->split, on_piece, &st, err);
}

/* Stage 3's continuation: normalized added tokens, or text for stage 4. */
static enum jev_status on_norm_span(void *ctx, size_t a, size_t b, int32_t id, struct jev_error *err) {
    struct stage *st = ctx;
    if (id >= 0)
        return jev_tokens_push(st->e->out, id, err);
    return pretok_from(st->e, 0, st->base + a, b - a, err);
}

/* Stages 2-5 on one stretch of raw text without non-normalized added tokens. */
static enum jev_status encode_segment(struct enc *e, const char *s, size_t n, struct jev_error *err) {
    if (n == 0)
        return JEV_OK;
    char *norm;
    size_t m;
    bool owned;
    JEV_TRY(jev_tok_normalize(e->t, s, n, &norm, &m, &owned, err));
    enum jev_status st;
    if (!e->no_added && e->t->norm_set.n > 0) {
        struct stage sg = {e, -1, norm};
        st = jev_added_run(e->t, &e->t->norm_set, norm, m, on_norm_span, &sg, err);
    } else {
        st = pretok_from(e, 0, norm, m, err);
    }
    if (owned)
        free(norm);
    return st;
}

/* Stage 1's continuation. */
static enum jev_status on_raw_span(void *ctx, size_t a, size_t b, int32_t id, struct jev_error *err) {
    struct stage *st = ctx;
    if (id >= 0)
        return jev_tokens_push(st->e->out, id, err);
    return encode_segment(st->e, st->base + a, b - a, err);
}

/* The text as the encoder sees it (bytes -> str): checked against the size limit, and when it
 * is not valid UTF-8 a copy (*clean, the caller frees) with every ill-formed run replaced by
 * U+FFFD (see utf8.h); *text and *len then point at the copy. */
static enum jev_status text_prepare(const char **text, size_t *len, char **clean, struct jev_error *err) {
    *clean = NULL;
    if (*len > JEV_TOK_MAX_TEXT)
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tokenizer: text of %zu bytes is over the %zu-byte limit", *len,
                        JEV_TOK_MAX_TEXT);
    if (*len > 0 && !jev_utf8_valid(*text, *len)) {
        *clean = malloc(3 * *len);
        if (*clean == NULL)
            return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for a text of %zu bytes", *len);
        *len = jev_utf8_sanitize(*text, *len, *clean);
        *text = *clean;
    }
    return JEV_OK;
}

/* Sanitizes once (only when the text is not valid UTF-8, which is checked
 * eight ASCII bytes at a time), then runs the pipeline; on failure the ids
 * appended so far are dropped so the caller's array is unchanged. */
enum jev_status jev_tokenizer_encode(const struct jev_tokenizer *tok, const char *text, size_t len, unsigned flags,
                                     struct jev_tokens *out, struct jev_error *err) {
    if (tok == NULL || out == NULL || (text == NULL && len > 0))
        return jev_fail(err, JEV_ERR_INVALID_ARG, "tokenizer: encode needs a tokenizer, a text and an output");
    char *clean;
    JEV_TRY(text_prepare(&text, &len, &clean, err));
    struct enc e = {.t = tok, .out = out, .no_added = (flags & JEV_TOK_NO_ADDED) != 0};
    size_t n0 = out->n;
    enum jev_status st;
    if (e.no_added || tok->raw_set.n == 0) {
        st = encode_segment(&e, text, len, err);
    } else {
        struct stage sg = {&e, -1, text};
        st = jev_added_run(tok, &tok->raw_set, text, len, on_raw_span, &sg, err);
    }
    if (st != JEV_OK)
        out->n = n0;
    jev_split_scratch_free(&e.split);
    jev_bpe_scratch_free(&e.bpe);
    free(e.prefix);
    free(clean);
    return st;
}

/* ---- added-token split for builders ---- */

struct split_added {
    const char *base;     /* the (sanitized) text */
    jev_added_span_fn fn; /* the caller's receiver */
    void *ctx;            /* its context */
};

static enum jev_status on_split_added(void *ctx, size_t a, size_t b, int32_t id, struct jev_error *err) {
    struct split_added *sa = ctx;
    return sa->fn(sa->ctx, sa->base + a, b - a, id, err);
}

enum jev_status jev_tokenizer_split_added(const struct jev_tokenizer *tok, const char *text, size_t len,
                                          jev_added_span_fn fn, void *ctx, struct jev_error *err) {
    char *clean;
    JEV_TRY(text_prepare(&text, &len, &clean, err));
    struct split_added sa = {text, fn, ctx};
    enum jev_status st = jev_added_run(tok, &tok->raw_set, text, len, on_split_added, &sa, err);
    free(clean);
    return st;
}

/* ---- decode ---- */

/* Two passes: validate every id and size the output, then copy the
 * precomputed bytes; the U+FFFD rule runs over the concatenation, as
 * from_utf8_lossy does, so a character split across two tokens survives. */
enum jev_status jev_tokenizer_decode(const struct jev_tokenizer *tok, const jev_token *ids, size_t n, unsigned flags,
                                     char **out, size_t *out_len, struct jev_error *err) {
    *out = NULL;
    *out_len = 0;
    bool skip = (flags & JEV_DECODE_SKIP_SPECIAL) != 0;
    bool join = tok->decoder == JEV_DECODER_NONE; /* tokenizers joins tokens with " " without a decoder */
    size_t total = 0;
    for (size_t i = 0; i < n; i++) {
        if (ids[i] < 0 || ids[i] >= tok->n_ids || tok->dec_len[ids[i]] == JEV_TOK_NO_PIECE)
            return jev_fail(err, JEV_ERR_INVALID_ARG, "tokenizer: decode: id %d at position %zu has no token",
                            (int)ids[i], i);
        total += tok->dec_len[ids[i]] + 1;
    }
    char *raw = malloc(total + 1);
    if (raw == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory decoding %zu ids", n);
    size_t m = 0;
    bool first = true;
    for (size_t i = 0; i < n; i++) {
        if (skip && jev_tokenizer_is_special(tok, ids[i]))
            continue;
        if (join && !first)
            raw[m++] = ' ';
        memcpy(raw + m, tok->dec_blob + tok->dec_off[ids[i]], tok->dec_len[ids[i]]);
        m += tok->dec_len[ids[i]];
        first = false;
    }
    /* from_utf8_lossy */
    char *text = malloc(3 * m + 1);
    if (text == NULL) {
        free(raw);
        return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory decoding %zu ids", n);
    }
    size_t k = jev_utf8_sanitize(raw, m, text);
    free(raw);
    text[k] = '\0';
    *out = text;
    *out_len = k;
    return JEV_OK;
}

/* ---- lookups ---- */

int32_t jev_tokenizer_vocab_size(const struct jev_tokenizer *tok) { return tok->n_ids; }

/* Added tokens take precedence over model pieces, like tokenizers'
 * id_to_token (an added token can reuse a model id). */
const char *jev_tokenizer_piece(const struct jev_tokenizer *tok, jev_token id, size_t *len) {
    if (id < 0 || id >= tok->n_ids)
        return NULL;
    int32_t a = tok->added_of_id[id];
    if (a >= 0) {
        /* tokenizers 0.23 reports a normalized added token by its normalized
         * content (id_to_token and decode), though token_to_id takes the
         * content as written */
        *len = tok->added[a].pattern_len;
        return tok->added[a].pattern;
    }
    if (tok->model_len[id] == JEV_TOK_NO_PIECE)
        return NULL;
    *len = tok->model_len[id];
    return tok->model_blob + tok->model_off[id];
}

const char *jev_tokenizer_piece_bytes(const struct jev_tokenizer *tok, jev_token id, size_t *len) {
    if (id < 0 || id >= tok->n_ids || tok->dec_len[id] == JEV_TOK_NO_PIECE)
        return NULL;
    *len = tok->dec_len[id];
    return tok->dec_blob + tok->dec_off[id];
}

/* A linear scan of the added tokens: there are tens of them and this is not
 * on a hot path. */
jev_token jev_tokenizer_piece_to_id(const struct jev_tokenizer *tok, const char *piece, size_t len) {
    for (int32_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].len == len && memcmp(tok->added[i].content, piece, len) == 0)
            return tok->added[i].id;
    return jev_strmap_get(&tok->bpe.vocab, piece, len);
}

jev_token jev_tokenizer_added_id(const struct jev_tokenizer *tok, const char *content) {
    size_t len = strlen(content);
    for (int32_t i = 0; i < tok->n_added; i++)
        if (tok->added[i].len == len && memcmp(tok->added[i].content, content, len) == 0)
            return tok->added[i].id;
    return -1;
}

bool jev_tokenizer_is_special(const struct jev_tokenizer *tok, jev_token id) {
    if (id < 0 || id >= tok->n_ids)
        return false;
    int32_t a = tok->added_of_id[id];
    return a >= 0 && tok->added[a].special;
}

/* ---- free ---- */

/* Frees everything the loader made; safe on a partly loaded tokenizer, which
 * is how load failures clean up. */
void jev_tokenizer_free(struct jev_tokenizer *tok) {
    if (tok == NULL)
        return;
    for (int i = 0; i < tok->n_pretok; i++) {
        pcre2_code_free(tok->pretok[i].re);
        free(tok->pretok[i].literal);
    }
    if (tok->added != NULL)
        for (int32_t i = 0; i < tok->n_added; i++) {
            if (tok->added[i].pattern != tok->added[i].content)
                free(tok->added[i].pattern);
            free(tok->added[i].content);
        }
    free(tok->added);
    free(tok->added_of_id);
    free(tok->raw_set.order);
    free(tok->norm_set.order);
    free(tok->model_blob);
    free(tok->model_off);
    free(tok->model_len);
    free(tok->dec_blob);
    free(tok->dec_off);
    free(tok->dec_len);
    free(tok->bpe.vocab.slots);
    free(tok->bpe.merges.keys);
    free(tok->bpe.merges.rank);
    free(tok->bpe.merges.merged);
    free(tok);
}

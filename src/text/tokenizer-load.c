/*
 * tokenizer-load.c - reads a Hugging Face tokenizer.json into a
 * struct jev_tokenizer.
 *
 * What it reads (docs/tokenizer.md has the table): model BPE (vocab, merges
 * as "a b" strings or ["a", "b"] pairs, unk_token, fuse_unk, byte_fallback,
 * ignore_merges), added_tokens, normalizer (NFC, NFD, NFKC, NFKD, Sequence,
 * null), pre_tokenizer (Split with a Regex or String pattern and any of the
 * five behaviours, ByteLevel as the last step, Sequence, null), decoder
 * (ByteLevel, null), post_processor (accepted; it adds nothing when encoding
 * with add_special_tokens=False, the only mode here). Anything else fails
 * with JEV_ERR_UNSUPPORTED and the JSON path of the component; malformed
 * JSON or wrong types fail with JEV_ERR_FORMAT.
 *
 * Constraints:
 * - Added-token ids follow tokenizers' own rule (the model's id when the
 *   content is in the vocabulary, else the next free id after the vocabulary
 *   and the earlier added tokens). tokenizers only warns when a file's "id"
 *   disagrees; here that is a load error, because the model's embedding rows
 *   follow the file.
 * - Ids are limited to JEV_TOK_MAX_IDS so that a hostile file cannot ask for
 *   huge tables; the file itself to 1 GiB.
 * - The JSON tree is freed before returning: the tokenizer keeps its own
 *   compact tables (one blob of pieces, offset/length arrays, two hashes).
 */
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "base/read-file.h"      // defines: jev_read_file
#include "text/tokenizer-impl.h" // defines: struct jev_tokenizer and its parts
#include "text/utf8.h"           // defines: jev_utf8_decode, jev_utf8_encode, jev_utf8_valid

#define JEV_TOK_MAX_IDS (1 << 22)
#define JEV_TOK_MAX_FILE ((size_t)1 << 30) /* tokenizer.json size limit */
#define PATH_MAX_LEN 160

/* What the loader carries around: the file's name for messages and the
 * tokenizer being filled. */
struct loader {
    const char *name;        /* file name for messages */
    struct jev_tokenizer *t; /* being filled */
    int32_t max_vocab_id;    /* highest id in model.vocab, -1 when empty */
    int32_t n_vocab;         /* entries in model.vocab (tokenizers' get_vocab_size) */
};

/* ---- JSON helpers ---- */

/* Failure helpers: every message is "<file>: <JSON path>: <what>", so the
 * user can find the offending spot without reading the loader. FORMAT is for
 * malformed input, UNSUPPORTED for valid input jev does not implement. */
static enum jev_status fail_fmt(struct loader *L, struct jev_error *err, const char *path, const char *what) {
    return jev_fail(err, JEV_ERR_FORMAT, "%s: %s: %s", L->name, path, what);
}

static enum jev_status fail_unsup(struct loader *L, struct jev_error *err, const char *path, const char *what) {
    return jev_fail(err, JEV_ERR_UNSUPPORTED, "%s: %s: %s", L->name, path, what);
}

/* The "type" string of a component object, or an error. */
static enum jev_status get_type(struct loader *L, const json_t *obj, const char *path, const char **type,
                                struct jev_error *err) {
    if (!json_is_object(obj))
        return fail_fmt(L, err, path, "expected an object or null");
    const json_t *ty = json_object_get(obj, "type");
    if (!json_is_string(ty)) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%.120s.type", path);
        return fail_fmt(L, err, p, "expected a string");
    }
    *type = json_string_value(ty);
    return JEV_OK;
}

/* A boolean field; absent or null gives def. */
static enum jev_status get_bool(struct loader *L, const json_t *obj, const char *key, bool def, const char *path,
                                bool *out, struct jev_error *err) {
    const json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v)) {
        *out = def;
        return JEV_OK;
    }
    if (!json_is_boolean(v)) {
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%.120s.%s", path, key);
        return fail_fmt(L, err, p, "expected true or false");
    }
    *out = json_is_true(v);
    return JEV_OK;
}

/* Describes a type name for messages: quotes it, cuts long names (a hostile
 * file should not be able to push the JSON path out of the message). */
static void quote_name(char *buf, size_t size, const char *s) { snprintf(buf, size, "\"%.40s\"", s); }

/* ---- normalizer ---- */

/* Appends the normalizer at path (recursing through Sequence) to the
 * tokenizer's list of utf8proc option sets. The four Unicode normal forms map
 * one to one onto utf8proc flags; STABLE keeps the result stable across
 * Unicode versions for assigned characters, as the standard forms require. */
static enum jev_status parse_normalizer(struct loader *L, const json_t *n, const char *path, struct jev_error *err) {
    if (n == NULL || json_is_null(n))
        return JEV_OK;
    const char *type;
    JEV_TRY(get_type(L, n, path, &type, err));
    int opt = -1;
    if (!strcmp(type, "NFC"))
        opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE;
    else if (!strcmp(type, "NFD"))
        opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE;
    else if (!strcmp(type, "NFKC"))
        opt = UTF8PROC_STABLE | UTF8PROC_COMPOSE | UTF8PROC_COMPAT;
    else if (!strcmp(type, "NFKD"))
        opt = UTF8PROC_STABLE | UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT;
    if (opt >= 0) {
        if (L->t->n_norm >= JEV_TOK_MAX_STEPS)
            return fail_unsup(L, err, path, "more than 16 normalizer steps");
        L->t->norm[L->t->n_norm++] = opt;
        return JEV_OK;
    }
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(n, "normalizers");
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%.120s.normalizers", path);
        if (!json_is_array(list))
            return fail_fmt(L, err, p, "expected an array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char q[PATH_MAX_LEN];
            snprintf(q, sizeof q, "%.120s[%zu]", p, i);
            JEV_TRY(parse_normalizer(L, json_array_get(list, i), q, err));
        }
        return JEV_OK;
    }
    char what[96];
    quote_name(what, sizeof what, type);
    strcat(what, " is not supported");
    char p[PATH_MAX_LEN];
    snprintf(p, sizeof p, "%.120s.type", path);
    return fail_unsup(L, err, p, what);
}

/* ---- pre-tokenizer ---- */

/* Reads one Split step: the pattern (a Regex compiled now, so a bad regex
 * fails at load and not at the first encode), the behaviour and invert. */
static enum jev_status parse_split(struct loader *L, const json_t *n, const char *path, struct jev_pretok *st,
                                   struct jev_error *err) {
    char p[PATH_MAX_LEN];
    st->kind = JEV_PRETOK_SPLIT;
    const json_t *pat = json_object_get(n, "pattern");
    snprintf(p, sizeof p, "%.120s.pattern", path);
    if (!json_is_object(pat))
        return fail_fmt(L, err, p, "expected {\"Regex\": ...} or {\"String\": ...}");
    const json_t *rx = json_object_get(pat, "Regex"), *lit = json_object_get(pat, "String");
    if (json_is_string(rx)) {
        snprintf(p, sizeof p, "%.120s.pattern.Regex", path);
        char where[PATH_MAX_LEN + 64];
        snprintf(where, sizeof where, "%s: %s", L->name, p);
        JEV_TRY(jev_regex_compile(json_string_value(rx), json_string_length(rx), where, &st->re, err));
    } else if (json_is_string(lit)) {
        st->literal_len = json_string_length(lit);
        st->literal = malloc(st->literal_len + 1);
        if (st->literal == NULL)
            return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L->name);
        memcpy(st->literal, json_string_value(lit), st->literal_len + 1);
    } else {
        return fail_fmt(L, err, p, "expected {\"Regex\": ...} or {\"String\": ...}");
    }
    const json_t *b = json_object_get(n, "behavior");
    snprintf(p, sizeof p, "%.120s.behavior", path);
    if (!json_is_string(b))
        return fail_fmt(L, err, p, "expected a string");
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"};
    int found = -1;
    for (int i = 0; i < 5; i++)
        if (!strcmp(json_string_value(b), names[i]))
            found = i;
    if (found < 0) {
        char what[96];
        quote_name(what, sizeof what, json_string_value(b));
        strcat(what, " is not a split behavior");
        return fail_fmt(L, err, p, what);
    }
    st->behavior = (enum jev_split_behavior)found;
    return get_bool(L, n, "invert", false, path, &st->invert, err);
}

/* GPT-2's pattern, which ByteLevel with use_regex applies (tokenizers'
 * byte_level.rs). */
static const char gpt2_pattern[] = "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Appends the pre-tokenizer at path, flattening Sequences: tokenizers applies
 * a Sequence's members one after the other to every piece, which is what a
 * flat list of steps does too. ByteLevel must come last, because BPE here
 * works on raw bytes and the byte mapping is implicit in it (a step after
 * ByteLevel would see mapped characters). */
static enum jev_status parse_pretok(struct loader *L, const json_t *n, const char *path, struct jev_error *err) {
    if (n == NULL || json_is_null(n))
        return JEV_OK;
    struct jev_tokenizer *t = L->t;
    const char *type;
    JEV_TRY(get_type(L, n, path, &type, err));
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(n, "pretokenizers");
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%.120s.pretokenizers", path);
        if (!json_is_array(list))
            return fail_fmt(L, err, p, "expected an array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char q[PATH_MAX_LEN];
            snprintf(q, sizeof q, "%.120s[%zu]", p, i);
            JEV_TRY(parse_pretok(L, json_array_get(list, i), q, err));
        }
        return JEV_OK;
    }
    bool split = !strcmp(type, "Split"), byte_level = !strcmp(type, "ByteLevel");
    if (!split && !byte_level) {
        char what[96], p[PATH_MAX_LEN];
        quote_name(what, sizeof what, type);
        strcat(what, " is not supported");
        snprintf(p, sizeof p, "%.120s.type", path);
        return fail_unsup(L, err, p, what);
    }
    if (t->n_pretok >= JEV_TOK_MAX_STEPS)
        return fail_unsup(L, err, path, "more than 16 pre-tokenizer steps");
    if (t->n_pretok > 0 && t->pretok[t->n_pretok - 1].kind == JEV_PRETOK_BYTE_LEVEL)
        return fail_unsup(L, err, path, "a step after ByteLevel (ByteLevel must be the last pre-tokenizer)");
    struct jev_pretok *st = &t->pretok[t->n_pretok++];
    if (split)
        return parse_split(L, n, path, st, err);
    st->kind = JEV_PRETOK_BYTE_LEVEL;
    /* tokenizers' defaults: add_prefix_space and use_regex are true */
    bool use_regex;
    JEV_TRY(get_bool(L, n, "add_prefix_space", true, path, &st->add_prefix_space, err));
    JEV_TRY(get_bool(L, n, "use_regex", true, path, &use_regex, err));
    if (use_regex) {
        char where[PATH_MAX_LEN + 64];
        snprintf(where, sizeof where, "%s: %s (GPT-2 regex)", L->name, path);
        JEV_TRY(jev_regex_compile(gpt2_pattern, sizeof gpt2_pattern - 1, where, &st->re, err));
    }
    return JEV_OK;
}

/* ---- decoder and post-processor ---- */

/* The decoder only decides how ids turn back into bytes; decode tables are
 * built from it at load (build_decoded). */
static enum jev_status parse_decoder(struct loader *L, const json_t *n, struct jev_error *err) {
    if (n == NULL || json_is_null(n)) {
        L->t->decoder = JEV_DECODER_NONE;
        return JEV_OK;
    }
    const char *type;
    JEV_TRY(get_type(L, n, "decoder", &type, err));
    if (!strcmp(type, "ByteLevel")) {
        L->t->decoder = JEV_DECODER_BYTE_LEVEL;
        return JEV_OK;
    }
    char what[96];
    quote_name(what, sizeof what, type);
    strcat(what, " is not supported");
    return fail_unsup(L, err, "decoder.type", what);
}

/* Post-processors are validated but not kept: with add_special_tokens=False
 * tokenizers returns the encoding unchanged for all of these. An unknown one
 * is still an error, since its effect cannot be known. */
static enum jev_status parse_post(struct loader *L, const json_t *n, const char *path, struct jev_error *err) {
    if (n == NULL || json_is_null(n))
        return JEV_OK;
    const char *type;
    JEV_TRY(get_type(L, n, path, &type, err));
    /* These only add tokens when add_special_tokens is true, or only move
     * offsets; encode here never asks for special tokens. */
    static const char *ok[] = {"ByteLevel", "TemplateProcessing", "RobertaProcessing", "BertProcessing"};
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++)
        if (!strcmp(type, ok[i]))
            return JEV_OK;
    if (!strcmp(type, "Sequence")) {
        const json_t *list = json_object_get(n, "processors");
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "%.120s.processors", path);
        if (!json_is_array(list))
            return fail_fmt(L, err, p, "expected an array");
        for (size_t i = 0; i < json_array_size(list); i++) {
            char q[PATH_MAX_LEN];
            snprintf(q, sizeof q, "%.120s[%zu]", p, i);
            JEV_TRY(parse_post(L, json_array_get(list, i), q, err));
        }
        return JEV_OK;
    }
    char what[96], p[PATH_MAX_LEN];
    quote_name(what, sizeof what, type);
    strcat(what, " is not supported");
    snprintf(p, sizeof p, "%.120s.type", path);
    return fail_unsup(L, err, p, what);
}

/* ---- model ---- */

/* Builds the string -> id hash over the model pieces. */
/* The hash has at least twice as many slots as pieces, so linear probing
 * stays short; keys are not copied, the slots point back into the piece
 * tables by id. */
static enum jev_status build_vocab_map(struct loader *L, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    struct jev_strmap *m = &t->bpe.vocab;
    uint32_t size = 16;
    while (size < 2u * (uint32_t)L->n_vocab + 2u)
        size *= 2;
    m->slots = calloc(size, sizeof *m->slots);
    if (m->slots == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory for the vocabulary hash", L->name);
    m->mask = size - 1;
    m->blob = t->model_blob;
    m->off = t->model_off;
    m->len = t->model_len;
    for (int32_t id = 0; id <= L->max_vocab_id; id++) {
        if (t->model_len[id] == JEV_TOK_NO_PIECE)
            continue;
        uint32_t i = (uint32_t)jev_tok_hash(t->model_blob + t->model_off[id], t->model_len[id]) & m->mask;
        while (m->slots[i] != 0)
            i = (i + 1) & m->mask;
        m->slots[i] = (uint32_t)id + 1;
    }
    return JEV_OK;
}

/* First pass over model.vocab: validates every id and finds the highest one,
 * which sizes the per-id tables before anything is copied. */
static enum jev_status read_vocab(struct loader *L, json_t *vocab, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    if (!json_is_object(vocab))
        return fail_fmt(L, err, "model.vocab", "expected an object of piece -> id");
    /* First pass: sizes and the id range. Ids are checked against the cap
     * before anything is sized from them. */
    size_t blob = 0;
    int32_t max_id = -1;
    for (void *iter = json_object_iter(vocab); iter; iter = json_object_iter_next(vocab, iter)) {
        const char *key = json_object_iter_key(iter);
        const json_t *v = json_object_iter_value(iter);
        json_int_t id = json_is_integer(v) ? json_integer_value(v) : -1;
        if (id < 0 || id >= JEV_TOK_MAX_IDS) {
            char p[PATH_MAX_LEN];
            snprintf(p, sizeof p, "model.vocab[\"%.40s\"]", key);
            return fail_fmt(L, err, p, "expected an id in [0, 4194304)");
        }
        if ((int32_t)id > max_id)
            max_id = (int32_t)id;
        blob += json_object_iter_key_len(iter);
    }
    if (blob > UINT32_MAX - 1)
        return fail_unsup(L, err, "model.vocab", "pieces larger than 4 GiB in total");
    L->max_vocab_id = max_id;
    L->n_vocab = (int32_t)json_object_size(vocab);
    t->n_ids = max_id + 1;
    return JEV_OK;
}

/* Second pass: copies the pieces into one blob (one allocation instead of
 * 150k small strings) and records offset and length by id. Two pieces with one
 * id would make id -> piece ambiguous, so that is refused. */
static enum jev_status fill_vocab(struct loader *L, json_t *vocab, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    size_t blob = 0;
    for (void *iter = json_object_iter(vocab); iter; iter = json_object_iter_next(vocab, iter))
        blob += json_object_iter_key_len(iter);
    t->model_blob = malloc(blob + 1);
    if (t->model_blob == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory for the vocabulary", L->name);
    size_t off = 0;
    for (void *iter = json_object_iter(vocab); iter; iter = json_object_iter_next(vocab, iter)) {
        const char *key = json_object_iter_key(iter);
        const json_t *v = json_object_iter_value(iter);
        int32_t id = (int32_t)json_integer_value(v);
        size_t klen = json_object_iter_key_len(iter);
        if (t->model_len[id] != JEV_TOK_NO_PIECE) {
            char p[PATH_MAX_LEN];
            snprintf(p, sizeof p, "model.vocab[\"%.40s\"]", key);
            return fail_fmt(L, err, p, "id already used by another piece");
        }
        memcpy(t->model_blob + off, key, klen);
        t->model_off[id] = (uint32_t)off;
        t->model_len[id] = (uint32_t)klen;
        off += klen;
    }
    return build_vocab_map(L, err);
}

/* Reads one merge as its two strings. */
/* The two halves of merge i. The whole list must use one form (tokenizers
 * reads it as either a list of strings or a list of pairs). */
static enum jev_status merge_parts(struct loader *L, const json_t *m, size_t i, bool tuple, const char **a,
                                   size_t *alen, const char **b, size_t *blen, struct jev_error *err) {
    char p[PATH_MAX_LEN];
    snprintf(p, sizeof p, "model.merges[%zu]", i);
    if (tuple) {
        if (!json_is_array(m) || json_array_size(m) != 2 || !json_is_string(json_array_get(m, 0)) ||
            !json_is_string(json_array_get(m, 1)))
            return fail_fmt(L, err, p, "expected a pair of strings like the other merges");
        *a = json_string_value(json_array_get(m, 0));
        *alen = json_string_length(json_array_get(m, 0));
        *b = json_string_value(json_array_get(m, 1));
        *blen = json_string_length(json_array_get(m, 1));
        return JEV_OK;
    }
    if (!json_is_string(m))
        return fail_fmt(L, err, p, "expected a string \"a b\" like the other merges");
    const char *s = json_string_value(m);
    size_t n = json_string_length(m);
    /* tokenizers: line.split(' ') must give exactly two parts */
    const char *sp = memchr(s, ' ', n);
    if (sp == NULL || memchr(sp + 1, ' ', n - (size_t)(sp + 1 - s)) != NULL)
        return fail_fmt(L, err, p, "expected exactly one space between two pieces");
    *a = s;
    *alen = (size_t)(sp - s);
    *b = sp + 1;
    *blen = n - *alen - 1;
    return JEV_OK;
}

/* Builds the merge-rank hash: (left id, right id) -> (rank, merged id). The
 * merged piece a + b must be in the vocabulary, as tokenizers requires; the
 * ids are resolved once here so the merge loop never touches strings. */
static enum jev_status read_merges(struct loader *L, const json_t *merges, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    if (merges == NULL || json_is_null(merges))
        return JEV_OK;
    if (!json_is_array(merges))
        return fail_fmt(L, err, "model.merges", "expected an array");
    size_t n = json_array_size(merges);
    if (n == 0)
        return JEV_OK;
    /* the first entry decides the form for the whole list */
    bool tuple = json_is_array(json_array_get(merges, 0));
    struct jev_mergemap *mm = &t->bpe.merges;
    /* at most half full, like the vocabulary hash */
    uint32_t size = 16;
    while (size < 2 * n + 2 && size < (1u << 31))
        size *= 2;
    mm->keys = malloc((size_t)size * sizeof *mm->keys);
    mm->rank = malloc((size_t)size * sizeof *mm->rank);
    mm->merged = malloc((size_t)size * sizeof *mm->merged);
    char *cat = NULL;
    size_t cat_cap = 0;
    if (mm->keys == NULL || mm->rank == NULL || mm->merged == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory for %zu merges", L->name, n);
    memset(mm->keys, 0xff, (size_t)size * sizeof *mm->keys);
    mm->mask = size - 1;
    uint32_t rank = 0;
    enum jev_status st = JEV_OK;
    for (size_t i = 0; i < n && st == JEV_OK; i++) {
        const char *a = NULL, *b = NULL;
        size_t alen = 0, blen = 0;
        const json_t *m = json_array_get(merges, i);
        st = merge_parts(L, m, i, tuple, &a, &alen, &b, &blen, err);
        if (st != JEV_OK)
            break;
        /* merges.txt headers are skipped and do not take a rank */
        if (!tuple && alen >= 8 && !memcmp(a, "#version", 8))
            continue;
        if (alen + blen > cat_cap) {
            cat_cap = 2 * (alen + blen) + 16;
            char *c = realloc(cat, cat_cap);
            if (c == NULL) {
                st = jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L->name);
                break;
            }
            cat = c;
        }
        memcpy(cat, a, alen);
        memcpy(cat + alen, b, blen);
        int32_t ia = jev_strmap_get(&t->bpe.vocab, a, alen), ib = jev_strmap_get(&t->bpe.vocab, b, blen);
        int32_t im = jev_strmap_get(&t->bpe.vocab, cat, alen + blen);
        if (ia < 0 || ib < 0 || im < 0) {
            const char *miss = ia < 0 ? a : ib < 0 ? b : cat;
            int mlen = (int)(ia < 0 ? alen : ib < 0 ? blen : alen + blen);
            st = jev_fail(err, JEV_ERR_FORMAT, "%s: model.merges[%zu]: \"%.*s\" is not in model.vocab", L->name, i,
                          mlen > 40 ? 40 : mlen, miss);
            break;
        }
        /* A repeated pair takes its later rank (tokenizers collects the
         * merges into a hash map, the last insert wins). */
        uint64_t key = ((uint64_t)(uint32_t)ia << 32) | (uint32_t)ib;
        uint32_t s = (uint32_t)((key * 0x9E3779B97F4A7C15ull) >> 32) & mm->mask;
        while (mm->keys[s] != UINT64_MAX && mm->keys[s] != key)
            s = (s + 1) & mm->mask;
        if (mm->keys[s] == UINT64_MAX)
            mm->n++;
        mm->keys[s] = key;
        mm->rank[s] = rank++;
        mm->merged[s] = im;
    }
    free(cat);
    return st;
}

/* Checks the BPE options and sizes the vocabulary; the tables are filled by
 * finish_model once the id range (vocabulary and added tokens) is known. */
static enum jev_status parse_model(struct loader *L, const json_t *m, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    if (!json_is_object(m))
        return fail_fmt(L, err, "model", "expected an object");
    const json_t *ty = json_object_get(m, "type");
    if (ty != NULL && !(json_is_string(ty) && !strcmp(json_string_value(ty), "BPE"))) {
        char what[96];
        quote_name(what, sizeof what, json_is_string(ty) ? json_string_value(ty) : "?");
        strcat(what, " is not supported (only BPE)");
        return fail_unsup(L, err, "model.type", what);
    }
    const json_t *drop = json_object_get(m, "dropout");
    if (drop != NULL && !json_is_null(drop) && !(json_is_number(drop) && json_number_value(drop) == 0.0))
        return fail_unsup(L, err, "model.dropout", "BPE dropout is not supported (must be null)");
    static const char *affix[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int i = 0; i < 2; i++) {
        const json_t *a = json_object_get(m, affix[i]);
        if (a != NULL && !json_is_null(a) && !(json_is_string(a) && json_string_length(a) == 0)) {
            char p[PATH_MAX_LEN];
            snprintf(p, sizeof p, "model.%s", affix[i]);
            return fail_unsup(L, err, p, "a non-empty subword affix is not supported");
        }
    }
    JEV_TRY(get_bool(L, m, "fuse_unk", false, "model", &t->bpe.fuse_unk, err));
    JEV_TRY(get_bool(L, m, "byte_fallback", false, "model", &t->bpe.byte_fallback, err));
    JEV_TRY(get_bool(L, m, "ignore_merges", false, "model", &t->bpe.ignore_merges, err));
    JEV_TRY(read_vocab(L, json_object_get(m, "vocab"), err));
    return JEV_OK;
}

/* After the tables exist: vocabulary, merges, unk and byte tables. */
/* unk_token is resolved lazily like tokenizers does: a name missing from the
 * vocabulary only fails when an unknown character needs it. */
static enum jev_status finish_model(struct loader *L, const json_t *m, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    JEV_TRY(fill_vocab(L, json_object_get(m, "vocab"), err));
    JEV_TRY(read_merges(L, json_object_get(m, "merges"), err));
    t->bpe.unk_id = -1;
    const json_t *unk = json_object_get(m, "unk_token");
    if (unk != NULL && !json_is_null(unk)) {
        if (!json_is_string(unk))
            return fail_fmt(L, err, "model.unk_token", "expected a string or null");
        int32_t id = jev_strmap_get(&t->bpe.vocab, json_string_value(unk), json_string_length(unk));
        t->bpe.unk_id = id >= 0 ? id : -2; /* tokenizers fails only when an unk is needed */
    }
    t->bpe.byte_level = t->n_pretok > 0 && t->pretok[t->n_pretok - 1].kind == JEV_PRETOK_BYTE_LEVEL;
    /* The one-character token of each byte (byte-level mode) and the "<0xAB>"
     * token of each byte (byte_fallback), looked up once so the merge loop
     * starts from ids. */
    for (int b = 0; b < 256; b++) {
        char buf[8];
        size_t n = jev_utf8_encode(jev_byte_level_char((unsigned char)b), buf);
        t->bpe.byte_id[b] = jev_strmap_get(&t->bpe.vocab, buf, n);
        snprintf(buf, sizeof buf, "<0x%02X>", b);
        t->bpe.fallback_id[b] = jev_strmap_get(&t->bpe.vocab, buf, 6);
    }
    return JEV_OK;
}

/* ---- added tokens ---- */

/* tokenizers' token_to_id while added tokens are being added: the earlier
 * added tokens first, then the model. */
static int32_t added_or_model_id(const struct jev_tokenizer *t, int32_t n_done, const char *s, size_t n) {
    for (int32_t i = 0; i < n_done; i++)
        if (t->added[i].len == n && !memcmp(t->added[i].content, s, n))
            return t->added[i].id;
    return jev_strmap_get(&t->bpe.vocab, s, n);
}

/* First pass: count and the highest file id (to size the id tables). */
static enum jev_status scan_added(struct loader *L, const json_t *list, int32_t *max_id, struct jev_error *err) {
    *max_id = -1;
    if (list == NULL || json_is_null(list))
        return JEV_OK;
    if (!json_is_array(list))
        return fail_fmt(L, err, "added_tokens", "expected an array");
    for (size_t i = 0; i < json_array_size(list); i++) {
        const json_t *a = json_array_get(list, i);
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "added_tokens[%zu]", i);
        if (!json_is_object(a))
            return fail_fmt(L, err, p, "expected an object");
        const json_t *id = json_object_get(a, "id"), *c = json_object_get(a, "content");
        if (!json_is_integer(id) || json_integer_value(id) < 0 || json_integer_value(id) >= JEV_TOK_MAX_IDS)
            return fail_fmt(L, err, p, "\"id\" must be an integer in [0, 4194304)");
        if (!json_is_string(c))
            return fail_fmt(L, err, p, "\"content\" must be a string");
        if ((int32_t)json_integer_value(id) > *max_id)
            *max_id = (int32_t)json_integer_value(id);
    }
    return JEV_OK;
}

/* Adds the added tokens in file order, computing each id by tokenizers' rule
 * and refusing a file whose "id" disagrees. A normalized token is matched by
 * its normalized content, so that is computed now with the file's
 * normalizer. */
static enum jev_status read_added(struct loader *L, const json_t *list, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    size_t n = list ? json_array_size(list) : 0;
    t->added = calloc(n ? n : 1, sizeof *t->added);
    if (t->added == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L->name);
    int32_t max_added = -1;
    for (size_t i = 0; i < n; i++) {
        const json_t *a = json_array_get(list, i);
        char p[PATH_MAX_LEN];
        snprintf(p, sizeof p, "added_tokens[%zu]", i);
        const json_t *c = json_object_get(a, "content");
        const char *content = json_string_value(c);
        size_t len = json_string_length(c);
        int32_t file_id = (int32_t)json_integer_value(json_object_get(a, "id"));
        /* tokenizers ignores empty added tokens */
        if (len == 0)
            continue;
        for (int32_t k = 0; k < t->n_added; k++)
            if (t->added[k].len == len && !memcmp(t->added[k].content, content, len))
                return fail_unsup(L, err, p, "content repeats an earlier added token");
        /* the id tokenizers gives this token */
        int32_t id = added_or_model_id(t, t->n_added, content, len);
        /* a new token: the vocabulary's entry count when no added token is
         * above it yet, else one past the highest added id (tokenizers'
         * AddedVocabulary::add_tokens) */
        if (id < 0)
            id = max_added < 0 ? L->n_vocab : (max_added >= L->n_vocab || L->n_vocab == 0) ? max_added + 1 : L->n_vocab;
        if (id != file_id) {
            return jev_fail(err, JEV_ERR_UNSUPPORTED,
                            "%s: %s: the file gives id %d but tokenizers would assign %d to \"%.40s\"", L->name, p,
                            (int)file_id, (int)id, content);
        }
        struct jev_added *ad = &t->added[t->n_added];
        JEV_TRY(get_bool(L, a, "special", false, p, &ad->special, err));
        JEV_TRY(get_bool(L, a, "normalized", !ad->special, p, &ad->normalized, err));
        JEV_TRY(get_bool(L, a, "lstrip", false, p, &ad->lstrip, err));
        JEV_TRY(get_bool(L, a, "rstrip", false, p, &ad->rstrip, err));
        JEV_TRY(get_bool(L, a, "single_word", false, p, &ad->single_word, err));
        ad->content = malloc(len + 1);
        if (ad->content == NULL)
            return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L->name);
        memcpy(ad->content, content, len + 1);
        ad->len = len;
        ad->id = id;
        t->n_added++;
        /* the matched text: normalized tokens match their normalized form */
        ad->pattern = ad->content;
        ad->pattern_len = len;
        if (ad->normalized) {
            char *norm;
            size_t nlen;
            bool owned;
            JEV_TRY(jev_tok_normalize(t, ad->content, len, &norm, &nlen, &owned, err));
            if (owned) {
                ad->pattern = norm;
                ad->pattern_len = nlen;
            }
        }
        /* id -> added token, for id_to_token and is_special */
        if (t->added_of_id[id] < 0)
            t->added_of_id[id] = t->n_added - 1;
        if (id > max_added)
            max_added = id;
    }
    return JEV_OK;
}

/* Indexes one matching set by first byte, longest pattern first within a
 * byte (the leftmost-longest rule). */
static enum jev_status build_set(struct loader *L, struct jev_added_set *set, bool normalized, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    set->order = malloc((size_t)(t->n_added ? t->n_added : 1) * sizeof *set->order);
    if (set->order == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L->name);
    /* counting sort by first byte: bucket b is order[first[b] .. first[b+1]) */
    uint32_t count[256] = {0};
    for (int32_t i = 0; i < t->n_added; i++)
        if (t->added[i].normalized == normalized && t->added[i].pattern_len > 0)
            count[(unsigned char)t->added[i].pattern[0]]++;
    set->first[0] = 0;
    for (int b = 0; b < 256; b++)
        set->first[b + 1] = set->first[b] + count[b];
    uint32_t fill[256];
    memcpy(fill, set->first, sizeof fill);
    for (int32_t i = 0; i < t->n_added; i++) {
        const struct jev_added *a = &t->added[i];
        if (a->normalized != normalized || a->pattern_len == 0)
            continue;
        unsigned char b = (unsigned char)a->pattern[0];
        /* insertion into the byte's bucket, longest first, file order on ties */
        uint32_t k = fill[b]++;
        while (k > set->first[b] && t->added[set->order[k - 1]].pattern_len < a->pattern_len) {
            set->order[k] = set->order[k - 1];
            k--;
        }
        set->order[k] = i;
    }
    set->n = (int32_t)set->first[256];
    return JEV_OK;
}

/* ---- per-id tables ---- */

/* What one piece decodes to: the ByteLevel decoder maps a piece made only
 * of byte-level characters back to bytes and leaves any other piece as its
 * UTF-8 (tokenizers' decode_chain). */
static size_t decoded_piece(enum jev_decoder_kind dec, const char *p, size_t n, char *out) {
    if (dec == JEV_DECODER_BYTE_LEVEL) {
        size_t o = 0, i = 0;
        while (i < n) {
            uint32_t cp;
            i += jev_utf8_decode((const unsigned char *)p + i, &cp);
            int b = jev_byte_level_byte(cp);
            if (b < 0) {
                memcpy(out, p, n);
                return n;
            }
            out[o++] = (char)b;
        }
        return o;
    }
    memcpy(out, p, n);
    return n;
}

/* Precomputes the bytes every id decodes to, so decode is a table lookup and
 * a copy per id. */
static enum jev_status build_decoded(struct loader *L, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    size_t total = 0;
    for (int32_t id = 0; id < t->n_ids; id++) {
        size_t len;
        if (jev_tokenizer_piece(t, id, &len) != NULL)
            total += len;
    }
    t->dec_blob = malloc(total + 1);
    if (t->dec_blob == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L->name);
    size_t off = 0;
    for (int32_t id = 0; id < t->n_ids; id++) {
        size_t len;
        const char *p = jev_tokenizer_piece(t, id, &len);
        if (p == NULL) {
            t->dec_len[id] = JEV_TOK_NO_PIECE;
            continue;
        }
        if (!jev_utf8_valid(p, len)) /* jansson only hands out valid UTF-8 */
            return fail_fmt(L, err, "model.vocab", "a piece is not valid UTF-8");
        size_t m = decoded_piece(t->decoder, p, len, t->dec_blob + off);
        t->dec_off[id] = (uint32_t)off;
        t->dec_len[id] = (uint32_t)m;
        off += m;
    }
    return JEV_OK;
}

/* ---- entry points ---- */

/* Fills the tokenizer from the parsed JSON. Order matters: the normalizer
 * before the added tokens (their normalized patterns), the pre-tokenizer
 * before the model (byte-level or not), the id range before any table. */
static enum jev_status load_tree(struct loader *L, const json_t *root, struct jev_error *err) {
    struct jev_tokenizer *t = L->t;
    if (!json_is_object(root))
        return fail_fmt(L, err, "(root)", "expected an object");
    static const char *nulls[] = {"truncation", "padding"};
    for (int i = 0; i < 2; i++) {
        const json_t *v = json_object_get(root, nulls[i]);
        if (v != NULL && !json_is_null(v))
            return fail_unsup(L, err, nulls[i], "must be null (truncation and padding are not supported)");
    }
    JEV_TRY(parse_normalizer(L, json_object_get(root, "normalizer"), "normalizer", err));
    JEV_TRY(parse_pretok(L, json_object_get(root, "pre_tokenizer"), "pre_tokenizer", err));
    JEV_TRY(parse_decoder(L, json_object_get(root, "decoder"), err));
    JEV_TRY(parse_post(L, json_object_get(root, "post_processor"), "post_processor", err));
    const json_t *model = json_object_get(root, "model");
    if (model == NULL)
        return fail_fmt(L, err, "model", "missing");
    JEV_TRY(parse_model(L, model, err));
    const json_t *added = json_object_get(root, "added_tokens");
    int32_t max_added;
    JEV_TRY(scan_added(L, added, &max_added, err));
    if (max_added + 1 > t->n_ids)
        t->n_ids = max_added + 1;
    /* the per-id tables, sized once for vocabulary and added tokens together;
     * ids that neither uses stay "no piece" and decode refuses them */
    size_t n = (size_t)(t->n_ids > 0 ? t->n_ids : 1);
    t->model_off = malloc(n * sizeof *t->model_off);
    t->model_len = malloc(n * sizeof *t->model_len);
    t->dec_off = malloc(n * sizeof *t->dec_off);
    t->dec_len = malloc(n * sizeof *t->dec_len);
    t->added_of_id = malloc(n * sizeof *t->added_of_id);
    if (!t->model_off || !t->model_len || !t->dec_off || !t->dec_len || !t->added_of_id)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory for %d ids", L->name, (int)t->n_ids);
    for (size_t i = 0; i < n; i++) {
        t->model_len[i] = JEV_TOK_NO_PIECE;
        t->model_off[i] = 0;
        t->added_of_id[i] = -1;
    }
    JEV_TRY(finish_model(L, model, err));
    JEV_TRY(read_added(L, added, err));
    JEV_TRY(build_set(L, &t->raw_set, false, err));
    JEV_TRY(build_set(L, &t->norm_set, true, err));
    return build_decoded(L, err);
}

/* Parses with JSON_ALLOW_NUL because a token may contain U+0000; every
 * string is then read with its length, never with strlen. */
enum jev_status jev_tokenizer_load_buffer(const char *json, size_t len, const char *name, struct jev_tokenizer **out,
                                          struct jev_error *err) {
    *out = NULL;
    struct loader L = {.name = name ? name : "tokenizer.json", .max_vocab_id = -1};
    json_error_t jerr;
    /* jansson validates UTF-8 in every string, so all pieces are valid */
    json_t *root = json_loadb(json, len, JSON_ALLOW_NUL, &jerr);
    if (root == NULL)
        return jev_fail(err, JEV_ERR_FORMAT, "%s: invalid JSON at line %d column %d: %s", L.name, jerr.line,
                        jerr.column, jerr.text);
    L.t = calloc(1, sizeof *L.t);
    if (L.t == NULL) {
        json_decref(root);
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory", L.name);
    }
    enum jev_status st = load_tree(&L, root, err);
    json_decref(root);
    if (st != JEV_OK) {
        jev_tokenizer_free(L.t);
        return st;
    }
    *out = L.t;
    return JEV_OK;
}

/* Reads the whole file first (pipes work too) and then parses it from
 * memory: one code path for files and buffers. */
enum jev_status jev_tokenizer_load(const char *path, struct jev_tokenizer **out, struct jev_error *err) {
    *out = NULL;
    char *buf = NULL;
    size_t n = 0;
    JEV_TRY(jev_read_file(path, JEV_TOK_MAX_FILE, &buf, &n, err));
    enum jev_status st = jev_tokenizer_load_buffer(buf, n, path, out, err);
    free(buf);
    return st;
}

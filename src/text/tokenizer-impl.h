/*
 * tokenizer-impl.h - the insides of struct jev_tokenizer, shared by the
 * tokenizer's source files and nothing else:
 *   tokenizer-load.c   reads tokenizer.json and fills the struct
 *   tokenizer-bpe.c    the vocabulary hash, the merge-rank hash, the BPE merge loop
 *   tokenizer-split.c  added-token matching and the pre-tokenizer splits (PCRE2)
 *   tokenizer.c        encode / decode / lookups, the pipeline that ties them
 *
 * The pipeline mirrors tokenizers' encode for one sequence:
 *   1. split out non-normalized added tokens on the raw text (leftmost-longest)
 *   2. normalize each remaining piece (NFC ...)
 *   3. split out normalized added tokens on the normalized pieces
 *   4. pre-tokenizer steps (regex Split ..., then ByteLevel) on the rest
 *   5. BPE on each final piece
 * Byte-level BPE works on raw bytes here: the vocabulary's byte-level
 * strings are never rebuilt per word, a 256-entry table maps each byte to its
 * one-character token and merges work on ids only.
 */
#ifndef JEV_TEXT_TOKENIZER_IMPL_H
#define JEV_TEXT_TOKENIZER_IMPL_H

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <stdbool.h>
#include <stdint.h>

#include "text/tokenizer.h" // defines: struct jev_tokenizer, struct jev_tokens

#define JEV_TOK_MAX_STEPS 16        /* normalizer or pre-tokenizer steps after flattening Sequences */
#define JEV_TOK_NO_PIECE UINT32_MAX /* piece length of an id that has no token */

/* ---- hashes ---- */

/* String -> id map over strings kept elsewhere (open addressing; a slot holds
 * id + 1, 0 = empty; the key of a slot is read back through off/len). */
struct jev_strmap {
    uint32_t *slots;     /* (mask + 1) id + 1 or 0 */
    uint32_t mask;       /* slot count - 1 (a power of two) */
    const char *blob;    /* the strings */
    const uint32_t *off; /* (n_ids) offset of id's string in blob */
    const uint32_t *len; /* (n_ids) length, JEV_TOK_NO_PIECE when the id is not in the map */
};

/* (left id, right id) -> (rank, merged id), open addressing. */
struct jev_mergemap {
    uint64_t *keys;  /* (mask + 1) left << 32 | right, UINT64_MAX = empty */
    uint32_t *rank;  /* (mask + 1) position in the merges list (lower merges first) */
    int32_t *merged; /* (mask + 1) id of left + right */
    uint32_t mask;   /* slot count - 1 */
    uint32_t n;      /* entries */
};

uint64_t jev_tok_hash(const void *s, size_t n);
/* The id of s[0..n) or -1. */
int32_t jev_strmap_get(const struct jev_strmap *m, const char *s, size_t n);
/* Looks up one merge; false when the pair has no merge. */
bool jev_mergemap_get(const struct jev_mergemap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged);

/* ---- BPE model ---- */

struct jev_bpe {
    struct jev_strmap vocab;    /* model piece -> id */
    struct jev_mergemap merges; /* pair -> (rank, merged id) */
    bool byte_level;            /* pieces are byte-level strings (the last pre-tokenizer is ByteLevel) */
    int32_t byte_id[256];       /* byte_level: id of the one-character piece of each byte, -1 if absent */
    bool ignore_merges;         /* a word found whole in the vocabulary is one token */
    int32_t unk_id;             /* id of unk_token; -1 none; -2 named but absent (error when needed) */
    bool fuse_unk;              /* consecutive unknown characters become one unk */
    bool byte_fallback;         /* unknown characters become <0xAB> byte tokens when all exist */
    int32_t fallback_id[256];   /* byte_fallback: id of "<0xAB>" per byte, -1 if absent */
};

/* Per-call scratch of the merge loop (grown with realloc, kept for the call). */
struct jev_bpe_scratch {
    void *sym;       /* symbols of the current word */
    void *heap;      /* candidate merges */
    size_t cap;      /* entries allocated in both */
    char *text;      /* byte-level strings for ignore_merges lookups */
    size_t text_cap; /* bytes allocated in text */
};

/* Runs BPE on one pre-tokenized piece (raw bytes; valid UTF-8) and appends
 * the ids. */
enum jev_status jev_bpe_word(const struct jev_bpe *bpe, const unsigned char *w, size_t n, struct jev_bpe_scratch *s,
                             struct jev_tokens *out, struct jev_error *err);
void jev_bpe_scratch_free(struct jev_bpe_scratch *s);

/* The byte-level alphabet: byte -> code point (GPT-2's bytes_to_unicode). */
uint32_t jev_byte_level_char(unsigned char b);
/* Its inverse: the byte of an alphabet code point, -1 for any other. */
int jev_byte_level_byte(uint32_t cp);

/* ---- added tokens ---- */

struct jev_added {
    char *content;       /* as in the file (NUL-terminated copy) */
    size_t len;          /* bytes of content */
    char *pattern;       /* the text matched: content, or normalize(content) when `normalized` */
    size_t pattern_len;  /* bytes of pattern */
    int32_t id;          /* token id */
    bool special;        /* skipped by decode(skip_special_tokens) */
    bool normalized;     /* matched after normalization (else on the raw text) */
    bool lstrip, rstrip; /* absorb whitespace on the left / right */
    bool single_word;    /* only at word boundaries */
};

/* The tokens of one matching set indexed by first byte, longest first. */
struct jev_added_set {
    int32_t *order;      /* (n) indices into jev_tokenizer.added */
    uint32_t first[257]; /* order[first[b] .. first[b + 1]) start with byte b */
    int32_t n;           /* tokens in the set */
};

/* ---- pre-tokenizer ---- */

enum jev_split_behavior {
    JEV_SPLIT_REMOVED = 0,
    JEV_SPLIT_ISOLATED = 1,
    JEV_SPLIT_MERGED_PREV = 2,
    JEV_SPLIT_MERGED_NEXT = 3,
    JEV_SPLIT_CONTIGUOUS = 4,
};

enum jev_pretok_kind {
    JEV_PRETOK_SPLIT = 0,     /* Split with a Regex or String pattern */
    JEV_PRETOK_BYTE_LEVEL = 1 /* ByteLevel (only as the last step) */
};

struct jev_pretok {
    enum jev_pretok_kind kind;        /* which step */
    pcre2_code *re;                   /* SPLIT with Regex, or BYTE_LEVEL with use_regex: compiled, JIT if possible */
    char *literal;                    /* SPLIT with String: the literal (NULL for Regex) */
    size_t literal_len;               /* bytes of literal */
    enum jev_split_behavior behavior; /* SPLIT */
    bool invert;                      /* SPLIT: matches and gaps swap roles */
    bool add_prefix_space;            /* BYTE_LEVEL: prepend " " to pieces not starting with one */
};

/* ---- the tokenizer ---- */

enum jev_decoder_kind {
    JEV_DECODER_NONE = 0,      /* "decoder": null - tokens joined with " " */
    JEV_DECODER_BYTE_LEVEL = 1 /* byte-level characters back to bytes */
};

struct jev_tokenizer {
    int32_t n_ids; /* id slots: highest id + 1 */
    /* model vocabulary */
    char *model_blob;    /* model pieces, concatenated */
    uint32_t *model_off; /* (n_ids) offset of the model piece of id */
    uint32_t *model_len; /* (n_ids) its length; JEV_TOK_NO_PIECE when the model has no such id */
    struct jev_bpe bpe;  /* the BPE model over that vocabulary */
    /* what each id decodes to on its own */
    char *dec_blob;    /* decoded bytes of all ids */
    uint32_t *dec_off; /* (n_ids) offset in dec_blob */
    uint32_t *dec_len; /* (n_ids) length; JEV_TOK_NO_PIECE when the id has no token */
    /* added tokens */
    struct jev_added *added;       /* (n_added) in file order */
    int32_t n_added;               /* entries of added */
    int32_t *added_of_id;          /* (n_ids) index into added, -1 when id is not an added token */
    struct jev_added_set raw_set;  /* non-normalized tokens: matched on the raw text */
    struct jev_added_set norm_set; /* normalized tokens: matched after normalization */
    /* normalizer: utf8proc option sets applied in order (NFC = STABLE|COMPOSE, ...) */
    int norm[JEV_TOK_MAX_STEPS]; /* utf8proc_option_t values */
    int n_norm;                  /* steps */
    /* pre-tokenizer */
    struct jev_pretok pretok[JEV_TOK_MAX_STEPS]; /* steps in order */
    int n_pretok;                                /* steps */
    enum jev_decoder_kind decoder;               /* decoder kind */
};

/* ---- split helpers (tokenizer-split.c) ---- */

/* Per-call scratch for regex matching. */
struct jev_split_scratch {
    pcre2_match_data *md;      /* one match-data block for every regex */
    pcre2_match_context *mctx; /* NULL until a JIT stack was needed */
    pcre2_jit_stack *jit;      /* the larger JIT stack, made on first need */
};

/* Compiles a tokenizers (Oniguruma) pattern for PCRE2, with `\s`/`\S`
 * rewritten to Oniguruma's White_Space set. where names the JSON path. */
enum jev_status jev_regex_compile(const char *pattern, size_t len, const char *where, pcre2_code **out,
                                  struct jev_error *err);

/* One piece of text produced by a split: [start, end) of the input. */
typedef enum jev_status (*jev_piece_fn)(void *ctx, size_t start, size_t end, struct jev_error *err);

/* Splits s[0..n) with a pre-tokenizer Split step and calls fn for every
 * non-empty resulting piece, in order. */
enum jev_status jev_split_run(const struct jev_pretok *step, const char *s, size_t n, struct jev_split_scratch *sc,
                              jev_piece_fn fn, void *ctx, struct jev_error *err);

/* Regex matches of re in s[0..n) with tokenizers' find_iter rules, each
 * reported as (start, end, is_match) spans covering s, gaps included. */
typedef enum jev_status (*jev_span_fn)(void *ctx, size_t start, size_t end, bool is_match, struct jev_error *err);
enum jev_status jev_regex_spans(const pcre2_code *re, const char *s, size_t n, struct jev_split_scratch *sc,
                                jev_span_fn fn, void *ctx, struct jev_error *err);

/* Added-token matching over s[0..n) with set: calls fn(ctx, start, end, -1)
 * for text spans and fn(ctx, start, end, id) for tokens. */
typedef enum jev_status (*jev_added_fn)(void *ctx, size_t start, size_t end, int32_t id, struct jev_error *err);
enum jev_status jev_added_run(const struct jev_tokenizer *t, const struct jev_added_set *set, const char *s, size_t n,
                              jev_added_fn fn, void *ctx, struct jev_error *err);

void jev_split_scratch_free(struct jev_split_scratch *sc);

/* Normalizes s[0..n) with the tokenizer's normalizer steps. *out is s itself
 * when nothing changes (no steps, or ASCII input), else a malloc'd buffer the
 * caller frees (*owned = true). */
enum jev_status jev_tok_normalize(const struct jev_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len,
                                  bool *owned, struct jev_error *err);

#endif

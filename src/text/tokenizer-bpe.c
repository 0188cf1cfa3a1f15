/*
 * tokenizer-bpe.c - the BPE model: the vocabulary and merge hashes and the
 * merge loop over one pre-tokenized word.
 *
 * The merge loop is tokenizers' Word::merge_all, transcribed: symbols in a
 * doubly linked list over an array, a min-heap of candidate merges ordered
 * by (rank, position), stale candidates recognised by re-looking-up the pair
 * now at that position. That is O(n log n) per word and gives the same ids as
 * tokenizers for every input, including long runs such as 10k spaces.
 * merge_word's treatment of characters missing from the vocabulary (unk_token,
 * fuse_unk, byte_fallback with "<0xAB>" tokens, or silently dropping the
 * character when none is configured) is transcribed too, including its order
 * quirk (a pending unk is emitted after later byte-fallback tokens).
 *
 * What it is not: dropout (the loader rejects it) or subword prefixes and
 * suffixes (rejected too).
 */
#include "text/tokenizer-impl.h" // defines: struct jev_bpe, jev_bpe_word

#include <stdlib.h>
#include <string.h>

#include "text/utf8.h" // defines: jev_utf8_encode, jev_utf8_next

/* ---- hashes ---- */

uint64_t jev_tok_hash(const void *s, size_t n) {
    /* FNV-1a followed by a final mix; keys are short token strings. */
    const unsigned char *p = s;
    uint64_t h = 0xcbf29ce484222325ull;
    for (size_t i = 0; i < n; i++)
        h = (h ^ p[i]) * 0x100000001b3ull;
    h ^= h >> 31;
    h *= 0x7fb5d329728ea185ull;
    h ^= h >> 27;
    return h;
}

/* Linear probing; the table is at most half full, so a miss ends at an empty
 * slot quickly. The key comparison goes through the piece tables. */
int32_t jev_strmap_get(const struct jev_strmap *m, const char *s, size_t n) {
    if (m->slots == NULL)
        return -1;
    uint32_t i = (uint32_t)jev_tok_hash(s, n) & m->mask;
    for (;;) {
        uint32_t v = m->slots[i];
        if (v == 0)
            return -1;
        int32_t id = (int32_t)(v - 1);
        if (m->len[id] == n && memcmp(m->blob + m->off[id], s, n) == 0)
            return id;
        i = (i + 1) & m->mask;
    }
}

static inline uint32_t merge_slot(uint64_t key, uint32_t mask) {
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    return (uint32_t)(h >> 32) & mask;
}

/* Fibonacci hashing of the packed pair spreads consecutive ids well; the
 * merge loop calls this a few times per merge, so it is kept branch-light. */
bool jev_mergemap_get(const struct jev_mergemap *m, int32_t a, int32_t b, uint32_t *rank, int32_t *merged) {
    if (m->keys == NULL)
        return false;
    uint64_t key = ((uint64_t)(uint32_t)a << 32) | (uint32_t)b;
    uint32_t i = merge_slot(key, m->mask);
    for (;;) {
        uint64_t k = m->keys[i];
        if (k == key) {
            *rank = m->rank[i];
            *merged = m->merged[i];
            return true;
        }
        if (k == UINT64_MAX)
            return false;
        i = (i + 1) & m->mask;
    }
}

/* ---- byte-level alphabet ---- */

uint32_t jev_byte_level_char(unsigned char b) {
    /* GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for
     * themselves, the other 68 bytes take 256, 257, ... in byte order
     * (0..32, then 127..160, then 173). */
    if ((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || b >= 174)
        return b;
    if (b <= 32)
        return 256u + b;
    if (b <= 160)
        return 256u + 33u + (uint32_t)(b - 127);
    return 256u + 33u + 34u; /* 173, the soft hyphen */
}

int jev_byte_level_byte(uint32_t cp) {
    if ((cp >= 33 && cp <= 126) || (cp >= 161 && cp <= 172) || (cp >= 174 && cp <= 255))
        return (int)cp;
    if (cp >= 256 && cp <= 288)
        return (int)(cp - 256);
    if (cp >= 289 && cp <= 322)
        return (int)(127 + cp - 289);
    return cp == 323 ? 173 : -1;
}

/* ---- merge loop ---- */

struct sym {
    int32_t id;   /* current token of this symbol */
    int32_t prev; /* index of the symbol on the left, -1 at the start */
    int32_t next; /* index on the right, -1 at the end */
    uint32_t len; /* bytes covered; 0 once merged into the left neighbour */
};

struct cand {
    uint32_t rank;  /* merge rank (lower first) */
    uint32_t pos;   /* index of the left symbol (lower first on equal rank) */
    int32_t merged; /* id the merge produces */
};

static inline bool cand_less(const struct cand *a, const struct cand *b) {
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

/* A binary min-heap on (rank, position): tokenizers uses a d-ary heap with
 * the same order, and the order alone decides the result. */
static void heap_push(struct cand *h, size_t *n, struct cand c) {
    size_t i = (*n)++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &h[p]))
            break;
        h[i] = h[p];
        i = p;
    }
    h[i] = c;
}

static struct cand heap_pop(struct cand *h, size_t *n) {
    struct cand top = h[0], last = h[--(*n)];
    size_t i = 0;
    for (;;) {
        size_t l = 2 * i + 1;
        if (l >= *n)
            break;
        size_t m = (l + 1 < *n && cand_less(&h[l + 1], &h[l])) ? l + 1 : l;
        if (!cand_less(&h[m], &last))
            break;
        h[i] = h[m];
        i = m;
    }
    h[i] = last;
    return top;
}

/* Grows the per-call symbol and heap arrays to hold a word of n symbols;
 * doubling keeps the number of reallocations logarithmic in the longest
 * word of the call. */
static enum jev_status scratch_reserve(struct jev_bpe_scratch *s, size_t n, struct jev_error *err) {
    if (n <= s->cap)
        return JEV_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n)
        cap *= 2;
    /* Heap candidates: n - 1 at the start and at most two per merge (one
     * with each neighbour), so 3n bounds the heap. */
    void *sym = realloc(s->sym, cap * sizeof(struct sym));
    if (sym == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for a word of %zu symbols", n);
    s->sym = sym;
    void *heap = realloc(s->heap, 3 * cap * sizeof(struct cand));
    if (heap == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for a word of %zu symbols", n);
    s->heap = heap;
    s->cap = cap;
    return JEV_OK;
}

void jev_bpe_scratch_free(struct jev_bpe_scratch *s) {
    free(s->sym);
    free(s->heap);
    free(s->text);
    memset(s, 0, sizeof *s);
}

/* Appends a symbol for id covering len bytes. */
static void sym_add(struct sym *syms, size_t *n, int32_t id, uint32_t len) {
    size_t i = (*n)++;
    syms[i].id = id;
    syms[i].prev = i == 0 ? -1 : (int32_t)(i - 1);
    syms[i].next = -1;
    syms[i].len = len;
    if (i > 0)
        syms[i - 1].next = (int32_t)i;
}

/* BPE::tokenize for one word: the ignore_merges shortcut, merge_word (one
 * symbol per character, unknown characters handled as tokenizers does), then
 * merge_all, then the surviving symbols in order. */
enum jev_status jev_bpe_word(const struct jev_bpe *bpe, const unsigned char *w, size_t n, struct jev_bpe_scratch *s,
                             struct jev_tokens *out, struct jev_error *err) {
    if (n == 0)
        return JEV_OK;

    /* ignore_merges: a word that is a vocabulary entry is that one token. */
    if (bpe->ignore_merges) {
        int32_t id;
        if (bpe->byte_level) {
            if (s->text_cap < 2 * n) {
                char *t = realloc(s->text, 2 * n);
                if (t == NULL)
                    return jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for a word of %zu bytes", n);
                s->text = t;
                s->text_cap = 2 * n;
            }
            size_t m = 0;
            for (size_t i = 0; i < n; i++)
                m += jev_utf8_encode(jev_byte_level_char(w[i]), s->text + m);
            id = jev_strmap_get(&bpe->vocab, s->text, m);
        } else {
            id = jev_strmap_get(&bpe->vocab, (const char *)w, n);
        }
        if (id >= 0)
            return jev_tokens_push(out, id, err);
    }

    /* Byte fallback can turn one character into up to 2 (byte-level) or 4
     * symbols, so size for 4 per byte. */
    JEV_TRY(scratch_reserve(s, bpe->byte_fallback ? 4 * n + 1 : n + 1, err));
    struct sym *syms = s->sym;
    struct cand *heap = s->heap;
    size_t n_sym = 0;

    /* ---- merge_word: one symbol per unit ---- */
    bool have_unk = false;    /* an unk symbol is pending */
    int32_t unk_pending = -1; /* its id */
    uint32_t unk_len = 0;     /* its byte length */
    for (size_t i = 0; i < n;) {
        /* The unit string BPE sees: one byte-level character, or one UTF-8
         * character; HF measures symbol lengths in that string. */
        char ubuf[8];
        size_t ulen, step;
        int32_t id;
        if (bpe->byte_level) {
            step = 1;
            ulen = jev_utf8_encode(jev_byte_level_char(w[i]), ubuf);
            id = bpe->byte_id[w[i]];
        } else {
            size_t bad = 0;
            step = jev_utf8_next(w + i, n - i, &bad);
            if (step == 0)
                step = bad; /* cannot happen: pieces are valid UTF-8 */
            memcpy(ubuf, w + i, step);
            ulen = step;
            id = jev_strmap_get(&bpe->vocab, ubuf, ulen);
        }
        uint32_t byte_len = (uint32_t)ulen;
        if (id >= 0) {
            if (have_unk) {
                sym_add(syms, &n_sym, unk_pending, unk_len);
                have_unk = false;
            }
            sym_add(syms, &n_sym, id, byte_len);
            i += step;
            continue;
        }
        if (bpe->byte_fallback) {
            bool all = true;
            for (size_t k = 0; k < ulen; k++)
                all = all && bpe->fallback_id[(unsigned char)ubuf[k]] >= 0;
            if (all) {
                for (size_t k = 0; k < ulen; k++)
                    sym_add(syms, &n_sym, bpe->fallback_id[(unsigned char)ubuf[k]], 1);
                i += step;
                continue;
            }
        }
        if (bpe->unk_id != -1) {
            if (bpe->unk_id == -2)
                return jev_fail(err, JEV_ERR_FORMAT, "tokenizer: model.unk_token is not in model.vocab");
            if (have_unk && bpe->fuse_unk) {
                unk_len += byte_len;
            } else {
                if (have_unk)
                    sym_add(syms, &n_sym, unk_pending, unk_len);
                have_unk = true;
                unk_pending = bpe->unk_id;
                unk_len = byte_len;
            }
        }
        /* No unk_token and no fallback: tokenizers drops the character. */
        i += step;
    }
    if (have_unk)
        sym_add(syms, &n_sym, unk_pending, unk_len);
    if (n_sym == 0)
        return JEV_OK;

    /* ---- merge_all ---- */
    size_t n_heap = 0;
    for (size_t i = 0; i + 1 < n_sym; i++) {
        struct cand c;
        if (jev_mergemap_get(&bpe->merges, syms[i].id, syms[i + 1].id, &c.rank, &c.merged)) {
            c.pos = (uint32_t)i;
            heap_push(heap, &n_heap, c);
        }
    }
    while (n_heap > 0) {
        struct cand top = heap_pop(heap, &n_heap);
        struct sym *cur = &syms[top.pos];
        if (cur->len == 0 || cur->next == -1)
            continue;
        struct sym right = syms[cur->next];
        uint32_t rank;
        int32_t merged;
        /* A stale candidate: the pair at pos changed since it was queued. */
        if (!jev_mergemap_get(&bpe->merges, cur->id, right.id, &rank, &merged) || merged != top.merged)
            continue;
        syms[cur->next].len = 0;
        cur->id = top.merged;
        cur->len += right.len;
        cur->next = right.next;
        if (right.next >= 0)
            syms[right.next].prev = (int32_t)top.pos;
        struct cand c;
        if (cur->prev >= 0 && jev_mergemap_get(&bpe->merges, syms[cur->prev].id, cur->id, &c.rank, &c.merged)) {
            c.pos = (uint32_t)cur->prev;
            heap_push(heap, &n_heap, c);
        }
        if (cur->next >= 0 && jev_mergemap_get(&bpe->merges, cur->id, syms[cur->next].id, &c.rank, &c.merged)) {
            c.pos = top.pos;
            heap_push(heap, &n_heap, c);
        }
    }

    size_t live = 0;
    for (size_t i = 0; i < n_sym; i++)
        live += syms[i].len != 0;
    JEV_TRY(jev_tokens_reserve(out, live, err));
    for (size_t i = 0; i < n_sym; i++)
        if (syms[i].len != 0)
            out->ids[out->n++] = syms[i].id;
    return JEV_OK;
}

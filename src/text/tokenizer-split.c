/*
 * tokenizer-split.c - the text-splitting parts of the tokenizer pipeline:
 * added-token matching, the normalizer, and pre-tokenizer Split steps with
 * PCRE2 standing in for tokenizers' Oniguruma.
 *
 * Regex dialect. tokenizers compiles patterns with Oniguruma (Ruby-like
 * syntax, Unicode classes); PCRE2 in UTF + UCP mode reads the patterns the
 * tokenizers ecosystem uses the same way, with these adjustments made here:
 * - `\s` / `\S` are rewritten to Oniguruma's set (Unicode White_Space),
 *   because PCRE2's UCP `\s` also matches U+180E. Inside a character class
 *   `\s` expands in place; `\S` inside a class is left to PCRE2.
 * - `^` and `$` are line anchors in Oniguruma, so PCRE2_MULTILINE is set.
 * - Empty matches follow onig's find_iter: an empty match right where the
 *   previous match ended is skipped by advancing one character.
 * Category tables differ by Unicode version (Debian 12's PCRE2 10.42 has
 * Unicode 14): characters assigned later are not \p{L} here.
 *
 * Added tokens are matched leftmost-longest, non-overlapping, like the
 * aho-corasick automaton in tokenizers' AddedVocabulary::find_matches, with
 * its single_word / lstrip / rstrip rules.
 */
#include "text/tokenizer-impl.h" // defines: jev_regex_compile, jev_split_run, jev_added_run

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <utf8proc.h>

#include "text/utf8.h" // defines: jev_utf8_decode, jev_unicode_is_white_space

/* ---- regex compile ---- */

/* Oniguruma's \s: the White_Space code points, as class contents. */
#define WS_CLASS                                                                                                       \
    "\\t\\n\\x{0B}\\f\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{"     \
    "3000}"

/* Rewrites `\s` and `\S` (see the file comment). Returns a malloc'd,
 * NUL-terminated pattern. */
static char *rewrite_pattern(const char *p, size_t n, size_t *out_len) {
    size_t ws = strlen(WS_CLASS);
    char *o = malloc(n * (ws + 4) + 1); /* worst case: every two bytes become one class */
    if (o == NULL)
        return NULL;
    size_t j = 0;
    bool in_class = false;
    for (size_t i = 0; i < n; i++) {
        char c = p[i];
        if (c == '\\' && i + 1 < n) {
            char e = p[i + 1];
            if (e == 'Q') { /* \Q...\E quotes verbatim */
                size_t k = i + 2;
                while (k + 1 < n && !(p[k] == '\\' && p[k + 1] == 'E'))
                    k++;
                size_t stop = k + 1 < n ? k + 2 : n;
                memcpy(o + j, p + i, stop - i);
                j += stop - i;
                i = stop - 1;
                continue;
            }
            if (e == 's' && in_class) {
                memcpy(o + j, WS_CLASS, ws);
                j += ws;
            } else if (e == 's' || e == 'S') {
                j += (size_t)sprintf(o + j, e == 's' ? "[%s]" : "[^%s]", WS_CLASS);
            } else {
                o[j++] = c;
                o[j++] = e;
            }
            i++;
            continue;
        }
        if (!in_class && c == '[') {
            in_class = true;
            o[j++] = c;
            /* a ']' right after '[' or '[^' is a literal */
            if (i + 1 < n && p[i + 1] == '^')
                o[j++] = p[++i];
            if (i + 1 < n && p[i + 1] == ']')
                o[j++] = p[++i];
            continue;
        }
        if (in_class && c == '[' && i + 1 < n && p[i + 1] == ':') {
            /* a POSIX class [:name:] inside a class */
            const char *end = NULL;
            for (size_t k = i + 2; k + 1 < n; k++)
                if (p[k] == ':' && p[k + 1] == ']') {
                    end = p + k + 2;
                    break;
                }
            if (end != NULL) {
                size_t m = (size_t)(end - (p + i));
                memcpy(o + j, p + i, m);
                j += m;
                i += m - 1;
                continue;
            }
        }
        if (in_class && c == ']')
            in_class = false;
        o[j++] = c;
    }
    o[j] = '\0';
    *out_len = j;
    return o;
}

/* Compiles with UTF (patterns and subjects are UTF-8), UCP (Unicode classes
 * for \d \w \b) and MULTILINE (Oniguruma's ^ and $). The pattern itself is
 * checked by PCRE2; subjects are not, because encode sanitizes them first. */
enum jev_status jev_regex_compile(const char *pattern, size_t len, const char *where, pcre2_code **out,
                                  struct jev_error *err) {
    size_t plen = 0;
    char *p = rewrite_pattern(pattern, len, &plen);
    if (p == NULL)
        return jev_fail(err, JEV_ERR_NOMEM, "%s: out of memory for the regex", where);
    int code = 0;
    PCRE2_SIZE off = 0;
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)p, plen, PCRE2_UTF | PCRE2_UCP | PCRE2_MULTILINE, &code, &off, NULL);
    free(p);
    if (re == NULL) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(code, msg, sizeof msg);
        /* off is in the rewritten pattern; it still points near the fault */
        return jev_fail(err, JEV_ERR_FORMAT, "%s: regex does not compile (%s, near offset %zu)", where, (char *)msg,
                        (size_t)off);
    }
    /* JIT when the platform has it; the interpreter is the fallback. */
    (void)pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    *out = re;
    return JEV_OK;
}

/* ---- regex spans ---- */

void jev_split_scratch_free(struct jev_split_scratch *sc) {
    pcre2_match_data_free(sc->md);
    pcre2_match_context_free(sc->mctx);
    pcre2_jit_stack_free(sc->jit);
    memset(sc, 0, sizeof *sc);
}

/* One search from `from`; returns 1 with the match in ov, 0 for none. */
static int regex_search(const pcre2_code *re, const char *s, size_t n, size_t from, struct jev_split_scratch *sc,
                        size_t ov[2], struct jev_error *err) {
    if (sc->md == NULL) {
        sc->md = pcre2_match_data_create(1, NULL);
        if (sc->md == NULL)
            return -jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for regex match data");
    }
    int rc = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, sc->md, sc->mctx);
    if (rc == PCRE2_ERROR_JIT_STACKLIMIT && sc->jit == NULL) {
        /* The default 32 KiB JIT stack was too small: retry with 8 MiB. */
        sc->jit = pcre2_jit_stack_create(32 * 1024, 8 * 1024 * 1024, NULL);
        sc->mctx = pcre2_match_context_create(NULL);
        if (sc->jit == NULL || sc->mctx == NULL)
            return -jev_fail(err, JEV_ERR_NOMEM, "tokenizer: out of memory for the regex stack");
        pcre2_jit_stack_assign(sc->mctx, NULL, sc->jit);
        rc = pcre2_match(re, (PCRE2_SPTR)s, n, from, PCRE2_NO_UTF_CHECK, sc->md, sc->mctx);
    }
    if (rc == PCRE2_ERROR_NOMATCH)
        return 0;
    if (rc < 0) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(rc, msg, sizeof msg);
        return -jev_fail(err, JEV_ERR_NOMEM, "tokenizer: regex match failed at byte %zu (%s)", from, (char *)msg);
    }
    PCRE2_SIZE *v = pcre2_get_ovector_pointer(sc->md);
    ov[0] = v[0];
    ov[1] = v[1];
    return 1;
}

/* onig's find_iter, which tokenizers' SysRegex uses: search from the end of
 * the last match; an empty match is kept unless it sits exactly where the
 * previous match ended, in which case the search steps one character. Gaps
 * between matches are reported as non-match spans, so the spans tile s. */
enum jev_status jev_regex_spans(const pcre2_code *re, const char *s, size_t n, struct jev_split_scratch *sc,
                                jev_span_fn fn, void *ctx, struct jev_error *err) {
    if (n == 0)
        return fn(ctx, 0, 0, false, err);
    size_t prev = 0; /* end of the last reported span */
    size_t from = 0; /* where the next search starts */
    bool have_last = false;
    size_t last_end = 0; /* end of the last match (onig's last_match_end) */
    while (from <= n) {
        size_t ov[2] = {0, 0};
        int r = regex_search(re, s, n, from, sc, ov, err);
        if (r < 0)
            return (enum jev_status) - r;
        if (r == 0)
            break;
        if (ov[0] == ov[1] && have_last && last_end == ov[1]) {
            /* An empty match where the last one ended: step one character. */
            if (from >= n)
                break;
            size_t bad = 0, k = jev_utf8_next((const unsigned char *)s + from, n - from, &bad);
            from += k ? k : 1;
            continue;
        }
        if (prev != ov[0])
            JEV_TRY(fn(ctx, prev, ov[0], false, err));
        JEV_TRY(fn(ctx, ov[0], ov[1], true, err));
        prev = ov[1];
        from = ov[1];
        have_last = true;
        last_end = ov[1];
    }
    if (prev != n)
        JEV_TRY(fn(ctx, prev, n, false, err));
    return JEV_OK;
}

/* ---- split behaviours ---- */

/* Streams (span, is_match) pairs into final pieces with one pending piece,
 * which is enough for all five behaviours of NormalizedString::split. */
struct split_state {
    const struct jev_pretok *step; /* the Split step */
    jev_piece_fn fn;               /* receives the pieces */
    void *ctx;                     /* fn's context */
    bool pending;                  /* a piece is held back */
    size_t p_start, p_end;         /* its span */
    bool p_match;                  /* whether it came from a match (after invert) */
    bool prev_match;               /* is_match of the previous span (fold state) */
};

static enum jev_status emit(struct split_state *st, size_t a, size_t b, struct jev_error *err) {
    return a == b ? JEV_OK : st->fn(st->ctx, a, b, err);
}

static enum jev_status flush(struct split_state *st, struct jev_error *err) {
    if (!st->pending)
        return JEV_OK;
    st->pending = false;
    return emit(st, st->p_start, st->p_end, err);
}

static void hold(struct split_state *st, size_t a, size_t b, bool m) {
    st->pending = true;
    st->p_start = a;
    st->p_end = b;
    st->p_match = m;
}

static enum jev_status on_span(void *ctx, size_t a, size_t b, bool is_match, struct jev_error *err) {
    struct split_state *st = ctx;
    bool m = is_match != st->step->invert;
    switch (st->step->behavior) {
    case JEV_SPLIT_ISOLATED: return emit(st, a, b, err);
    case JEV_SPLIT_REMOVED: return m ? JEV_OK : emit(st, a, b, err);
    case JEV_SPLIT_MERGED_PREV:
        /* a match that follows a non-match joins the piece on its left */
        if (m && !st->prev_match && st->pending) {
            st->p_end = b;
        } else {
            JEV_TRY(flush(st, err));
            hold(st, a, b, m);
        }
        st->prev_match = m;
        return JEV_OK;
    case JEV_SPLIT_CONTIGUOUS:
        /* runs of the same kind become one piece */
        if (m == st->prev_match && st->pending) {
            st->p_end = b;
        } else {
            JEV_TRY(flush(st, err));
            hold(st, a, b, m);
        }
        st->prev_match = m;
        return JEV_OK;
    case JEV_SPLIT_MERGED_NEXT:
        /* a match followed by a non-match joins the piece on its right */
        if (st->pending && st->p_match && !m) {
            st->pending = false;
            hold(st, st->p_start, b, m);
        } else {
            JEV_TRY(flush(st, err));
            hold(st, a, b, m);
        }
        return JEV_OK;
    }
    return JEV_OK;
}

/* Non-overlapping literal matches, as tokenizers' escaped-regex String
 * pattern gives them; an empty literal matches nothing. */
static enum jev_status literal_spans(const struct jev_pretok *step, const char *s, size_t n, jev_span_fn fn, void *ctx,
                                     struct jev_error *err) {
    if (n == 0)
        return fn(ctx, 0, 0, false, err);
    size_t prev = 0, L = step->literal_len;
    if (L > 0) {
        size_t i = 0;
        while (i + L <= n) {
            const char *hit = memmem(s + i, n - i, step->literal, L);
            if (hit == NULL)
                break;
            size_t a = (size_t)(hit - s);
            if (prev != a)
                JEV_TRY(fn(ctx, prev, a, false, err));
            JEV_TRY(fn(ctx, a, a + L, true, err));
            prev = i = a + L;
        }
    }
    if (prev != n)
        JEV_TRY(fn(ctx, prev, n, false, err));
    return JEV_OK;
}

/* One Split step over one piece: spans from the regex or the literal, folded
 * into pieces by the behaviour, the pending piece flushed at the end. */
enum jev_status jev_split_run(const struct jev_pretok *step, const char *s, size_t n, struct jev_split_scratch *sc,
                              jev_piece_fn fn, void *ctx, struct jev_error *err) {
    struct split_state st = {.step = step, .fn = fn, .ctx = ctx};
    if (step->re != NULL)
        JEV_TRY(jev_regex_spans(step->re, s, n, sc, on_span, &st, err));
    else
        JEV_TRY(literal_spans(step, s, n, on_span, &st, err));
    return flush(&st, err);
}

/* ---- added tokens ---- */

/* The first token of set matching at s[i..n) (longest first), or -1. */
/* Buckets are sorted longest first, so the first hit is the longest token
 * starting here: together with scanning positions left to right this is
 * aho-corasick's leftmost-longest rule. */
static int32_t added_at(const struct jev_tokenizer *t, const struct jev_added_set *set, const char *s, size_t n,
                        size_t i) {
    unsigned char b = (unsigned char)s[i];
    for (uint32_t k = set->first[b]; k < set->first[b + 1]; k++) {
        const struct jev_added *a = &t->added[set->order[k]];
        if (a->pattern_len <= n - i && memcmp(s + i, a->pattern, a->pattern_len) == 0)
            return set->order[k];
    }
    return -1;
}

/* The regex crate's \w$ and ^\w tests of tokenizers' single_word rule. */
static bool ends_with_word(const char *s, size_t end) {
    if (end == 0)
        return false;
    uint32_t cp;
    jev_utf8_decode((const unsigned char *)s + jev_utf8_prev((const unsigned char *)s, end), &cp);
    return jev_unicode_is_word(cp);
}

static bool starts_with_word(const char *s, size_t start, size_t n) {
    if (start >= n)
        return false;
    uint32_t cp;
    jev_utf8_decode((const unsigned char *)s + start, &cp);
    return jev_unicode_is_word(cp);
}

/* AddedVocabulary::find_matches: a match that fails single_word is skipped
 * but still consumed (the automaton does not look inside it again); lstrip
 * never reaches back past the previous token; rstrip may run into the next
 * match, exactly as in tokenizers. */
enum jev_status jev_added_run(const struct jev_tokenizer *t, const struct jev_added_set *set, const char *s, size_t n,
                              jev_added_fn fn, void *ctx, struct jev_error *err) {
    size_t start_offset = 0; /* end of the last emitted token */
    size_t i = 0;            /* where the automaton looks next */
    if (set->n > 0) {
        while (i < n) {
            int32_t k = added_at(t, set, s, n, i);
            if (k < 0) {
                i++;
                continue;
            }
            const struct jev_added *a = &t->added[k];
            size_t start = i, stop = i + a->pattern_len;
            i = stop; /* matches never overlap, kept or not */
            if (a->single_word &&
                !((start == 0 || !ends_with_word(s, start)) && (stop == n || !starts_with_word(s, stop, n))))
                continue;
            if (a->lstrip) {
                /* start of the whitespace run that ends at start */
                size_t ns = start;
                while (ns > 0) {
                    size_t p = jev_utf8_prev((const unsigned char *)s, ns);
                    uint32_t cp;
                    jev_utf8_decode((const unsigned char *)s + p, &cp);
                    if (!jev_unicode_is_white_space(cp))
                        break;
                    ns = p;
                }
                start = ns > start_offset ? ns : start_offset;
            }
            if (a->rstrip) {
                while (stop < n) {
                    uint32_t cp;
                    size_t k2 = jev_utf8_decode((const unsigned char *)s + stop, &cp);
                    if (!jev_unicode_is_white_space(cp))
                        break;
                    stop += k2;
                }
            }
            if (start_offset < start)
                JEV_TRY(fn(ctx, start_offset, start, -1, err));
            JEV_TRY(fn(ctx, start, stop, a->id, err));
            start_offset = stop;
        }
    }
    if (start_offset < n)
        JEV_TRY(fn(ctx, start_offset, n, -1, err));
    return JEV_OK;
}

/* ---- normalizer ---- */

/* The steps run one after the other on utf8proc's output. utf8proc_map
 * allocates; that happens once per text stretch, not per word. */
enum jev_status jev_tok_normalize(const struct jev_tokenizer *t, const char *s, size_t n, char **out, size_t *out_len,
                                  bool *owned, struct jev_error *err) {
    *out = (char *)(uintptr_t)s;
    *out_len = n;
    *owned = false;
    if (t->n_norm == 0)
        return JEV_OK;
    /* Every Unicode normal form leaves ASCII alone. */
    bool ascii = true;
    for (size_t i = 0; i < n && ascii; i++)
        ascii = (unsigned char)s[i] < 0x80;
    if (ascii)
        return JEV_OK;
    for (int k = 0; k < t->n_norm; k++) {
        utf8proc_uint8_t *dst = NULL;
        utf8proc_ssize_t m = utf8proc_map((const utf8proc_uint8_t *)*out, (utf8proc_ssize_t)*out_len, &dst,
                                          (utf8proc_option_t)t->norm[k]);
        if (*owned)
            free(*out);
        if (m < 0) {
            free(dst);
            *owned = false;
            return jev_fail(err, m == UTF8PROC_ERROR_NOMEM ? JEV_ERR_NOMEM : JEV_ERR_INVALID_ARG,
                            "tokenizer: normalization failed (%s)", utf8proc_errmsg(m));
        }
        *out = (char *)dst;
        *out_len = (size_t)m;
        *owned = true;
    }
    return JEV_OK;
}

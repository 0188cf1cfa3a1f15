/*
 * utf8.c - UTF-8 validation, the U+FFFD replacement rule, code point
 * decode/encode and a few Unicode predicates (see utf8.h for the contracts).
 *
 * The well-formed byte sequences are the ones of Unicode's Table 3-7; the
 * second byte of E0, ED, F0 and F4 has a narrower range than 80..BF, which is
 * what rules out overlong forms, surrogates and code points above U+10FFFF.
 */
#include "text/utf8.h" // defines: jev_utf8_*

#include <string.h>
#include <utf8proc.h>

/* ---- validation ---- */

size_t jev_utf8_next(const unsigned char *s, size_t n, size_t *bad) {
    unsigned char b0 = s[0];
    if (b0 < 0x80)
        return 1;
    /* The expected continuation count and the allowed range of the second
     * byte, by lead byte (Table 3-7). */
    size_t need;
    unsigned char lo = 0x80, hi = 0xBF;
    if (b0 >= 0xC2 && b0 <= 0xDF) {
        need = 1;
    } else if (b0 == 0xE0) {
        need = 2, lo = 0xA0;
    } else if (b0 >= 0xE1 && b0 <= 0xEC) {
        need = 2;
    } else if (b0 == 0xED) {
        need = 2, hi = 0x9F;
    } else if (b0 >= 0xEE && b0 <= 0xEF) {
        need = 2;
    } else if (b0 == 0xF0) {
        need = 3, lo = 0x90;
    } else if (b0 >= 0xF1 && b0 <= 0xF3) {
        need = 3;
    } else if (b0 == 0xF4) {
        need = 3, hi = 0x8F;
    } else {
        *bad = 1; /* 80..C1, F5..FF never start a sequence */
        return 0;
    }
    /* Walk the continuation bytes; the maximal subpart is the lead byte plus
     * the continuation bytes that were still acceptable. */
    for (size_t i = 1; i <= need; i++) {
        unsigned char lo_i = i == 1 ? lo : 0x80, hi_i = i == 1 ? hi : 0xBF;
        if (i >= n || s[i] < lo_i || s[i] > hi_i) {
            *bad = i;
            return 0;
        }
    }
    return need + 1;
}

/* The common case is valid text, so this runs before any copy: encode only
 * sanitizes (and allocates) when it finds an ill-formed byte. */
bool jev_utf8_valid(const char *s, size_t n) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        /* ASCII runs are the common case: skip eight bytes at a time. */
        if (i + 8 <= n) {
            uint64_t w;
            memcpy(&w, u + i, 8);
            if ((w & 0x8080808080808080ull) == 0) {
                i += 8;
                continue;
            }
        }
        size_t bad = 0, k = jev_utf8_next(u + i, n - i, &bad);
        if (k == 0)
            return false;
        i += k;
    }
    return true;
}

/* One pass with the same scanner, so validation and replacement can never
 * disagree about where a sequence ends. */
size_t jev_utf8_sanitize(const char *s, size_t n, char *out) {
    const unsigned char *u = (const unsigned char *)s;
    size_t i = 0, o = 0;
    while (i < n) {
        size_t bad = 0, k = jev_utf8_next(u + i, n - i, &bad);
        if (k > 0) {
            memcpy(out + o, s + i, k);
            o += k;
            i += k;
        } else {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i += bad;
        }
    }
    return o;
}

/* ---- code points ---- */

/* No checks: callers only decode text that jev_utf8_valid accepted or that
 * jev_utf8_sanitize produced. */
size_t jev_utf8_decode(const unsigned char *s, uint32_t *cp) {
    if (s[0] < 0x80) {
        *cp = s[0];
        return 1;
    }
    if (s[0] < 0xE0) {
        *cp = ((uint32_t)(s[0] & 0x1F) << 6) | (s[1] & 0x3F);
        return 2;
    }
    if (s[0] < 0xF0) {
        *cp = ((uint32_t)(s[0] & 0x0F) << 12) | ((uint32_t)(s[1] & 0x3F) << 6) | (s[2] & 0x3F);
        return 3;
    }
    *cp = ((uint32_t)(s[0] & 0x07) << 18) | ((uint32_t)(s[1] & 0x3F) << 12) | ((uint32_t)(s[2] & 0x3F) << 6) |
          (s[3] & 0x3F);
    return 4;
}

/* Steps back over continuation bytes (10xxxxxx) to the lead byte. */
size_t jev_utf8_prev(const unsigned char *s, size_t end) {
    size_t i = end - 1;
    while (i > 0 && (s[i] & 0xC0) == 0x80)
        i--;
    return i;
}

/* Callers pass code points they decoded or the byte-level alphabet (< 0x144). */
size_t jev_utf8_encode(uint32_t cp, char *out) {
    unsigned char *o = (unsigned char *)out;
    if (cp < 0x80) {
        o[0] = (unsigned char)cp;
        return 1;
    }
    if (cp < 0x800) {
        o[0] = (unsigned char)(0xC0 | (cp >> 6));
        o[1] = (unsigned char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        o[0] = (unsigned char)(0xE0 | (cp >> 12));
        o[1] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
        o[2] = (unsigned char)(0x80 | (cp & 0x3F));
        return 3;
    }
    o[0] = (unsigned char)(0xF0 | (cp >> 18));
    o[1] = (unsigned char)(0x80 | ((cp >> 12) & 0x3F));
    o[2] = (unsigned char)(0x80 | ((cp >> 6) & 0x3F));
    o[3] = (unsigned char)(0x80 | (cp & 0x3F));
    return 4;
}

/* ---- Unicode predicates ---- */

bool jev_unicode_is_white_space(uint32_t cp) {
    /* The White_Space property list (PropList.txt); it has been stable
     * since Unicode 6.3 removed U+180E. */
    return (cp >= 0x09 && cp <= 0x0D) || cp == 0x20 || cp == 0x85 || cp == 0xA0 || cp == 0x1680 ||
           (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 || cp == 0x202F || cp == 0x205F ||
           cp == 0x3000;
}

/* utf8proc's tables carry both the category and the bidi class, which is
 * exactly what CPython's _PyUnicode_IsWhitespace is generated from. */
bool jev_unicode_is_py_space(uint32_t cp) {
    if (cp > 0x10FFFF)
        return false;
    const utf8proc_property_t *p = utf8proc_get_property((utf8proc_int32_t)cp);
    return p->category == UTF8PROC_CATEGORY_ZS || p->bidi_class == UTF8PROC_BIDI_CLASS_WS ||
           p->bidi_class == UTF8PROC_BIDI_CLASS_B || p->bidi_class == UTF8PROC_BIDI_CLASS_S;
}

/* Used only for added tokens with single_word, which Qwen's file has none
 * of; the approximation is documented in utf8.h. */
bool jev_unicode_is_word(uint32_t cp) {
    if (cp == '_' || cp == 0x200C || cp == 0x200D)
        return true;
    if (cp > 0x10FFFF)
        return false;
    switch (utf8proc_category((utf8proc_int32_t)cp)) {
    case UTF8PROC_CATEGORY_LU:
    case UTF8PROC_CATEGORY_LL:
    case UTF8PROC_CATEGORY_LT:
    case UTF8PROC_CATEGORY_LM:
    case UTF8PROC_CATEGORY_LO:
    case UTF8PROC_CATEGORY_MN:
    case UTF8PROC_CATEGORY_MC:
    case UTF8PROC_CATEGORY_ME:
    case UTF8PROC_CATEGORY_ND:
    case UTF8PROC_CATEGORY_NL:
    case UTF8PROC_CATEGORY_PC: return true;
    default: return false;
    }
}

/*
 * utf8.h - UTF-8 helpers the tokenizer and the prompt renderer share.
 *
 * What it is: validation, the replacement rule for ill-formed input, single
 * code point decode/encode, and the few Unicode character classes that the
 * Hugging Face stack tests with Rust or Python predicates (whitespace, word
 * characters), answered from utf8proc's tables.
 * What it is not: normalization (utf8proc does that, see tokenizer.c) or
 * regex classes (PCRE2 has its own tables).
 *
 * The replacement rule: every maximal subpart of an ill-formed subsequence
 * becomes one U+FFFD (Unicode 15 §3.9, "U+FFFD substitution of maximal
 * subparts"). This is what Python's bytes.decode("utf-8", errors="replace")
 * and Rust's String::from_utf8_lossy do, so bytes -> text here equals bytes ->
 * str in the reference scripts.
 */
#ifndef JEV_TEXT_UTF8_H
#define JEV_TEXT_UTF8_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The byte length of the well-formed sequence at s[0..n), or 0 when s starts
 * with an ill-formed one; *bad then gets the length of its maximal subpart
 * (>= 1). n must be >= 1. */
size_t jev_utf8_next(const unsigned char *s, size_t n, size_t *bad);

/* True when s[0..n) is well-formed UTF-8 (NUL bytes are allowed). */
bool jev_utf8_valid(const char *s, size_t n);

/* Copies s[0..n) to out with every maximal ill-formed subpart replaced by
 * U+FFFD (EF BF BD) and returns the bytes written. out holds at least
 * 3 * n bytes (the worst case: every byte replaced). */
size_t jev_utf8_sanitize(const char *s, size_t n, char *out);

/* Decodes the code point at s (well-formed, at least one byte left) and
 * returns its byte length. */
size_t jev_utf8_decode(const unsigned char *s, uint32_t *cp);

/* The start of the code point that ends at s[end] (exclusive): the index of
 * its lead byte. s[0..end) must be well-formed and end > 0. */
size_t jev_utf8_prev(const unsigned char *s, size_t end);

/* Writes cp as UTF-8 into out (4 bytes of room) and returns the length. */
size_t jev_utf8_encode(uint32_t cp, char *out);

/* Rust's char::is_whitespace: the Unicode White_Space property. */
bool jev_unicode_is_white_space(uint32_t cp);

/* Python's str.isspace for one character: general category Zs or
 * bidirectional class WS, B or S. */
bool jev_unicode_is_py_space(uint32_t cp);

/* An approximation of the regex crate's \w (Alphabetic, M, Nd, Pc,
 * Join_Control): letters, marks, Nd, Nl, Pc, U+200C and U+200D. Alphabetic
 * symbols such as circled letters (So) are not counted. */
bool jev_unicode_is_word(uint32_t cp);

#endif

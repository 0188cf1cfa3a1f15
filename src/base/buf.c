/*
 * buf.c - the bounded growing byte buffer of buf.h.
 *
 * Written here rather than taken from a library: the ones at hand (GLib's
 * GString, sds) grow without a bound, and a mandatory cap checked by every
 * append is the point of this file; curl's dynbuf, the model, is internal
 * to libcurl.
 */
#include "base/buf.h" // defines: struct jev_buf, jev_buf_*

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Why a buffer failed (struct jev_buf.failed). */
enum { FAIL_NONE, FAIL_OVER, FAIL_NOMEM, FAIL_FORMAT };

/* The first allocation: small, since many buffers hold one short message. */
#define FIRST_ALLOC 64

void jev_buf_init(struct jev_buf *b, size_t cap) {
    /* so that cap + 1 (the NUL) and doubling an allocation never overflow */
    JEV_ASSERT(cap <= SIZE_MAX / 2);
    memset(b, 0, sizeof *b);
    b->cap = cap;
}

void jev_buf_free(struct jev_buf *b) {
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
    b->failed = FAIL_NONE;
}

void jev_buf_reset(struct jev_buf *b) {
    b->len = 0;
    if (b->data)
        b->data[0] = '\0';
    b->failed = FAIL_NONE;
}

/* Records a failure: the bytes are freed and later appends fail (buf.h). */
static void mark_failed(struct jev_buf *b, int why) {
    free(b->data);
    b->data = NULL;
    b->len = b->alloc = 0;
    b->failed = why;
}

enum jev_status jev_buf_status(const struct jev_buf *b, struct jev_error *err) {
    switch (b->failed) {
    case FAIL_NONE: return JEV_OK;
    case FAIL_OVER:
        return jev_fail(err, JEV_ERR_NOMEM, "buffer: an earlier append passed the limit of %zu bytes", b->cap);
    case FAIL_NOMEM:
        return jev_fail(err, JEV_ERR_NOMEM, "buffer: an earlier append ran out of memory (the limit is %zu bytes)",
                        b->cap);
    default: return jev_fail(err, JEV_ERR_INVALID_ARG, "buffer: an earlier printf format failed (an encoding error)");
    }
}

/* Makes room for n more bytes and the NUL: doubling, at most cap + 1 bytes. */
static enum jev_status grow(struct jev_buf *b, size_t n, struct jev_error *err) {
    if (n > b->cap - b->len) { /* len <= cap always: no underflow, no overflow */
        size_t held = b->len;
        mark_failed(b, FAIL_OVER);
        if (b->cap == 0)
            return jev_fail(err, JEV_ERR_NOMEM,
                            "buffer: %zu bytes would pass the limit of 0 bytes (jev_buf_init gives the limit)", n);
        return jev_fail(err, JEV_ERR_NOMEM, "buffer: %zu + %zu bytes would pass the limit of %zu bytes", held, n,
                        b->cap);
    }
    size_t need = b->len + n + 1;
    if (need <= b->alloc)
        return JEV_OK;
    /* alloc < need <= cap + 1 <= SIZE_MAX / 2 + 1, so 2 * alloc cannot overflow */
    size_t a = b->alloc ? 2 * b->alloc : FIRST_ALLOC;
    if (a < need)
        a = need;
    if (a > b->cap + 1)
        a = b->cap + 1;
    char *d = realloc(b->data, a);
    if (d == NULL) {
        mark_failed(b, FAIL_NOMEM);
        return jev_fail(err, JEV_ERR_NOMEM, "buffer: out of memory for %zu bytes (the limit is %zu bytes)", a, b->cap);
    }
    if (b->data == NULL)
        d[0] = '\0';
    b->data = d;
    b->alloc = a;
    return JEV_OK;
}

enum jev_status jev_buf_add(struct jev_buf *b, const void *p, size_t n, struct jev_error *err) {
    if (b->failed)
        return jev_buf_status(b, err);
    JEV_TRY(grow(b, n, err));
    if (n)
        memcpy(b->data + b->len, p, n);
    b->len += n;
    b->data[b->len] = '\0';
    return JEV_OK;
}

enum jev_status jev_buf_add_str(struct jev_buf *b, const char *s, struct jev_error *err) {
    return jev_buf_add(b, s, strlen(s), err);
}

/* One vsnprintf straight into the spare room; a second one only when the text did not fit. */
enum jev_status jev_buf_vprintf(struct jev_buf *b, struct jev_error *err, const char *fmt, va_list ap) {
    if (b->failed)
        return jev_buf_status(b, err);
    size_t room = b->alloc ? b->alloc - b->len : 0; /* NUL included */
    va_list again;
    va_copy(again, ap);
    int k = vsnprintf(b->data ? b->data + b->len : NULL, room, fmt, ap);
    enum jev_status s = JEV_OK;
    if (k < 0) {
        mark_failed(b, FAIL_FORMAT);
        s = jev_buf_status(b, err);
    } else if ((size_t)k < room) {
        b->len += (size_t)k; /* it fit, NUL and all (len + k < alloc <= cap + 1) */
    } else if ((s = grow(b, (size_t)k, err)) == JEV_OK) {
        vsnprintf(b->data + b->len, (size_t)k + 1, fmt, again);
        b->len += (size_t)k;
    }
    va_end(again);
    return s;
}

enum jev_status jev_buf_printf(struct jev_buf *b, struct jev_error *err, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    enum jev_status s = jev_buf_vprintf(b, err, fmt, ap);
    va_end(ap);
    return s;
}

enum jev_status jev_buf_add_buf(struct jev_buf *b, const struct jev_buf *src, struct jev_error *err) {
    if (b->failed)
        return jev_buf_status(b, err);
    if (src->failed) {
        enum jev_status s = jev_buf_status(src, err);
        mark_failed(b, src->failed);
        return s;
    }
    return jev_buf_add(b, src->data, src->len, err);
}

const char *jev_buf_str(const struct jev_buf *b) { return b->data ? b->data : ""; }

size_t jev_buf_room(const struct jev_buf *b) { return b->failed ? 0 : b->cap - b->len; }

enum jev_status jev_buf_take(struct jev_buf *b, char **out, size_t *len, struct jev_error *err) {
    *out = NULL;
    if (len)
        *len = 0;
    enum jev_status s = jev_buf_status(b, err);
    if (s == JEV_OK && b->data == NULL)
        s = grow(b, 0, err); /* an empty buffer still hands over "" */
    if (s != JEV_OK) {
        jev_buf_free(b);
        return s;
    }
    *out = b->data;
    if (len)
        *len = b->len;
    b->data = NULL;
    b->len = b->alloc = 0;
    return JEV_OK;
}

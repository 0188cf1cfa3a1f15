/*
 * buf.h - the one growing byte buffer, always bounded: every buffer has a
 * cap (the most bytes it may hold), chosen by its owner from a limit that
 * already exists (the server's body limit, a file's size limit, a response's
 * generous bound), and every append checks it. Text built from outside input
 * can therefore never grow without bound. Modelled on curl's dynbuf.
 *
 * The rules:
 *   - jev_buf_init(&b, cap) before use. A cap of 0 refuses every append, and
 *     so does a buffer that was never initialized (= {0}): there is no
 *     unbounded buffer.
 *   - Appends grow the buffer by doubling, up to cap + 1 bytes (the NUL).
 *     The bytes are always NUL-terminated once something is held.
 *   - A failed append (over the cap: JEV_ERR_NOMEM naming the cap; or out of
 *     memory) frees the bytes, and every later append fails too, until
 *     jev_buf_reset, jev_buf_free or jev_buf_take. So a caller may append
 *     without checking each call (err may be NULL) and check once at the end
 *     with jev_buf_status or jev_buf_take, which report the first failure.
 *   - Ownership: the bytes are the buffer's until taken. b->data and b->len
 *     may be read (and data[0 .. len) written) but the pointer is not kept
 *     past the next append, which may move it, and is never freed by the
 *     caller; jev_buf_take hands the bytes over (free() them).
 *
 * Not here: typed arrays that grow (token ids, segments, tensor tables have
 * their own element types), or anything that needs a shrinking or ring buffer.
 */
#ifndef JEV_BASE_BUF_H
#define JEV_BASE_BUF_H

#include <stdarg.h>
#include <stddef.h>

#include "base/error.h" // defines: struct jev_error, enum jev_status

struct jev_buf {
    char *data;   /* the bytes, NUL after the last; NULL while nothing is allocated */
    size_t len;   /* bytes held, the NUL not counted */
    size_t alloc; /* bytes allocated: 0, or len + 1 .. cap + 1 */
    size_t cap;   /* the most bytes it may hold, the NUL not counted */
    int failed;   /* 0, or why an append failed (buf.c's FAIL_*): empty, and appends fail until reset */
};

/* An empty buffer that holds at most cap bytes (cap <= SIZE_MAX / 2). Allocates nothing. */
void jev_buf_init(struct jev_buf *b, size_t cap);

/* Frees the bytes and clears a failure; the cap stays, so the buffer can be used again. */
void jev_buf_free(struct jev_buf *b);

/* Empties the buffer but keeps its memory for reuse; clears a failure. */
void jev_buf_reset(struct jev_buf *b);

/* Appends n bytes (p may be NULL when n is 0). Fails with JEV_ERR_NOMEM when
 * len + n would pass the cap or memory runs out (the buffer is then emptied,
 * see above); err may be NULL. */
enum jev_status jev_buf_add(struct jev_buf *b, const void *p, size_t n, struct jev_error *err);

/* Appends a NUL-terminated string (without its NUL). */
enum jev_status jev_buf_add_str(struct jev_buf *b, const char *s, struct jev_error *err);

/* Appends what printf would print. A format that fails (an encoding error)
 * fails the buffer with JEV_ERR_INVALID_ARG. */
enum jev_status jev_buf_printf(struct jev_buf *b, struct jev_error *err, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
enum jev_status jev_buf_vprintf(struct jev_buf *b, struct jev_error *err, const char *fmt, va_list ap)
    __attribute__((format(printf, 3, 0)));

/* Appends the bytes of src, a part built aside; when src has failed, b fails
 * with src's failure, so the part's failure is not lost. */
enum jev_status jev_buf_add_buf(struct jev_buf *b, const struct jev_buf *src, struct jev_error *err);

/* The bytes as a string: data, or "" while nothing is allocated. Same lifetime rule as data. */
const char *jev_buf_str(const struct jev_buf *b);

/* Bytes that can still be appended: cap - len (0 after a failure). */
size_t jev_buf_room(const struct jev_buf *b);

/* JEV_OK, or the earlier failure (JEV_ERR_NOMEM, or JEV_ERR_INVALID_ARG for a
 * failed format) with a message naming the cap; the buffer is unchanged. */
enum jev_status jev_buf_status(const struct jev_buf *b, struct jev_error *err);

/* Hands the bytes to the caller: *out is malloc'd and NUL-terminated ("" for
 * an empty buffer), *len (len may be NULL) its length; the buffer is left
 * empty, as after jev_buf_free. After a failed append, or when even the empty
 * string cannot be allocated, *out is NULL and the failure is returned (and
 * cleared). */
enum jev_status jev_buf_take(struct jev_buf *b, char **out, size_t *len, struct jev_error *err);

#endif

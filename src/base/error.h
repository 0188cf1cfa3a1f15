/*
 * error.h - numbered status plus a detail message, and the always-on assert.
 *
 * Internal code passes a `struct jev_error *` down the call chain; the first
 * failure fills it (jev_fail) and every caller returns the status unchanged.
 * Messages name what was wrong: the file, the tensor, the field, the limit.
 * JEV_ASSERT is for invariants (bugs), never for bad input: it calls the
 * abort hook, which by default prints file:line and aborts.
 */
#ifndef JEV_BASE_ERROR_H
#define JEV_BASE_ERROR_H

#include "jev.h" // defines: enum jev_status

#ifdef __cplusplus
extern "C" { /* the CUDA kernel files (C++) call jev_fail and JEV_ASSERT */
#endif

#define JEV_ERROR_MSG_MAX 512

struct jev_error {
    enum jev_status status;      /* JEV_OK until the first failure */
    char msg[JEV_ERROR_MSG_MAX]; /* detail text, "" when status is JEV_OK */
};

/* Records a failure (only the first one sticks) and returns its status. */
enum jev_status jev_fail(struct jev_error *err, enum jev_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* Clears err back to JEV_OK. */
void jev_error_clear(struct jev_error *err);

/* Copies err's message to a caller buffer (may be NULL), always terminated. */
void jev_error_copy(const struct jev_error *err, char *buf, size_t size);

/* The abort hook for JEV_ASSERT; replaceable for tests and embedders. */
typedef void (*jev_abort_fn)(const char *file, int line, const char *expr);
void jev_set_abort_hook(jev_abort_fn fn);
void jev_abort(const char *file, int line, const char *expr) __attribute__((noreturn));

#define JEV_ASSERT(x)                                                                                                  \
    do {                                                                                                               \
        if (!(x))                                                                                                      \
            jev_abort(__FILE__, __LINE__, #x);                                                                         \
    } while (0)

/* Returns from the enclosing function when a status-returning call fails. */
#define JEV_TRY(expr)                                                                                                  \
    do {                                                                                                               \
        enum jev_status jev_try_s_ = (expr);                                                                           \
        if (jev_try_s_ != JEV_OK)                                                                                      \
            return jev_try_s_;                                                                                         \
    } while (0)

#ifdef __cplusplus
}
#endif

#endif

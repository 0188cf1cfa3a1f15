/*
 * error.c - status names, failure recording and the assert hook.
 */
#include "base/error.h" // defines: struct jev_error, jev_fail

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *jev_status_str(enum jev_status s) {
    switch (s) {
    case JEV_OK: return "ok";
    case JEV_ERR_IO: return "i/o error";
    case JEV_ERR_FORMAT: return "malformed input";
    case JEV_ERR_NOMEM: return "out of memory or over a size limit";
    case JEV_ERR_INVALID_ARG: return "invalid argument";
    case JEV_ERR_CUDA: return "CUDA error";
    case JEV_ERR_CONTEXT_FULL: return "context full";
    case JEV_ERR_ABORTED: return "aborted";
    case JEV_ERR_UNSUPPORTED: return "unsupported";
    case JEV_ERR_DEVICE_LOST: return "device lost";
    }
    return "unknown status";
}

const char *jev_version(void) {
#define JEV_STR2(x) #x
#define JEV_STR(x) JEV_STR2(x)
    return JEV_STR(JEV_VERSION_MAJOR) "." JEV_STR(JEV_VERSION_MINOR) "." JEV_STR(JEV_VERSION_PATCH);
}

enum jev_status jev_fail(struct jev_error *err, enum jev_status status, const char *fmt, ...) {
    if (err == NULL || err->status != JEV_OK)
        return err ? err->status : status;
    err->status = status;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    return status;
}

void jev_error_clear(struct jev_error *err) {
    err->status = JEV_OK;
    err->msg[0] = '\0';
}

void jev_error_copy(const struct jev_error *err, char *buf, size_t size) {
    if (buf == NULL || size == 0)
        return;
    snprintf(buf, size, "%s", err->msg[0] ? err->msg : jev_status_str(err->status));
}

static void default_abort(const char *file, int line, const char *expr) {
    fprintf(stderr, "jev: assertion failed at %s:%d: %s\n", file, line, expr);
}

static jev_abort_fn abort_hook = default_abort;

void jev_set_abort_hook(jev_abort_fn fn) { abort_hook = fn ? fn : default_abort; }

void jev_abort(const char *file, int line, const char *expr) {
    abort_hook(file, line, expr);
    abort();
}

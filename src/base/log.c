/*
 * log.c - the stderr logger of log.h.
 */
#include "base/log.h" // defines: jev_log

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>

static _Atomic int log_level = JEV_LOG_SILENT;

void jev_log_set_level(enum jev_log_level level) { atomic_store(&log_level, (int)level); }
enum jev_log_level jev_log_get_level(void) { return (enum jev_log_level)atomic_load(&log_level); }

void jev_log(enum jev_log_level level, const char *fmt, ...) {
    if ((int)level > atomic_load(&log_level))
        return;
    va_list ap;
    va_start(ap, fmt);
    fputs("jev: ", stderr);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

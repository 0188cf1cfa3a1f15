/*
 * log.h - opt-in diagnostics to stderr. The library is silent unless the
 * embedding program raises the level (the CLI's -v does).
 */
#ifndef JEV_BASE_LOG_H
#define JEV_BASE_LOG_H

enum jev_log_level { JEV_LOG_SILENT = 0, JEV_LOG_WARN = 1, JEV_LOG_INFO = 2, JEV_LOG_DEBUG = 3 };

void jev_log_set_level(enum jev_log_level level);
enum jev_log_level jev_log_get_level(void);
void jev_log(enum jev_log_level level, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif

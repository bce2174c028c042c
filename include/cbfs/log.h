/* Logging: one line per event to stderr (foreground, tests) or syslog (daemon).
 * A mount test passes only when the daemon printed no warning, so WARN and ERR
 * are for things an operator must act on; routine events are INFO/DEBUG. */
#ifndef CBFS_LOG_H
#define CBFS_LOG_H

#include <stdbool.h>

enum cbfs_log_level { CBFS_LOG_ERR = 0, CBFS_LOG_WARN, CBFS_LOG_INFO, CBFS_LOG_DEBUG };

/* Not thread-safe; call before starting threads. Default: stderr, level WARN. */
void cbfs_log_setup(const char *ident, bool use_syslog, enum cbfs_log_level max_level);
void cbfs_log(enum cbfs_log_level level, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

#define cbfs_log_err(...) cbfs_log(CBFS_LOG_ERR, __VA_ARGS__)
#define cbfs_log_warn(...) cbfs_log(CBFS_LOG_WARN, __VA_ARGS__)
#define cbfs_log_info(...) cbfs_log(CBFS_LOG_INFO, __VA_ARGS__)
#define cbfs_log_debug(...) cbfs_log(CBFS_LOG_DEBUG, __VA_ARGS__)

#endif

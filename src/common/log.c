/* One-line logging to stderr or syslog; the level filter is set once at start. */
#include <stdarg.h>
#include <stdio.h>
#include <syslog.h>

#include "cbfs/log.h"

static const char *cbfs_log_ident = "cbfs";
static bool cbfs_log_syslog;
static enum cbfs_log_level cbfs_log_max = CBFS_LOG_WARN;

void cbfs_log_setup(const char *ident, bool use_syslog, enum cbfs_log_level max_level)
{
    cbfs_log_ident = ident;
    cbfs_log_syslog = use_syslog;
    cbfs_log_max = max_level;
    if (use_syslog) openlog(ident, LOG_PID, LOG_DAEMON);
}

void cbfs_log(enum cbfs_log_level level, const char *fmt, ...)
{
    static const char *const names[] = {"error", "warning", "info", "debug"};
    static const int prio[] = {LOG_ERR, LOG_WARNING, LOG_INFO, LOG_DEBUG};
    if (level > cbfs_log_max) return;
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cbfs_log_syslog)
        syslog(prio[level], "%s", line);
    else
        fprintf(stderr, "%s: %s: %s\n", cbfs_log_ident, names[level], line);
}

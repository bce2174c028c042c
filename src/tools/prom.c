/* `cbfs stats --prometheus`: samples of user.cbfs.stats in the Prometheus text
 * exposition format (0.0.4), for node_exporter's textfile collector. Every
 * metric is generated from the stats lists (cbfs/stats.h CBFS_STATS_DAEMON,
 * cbfs/engine.h CBFS_ENGINE_COUNTERS and CBFS_ENGINE_GAUGES); a new field of
 * the lists becomes a metric with no change here. */
#include <inttypes.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include "cbfs/stats.h"
#include "cbfs/version.h"
#include "tools/tool.h"

enum tool_prom_kind { TOOL_PROM_COUNTER, TOOL_PROM_GAUGE, TOOL_PROM_GAUGE_I64, TOOL_PROM_LABEL };

struct tool_prom_field {
    const char *key; /* the field's name in the lists and the text */
    enum tool_prom_kind kind;
    size_t off;      /* in struct cbfs_stats */
};

/* Daemon fields: numbers are gauges, text (the codec) becomes a label of cbfs_info. */
#define TOOL_PROM_KIND_U64_ TOOL_PROM_GAUGE
#define TOOL_PROM_KIND_I64_ TOOL_PROM_GAUGE_I64
#define TOOL_PROM_KIND_STR_ TOOL_PROM_LABEL
static const struct tool_prom_field tool_prom_fields[] = {
#define TOOL_PROM_DAEMON_(key, type)                                                    \
    {#key, TOOL_PROM_KIND_##type##_, offsetof(struct cbfs_stats, key)},
    CBFS_STATS_DAEMON(TOOL_PROM_DAEMON_)
#undef TOOL_PROM_DAEMON_
#define TOOL_PROM_COUNTER_(key) {#key, TOOL_PROM_COUNTER, offsetof(struct cbfs_stats, st.key)},
    CBFS_ENGINE_COUNTERS(TOOL_PROM_COUNTER_)
#undef TOOL_PROM_COUNTER_
#define TOOL_PROM_GAUGE_(key) {#key, TOOL_PROM_GAUGE, offsetof(struct cbfs_stats, st.key)},
    CBFS_ENGINE_GAUGES(TOOL_PROM_GAUGE_)
#undef TOOL_PROM_GAUGE_
};
#define TOOL_PROM_NFIELDS (sizeof tool_prom_fields / sizeof tool_prom_fields[0])

static bool tool_prom_prefix(const char *s, const char *p)
{
    return strncmp(s, p, strlen(p)) == 0;
}

static bool tool_prom_suffix(const char *s, const char *x)
{
    const size_t n = strlen(s), m = strlen(x);
    return n >= m && strcmp(s + n - m, x) == 0;
}

/* The metric's name, in Prometheus's base units, from the field's name by the
 * convention the lists follow: ns_X and X_ns are nanoseconds (exported as
 * seconds), logical_X, physical_X, X_bytes and X_size are bytes, anything else
 * is a count. Counters end in _total. *unit: "seconds", "bytes" or NULL.
 * @return true if the value is in nanoseconds. */
static bool tool_prom_name(const struct tool_prom_field *f, char *buf, size_t cap,
                           const char **unit)
{
    const char *base = f->key;
    size_t len = strlen(base);
    bool ns = false;
    *unit = NULL;
    if (tool_prom_prefix(base, "ns_")) {
        base += 3, len -= 3, *unit = "seconds", ns = true;
    } else if (tool_prom_suffix(base, "_ns")) {
        len -= 3, *unit = "seconds", ns = true;
    } else if (tool_prom_suffix(base, "_bytes")) {
        len -= 6, *unit = "bytes";
    } else if (tool_prom_prefix(base, "logical_") || tool_prom_prefix(base, "physical_") ||
               tool_prom_suffix(base, "_size")) {
        *unit = "bytes";
    }
    snprintf(buf, cap, "cbfs_%.*s%s%s%s", (int)len, base, *unit ? "_" : "", *unit ? *unit : "",
             f->kind == TOOL_PROM_COUNTER ? "_total" : "");
    return ns;
}

/* A label value: backslash, double quote and newline escaped. The format
 * wants UTF-8: a mount point that is not was refused before anything was
 * printed (tool_stats_prom_main); a byte of the daemon's text that is not
 * (a codec name) prints as U+FFFD. */
static void tool_prom_label(const char *name, const char *v)
{
    printf("%s=\"", name);
    for (const unsigned char *p = (const unsigned char *)v; *p;) {
        const size_t n = tool_utf8_len(p);
        if (!n) {
            fputs("\xef\xbf\xbd", stdout);
            p++;
        } else if (*p == '\\' || *p == '"') {
            printf("\\%c", *p++);
        } else if (*p == '\n') {
            fputs("\\n", stdout);
            p++;
        } else {
            fwrite(p, 1, n, stdout);
            p += n;
        }
    }
    putchar('"');
}

static void tool_prom_family(const char *name, const char *type, const char *help)
{
    printf("# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void tool_prom_sample_start(const char *name, const char *mnt)
{
    printf("%s{", name);
    tool_prom_label("mountpoint", mnt);
}

/* cbfs_info{mountpoint,version,<every text field>} 1 */
static void tool_prom_info(char *const *mnts, const struct cbfs_stats *s, size_t n)
{
    tool_prom_family("cbfs_info", "gauge", "cbfs daemon serving the mount (labels: its settings)");
    for (size_t i = 0; i < n; i++) {
        tool_prom_sample_start("cbfs_info", mnts[i]);
        putchar(',');
        tool_prom_label("version", CBFS_VERSION);
        for (size_t k = 0; k < TOOL_PROM_NFIELDS; k++) {
            const struct tool_prom_field *const f = &tool_prom_fields[k];
            if (f->kind != TOOL_PROM_LABEL) continue;
            putchar(',');
            tool_prom_label(f->key, (const char *)&s[i] + f->off);
        }
        puts("} 1");
    }
}

void tool_stats_prometheus(char *const *mnts, const struct cbfs_stats *s, size_t n)
{
    tool_prom_info(mnts, s, n);
    for (size_t k = 0; k < TOOL_PROM_NFIELDS; k++) {
        const struct tool_prom_field *const f = &tool_prom_fields[k];
        if (f->kind == TOOL_PROM_LABEL) continue;
        char name[96], help[128];
        const char *unit;
        const bool ns = tool_prom_name(f, name, sizeof name, &unit);
        snprintf(help, sizeof help, "%s in %s%s%s", f->key, CBFS_XATTR_STATS,
                 unit ? ", in " : "", unit ? unit : "");
        tool_prom_family(name, f->kind == TOOL_PROM_COUNTER ? "counter" : "gauge", help);
        for (size_t i = 0; i < n; i++) {
            const char *const p = (const char *)&s[i] + f->off;
            tool_prom_sample_start(name, mnts[i]);
            if (f->kind == TOOL_PROM_GAUGE_I64) {
                int64_t v;
                memcpy(&v, p, sizeof v);
                printf("} %" PRId64 "\n", v);
                continue;
            }
            uint64_t v;
            memcpy(&v, p, sizeof v);
            if (ns) /* exact decimal seconds */
                printf("} %" PRIu64 ".%09" PRIu64 "\n", v / 1000000000u, v % 1000000000u);
            else
                printf("} %" PRIu64 "\n", v);
        }
    }
    /* The one derived figure: what `cbfs stats` calls the average ratio. */
    tool_prom_family("cbfs_compression_ratio", "gauge",
                     "logical_written / physical_written since the mount (NaN before the first "
                     "write)");
    for (size_t i = 0; i < n; i++) {
        const struct cbfs_engine_stats *const st = &s[i].st;
        tool_prom_sample_start("cbfs_compression_ratio", mnts[i]);
        if (st->physical_written)
            printf("} %.6g\n", (double)st->logical_written / (double)st->physical_written);
        else
            puts("} NaN");
    }
}

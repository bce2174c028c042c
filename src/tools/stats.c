/* `cbfs stats`: live counters of a running mount, read from the xattr
 * user.cbfs.stats on the mount root (struct cbfs_stats, decoded by the core).
 * Shows totals, rates between two samples, time per pipeline stage, and a
 * one-line verdict naming the bottleneck; --watch redraws like top;
 * --prometheus prints the counters of one or more mounts for monitoring. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>
#include <time.h>

#include "cbfs/stats.h"
#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_stats_help[] =
    "usage: cbfs stats [--watch [SECS]] [--json] [--input FILE] MOUNTPOINT\n"
    "       cbfs stats --prometheus [--input FILE] MOUNTPOINT...\n"
    "Live counters of a running cbfs mount and the current bottleneck.\n"
    "  --watch [SECS]  redraw every SECS seconds (0.1 to 3600, default 1) until Ctrl-C\n"
    "  --json          JSON (one document per sample with --watch)\n"
    "  --prometheus    the counters in the Prometheus text format, labelled by mount\n"
    "                  point (for node_exporter's textfile collector)\n"
    "  --input FILE    read the counters from FILE instead of the mount (testing)\n"
    "exit status: 0 ok, 2 usage error or no counters (not a cbfs mount)\n";

/* Reads one sample from the mount's xattr or from a file. @return
 * CBFS_E_NOTSUP if mnt has no counters; on any error a sentence in msg. */
static cbfs_err tool_stats_read(const char *mnt, const char *input, struct cbfs_stats *s,
                                char *msg, size_t msg_cap)
{
    char buf[CBFS_STATS_TEXT_MAX];
    ssize_t n = 0;
    cbfs_err e = CBFS_OK;
    if (input) {
        FILE *const f = fopen(input, "re");
        if (!f) {
            e = cbfs_err_from_errno(errno);
        } else {
            n = (ssize_t)fread(buf, 1, sizeof buf, f);
            const int rerr = ferror(f) ? errno : 0;
            fclose(f);
            if (rerr == EISDIR) { /* not in the error list: said here */
                snprintf(msg, msg_cap, "is a directory, not a stats text");
                return CBFS_E_INVAL;
            }
            if (rerr) e = cbfs_err_from_errno(rerr);
        }
    } else {
        n = getxattr(mnt, CBFS_XATTR_STATS, buf, sizeof buf);
        if (n < 0)
            e = errno == ENODATA || errno == ENOTSUP ? CBFS_E_NOTSUP : cbfs_err_from_errno(errno);
    }
    if (e) {
        snprintf(msg, msg_cap, "%s", cbfs_err_str(e));
        return e;
    }
    return cbfs_stats_decode(buf, (size_t)n, s, msg, msg_cap);
}

/* Derived figures over an interval (prev NULL: since the mount started). */
struct tool_view {
    double wall;           /* seconds */
    double lw, pw, lr, pr; /* bytes in the interval */
    double ratio_now, ratio_avg;
    double stage_s[5], stage_pct[5];
    double hit_rate; /* percent; < 0: no lookups in the interval */
    const char *verdict;
};

static const char *const tool_stage_names[5] = {"compress", "store write", "wait for slots",
                                                "decompress", "store read"};

static const char *tool_stats_verdict(const struct tool_view *v, double workers)
{
    const double io = v->lw + v->lr;
    if (v->wall <= 0 || io <= 0) return "none: no I/O (cbfs is idle)";
    const double cpu = (v->stage_s[0] + v->stage_s[3]) / (v->wall * workers);
    if (cpu >= 0.75)
        return v->stage_s[0] >= v->stage_s[3] ? "compression (CPU)" : "decompression (CPU)";
    if (v->stage_s[1] / v->wall >= 0.5) return "store writes (disk)";
    if (v->stage_s[4] / v->wall >= 0.5) return "store reads (disk)";
    if (v->stage_s[2] / v->wall >= 0.5)
        return "in-flight bound (writers wait for slots; raise inflight=)";
    return v->lw >= v->lr ? "the writer (cbfs is idle)" : "the reader (cbfs is idle)";
}

/* Whether cur continues prev's run of the daemon: its uptime is later and no
 * counter went back. A remount between two samples can still show a later
 * uptime; a difference across it would wrap to absurd figures, so the view
 * falls back to the totals since the mount. */
static bool tool_stats_follows(const struct cbfs_stats *cur, const struct cbfs_stats *prev)
{
    if (cur->uptime_ns <= prev->uptime_ns) return false;
#define TOOL_STATS_BACK_(name) \
    if (cur->st.name < prev->st.name) return false;
    CBFS_ENGINE_COUNTERS(TOOL_STATS_BACK_)
#undef TOOL_STATS_BACK_
    return true;
}

static void tool_stats_view(const struct cbfs_stats *cur, const struct cbfs_stats *prev,
                            struct tool_view *v)
{
    static const struct cbfs_stats zero;
    const struct cbfs_stats *const p = prev ? prev : &zero;
    const struct cbfs_engine_stats *const a = &cur->st, *const b = &p->st;
    memset(v, 0, sizeof *v);
    v->wall = (double)(cur->uptime_ns - p->uptime_ns) / 1e9;
    v->lw = (double)(a->logical_written - b->logical_written);
    v->pw = (double)(a->physical_written - b->physical_written);
    v->lr = (double)(a->logical_read - b->logical_read);
    v->pr = (double)(a->physical_read - b->physical_read);
    v->ratio_now = v->pw > 0 ? v->lw / v->pw : 0;
    v->ratio_avg =
        a->physical_written ? (double)a->logical_written / (double)a->physical_written : 0;
    const uint64_t ns[5] = {
        a->ns_compress - b->ns_compress,     a->ns_store_write - b->ns_store_write,
        a->ns_wait_slots - b->ns_wait_slots, a->ns_decompress - b->ns_decompress,
        a->ns_store_read - b->ns_store_read,
    };
    const double workers = cur->workers ? (double)cur->workers : 1.0;
    for (int i = 0; i < 5; i++) {
        v->stage_s[i] = (double)ns[i] / 1e9;
        v->stage_pct[i] = v->wall > 0 ? 100.0 * v->stage_s[i] / (v->wall * workers) : 0;
    }
    const double hits = (double)(a->cache_hits - b->cache_hits);
    const double lookups = hits + (double)(a->cache_misses - b->cache_misses);
    v->hit_rate = lookups > 0 ? 100.0 * hits / lookups : -1;
    v->verdict = tool_stats_verdict(v, workers);
}

static double tool_stats_mbps(double bytes, double secs)
{
    return secs > 0 ? bytes / 1e6 / secs : 0.0;
}

static void tool_stats_text(const char *mnt, const struct cbfs_stats *s, const struct tool_view *v,
                            bool interval)
{
    char b1[32], b2[32];
    const double up = (double)s->uptime_ns / 1e9;
    printf("cbfs stats %s: codec %s level %" PRId64 ", block %s, %" PRIu64
           " workers, up %.0f s\n",
           mnt, s->codec[0] ? s->codec : "?", s->level,
           tool_fmt_bytes(s->block_size, b1, sizeof b1), s->workers, up);
    printf("%-18s %14s %14s\n", "", "total", interval ? "per second" : "avg per second");
    const struct {
        const char *name;
        uint64_t total;
        double delta;
    } rows[] = {{"written logical", s->st.logical_written, v->lw},
                {"written physical", s->st.physical_written, v->pw},
                {"read logical", s->st.logical_read, v->lr},
                {"read physical", s->st.physical_read, v->pr}};
    for (size_t i = 0; i < sizeof rows / sizeof rows[0]; i++)
        printf("%-18s %14s %11.1f MB/s\n", rows[i].name,
               tool_fmt_bytes(rows[i].total, b1, sizeof b1),
               tool_stats_mbps(rows[i].delta, v->wall));
    printf("ratio: current %.2f, average %.2f\n", v->ratio_now, v->ratio_avg);
    printf("%-18s %14s %14s\n", "stage", "seconds", "% wall*workers");
    for (int i = 0; i < 5; i++)
        printf("%-18s %14.2f %13.1f%%\n", tool_stage_names[i], v->stage_s[i], v->stage_pct[i]);
    /* the rate is the interval's, the counts are totals: an idle second has no rate */
    if (v->hit_rate < 0)
        printf("cache hit rate -");
    else
        printf("cache hit rate %.1f%%", v->hit_rate);
    printf(" (total %" PRIu64 " hits, %" PRIu64 " misses), read-ahead hits %" PRIu64
           ", in flight %s\n",
           s->st.cache_hits, s->st.cache_misses, s->st.readahead_hits,
           tool_fmt_bytes(s->st.inflight_bytes, b2, sizeof b2));
    printf("errors: %" PRIu64 " write, %" PRIu64 " read%s\n", s->st.write_errors,
           s->st.read_errors,
           s->st.write_errors || s->st.read_errors ? " (journalctl -t mount.cbfs names the files)"
                                                  : "");
    if (s->st.stream_gaps)
        printf("stream gaps: %" PRIu64 " (sequential writes stored past a block that came late or "
               "never: see the log)\n", s->st.stream_gaps);
    printf("bottleneck: %s\n", v->verdict);
}

static void tool_stats_json(const struct cbfs_stats *s, const struct tool_view *v)
{
    printf("{\"codec\":");
    tool_json_str(stdout, s->codec);
    printf(",\"level\":%" PRId64 ",\"block_size\":%" PRIu64 ",\"workers\":%" PRIu64
           ",\"uptime_ns\":%" PRIu64,
           s->level, s->block_size, s->workers, s->uptime_ns);
#define TOOL_STATS_JSON_(name) printf(",\"%s\":%" PRIu64, #name, s->st.name);
    CBFS_ENGINE_STATS(TOOL_STATS_JSON_)
#undef TOOL_STATS_JSON_
    printf(",\"interval_s\":%.3f,\"logical_write_mbps\":%.2f,\"physical_write_mbps\":%.2f,"
           "\"logical_read_mbps\":%.2f,\"physical_read_mbps\":%.2f,\"ratio_current\":%.4f,"
           "\"ratio_average\":%.4f,\"cache_hit_rate\":",
           v->wall, tool_stats_mbps(v->lw, v->wall), tool_stats_mbps(v->pw, v->wall),
           tool_stats_mbps(v->lr, v->wall), tool_stats_mbps(v->pr, v->wall),
           v->ratio_now, v->ratio_avg);
    if (v->hit_rate < 0)
        printf("null,\"stages\":{"); /* no lookups in the interval */
    else
        printf("%.2f,\"stages\":{", v->hit_rate);
    for (int i = 0; i < 5; i++)
        printf("%s\"%s\":{\"seconds\":%.3f,\"pct\":%.2f}", i ? "," : "", tool_stage_names[i],
               v->stage_s[i], v->stage_pct[i]);
    printf("},\"bottleneck\":");
    tool_json_str(stdout, v->verdict);
    printf("}\n");
}

/* The first sample of mnt; on failure prints why. @return true if read. */
static bool tool_stats_read_first(const char *mnt, const char *input, struct cbfs_stats *s)
{
    char msg[256];
    const cbfs_err e = tool_stats_read(mnt, input, s, msg, sizeof msg);
    if (e == CBFS_E_NOTSUP)
        tool_err("stats", "%s has no %s attribute: is it the root of a running cbfs mount?", mnt,
                 CBFS_XATTR_STATS);
    else if (e)
        tool_err("stats", "%s: %s", input ? input : mnt, msg);
    return e == CBFS_OK;
}

/* --prometheus: one sample of each mount, no interval (the counters are
 * totals; Prometheus computes the rates). All or nothing: a textfile that
 * silently lacks a mount would look like a healthy one. */
static int tool_stats_prom_main(char *const *mnts, size_t n, const char *input)
{
    struct cbfs_stats *const s = calloc(n, sizeof *s);
    if (!s) {
        tool_err("stats", "%s", cbfs_err_str(CBFS_E_NOMEM));
        return TOOL_EXIT_USAGE;
    }
    bool ok = true;
    for (size_t i = 0; i < n; i++) {
        bool twice = false; /* one series per mount: a second would repeat its labels */
        for (size_t j = 0; j < i; j++) twice = twice || strcmp(mnts[i], mnts[j]) == 0;
        if (twice) {
            tool_err("stats", "--prometheus: %s given twice", mnts[i]);
            ok = false;
            continue;
        }
        if (!tool_utf8_valid(mnts[i])) { /* a label value must be UTF-8 */
            tool_err("stats", "--prometheus: mount point '%s' is not UTF-8, so it cannot be "
                              "a Prometheus label value",
                     mnts[i]);
            ok = false;
            continue;
        }
        ok = tool_stats_read_first(mnts[i], input, &s[i]) && ok;
    }
    if (ok) tool_stats_prometheus(mnts, s, n);
    free(s);
    return ok ? TOOL_EXIT_OK : TOOL_EXIT_USAGE;
}

static volatile sig_atomic_t tool_stats_stop;

static void tool_stats_sigint(int sig)
{
    (void)sig;
    tool_stats_stop = 1;
}

int tool_stats_main(int argc, char **argv)
{
    static const struct option opts[] = {{"watch", optional_argument, NULL, 'w'},
                                         {"json", no_argument, NULL, 'j'},
                                         {"input", required_argument, NULL, 'i'},
                                         {"prometheus", no_argument, NULL, 'P'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    bool json = false, watch = false, prom = false;
    double secs = 1.0;
    const char *input = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'j') {
            json = true;
        } else if (ch == 'P') {
            prom = true;
        } else if (ch == 'i') {
            input = optarg;
        } else if (ch == 'w') {
            watch = true;
            /* "--watch 2" as well as "--watch=2", before or after the mount point:
             * a word of digits and dots after --watch is its interval (a mount
             * point named so is written ./5). */
            const char *arg = optarg;
            if (!arg && optind < argc && argv[optind][0] &&
                strspn(argv[optind], "0123456789.") == strlen(argv[optind]))
                arg = argv[optind++];
            if (arg && !cbfs_parse_seconds(arg, 0.1, 3600, &secs)) {
                tool_err("stats", "--watch wants seconds from 0.1 to 3600, not '%s'", arg);
                return TOOL_EXIT_USAGE;
            }
        } else {
            return tool_usage(tool_stats_help, ch == 'h');
        }
    }
    if (prom) {
        if (watch || json || optind == argc || (input && optind + 1 != argc))
            return tool_usage(tool_stats_help, false);
        return tool_stats_prom_main(argv + optind, (size_t)(argc - optind), input);
    }
    if (optind + 1 != argc) return tool_usage(tool_stats_help, false);
    const char *const mnt = argv[optind];
    struct cbfs_stats cur, prev;
    char msg[256];
    if (!tool_stats_read_first(mnt, input, &cur)) return TOOL_EXIT_USAGE;
    cbfs_err e;
    struct sigaction sa = {.sa_handler = tool_stats_sigint};
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
    bool have_prev = false;
    if (!watch && !input) {
        /* One shot on a live mount: judge the last second, not the average since
         * mount — the question is which stage is the bottleneck *now*. */
        prev = cur;
        const struct timespec one = {.tv_sec = 1};
        nanosleep(&one, NULL);
        e = tool_stats_read(mnt, input, &cur, msg, sizeof msg);
        if (e) {
            tool_err("stats", "%s: %s (daemon gone?)", mnt, msg);
            return TOOL_EXIT_USAGE;
        }
        have_prev = tool_stats_follows(&cur, &prev);
    }
    for (;;) {
        struct tool_view v;
        tool_stats_view(&cur, have_prev ? &prev : NULL, &v);
        if (watch && !json) fputs("\033[H\033[2J", stdout);
        if (json)
            tool_stats_json(&cur, &v);
        else
            tool_stats_text(mnt, &cur, &v, have_prev);
        if (!tool_out_flush()) return TOOL_EXIT_USAGE; /* no one reads on: main says so */
        if (!watch) break;
        const struct timespec ts = {.tv_sec = (time_t)secs,
                                    .tv_nsec = (long)((secs - (double)(time_t)secs) * 1e9)};
        if (tool_stats_stop || nanosleep(&ts, NULL) != 0 || tool_stats_stop) break;
        prev = cur;
        e = tool_stats_read(mnt, input, &cur, msg, sizeof msg);
        if (tool_stats_stop) break; /* Ctrl-C during the read: its EINTR is no failure */
        if (e) {
            tool_err("stats", "%s: %s (daemon gone?)", input ? input : mnt, msg);
            return TOOL_EXIT_USAGE;
        }
        have_prev = tool_stats_follows(&cur, &prev); /* else restarted, or a static file */
    }
    return TOOL_EXIT_OK;
}

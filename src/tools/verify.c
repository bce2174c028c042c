/* `cbfs verify`: reads every live frame of every file below a path (no
 * writes), on the worker pool, and reports each problem as
 * "FILE: offset N: what" plus a summary with throughput. A progress bar goes
 * to stderr when it is a terminal. */
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/pool.h"
#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_verify_help[] =
    "usage: cbfs verify [--json] [--workers N] PATH|STORE...\n"
    "Reads and checks every frame of every stored file (no writes): frame header\n"
    "checksums, decoded blocks against their XXH3, and the sidecar against the frames.\n"
    "Each problem is printed as 'FILE: offset N: what' (N: byte offset in FILE).\n"
    "  --json        one JSON document on stdout\n"
    "  --workers N   threads, 1 to " TOOL_STR(TOOL_WORKERS_MAX) " (default: online CPUs)\n"
    "exit status: 0 no problem, 1 problems found, 2 usage or I/O error\n";

struct tool_verify {
    bool json, bar;
    struct cbfs_pool *pool;
    struct tool_check chk;
    unsigned errors;
    uint64_t files, plain, cbfs_files;
    uint64_t total_bytes;   /* data file bytes to read (for the bar) */
    uint64_t done_bytes;    /* frame bytes read so far (atomic adds by workers) */
    uint64_t base_bytes;    /* done_bytes of files already finished, plus skipped bytes */
    uint64_t t0;
};

static void tool_verify_bar(void *arg)
{
    const struct tool_verify *const v = arg;
    if (!v->bar) return;
    const uint64_t done = __atomic_load_n(&v->done_bytes, __ATOMIC_RELAXED);
    const double pct = v->total_bytes ? 100.0 * (double)done / (double)v->total_bytes : 100.0;
    const double secs = (double)(cbfs_now_ns() - v->t0) / 1e9;
    const int fill = (int)(pct / 100.0 * 30.0);
    char d[32], t[32];
    fprintf(stderr, "\r[%-30.*s] %5.1f%% %s / %s  %.0f MB/s ", fill > 30 ? 30 : fill,
            "##############################", pct > 100 ? 100 : pct,
            tool_fmt_bytes(done, d, sizeof d), tool_fmt_bytes(v->total_bytes, t, sizeof t),
            secs > 0 ? (double)done / 1e6 / secs : 0.0);
}

static int tool_verify_size(void *arg, const struct tool_store *store, int dirfd, const char *name,
                            const char *display, enum tool_ent_kind kind)
{
    (void)display;
    (void)store;
    struct stat st;
    if (kind == TOOL_ENT_FILE && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0)
        *(uint64_t *)arg += (uint64_t)st.st_size;
    return 0;
}

static int tool_verify_one(void *arg, const struct tool_store *store, int dirfd, const char *name,
                           const char *display, enum tool_ent_kind kind)
{
    struct tool_verify *const v = arg;
    if (kind != TOOL_ENT_FILE) {
        tool_check_add(&v->chk, display, UINT64_MAX, "%s", tool_orphan_what(kind));
        return 0;
    }
    struct tool_file tf;
    if (!tool_file_open_walked(store, dirfd, name, TOOL_LOAD_FULL, display, "verify", &v->errors, &tf)) return 0;
    v->files++;
    v->plain += !tf.is_cbfs;
    v->cbfs_files += tf.is_cbfs;
    const cbfs_err ce = tool_check_file_live(v->pool, display, &tf, &v->chk, &v->done_bytes,
                                             tool_verify_bar, v);
    if (ce) {
        tool_err("verify", "%s: %s", display, cbfs_err_str(ce));
        v->errors++;
    }
    /* Plain files, garbage and sidecars count as done for the bar. */
    v->base_bytes += (uint64_t)tf.data_st.st_size;
    __atomic_store_n(&v->done_bytes, v->base_bytes, __ATOMIC_RELAXED);
    tool_file_close(&tf);
    return 0;
}

static void tool_verify_json(const struct tool_verify *v, double secs)
{
    /* problems_unlisted: found, but with no memory to keep them for this
     * list (printed on stderr at once); the exit status counts them too */
    printf("{\"files\":%" PRIu64 ",\"plain\":%" PRIu64 ",\"blocks\":%" PRIu64
           ",\"logical_bytes\":%" PRIu64 ",\"frame_bytes\":%" PRIu64
           ",\"seconds\":%.3f,\"mb_per_s\":%.1f,\"errors\":%u,\"problems_unlisted\":%zu"
           ",\"problems\":[",
           v->files, v->plain, v->chk.blocks, v->chk.logical_bytes, v->chk.frame_bytes, secs,
           secs > 0 ? (double)v->chk.logical_bytes / 1e6 / secs : 0.0, v->errors,
           v->chk.unlisted);
    for (size_t i = 0; i < v->chk.n; i++) {
        const struct tool_problem *const p = &v->chk.v[i];
        printf("%s\n  {\"file\":", i ? "," : "");
        tool_json_path(stdout, p->where);
        if (p->offset == UINT64_MAX)
            printf(",\"offset\":null,\"what\":");
        else
            printf(",\"offset\":%" PRIu64 ",\"what\":", p->offset);
        tool_json_str(stdout, p->what);
        putchar('}');
    }
    printf("]}\n");
}

int tool_verify_main(int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"workers", required_argument, NULL, 'w'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct tool_verify v;
    memset(&v, 0, sizeof v);
    v.chk.unindexed_ok = true;
    unsigned workers = tool_ncpus();
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'j') {
            v.json = true;
        } else if (ch == 'w') {
            long n;
            if (!cbfs_parse_long(optarg, 1, TOOL_WORKERS_MAX, &n)) {
                tool_err("verify", "--workers wants 1..%d, not '%s'", TOOL_WORKERS_MAX, optarg);
                return TOOL_EXIT_USAGE;
            }
            workers = (unsigned)n;
        } else {
            return tool_usage(tool_verify_help, ch == 'h');
        }
    }
    if (optind >= argc) return tool_usage(tool_verify_help, false);
    v.bar = isatty(STDERR_FILENO);
    const cbfs_err pe = cbfs_pool_create(workers, &v.pool);
    if (pe) {
        tool_err("verify", "cannot start %u workers: %s", workers, cbfs_err_str(pe));
        return TOOL_EXIT_USAGE;
    }
    v.t0 = cbfs_now_ns();
    const struct tool_walk_req req = {.sub = "verify",
                                      .fn = tool_verify_one,
                                      .arg = &v,
                                      .pre = v.bar ? tool_verify_size : NULL,
                                      .pre_arg = &v.total_bytes,
                                      .cbfs_files = &v.cbfs_files};
    v.errors += tool_walk_paths(argv + optind, argc - optind, &req);
    cbfs_pool_destroy(v.pool);
    const double secs = (double)(cbfs_now_ns() - v.t0) / 1e9;
    if (v.bar) fputs("\r\033[K", stderr);
    if (v.json) {
        tool_verify_json(&v, secs);
    } else {
        tool_check_print(&v.chk, stdout);
        char lb[32];
        printf("verified %" PRIu64 " file(s) (%" PRIu64 " plain), %" PRIu64
               " block(s), %s logical in %.2f s (%.0f MB/s): %zu problem(s)",
               v.files, v.plain, v.chk.blocks, tool_fmt_bytes(v.chk.logical_bytes, lb, sizeof lb),
               secs, secs > 0 ? (double)v.chk.logical_bytes / 1e6 / secs : 0.0,
               tool_check_count(&v.chk));
        tool_summary_end(v.errors);
    }
    const int rc = v.errors                   ? TOOL_EXIT_USAGE
                   : tool_check_count(&v.chk) ? TOOL_EXIT_PROBLEMS
                                              : TOOL_EXIT_OK;
    tool_check_free(&v.chk);
    return rc;
}

/* `cbfs`: the offline companion of mount.cbfs. Dispatches to one subcommand
 * (stat, verify, cat, bench, stats, mkfs, fsck); each parses its own options
 * and returns its exit code (0 ok, 1 problems found, 2 usage or I/O error;
 * fsck uses e2fsck's codes). */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>

#include "cbfs/log.h"
#include "cbfs/version.h"
#include "tools/tool.h"

struct tool_cmd {
    const char *name;
    int (*run)(int argc, char **argv);
    const char *summary;
};

static const struct tool_cmd tool_cmds[] = {
    {"stat", tool_stat_main, "sizes, ratio, codecs and garbage of stored files"},
    {"verify", tool_verify_main, "read and check every frame of a store or file"},
    {"cat", tool_cat_main, "decode a stored file to stdout without a mount"},
    {"bench", tool_bench_main, "compare codecs, levels and block sizes on a sample"},
    {"stats", tool_stats_main, "live counters of a running mount; names the bottleneck"},
    {"mkfs", tool_mkfs_main, "initialise a store (.cbfs/store.conf)"},
    {"fsck", tool_fsck_main, "check (and --repair) an unmounted store"},
};

static int tool_main_usage(FILE *f, int rc)
{
    fputs("usage: cbfs COMMAND [OPTIONS] ARGS...\n"
          "       cbfs COMMAND --help\n"
          "       cbfs help | -h | --help;  cbfs --version\n\ncommands:\n",
          f);
    for (size_t i = 0; i < sizeof tool_cmds / sizeof tool_cmds[0]; i++)
        fprintf(f, "  %-8s %s\n", tool_cmds[i].name, tool_cmds[i].summary);
    fputs("\nexit status: 0 ok, 1 problems found, 2 usage or I/O error "
          "(fsck: 0, 1, 4, 8 as e2fsck)\nSee cbfs(1).\n",
          f);
    return rc;
}

/* A subcommand's report that did not reach stdout (a full disk under
 * `cbfs stats --prometheus > file.tmp && mv`, a closed pipe) is an I/O error,
 * never exit 0: the caller would install an empty or cut report. */
static int tool_main_flushed(const char *sub, int rc)
{
    if (tool_out_flush()) return rc;
    /* said already by one that wrote past stdio (cat, with its file's name) */
    if (!ferror(stdout)) return rc;
    tool_err(sub, "writing to stdout: %s", strerror(tool_out_errno())); /* not the store's */
    return strcmp(sub, "fsck") == 0 ? FSCK_ERROR : TOOL_EXIT_USAGE;
}

int main(int argc, char **argv)
{
    cbfs_log_setup("cbfs", false, CBFS_LOG_WARN);
    /* Under a file size limit (ulimit -f), a write past it raises SIGXFSZ,
     * which killed fsck --repair in the middle of a sidecar with no word of
     * which file; ignored, the write fails with EFBIG and is reported. */
    signal(SIGXFSZ, SIG_IGN);
    if (argc < 2) return tool_main_usage(stderr, TOOL_EXIT_USAGE);
    if (tool_is_help(argv[1]) || strcmp(argv[1], "help") == 0)
        return tool_main_usage(stdout, TOOL_EXIT_OK);
    if (strcmp(argv[1], "--version") == 0) {
        puts("cbfs " CBFS_VERSION);
        return TOOL_EXIT_OK;
    }
    for (size_t i = 0; i < sizeof tool_cmds / sizeof tool_cmds[0]; i++)
        if (strcmp(argv[1], tool_cmds[i].name) == 0)
            return tool_main_flushed(tool_cmds[i].name, tool_cmds[i].run(argc - 1, argv + 1));
    fprintf(stderr, "cbfs: unknown command '%s'\n", argv[1]);
    return tool_main_usage(stderr, TOOL_EXIT_USAGE);
}

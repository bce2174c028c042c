/* `cbfs mkfs`: initialises a store explicitly (STORE/.cbfs/ and store.conf)
 * through the store API, with the defaults that mounts without -o codec=...
 * will use. Refuses a store that is mounted or already initialised. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/settings.h"
#include "cbfs/store.h"
#include "tools/tool.h"

static const char tool_mkfs_help[] =
    "usage: cbfs mkfs [-o codec=C[:L],level=L,block_size=SIZE] STORE\n"
    "Initialises STORE (created if missing): STORE/.cbfs/store.conf records the\n"
    "default codec, level and block size of mounts that do not give them.\n"
    "exit status: 0 ok, 1 already initialised, mounted, or a store of layout 1 that lost\n"
    "its store.conf, 2 usage or I/O error\n"
    "options:\n";

static int tool_mkfs_usage(bool asked)
{
    FILE *const out = asked ? stdout : stderr;
    fputs(tool_mkfs_help, out);
    cbfs_settings_help(out, CBFS_SCOPE_STORE);
    return asked ? TOOL_EXIT_OK : TOOL_EXIT_USAGE;
}

/* Applies "codec=zstd:3,level=5,block_size=64K", split as mount.cbfs -o is. */
static bool tool_mkfs_parse(const char *list, struct cbfs_settings *set)
{
    char msg[256] = "";
    const cbfs_err e = cbfs_settings_set_list(set, CBFS_SCOPE_STORE, list, msg, sizeof msg);
    if (e) tool_err("mkfs", "%s", msg[0] ? msg : cbfs_err_str(e));
    return e == CBFS_OK;
}

int tool_mkfs_main(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    struct cbfs_settings set;
    char msg[256];
    int ch;
    cbfs_settings_init(&set);
    optind = 1;
    while ((ch = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (ch != 'o') return tool_mkfs_usage(ch == 'h');
        if (!tool_mkfs_parse(optarg, &set)) return TOOL_EXIT_USAGE;
    }
    if (optind + 1 != argc) return tool_mkfs_usage(false);
    if (cbfs_settings_resolve(&set, NULL, msg, sizeof msg) != CBFS_OK) {
        tool_err("mkfs", "%s", msg);
        return TOOL_EXIT_USAGE;
    }
    const char *const path = argv[optind];
    const bool made = mkdir(path, 0755) == 0;
    if (!made && errno != EEXIST) {
        tool_err("mkfs", "cannot create %s: %s", path, cbfs_err_str(cbfs_err_from_errno(errno)));
        return TOOL_EXIT_USAGE;
    }
    struct tool_loc loc;
    char where[512];
    if (tool_loc_resolve(path, false, &loc, where, sizeof where) != CBFS_OK) {
        /* a path the tools refuse (inside .cbfs/ or an index directory, a
         * store whose upgrade was cut short) is no place for a store either */
        tool_err("mkfs", "%s", where);
        if (made) (void)rmdir(path); /* refused: nothing left behind */
        return TOOL_EXIT_USAGE;
    }
    const bool mounted = loc.via_mount, inside = loc.in_store && !loc.at_root;
    tool_loc_free(&loc);
    if (mounted || inside) {
        /* inside a store, its .cbfs/ would be files of the outer store's */
        tool_err("mkfs", mounted ? "%s is inside a mounted cbfs: run mkfs on a store directory"
                                 : "%s is inside a cbfs store: run mkfs on a directory of its own",
                 path);
        if (made) (void)rmdir(path); /* refused: nothing left behind */
        return TOOL_EXIT_USAGE;
    }
    struct cbfs_store *st = NULL;
    cbfs_err e = cbfs_store_open(path, &st);
    if (e) {
        tool_err("mkfs", "%s: %s", path, cbfs_err_str(e));
        return TOOL_EXIT_USAGE;
    }
    int rc = TOOL_EXIT_USAGE;
    pid_t holder = 0;
    e = cbfs_store_lock(st, false, &holder);
    if (e == CBFS_E_BUSY) {
        char who[128];
        (void)cbfs_store_holder_describe(holder, who, sizeof who);
        tool_err("mkfs", "%s is in use by %s", path, who);
        rc = TOOL_EXIT_PROBLEMS;
        goto out;
    }
    if (e) {
        tool_err("mkfs", "%s: cannot lock the store: %s", path, cbfs_err_str(e));
        goto out;
    }
    struct cbfs_store_conf conf;
    bool found = false;
    msg[0] = '\0';
    e = cbfs_store_read_conf(st, &conf, &found, msg, sizeof msg);
    if (e) { /* an I/O error or a store.conf it cannot take: exit 2, as the help says */
        tool_err("mkfs", "%s: %s/%s: %s%s%s", path, CBFS_STORE_DIR, CBFS_STORE_CONF,
                 cbfs_err_str(e), msg[0] ? ": " : "", msg);
        goto out;
    }
    if (found) {
        tool_err("mkfs", "%s is already a cbfs store (codec %s level %d, block size %u); "
                 "remove %s/%s to start over", path, conf.codec->name, conf.level,
                 conf.block_size, CBFS_STORE_DIR, CBFS_STORE_CONF);
        rc = TOOL_EXIT_PROBLEMS;
        goto out;
    }
    /* The mount's rule (cbfs_store_layout_of): a tree that holds sidecars of
     * layout 1 is a store of layout 1 that lost its store.conf, and a new
     * store.conf (layout 2) would make every compressed file EIO. */
    struct cbfs_store_layout *const lay = malloc(sizeof *lay);
    e = lay ? cbfs_store_layout_of(cbfs_store_fd(st), NULL, lay) : CBFS_E_NOMEM;
    if (e) {
        tool_err("mkfs", "%s: cannot tell whether it holds sidecars of layout 1: %s", path,
                 cbfs_err_str(e));
        free(lay);
        goto out;
    }
    if (lay->state == CBFS_LAYOUT_LOST_CONF) {
        tool_layout_refusal("mkfs", lay, path);
        free(lay);
        rc = TOOL_EXIT_PROBLEMS;
        goto out;
    }
    free(lay);
    cbfs_store_conf_init(&conf, set.codec, set.level, set.block_size);
    e = cbfs_store_write_conf(st, &conf);
    if (e) {
        tool_err("mkfs", "%s: cannot write %s/%s: %s", path, CBFS_STORE_DIR, CBFS_STORE_CONF,
                 cbfs_err_str(e));
        goto out;
    }
    printf("initialised cbfs store %s: uuid %s, codec %s level %d, block size %u\n", path,
           conf.uuid, conf.codec->name, conf.level, conf.block_size);
    rc = TOOL_EXIT_OK;
out:
    cbfs_store_close(st);
    return rc;
}

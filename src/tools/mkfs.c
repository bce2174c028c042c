/* `cbfs mkfs`: initialises a store explicitly (STORE/.cbfs/ and store.conf)
 * through the store API, with the defaults that mounts without -o codec=...
 * will use. Refuses a store that is mounted or already initialised. */
#include <errno.h>
#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cbfs/format.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_mkfs_help[] =
    "usage: cbfs mkfs [-o codec=C[:L],level=L,block_size=SIZE] STORE\n"
    "Initialises STORE (created if missing): STORE/.cbfs/store.conf records the\n"
    "default codec, level and block size of mounts that do not give them.\n"
    "Defaults: codec=lz4, the codec's default level, block_size=256K.\n"
    "exit status: 0 ok, 1 already initialised or mounted, 2 usage or I/O error\n";

struct tool_mkfs_opts {
    const struct cbfs_codec_ops *codec;
    int level;
    bool level_set;
    uint32_t block_size;
};

/* Parses "codec=zstd:3,level=5,block_size=64K" (modifies s). */
static bool tool_mkfs_parse(char *s, struct tool_mkfs_opts *o)
{
    char msg[256];
    char *save = NULL;
    for (char *kv = strtok_r(s, ",", &save); kv; kv = strtok_r(NULL, ",", &save)) {
        char *const val = strchr(kv, '=');
        if (!val) {
            tool_err("mkfs", "option '%s' wants a value (codec=, level=, block_size=)", kv);
            return false;
        }
        *val = '\0';
        const char *const v = val + 1;
        if (strcmp(kv, "codec") == 0) {
            if (cbfs_codec_parse(v, &o->codec, &o->level, msg, sizeof msg) != CBFS_OK) {
                tool_err("mkfs", "%s", msg);
                return false;
            }
            o->level_set = strchr(v, ':') != NULL || o->level_set;
        } else if (strcmp(kv, "level") == 0) {
            char *end;
            const long l = strtol(v, &end, 10);
            if (*end || end == v) {
                tool_err("mkfs", "level=%s is not a number", v);
                return false;
            }
            o->level = (int)l;
            o->level_set = true;
        } else if (strcmp(kv, "block_size") == 0) {
            uint64_t bs;
            if (cbfs_parse_size(v, &bs) != CBFS_OK || bs < CBFS_BLOCK_MIN || bs > CBFS_BLOCK_MAX ||
                (bs & (bs - 1))) {
                tool_err("mkfs", "block_size=%s: give a power of two from 4K to 16M", v);
                return false;
            }
            o->block_size = (uint32_t)bs;
        } else {
            tool_err("mkfs", "unknown option '%s' (known: codec, level, block_size)", kv);
            return false;
        }
    }
    return true;
}

int tool_mkfs_main(int argc, char **argv)
{
    static const struct option opts[] = {{"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    struct tool_mkfs_opts o = {.block_size = CBFS_BLOCK_DEFAULT};
    char msg[256];
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "ho:", opts, NULL)) != -1) {
        if (ch != 'o') return tool_usage(tool_mkfs_help, ch == 'h');
        if (!tool_mkfs_parse(optarg, &o)) return TOOL_EXIT_USAGE;
    }
    if (optind + 1 != argc) return tool_usage(tool_mkfs_help, false);
    if (!o.codec && cbfs_codec_by_name("lz4", &o.codec) != CBFS_OK &&
        cbfs_codec_by_name("none", &o.codec) != CBFS_OK) {
        tool_err("mkfs", "no default codec is built into this cbfs");
        return TOOL_EXIT_USAGE;
    }
    if (!o.level_set) o.level = o.codec->default_level;
    if (cbfs_codec_check_level(o.codec, o.level, msg, sizeof msg) != CBFS_OK) {
        tool_err("mkfs", "%s", msg);
        return TOOL_EXIT_USAGE;
    }
    const char *const path = argv[optind];
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        tool_err("mkfs", "cannot create %s: %s", path, cbfs_err_str(cbfs_err_from_errno(errno)));
        return TOOL_EXIT_USAGE;
    }
    struct tool_loc loc;
    if (tool_loc_resolve(path, &loc, msg, sizeof msg) == CBFS_OK) {
        const bool mounted = loc.via_mount;
        tool_loc_free(&loc);
        if (mounted) {
            tool_err("mkfs", "%s is inside a mounted cbfs: run mkfs on a store directory", path);
            return TOOL_EXIT_USAGE;
        }
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
        tool_err("mkfs", "%s is in use by a running cbfs daemon (pid %ld)", path, (long)holder);
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
    if (e || found) {
        if (e)
            tool_err("mkfs", "%s: %s%s%s", path, cbfs_err_str(e), msg[0] ? ": " : "", msg);
        else
            tool_err("mkfs", "%s is already a cbfs store (codec %s level %d, block size %u); "
                     "remove %s/%s to start over", path, conf.codec->name, conf.level,
                     conf.block_size, CBFS_STORE_DIR, CBFS_STORE_CONF);
        rc = TOOL_EXIT_PROBLEMS;
        goto out;
    }
    cbfs_store_conf_init(&conf, o.codec, o.level, o.block_size);
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

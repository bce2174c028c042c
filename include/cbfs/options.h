/* mount.cbfs command line: `mount.cbfs [-f] [-d] [-o OPTS]... [STORE] MOUNTPOINT`
 * and the mount(8) helper convention `mount.cbfs SOURCE DIR [-sfnv] -o OPTS`.
 * Splits -o lists into cbfs options (validated here), FUSE/kernel options
 * (passed to libfuse) and fstab noise (dropped). No FUSE calls, no I/O. */
#ifndef CBFS_FUSE_OPTIONS_H
#define CBFS_FUSE_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"

struct cbfs_store_conf;

#define CBFS_OPT_READAHEAD_DEFAULT 8u
#define CBFS_OPT_ATTR_TIMEOUT_DEFAULT 1.0
#define CBFS_OPT_WORKERS_MAX 256u
#define CBFS_OPT_READAHEAD_MAX 4096u

struct cbfs_options {
    /* Positional arguments as given (not resolved); store == mountpoint for
     * the one-directory (in-place) form. Point into argv. */
    const char *store;
    const char *mountpoint;
    bool foreground; /* -f (also implied by -d) */
    bool debug;      /* -d / -o debug: log level DEBUG and libfuse debug */
    bool help, version;

    /* Store defaults that the command line overrides for this mount only;
     * *_set says the user gave it (else store.conf decides). */
    bool codec_set;
    const struct cbfs_codec_ops *codec;
    bool level_set; /* from codec=NAME:N or level=N (level= wins) */
    int level;
    /* level=N not yet checked: its codec may only be known from store.conf.
     * cbfs_options_resolve checks it and moves it to level. */
    bool level_pending;
    int level_pending_value;
    bool block_size_set;
    uint32_t block_size;

    unsigned workers;        /* 0 = online CPUs */
    uint64_t cache_bytes;    /* 0 = engine default */
    unsigned readahead;      /* blocks; 0 = off */
    uint64_t inflight_bytes; /* 0 = engine default */
    bool writeback_cache;
    double attr_timeout; /* seconds */
    bool readonly;       /* -o ro (last of ro/rw wins) */

    /* Comma list for libfuse, already escaped: the pass-through FUSE options
     * given by the user. Owned (free with cbfs_options_free). */
    char *fuse_opts;
    bool fsname_set, subtype_set; /* else main adds fsname=<store>, subtype=cbfs */
};

/* Parses argv. On error writes one sentence naming the problem and the fix
 * into msg (no program name, no newline). With --help / --version only that
 * flag is set and the rest may be missing.
 * @return CBFS_OK, CBFS_E_INVAL (usage, bad value, unknown option),
 * CBFS_E_CODEC_UNKNOWN/MISSING/LEVEL, CBFS_E_NOMEM. */
cbfs_err cbfs_options_parse(int argc, char *const argv[], struct cbfs_options *o, char *msg,
                            size_t msg_cap);

/* Fills in what the command line did not give from the store's defaults (conf
 * may be NULL: built-in defaults lz4/level 1/256 KiB) and checks what depends
 * on both: level= against the effective codec, inflight >= one block.
 * @return CBFS_OK or CBFS_E_CODEC_LEVEL / CBFS_E_INVAL with msg. */
cbfs_err cbfs_options_resolve(struct cbfs_options *o, const struct cbfs_store_conf *conf,
                              char *msg, size_t msg_cap);

/* Builds the one -o list handed to libfuse: default_permissions, fsname=
 * <store_path> and subtype=cbfs unless the user gave them, ro when readonly,
 * then the user's FUSE options; escaped for libfuse's parser. *out is
 * malloc'ed. @return CBFS_E_NOMEM. */
cbfs_err cbfs_options_fuse_list(const struct cbfs_options *o, const char *store_path, char **out);

void cbfs_options_usage(FILE *out, const char *prog);

/* Frees what cbfs_options_parse allocated; the struct may be parsed again. */
void cbfs_options_free(struct cbfs_options *o);

#endif

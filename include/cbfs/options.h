/* mount.cbfs command line: `mount.cbfs [-f] [-d] [-o OPTS]... [STORE] MOUNTPOINT`
 * and the mount(8) helper convention `mount.cbfs SOURCE DIR [-sfnv] -o OPTS`,
 * also with -o remount. Splits -o lists into cbfs settings (cbfs/settings.h),
 * kernel mount flags (MS_*), FUSE options (passed to libfuse) and fstab noise
 * (dropped). No FUSE calls, no I/O: it is in the core library so that the
 * unit tests reach it; only mount.cbfs uses it. */
#ifndef CBFS_OPTIONS_H
#define CBFS_OPTIONS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cbfs/err.h"
#include "cbfs/settings.h"

struct cbfs_store_conf;

struct cbfs_options {
    /* Positional arguments as given (not resolved); store == mountpoint for
     * the one-directory (in-place) form. Point into argv. */
    const char *store;
    const char *mountpoint;
    bool foreground; /* -f (also implied by -d) */
    bool debug;      /* -d / -o debug: log level DEBUG and libfuse debug */
    bool help, version;

    /* codec, level, block size (the store's defaults, overridden for this
     * mount only) and the daemon's tuning. Complete after
     * cbfs_options_resolve. */
    struct cbfs_settings set;

    /* Kernel mount flags by their mount(8) names (ro, nosuid, noatime,
     * nodiratime, relatime, lazytime...; the table is in options.c): mflags
     * holds the MS_* bits the options set, mflags_given every bit any of them
     * named; the last of a pair (noatime/atime) wins. A mount hands libfuse
     * the words libfuse 3.14 knows; a remount hands the kernel all of them. */
    unsigned long mflags, mflags_given;
    /* -o remount: change the flags of a running cbfs mount
     * (cbfs_options_remount_flags); cbfs settings and FUSE options are still
     * checked but cannot change. Only then are the options the kernel shows
     * for a FUSE mount (user_id=, group_id=, rootmode=...), which mount(8)
     * copies from the mount table into a remount, accepted (and ignored). */
    bool remount;
    const char *kernel_shown; /* the first such option given (a static string) */

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
 * may be NULL: the built-in defaults) and checks what depends on both
 * (cbfs_settings_resolve). @return CBFS_OK or CBFS_E_CODEC_LEVEL /
 * CBFS_E_INVAL with msg. */
cbfs_err cbfs_options_resolve(struct cbfs_options *o, const struct cbfs_store_conf *conf,
                              char *msg, size_t msg_cap);

/* Builds the one -o list handed to libfuse: default_permissions, fsname=
 * <store_path> and subtype=cbfs unless the user gave them, ro when
 * cbfs_options_readonly, noatime when cbfs_options_noatime, then the user's
 * FUSE options and the mount flags libfuse takes; escaped for libfuse's
 * parser. *out is malloc'ed. @return CBFS_E_NOMEM. */
cbfs_err cbfs_options_fuse_list(const struct cbfs_options *o, const char *store_path, char **out);

/* The daemon's atime policy for store files (mirrors the kernel's for a
 * disk filesystem): noatime (unless strictatime) for every file, nodiratime
 * for directories. */
bool cbfs_options_noatime(const struct cbfs_options *o);
bool cbfs_options_nodiratime(const struct cbfs_options *o);
/* -o ro: the mount's MS_RDONLY (the last of ro/rw wins). */
bool cbfs_options_readonly(const struct cbfs_options *o);

/* The mount(2) flags for -o remount: MS_REMOUNT, then each flag the options
 * named as they set it, the others as the mount has them now (cur_st_flag:
 * statvfs(3) f_flag of the mount point; the kernel would otherwise clear
 * nosuid/nodev/noexec that a remount leaves out). */
unsigned long cbfs_options_remount_flags(const struct cbfs_options *o, unsigned long cur_st_flag);

/* The --help text; the cbfs options and their defaults come from the
 * settings table. */
void cbfs_options_usage(FILE *out, const char *prog);

/* Frees what cbfs_options_parse allocated; the struct may be parsed again. */
void cbfs_options_free(struct cbfs_options *o);

#endif

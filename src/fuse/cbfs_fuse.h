/* Bridge between the daemon's main (main.c) and the filesystem it serves:
 * the state (fs.c) and the ops table (ops_table.c). Only src/fuse includes
 * FUSE headers; its layout: docs/ENGINE.md, its lock order: fuse/inode.h. */
#ifndef CBFS_FUSE_H
#define CBFS_FUSE_H

#define FUSE_USE_VERSION 314
#include <fuse_lowlevel.h>
#include <stdbool.h>
#include <stdint.h>

#include "cbfs/codec.h"
#include "cbfs/engine.h"

struct cbfs_fs_options {
    int store_fd;                       /* O_PATH|O_DIRECTORY on the store root, opened
                                           before mounting (in-place mounts); borrowed */
    const char *store_path;             /* for log lines */
    unsigned layout;                    /* the store's CBFS_LAYOUT_* (store.conf) */
    const struct cbfs_codec_ops *codec; /* codec for new files (NONE: plain files) */
    int level;
    struct cbfs_engine *eng;            /* borrowed; outlives the fs */
    bool readonly;                      /* for the daemon's life, also after a
                                           remount,rw (see cbfs_fs_ops) */
    bool noatime;                       /* store files opened with O_NOATIME */
    bool nodiratime;                    /* store directories opened with O_NOATIME */
    double attr_timeout;                /* seconds; entry/attr cache in the kernel */
    bool writeback_cache;               /* FUSE_CAP_WRITEBACK_CACHE if offered */
    unsigned max_background;            /* conn->max_background; 0 = the kernel's */
};

struct cbfs_fs;

/* The low-level operations table (ops_table.c); its userdata is a struct
 * cbfs_fs. readonly: every op that would change the store answers EROFS, so
 * that a mount started read-only stays so after `mount -o remount,rw` (the
 * kernel then sends the changes on; the daemon holds the store read-only). */
const struct fuse_lowlevel_ops *cbfs_fs_ops(bool readonly);

/* Creates the filesystem state (inode table with the root inode). The options
 * are copied. @return NULL on allocation failure. */
struct cbfs_fs *cbfs_fs_new(const struct cbfs_fs_options *opt);

/* A page the kernel wrote back through handle fh (a WRITE's fh) at off was
 * answered with error err without the write op storing it (libfuse answered
 * it, cbfs_chan_on_lost_write): counted as the op counts its own failed
 * pages, for the file's writers to hear at their close or fsync. fs: the
 * filesystem (void *: the channel's hook). */
void cbfs_op_lost_write(void *fs, uint64_t fh, uint64_t off, int err);

/* Called after fuse_session_loop_mt returns: closes every file the kernel did
 * not release (flushing it, so nothing written is lost) and frees the table.
 * @return 0, or -1 if some flush failed (already logged). NULL-safe. */
int cbfs_fs_free(struct cbfs_fs *fs);

#endif

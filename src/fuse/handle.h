/* Open files and directories (fi->fh): struct cbfs_handle, the one
 * constructor both kinds use, the list of open handles that cbfs_fs_free
 * closes, and the close functions. Lock order: fuse/inode.h. */
#ifndef CBFS_FUSE_HANDLE_H
#define CBFS_FUSE_HANDLE_H

#include <dirent.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "fuse/inode.h"

/* An open file or directory (fi->fh). Listed in fs->handles while open.
 * inode, fd, file, flags and append are immutable after the handle is made:
 * the threads serving one handle read them without a lock. */
struct cbfs_handle {
    struct cbfs_handle *next, *prev; /* protected by fs->lock */
    struct cbfs_inode *inode;        /* holds one ref */
    int fd;                          /* PLAIN file: real fd; directory: dirfd(dp) */
    struct cbfs_file *file;          /* COMPRESSED: inode->file, on an open reference */
    int flags;                       /* open(2) flags as the caller gave them */
    bool append;                     /* O_APPEND that the FS must honour itself */
    uint64_t err_seen;               /* the failures this handle has heard of: COMPRESSED,
                                        the file's (cbfs_file_flush; the file's lock);
                                        PLAIN, inode->plain_errs' (inode->lock) */
    _Atomic uint64_t plain_synced;   /* PLAIN: inode->plain_changes as of the last good sync
                                        through fd (cbfs_inode_plain_sync); atomic: a
                                        flush and an fsync of one handle may run at once */
    /* Directories only; the kernel serialises readdir on one handle. */
    DIR *dp;                         /* set by cbfs_handle_new, never changed: NULL for a file */
    struct dirent *entry;            /* read from dp but not yet returned */
    off_t offset;                    /* d_off cookie of the next entry */
};

/* Wraps an open file or directory of inode in a handle: takes a ref on the
 * inode and lists the handle. fd: a PLAIN file's real fd (else -1); file: a
 * COMPRESSED file's engine state on an open reference (cbfs_inode_file_get),
 * else NULL; dp: a directory's stream (its fd becomes h->fd), else NULL.
 * Owns fd, dp and the open reference on file from here, also on failure.
 * @return 0 or ENOMEM. */
int cbfs_handle_new(struct cbfs_fs *fs, struct cbfs_inode *inode, int flags, int fd,
                    struct cbfs_file *file, DIR *dp, struct cbfs_handle **out);

/* Whether any file or directory handle of inode is open: a walk of the
 * list under fs->lock, for rare paths only. */
bool cbfs_handle_any_open(struct cbfs_fs *fs, const struct cbfs_inode *inode);

/* A directory handle is the one with a stream: cbfs_handle_new sets dp
 * exactly for directories and nothing clears it before the close. */
static inline bool cbfs_handle_is_dir(const struct cbfs_handle *h)
{
    return h->dp != NULL;
}

/* Closes a file handle (release, cbfs_fs_free). @return 0 or the errno of a
 * failed final close of the engine state (already logged). */
int cbfs_handle_close_file(struct cbfs_fs *fs, struct cbfs_handle *h);
/* Closes a directory handle (releasedir, cbfs_fs_free). */
void cbfs_handle_close_dir(struct cbfs_fs *fs, struct cbfs_handle *h);

/* After the session loop: closes every handle the kernel never released
 * (aborted connection), flushing compressed files so nothing written is
 * lost. @return 0, or -1 if some final close failed (already logged). */
int cbfs_handle_close_all(struct cbfs_fs *fs);

#endif

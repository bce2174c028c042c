/* A compressed file's sidecar from the FUSE layer (sidecar.c): it follows
 * its data file when a name goes, is cleared before a plain file takes a
 * name, and takes the data file's owner, mode and ACL. Where a sidecar lives
 * and its name are the inode table's (cbfs_inode_sidecar_path, cbfs_inode_sidecar_dir).
 *
 * Dependencies: ops_* -> sidecar -> inode -> fdcache. */
#ifndef CBFS_FUSE_SIDECAR_H
#define CBFS_FUSE_SIDECAR_H

#include <stdbool.h>
#include <sys/stat.h>

#include "fuse/inode.h"

/* Gives the sidecar of a COMPRESSED inode (fd: its pinned data fd) the
 * owner, mode and access ACL of the data file after they changed
 * (cbfs_store_sidecar_match); was: the data file's stat before
 * the change (a sidecar not owned as it was is not touched). Failures are
 * logged, not returned: the data file already changed and the sidecar is
 * invisible. Takes inode->lock. */
void cbfs_sidecar_sync(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd,
                       const struct stat *was);

/* Before a regular file without a sidecar takes name in dirfd
 * by create or link: if name is free, removes a sidecar left there (a lost
 * file's), which would make the new file look compressed; a failure is
 * logged. If name exists nothing is done: the op then fails with EEXIST.
 * (The kernel holds the directory's lock across the op, so nothing else of
 * this mount takes the name in between.) @return 0 or errno. */
int cbfs_sidecar_clear(struct cbfs_fs *fs, int dirfd, const char *name);

/* unlink of name in dir (dirfd: pinned), its sidecar first; takes
 * fs->names_lock. Also what takes back a name an op made before it failed
 * (mknod, link, create). @return 0 or errno. */
int cbfs_sidecar_unlink(struct cbfs_fs *fs, struct cbfs_inode *dir, int dirfd, const char *name);

/* Removes the sidecar of name in dirfd if there is one; *removed (if not
 * NULL) says whether there was. @return 0 or errno (not ENOENT). */
int cbfs_sidecar_remove(struct cbfs_fs *fs, int dirfd, const char *name, bool *removed);

/* Moves the sidecar sc of name in dirfd (if any) out of the way, to a name of
 * its own in the store's CBFS_STORE_DIR (path: CBFS_STORE_ASIDE_MAX bytes, set
 * when *aside says it did; a fresh name each time, so that one a crash left is
 * never overwritten): moved, not removed, so that an operation that then
 * fails can put it back (cbfs_sidecar_restore); one that succeeds removes it
 * (cbfs_sidecar_drop). fs->names_lock held. @return 0 (nothing there: *aside
 * false), EXDEV (dirfd is on another filesystem inside the store), or errno. */
int cbfs_sidecar_aside(struct cbfs_fs *fs, int dirfd, const char *sc, char *path, bool *aside);

/* After op on name failed (err): the sidecar cbfs_sidecar_aside moved to
 * path goes back to sc in dirfd. */
void cbfs_sidecar_restore(struct cbfs_fs *fs, const char *path, int dirfd, const char *sc,
                          const char *op, const char *name, int err);

/* After op on name succeeded: the sidecar cbfs_sidecar_aside moved to path,
 * the index of contents that are gone, is removed. */
void cbfs_sidecar_drop(struct cbfs_fs *fs, const char *path, const char *op, const char *name);

#endif

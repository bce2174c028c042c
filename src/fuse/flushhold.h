/* The kernel's own times SETATTR after a change of an object's names or
 * xattrs, and the store descriptors it needs, held for it from the change.
 *
 * With the writeback cache, after a SETXATTR, REMOVEXATTR, LINK, UNLINK or
 * RENAME that succeeded the kernel sends the object's mtime and ctime in a
 * SETATTR of its own, from the same task, right after the reply
 * (fuse_update_ctime -> fuse_flush_time_update), and takes its failure as a
 * writeback error of the file (mapping_set_error: AS_EIO): the next close of
 * any descriptor of it returns EIO, to a program that did nothing wrong. For
 * an object nobody has open, that SETATTR (cbfs_op_setattr) needs the
 * object's O_PATH fd, a compressed file's sidecar's and its logical size. A
 * daemon out of descriptors whose fd cache had let them go between the change
 * and the SETATTR (any request short of fds closes every idle one) answered
 * it EMFILE: t_stress_mixed's nofile:drop: variant, helper-71 (kernel trace:
 * SETXATTR, then the SETATTR answered -24, then filemap_set_wb_err and the
 * next close EIO).
 *
 * So such a change takes them first (cbfs_flush_hold_take): where it cannot
 * it fails with the error before it changes anything, and its caller hears
 * it, as the kernel's SETATTR could not tell anyone. They stay held
 * (cbfs_flush_hold_keep) until the object's next SETATTR of times only
 * (cbfs_flush_hold_drop), which then needs no new descriptor; a hold the
 * SETATTR never came for (the inode was clean by then: another task's flush
 * wrote both changes) goes once it is CBFS_FLUSH_HOLD_NS old, looked at when
 * another is kept or dropped. At most CBFS_FLUSH_HOLDS are held at once, the
 * oldest giving way (each is at most two O_PATH fds, pinned in the fd cache,
 * where they take the room of idle ones). Nothing is held without the
 * writeback cache, nor for what is not a regular file: the kernel sends no
 * such SETATTR then (S_NOCMTIME).
 *
 * Locking: the list is fs->lock's; a hold is taken and released with no lock
 * held (it takes inode->lock for a sidecar's pin, fs->lock for refs). */
#ifndef CBFS_FUSE_FLUSHHOLD_H
#define CBFS_FUSE_FLUSHHOLD_H

#include <stdbool.h>
#include <stdint.h>

#define CBFS_FLUSH_HOLDS 8
#define CBFS_FLUSH_HOLD_NS (1000ull * 1000 * 1000)

struct cbfs_fs;
struct cbfs_inode;

struct cbfs_flush_hold {
    struct cbfs_inode *inode; /* with a ref and its O_PATH fd pinned; NULL: nothing held */
    bool idx;                 /* its sidecar's O_PATH fd is pinned too */
    uint64_t at_ns;           /* cbfs_now_ns() when kept */
};

/* Before a change of inode after which the kernel sends its times SETATTR:
 * pins inode's O_PATH fd and, for a compressed file, its sidecar's, and reads
 * its logical size where it is not known, into *h (nothing without the
 * writeback cache). No lock held. @return 0, or the errno of a pin or of
 * that read (EMFILE, ESTALE...): nothing is held then, and the caller fails
 * before it changes anything. */
int cbfs_flush_hold_take(struct cbfs_fs *fs, struct cbfs_inode *inode, struct cbfs_flush_hold *h);
/* cbfs_flush_hold_take of the object at name in dirfd (a pinned directory),
 * where the kernel holds an inode of it; nothing where it holds none or the
 * name does not exist (the change itself then fails or needs no hold).
 * other_names: only if the object keeps another name (st_nlink > 1): after
 * the removal of its last name the object is gone, and the
 * SETATTR of such an object is answered without descriptors (ESTALE,
 * cbfs_setattr_gone) or through the fd kept for it (cbfs_inode_hold_name). */
int cbfs_flush_hold_take_name(struct cbfs_fs *fs, int dirfd, const char *name, bool other_names,
                              struct cbfs_flush_hold *h);
/* After the change, before its reply: changed, h's hold waits for the
 * kernel's SETATTR; else it is released now. No lock held. */
void cbfs_flush_hold_keep(struct cbfs_fs *fs, struct cbfs_flush_hold *h, bool changed);
/* A SETATTR of times only of inode was served: the oldest hold of inode, if
 * any, is released, and any older than CBFS_FLUSH_HOLD_NS. No lock held. */
void cbfs_flush_hold_drop(struct cbfs_fs *fs, struct cbfs_inode *inode);
/* Releases every hold (at unmount, before the inode table goes). */
void cbfs_flush_hold_drop_all(struct cbfs_fs *fs);

#endif

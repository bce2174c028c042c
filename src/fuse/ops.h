/* FUSE low-level operations of cbfs, one group per file (fs.c, ops_entry.c,
 * ops_rename.c, ops_dir.c, ops_file.c, ops_space.c, ops_xattr.c), gathered into the ops
 * table by ops_table.c. They stand on handles, replies, sidecars and the inode
 * table.
 * Contract for every op: exactly one fuse_reply_* on every path, no lock held
 * while replying (lock order: fuse/inode.h), syscall failures replied with
 * their errno right there and engine errors with cbfs_err_errno(). */
#ifndef CBFS_FUSE_OPS_H
#define CBFS_FUSE_OPS_H

#include "cbfs/stats.h"
#include "fuse/handle.h"
#include "fuse/inode.h"
#include "fuse/reply.h"
#include "fuse/sidecar.h"

static inline struct cbfs_fs *cbfs_req_fs(fuse_req_t req)
{
    return (struct cbfs_fs *)fuse_req_userdata(req);
}

static inline struct cbfs_handle *cbfs_fi_handle(const struct fuse_file_info *fi)
{
    return (struct cbfs_handle *)(uintptr_t)fi->fh;
}

/* Creates name in dir (dirfd: its pinned fd) as a new, empty regular file: PLAIN with codec none,
 * else data file + sidecar + engine state installed in the inode (one open
 * reference, for the caller to keep or drop). The codec is the directory's
 * user.cbfs.codec if set, else the mount's. *inode gets one ref (for an entry
 * reply); for PLAIN files *plain_fd is the data file opened with store_flags
 * (or -1 if plain_fd is NULL: nothing kept open). @return 0 or errno (EEXIST
 * when the name exists). */
int cbfs_create_regular(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir, int dirfd,
                        const char *name, mode_t mode, int store_flags,
                        struct cbfs_inode **inode, struct stat *st, int *plain_fd);

/* ops_entry.c: what unlink, link and rename (ops_rename.c) share */

/* Pins dir's fd for an op that creates or removes a name in it; on failure
 * replies the error. @return true if pinned. */
bool cbfs_pin_dir(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir, int *dirfd);

#define CBFS_XATTR_CODEC "user.cbfs.codec"

/* fs.c: the session's start and end (cbfs_fs_new/free are in cbfs_fuse.h) */
void cbfs_op_init(void *userdata, struct fuse_conn_info *conn);
void cbfs_op_destroy(void *userdata);

/* ops_entry.c */
void cbfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name);
void cbfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup);
void cbfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets);
void cbfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cbfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
                     struct fuse_file_info *fi);
void cbfs_op_readlink(fuse_req_t req, fuse_ino_t ino);
void cbfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev);
void cbfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode);
void cbfs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name);
void cbfs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname);
void cbfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name);
void cbfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name);
void cbfs_op_statfs(fuse_req_t req, fuse_ino_t ino);
void cbfs_op_access(fuse_req_t req, fuse_ino_t ino, int mask);

/* ops_rename.c */
void cbfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                    const char *newname, unsigned int flags);

/* ops_dir.c */
void cbfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cbfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info *fi);
void cbfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                         struct fuse_file_info *fi);
void cbfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cbfs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);

/* ops_file.c */
void cbfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                    struct fuse_file_info *fi);
void cbfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cbfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  struct fuse_file_info *fi);
void cbfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi);
void cbfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);
void cbfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi);
void cbfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi);

/* ops_space.c */
void cbfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                       struct fuse_file_info *fi);
void cbfs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                   struct fuse_file_info *fi);

/* ops_stats.c: the read-only xattr CBFS_XATTR_STATS on the mount root. */
/* Formats the daemon's counters as "key=value\n" lines into buf.
 * @return the length (may exceed cap: then buf holds a truncated prefix). */
size_t cbfs_ops_stats_format(const struct cbfs_fs *fs, char *buf, size_t cap);

/* ops_xattr.c */
void cbfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                      size_t size, int flags);
void cbfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size);
void cbfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size);
void cbfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name);
/* Reads the user.cbfs.codec of the directory dirfd (any fd on it, O_PATH
 * included) into buf (NUL-terminated). @return 0, ENODATA if unset (or the
 * store has no xattrs), EINVAL if longer than cap - 1 (no codec spec is: an
 * invalid value, ignored as a short one is, set in the store directly), or
 * errno. */
int cbfs_xattr_dir_codec(int dirfd, char *buf, size_t cap);

#endif

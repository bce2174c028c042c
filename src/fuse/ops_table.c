/* The FUSE low-level operations table, beside main as in squashfuse's
 * ll_main.c: only main.c uses it (cbfs_fs_ops), and the ops files never call
 * back into it. One entry per op; the ops are declared in ops.h. A daemon
 * started read-only serves a copy whose changing ops answer EROFS. */
#include <errno.h>

#include "fuse/cbfs_fuse.h"
#include "fuse/ops.h"

static const struct fuse_lowlevel_ops cbfs_ops = {
    .init = cbfs_op_init,
    .destroy = cbfs_op_destroy,
    .lookup = cbfs_op_lookup,
    .forget = cbfs_op_forget,
    .forget_multi = cbfs_op_forget_multi,
    .getattr = cbfs_op_getattr,
    .setattr = cbfs_op_setattr,
    .readlink = cbfs_op_readlink,
    .mknod = cbfs_op_mknod,
    .mkdir = cbfs_op_mkdir,
    .symlink = cbfs_op_symlink,
    .link = cbfs_op_link,
    .unlink = cbfs_op_unlink,
    .rmdir = cbfs_op_rmdir,
    .rename = cbfs_op_rename,
    .statfs = cbfs_op_statfs,
    .access = cbfs_op_access,
    .opendir = cbfs_op_opendir,
    .readdir = cbfs_op_readdir,
    .readdirplus = cbfs_op_readdirplus,
    .releasedir = cbfs_op_releasedir,
    .fsyncdir = cbfs_op_fsyncdir,
    .create = cbfs_op_create,
    .open = cbfs_op_open,
    .read = cbfs_op_read,
    .write = cbfs_op_write,
    .flush = cbfs_op_flush,
    .fsync = cbfs_op_fsync,
    .release = cbfs_op_release,
    .setxattr = cbfs_op_setxattr,
    .getxattr = cbfs_op_getxattr,
    .fallocate = cbfs_op_fallocate,
    .lseek = cbfs_op_lseek,
    .listxattr = cbfs_op_listxattr,
    .removexattr = cbfs_op_removexattr,
};

/* ---- the read-only table: every op that changes the store answers EROFS
 * (opening for write already does; see cbfs_op_open) ---- */

static void cbfs_ro_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                            struct fuse_file_info *fi)
{
    (void)ino, (void)attr, (void)to_set, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                          dev_t rdev)
{
    (void)parent, (void)name, (void)mode, (void)rdev;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    (void)parent, (void)name, (void)mode;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_symlink(fuse_req_t req, const char *link, fuse_ino_t parent,
                            const char *name)
{
    (void)link, (void)parent, (void)name;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent,
                         const char *newname)
{
    (void)ino, (void)newparent, (void)newname;
    fuse_reply_err(req, EROFS);
}

/* unlink and rmdir */
static void cbfs_ro_remove(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    (void)parent, (void)name;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_rename(fuse_req_t req, fuse_ino_t parent, const char *name,
                           fuse_ino_t newparent, const char *newname, unsigned int flags)
{
    (void)parent, (void)name, (void)newparent, (void)newname, (void)flags;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                           struct fuse_file_info *fi)
{
    (void)parent, (void)name, (void)mode, (void)fi;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name,
                             const char *value, size_t size, int flags)
{
    (void)ino, (void)name, (void)value, (void)size, (void)flags;
    fuse_reply_err(req, EROFS);
}

static void cbfs_ro_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    (void)ino, (void)name;
    fuse_reply_err(req, EROFS);
}

const struct fuse_lowlevel_ops *cbfs_fs_ops(bool readonly)
{
    static struct fuse_lowlevel_ops ro; /* main calls this once, before any thread */
    if (!readonly) return &cbfs_ops;
    ro = cbfs_ops;
    ro.setattr = cbfs_ro_setattr;
    ro.mknod = cbfs_ro_mknod;
    ro.mkdir = cbfs_ro_mkdir;
    ro.symlink = cbfs_ro_symlink;
    ro.link = cbfs_ro_link;
    ro.unlink = cbfs_ro_remove;
    ro.rmdir = cbfs_ro_remove;
    ro.rename = cbfs_ro_rename;
    ro.create = cbfs_ro_create;
    ro.setxattr = cbfs_ro_setxattr;
    ro.removexattr = cbfs_ro_removexattr;
    return &ro;
}


/* The FUSE low-level operations table, beside main as in squashfuse's
 * ll_main.c: only main.c uses it (cbfs_fs_ops), and the ops files never call
 * back into it. One entry per op; the ops are declared in ops.h. */
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

const struct fuse_lowlevel_ops *cbfs_fs_ops(void)
{
    return &cbfs_ops;
}


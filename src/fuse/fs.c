/* Filesystem state and the low-level ops table: cbfs_fs_new/free (the bridge
 * in cbfs_fuse.h), init (connection capabilities), destroy, and the entry
 * reply and new-object ownership helpers shared by the ops files. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "fuse/ops.h"

#define CBFS_MAX_WRITE (1u << 20) /* one default block per write request */

static void cbfs_op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct cbfs_fs *const fs = userdata;
    /* Big writes mean whole blocks reach the engine in one request. libfuse
     * caps this to its buffer size and asks the kernel for the pages. */
    conn->max_write = CBFS_MAX_WRITE;
    /* max_readahead already holds the largest value the kernel offers. */
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (fs->opt.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    else
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    fs->writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
    cbfs_log_debug("fuse init: max_write %u, max_readahead %u, writeback cache %s",
                   conn->max_write, conn->max_readahead,
                   (conn->want & FUSE_CAP_WRITEBACK_CACHE) ? "on" : "off");
}

/* Nothing heavy here: files still open are closed by cbfs_fs_free, after the
 * session loop, where errors can still reach the exit status. */
static void cbfs_op_destroy(void *userdata)
{
    (void)userdata;
}

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

struct cbfs_fs *cbfs_fs_new(const struct cbfs_fs_options *opt)
{
    struct cbfs_fs *fs = calloc(1, sizeof *fs);
    if (!fs) return NULL;
    fs->opt = *opt;
    fs->started_ns = cbfs_now_ns();
    fs->store_path = strdup(opt->store_path ? opt->store_path : "");
    if (!fs->store_path) goto fail_fs;
    fs->opt.store_path = fs->store_path;
    if (pthread_mutex_init(&fs->lock, NULL) != 0) goto fail_path;
    const int err = cbfs_itable_init(fs);
    if (err) {
        cbfs_log_err("cannot set up the inode table on '%s': %s", fs->store_path, strerror(err));
        goto fail_table;
    }
    return fs;

fail_table:
    cbfs_itable_free(fs);
    pthread_mutex_destroy(&fs->lock);
fail_path:
    free(fs->store_path);
fail_fs:
    free(fs);
    return NULL;
}

int cbfs_fs_free(struct cbfs_fs *fs)
{
    int ret = 0;
    if (!fs) return 0;
    if (cbfs_handle_close_all(fs) != 0) ret = -1;
    cbfs_itable_free(fs);
    pthread_mutex_destroy(&fs->lock);
    free(fs->store_path);
    free(fs);
    return ret;
}

/* ---- helpers shared by the ops files ---- */

void cbfs_fill_entry(const struct cbfs_fs *fs, struct cbfs_inode *inode, const struct stat *st,
                     struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = inode == fs->root ? FUSE_ROOT_ID : (fuse_ino_t)(uintptr_t)inode;
    e->attr = *st;
    e->attr_timeout = fs->opt.attr_timeout;
    e->entry_timeout = fs->opt.attr_timeout;
}

void cbfs_reply_entry(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *inode,
                      const struct stat *st)
{
    struct fuse_entry_param e;
    cbfs_fill_entry(fs, inode, st, &e);
    if (fuse_reply_entry(req, &e) != 0) cbfs_inode_unref(fs, inode, 1);
}

int cbfs_own_new(fuse_req_t req, int dirfd, int fd, mode_t mode)
{
    struct stat st, dst;
    char path[CBFS_PROCFD_MAX];

    /* An unprivileged daemon cannot give files away: everything is its own,
     * as in passthrough_ll. */
    if (geteuid() != 0) return 0;
    const struct fuse_ctx *const ctx = fuse_req_ctx(req);
    uid_t uid = ctx->uid;
    gid_t gid = ctx->gid;
    if (fstat(dirfd, &dst) == -1) return errno;
    if (dst.st_mode & S_ISGID) gid = (gid_t)-1;
    if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) return errno;
    if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) return errno;
    if (S_ISLNK(st.st_mode)) return 0;
    /* chown cleared set-id bits and the daemon's umask may have taken
     * permission bits away: set exactly what the kernel asked for (it has
     * applied the caller's umask), keeping an inherited setgid on dirs. */
    const mode_t want = (mode & 07777) | (S_ISDIR(st.st_mode) ? (st.st_mode & S_ISGID) : 0);
    if ((st.st_mode & 07777) == want) return 0;
    cbfs_procfd(path, fd);
    if (chmod(path, want) == -1) return errno;
    return 0;
}

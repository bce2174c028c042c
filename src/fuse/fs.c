/* The filesystem's life: cbfs_fs_new/free (the bridge in cbfs_fuse.h) and
 * the session's init (connection capabilities) and destroy, which the ops
 * table (ops_table.c) names. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/xattr.h>

#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/ops.h"

#define CBFS_MAX_WRITE (1u << 20) /* per write request: 4 blocks of CBFS_BLOCK_DEFAULT (256K) */

/* @return true if the store keeps POSIX ACLs: asking the root for its access
 * ACL gives ENOTSUP where it does not (a filesystem without ACLs, ext4 with
 * noacl). The kernel must not enforce ACLs there: every permission check
 * that asked would fail with that error. */
static bool cbfs_fs_store_acl(struct cbfs_fs *fs)
{
    char path[CBFS_PROCFD_MAX];
    int fd;
    if (cbfs_inode_pin(fs, fs->root, &fd) != 0) return false;
    cbfs_procfd(path, fd);
    const bool acl = getxattr(path, CBFS_STORE_XATTR_ACL, NULL, 0) >= 0 || errno != ENOTSUP;
    cbfs_inode_unpin(fs, fs->root);
    if (!acl) cbfs_log_info("the store keeps no POSIX ACLs: the mount has none either");
    return acl;
}

void cbfs_op_init(void *userdata, struct fuse_conn_info *conn)
{
    struct cbfs_fs *const fs = userdata;
    /* Big writes mean whole blocks reach the engine in one request. libfuse
     * caps this to its buffer size and asks the kernel for the pages. */
    conn->max_write = CBFS_MAX_WRITE;
    /* O_TRUNC as a SETATTR after the open, not inside OPEN: the kernel
     * checks for a running program (ETXTBSY) only once OPEN has returned,
     * so a truncate inside it emptied the file of a failed open */
    conn->want &= ~FUSE_CAP_ATOMIC_O_TRUNC;
    /* max_readahead already holds the largest value the kernel offers. */
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    if (fs->opt.writeback_cache && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    else
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
    fs->writeback = (conn->want & FUSE_CAP_WRITEBACK_CACHE) != 0;
    if (fs->opt.max_background) conn->max_background = fs->opt.max_background;
    /* POSIX ACLs: the kernel checks and caches them (FUSE_POSIX_ACL turns
     * default_permissions on), the store keeps them as its own xattrs and
     * applies a directory's default ACL to what the daemon creates there.
     * The kernel then leaves the umask to the daemon (DONT_MASK, else it
     * would mask the mode before the default ACL could): see cbfs_reply_new_mode. */
    const unsigned acl = FUSE_CAP_POSIX_ACL | FUSE_CAP_DONT_MASK;
    if ((conn->capable & acl) == acl && cbfs_fs_store_acl(fs)) conn->want |= acl;
    fs->posix_acl = (conn->want & acl) == acl;
    /* "." and ".." lookups of node ids (export.h), for NFS */
    if (fs->export && (conn->capable & FUSE_CAP_EXPORT_SUPPORT))
        conn->want |= FUSE_CAP_EXPORT_SUPPORT;
    cbfs_log_debug("fuse init: max_write %u, max_readahead %u, writeback cache %s, posix acl %s",
                   conn->max_write, conn->max_readahead,
                   (conn->want & FUSE_CAP_WRITEBACK_CACHE) ? "on" : "off",
                   fs->posix_acl ? "on" : "off");
}

/* Nothing heavy here: files still open are closed by cbfs_fs_free, after the
 * session loop, where errors can still reach the exit status. */
void cbfs_op_destroy(void *userdata)
{
    (void)userdata;
}

struct cbfs_fs *cbfs_fs_new(const struct cbfs_fs_options *opt)
{
    if (!cbfs_store_layout_known(opt->layout)) return NULL; /* contract: the store's layout */
    struct cbfs_fs *fs = calloc(1, sizeof *fs);
    if (!fs) return NULL;
    fs->opt = *opt;
    fs->started_ns = cbfs_now_ns();
    fs->store_path = strdup(opt->store_path ? opt->store_path : "");
    if (!fs->store_path) goto fail_fs;
    fs->opt.store_path = fs->store_path;
    cbfs_mutex_init(&fs->lock);
    cbfs_mutex_init(&fs->names_lock);
    const int err = cbfs_itable_init(fs);
    if (err) {
        cbfs_log_err("cannot set up the inode table on '%s': %s", fs->store_path, strerror(err));
        goto fail_table;
    }
    return fs;

fail_table:
    cbfs_itable_free(fs);
    cbfs_mutex_destroy(&fs->names_lock);
    cbfs_mutex_destroy(&fs->lock);
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
    cbfs_flush_hold_drop_all(fs);
    cbfs_itable_free(fs);
    cbfs_mutex_destroy(&fs->names_lock);
    cbfs_mutex_destroy(&fs->lock);
    free(fs->store_path);
    free(fs);
    return ret;
}

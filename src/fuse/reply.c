/* Reply helpers shared by the ops files: entry replies and the ownership of
 * new objects (see reply.h). */
#include <errno.h>
#include <string.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/channel.h"
#include "fuse/reply.h"

/* Keeps what the kernel is shown of inode (cbfs_setattr_gone answers with it
 * once the object is gone). */
static void cbfs_reply_shown(struct cbfs_inode *inode, const struct stat *st)
{
    atomic_store_explicit(&inode->shown_mode, st->st_mode, memory_order_relaxed);
    atomic_store_explicit(&inode->shown_uid, st->st_uid, memory_order_relaxed);
    atomic_store_explicit(&inode->shown_gid, st->st_gid, memory_order_relaxed);
}

void cbfs_reply_fill_entry(const struct cbfs_fs *fs, struct cbfs_inode *inode,
                           const struct stat *st, struct fuse_entry_param *e)
{
    cbfs_reply_shown(inode, st);
    memset(e, 0, sizeof *e);
    e->ino = cbfs_inode_nodeid(fs, inode);
    e->generation = inode->gen;
    e->attr = *st;
    e->attr.st_ino = cbfs_inode_st_ino(fs, inode);
    e->attr_timeout = fs->opt.attr_timeout;
    e->entry_timeout = fs->opt.attr_timeout;
}

void cbfs_reply_attr(fuse_req_t req, const struct cbfs_fs *fs, struct cbfs_inode *inode,
                     struct stat *st)
{
    cbfs_reply_shown(inode, st);
    st->st_ino = cbfs_inode_st_ino(fs, inode);
    fuse_reply_attr(req, st, fs->opt.attr_timeout);
}

void cbfs_reply_entry(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *inode,
                      const struct stat *st)
{
    struct fuse_entry_param e;
    cbfs_reply_fill_entry(fs, inode, st, &e);
    if (fuse_reply_entry(req, &e) != 0) cbfs_inode_unref(fs, inode, 1);
}

mode_t cbfs_reply_new_mode(fuse_req_t req, int dirfd, mode_t mode, bool *inherit)
{
    char path[CBFS_PROCFD_MAX];
    const struct cbfs_fs *const fs = fuse_req_userdata(req);
    *inherit = false;
    if (!fs->posix_acl) return mode; /* the kernel applied the umask */
    cbfs_procfd(path, dirfd);
    *inherit = getxattr(path, CBFS_STORE_XATTR_ACL_DEFAULT, NULL, 0) > 0;
    return *inherit ? mode : mode & ~fuse_req_ctx(req)->umask;
}

int cbfs_reply_own_new(fuse_req_t req, int dirfd, int fd, mode_t mode, bool inherit)
{
    struct stat st, dst;
    char path[CBFS_PROCFD_MAX];

    /* An unprivileged daemon cannot give files away: everything is its own,
     * as in passthrough_ll; its umask is put right all the same. */
    if (geteuid() == 0) {
        const struct fuse_ctx *const ctx = fuse_req_ctx(req);
        gid_t gid = ctx->gid;
        if (fstat(dirfd, &dst) == -1) return errno;
        if (dst.st_mode & S_ISGID) gid = (gid_t)-1;
        if (fchownat(fd, "", ctx->uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
            return errno;
    }
    if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) return errno;
    if (S_ISLNK(st.st_mode)) return 0;
    /* chown cleared set-id bits and the daemon's umask may have taken
     * permission bits away: set exactly what was asked for (umask applied,
     * cbfs_reply_new_mode), keeping an inherited setgid on dirs. A default ACL
     * made the bits (the daemon's umask played no part): a chmod to other
     * bits would rewrite the inherited ACL's mask, owner and other entries. */
    const mode_t perm = inherit ? (st.st_mode & 0777) : (mode & 0777);
    const mode_t want =
        perm | (mode & 07000) | (S_ISDIR(st.st_mode) ? (st.st_mode & S_ISGID) : 0);
    if ((st.st_mode & 07777) == want) return 0;
    cbfs_procfd(path, fd);
    if (chmod(path, want) == -1) return errno;
    return 0;
}

bool cbfs_reply_kill_failed(fuse_req_t req, fuse_ino_t ino, struct cbfs_inode *inode)
{
    bool changed;
    const int err =
        cbfs_inode_kill_suidgid((struct cbfs_fs *)fuse_req_userdata(req), inode, &changed);
    if (err) {
        fuse_reply_err(req, err);
        return true;
    }
    if (changed) cbfs_chan_inval_attr(ino); /* else the kernel's mode is still right */
    return false;
}

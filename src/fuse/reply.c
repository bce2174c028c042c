/* Reply helpers shared by the ops files: entry replies and the ownership of
 * new objects (see reply.h). */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "fuse/channel.h"
#include "fuse/reply.h"

void cbfs_fill_entry(const struct cbfs_fs *fs, struct cbfs_inode *inode, const struct stat *st,
                     struct fuse_entry_param *e)
{
    memset(e, 0, sizeof *e);
    e->ino = cbfs_inode_nodeid(fs, inode);
    e->generation = inode->gen;
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

bool cbfs_reply_kill_failed(fuse_req_t req, fuse_ino_t ino, struct cbfs_inode *inode)
{
    const int err = cbfs_inode_kill_suidgid((struct cbfs_fs *)fuse_req_userdata(req), inode);
    if (err) {
        fuse_reply_err(req, err);
        return true;
    }
    cbfs_chan_inval_attr(ino);
    return false;
}

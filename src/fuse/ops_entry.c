/* Namespace operations: lookup/forget, attributes, and creating, linking,
 * renaming and removing names. A compressed file's sidecar follows its data
 * file through link, rename and unlink; hidden names never reach the store. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statvfs.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/channel.h"
#include "fuse/export.h"
#include "fuse/ops.h"

void cbfs_op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *inode;
    struct stat st;
    int err;

    if (name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'))) {
        /* NFS export: parent may be an id the kernel does not hold */
        err = cbfs_export_lookup(fs, parent, name, &inode, &st);
    } else {
        struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
        err = cbfs_inode_name_check(fs, dir, name, NULL);
        if (err == 0) err = cbfs_inode_lookup(fs, dir, name, &inode, &st);
    }
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    cbfs_reply_entry(req, fs, inode, &st);
}

static void cbfs_forget_one(struct cbfs_fs *fs, fuse_ino_t ino, uint64_t nlookup)
{
    /* The root is not counted by the kernel's lookups; it lives until the end. */
    if (ino == FUSE_ROOT_ID) return;
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    if (!inode) {
        cbfs_log_err("internal: forget of node %llu, which the inode table does not hold",
                     (unsigned long long)ino);
        return;
    }
    cbfs_inode_unref(fs, inode, nlookup);
}

void cbfs_op_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    cbfs_forget_one(cbfs_req_fs(req), ino, nlookup);
    fuse_reply_none(req);
}

void cbfs_op_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    for (size_t i = 0; i < count; i++) cbfs_forget_one(fs, forgets[i].ino, forgets[i].nlookup);
    fuse_reply_none(req);
}

void cbfs_op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct stat st;
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    /* an open file's (fstat; the writeback cache's before a write): through
     * its handle, with no descriptor of the daemon's own */
    const struct cbfs_handle *const h = fi ? cbfs_fi_handle(fi) : NULL;
    const int err = cbfs_inode_stat_via(fs, inode, h ? h->fd : -1, &st);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    cbfs_reply_attr(req, fs, inode, &st);
}

/* Before setting times on an open compressed file, write what is pending:
 * otherwise the next flush (close) would bump the mtime that cp -p, tar or
 * rsync just set. (Not with the writeback cache: the kernel may still hold
 * dirty pages, and it sends SETATTR times at every writeback pass, so a
 * flush here would cost an fdatasync per pass; see cbfs_inode_record_times.)
 * @return an error this flush finds (the handles still hear of it). */
static int cbfs_compressed_settle(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    struct cbfs_file *file = NULL;
    cbfs_mutex_lock(&inode->lock);
    if (inode->file && !inode->ro_errno) {
        file = inode->file;
        inode->opens++;
    }
    cbfs_mutex_unlock(&inode->lock);
    if (!file) return 0;
    const cbfs_err e = cbfs_file_flush(file, NULL);
    const int cerr = cbfs_inode_file_put(fs, inode); /* last one if a release raced */
    return e ? cbfs_err_errno(e) : cerr;
}

/* The bits of a SETATTR that only set times: what the kernel sends on its
 * own (writeback cache) to write back an inode's mtime and ctime. */
#define CBFS_SETATTR_TIMES                                                                  \
    (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME | FUSE_SET_ATTR_ATIME_NOW |                  \
     FUSE_SET_ATTR_MTIME_NOW | FUSE_SET_ATTR_CTIME)

/* A SETATTR of times only, for an object that is gone from the store
 * (its handle no longer opens: unlinked, closed, and its fd left the fd
 * cache). With the writeback cache the kernel sends one after every unlink
 * or rmdir, for the ctime of the object it just removed
 * (fuse_entry_unlinked -> fuse_update_ctime), and takes an error as a
 * writeback error of the whole filesystem: the next syncfs(2) (`sync -f`)
 * failed with ESTALE though nothing was lost (helper-41, stress-ng dentry).
 * Nothing is left to set, so it is answered as done. Only with no handle
 * open (an open file's handle still opens on ext4; where a store's does not,
 * a SETATTR through the open file keeps its ESTALE). The kernel ignores the
 * reply's attributes in its own flush (fuse_flush_times), but a user can
 * still name such an object without a handle (a removed working directory,
 * an O_PATH fd: utimensat(".")), and then the kernel takes them for its
 * inode (fuse_do_setattr): so the reply carries the mode and owner the
 * object last showed, no links, the times asked for, not to be cached
 * (helper-44 saw mode 0 and owner root there before). */
static void cbfs_setattr_gone(fuse_req_t req, const struct cbfs_fs *fs,
                              struct cbfs_inode *inode, const struct stat *attr, int valid)
{
    struct stat st;
    struct timespec now;
    memset(&st, 0, sizeof st);
    clock_gettime(CLOCK_REALTIME, &now);
    st.st_ino = cbfs_inode_st_ino(fs, inode);
    const mode_t mode = atomic_load_explicit(&inode->shown_mode, memory_order_relaxed);
    st.st_mode = mode ? mode : inode->type;
    st.st_uid = atomic_load_explicit(&inode->shown_uid, memory_order_relaxed);
    st.st_gid = atomic_load_explicit(&inode->shown_gid, memory_order_relaxed);
    st.st_atim = valid & FUSE_SET_ATTR_ATIME_NOW ? now : attr->st_atim;
    st.st_mtim = valid & FUSE_SET_ATTR_MTIME_NOW ? now : attr->st_mtim;
    st.st_ctim = valid & FUSE_SET_ATTR_CTIME ? attr->st_ctim : now;
    fuse_reply_attr(req, &st, 0);
}

/* May a SETATTR that met ESTALE be answered as done (cbfs_setattr_gone)? A
 * SETATTR of times only, with no handle of the inode open. The caller adds
 * what it knows of the object being gone. */
static bool cbfs_setattr_gone_may(struct cbfs_fs *fs, const struct cbfs_inode *inode, int err,
                                  int valid)
{
    return err == ESTALE && !(valid & ~CBFS_SETATTR_TIMES) && !cbfs_handle_any_open(fs, inode);
}

/* What a SETATTR of a compressed file holds from before its first change to
 * after its reply's stat, so that a daemon out of descriptors refuses it
 * before it changes anything (helper-51: a truncate it had made answered
 * EMFILE, and the kernel's cached size then put a later append past the cut,
 * zeros where the program's bytes were; a chmod, chown or utimes was made,
 * then answered EMFILE). A size change goes through the engine, which *file
 * opens if need be, and the stat then reads it there. Any other change: a
 * file the engine has open is held all the same (its stat goes through the
 * engine's descriptors); another one's sidecar is pinned (*idx: the caller
 * unpins it under inode->lock), and where its logical size is not known yet
 * (it is after a lookup) its stat is taken now, which reads it. *file: put
 * by the caller. @return 0 or errno, nothing held. */
static int cbfs_setattr_hold(struct cbfs_fs *fs, struct cbfs_inode *inode, bool size,
                             struct cbfs_file **file, bool *idx)
{
    struct stat st;
    int ifd, err = 0;
    if (size) return cbfs_inode_file_get(fs, inode, file);
    cbfs_mutex_lock(&inode->lock);
    if (inode->file) {
        *file = inode->file;
        inode->opens++;
    } else if (inode->has_idx) {
        err = cbfs_inode_idx_pin(fs, inode, &ifd);
        *idx = err == 0;
    }
    const bool known = inode->file || inode->size_valid;
    cbfs_mutex_unlock(&inode->lock);
    if (!err && !known) err = cbfs_inode_stat(fs, inode, &st);
    return err;
}

/* The descriptor a SETATTR of inode through handle h (NULL: none) makes its
 * changes through: the open file's own (a PLAIN file's fd, the engine's data
 * file of a COMPRESSED one), or without a handle, where the size does not
 * change, the engine's data file of a COMPRESSED file the engine has open (a
 * reader's), on an open reference in *held that is also the SETATTR's hold
 * (cbfs_setattr_hold; put by the caller); -1 for the inode's pinned O_PATH
 * fd. With the writeback cache the kernel sends the mtime and ctime of a
 * file in a SETATTR after a rename, unlink, link, setxattr, fallocate or
 * copy_file_range (fuse_flush_time_update), through a handle where one is
 * open for writing, and takes a failure as a writeback error of the file
 * (mapping_set_error): the next close of any of its descriptors returns EIO.
 * A daemon out of descriptors could not reopen an O_PATH fd its cache had
 * let go of and answered EMFILE (t_stress_mixed under an fd limit of 64,
 * helper-65; t_emfile_flush_times). */
static int cbfs_setattr_fd(struct cbfs_inode *inode, const struct cbfs_handle *h, bool size,
                           struct cbfs_file **held)
{
    int fd = -1;
    *held = NULL;
    if (h && !cbfs_handle_is_dir(h)) return h->file ? cbfs_file_data_fd(h->file) : h->fd;
    if (inode->kind != CBFS_KIND_COMPRESSED || size) return -1;
    cbfs_mutex_lock(&inode->lock);
    if (inode->file) {
        *held = inode->file;
        inode->opens++;
        fd = cbfs_file_data_fd(inode->file);
    }
    cbfs_mutex_unlock(&inode->lock);
    return fd;
}

void cbfs_op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int valid,
                     struct fuse_file_info *fi)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    const struct cbfs_handle *const h = fi ? cbfs_fi_handle(fi) : NULL;
    const int hfd = (h && !cbfs_handle_is_dir(h)) ? h->fd : -1; /* real fd of a PLAIN file */
    char path[CBFS_PROCFD_MAX];
    struct stat st;
    const bool kill = cbfs_chan_take_kill() || (valid & (FUSE_SET_ATTR_KILL_SUID | FUSE_SET_ATTR_KILL_SGID));
    struct cbfs_file *held_file;
    int fd = cbfs_setattr_fd(inode, h, valid & FUSE_SET_ATTR_SIZE, &held_file);
    const bool pinned = fd < 0;
    int err = pinned ? cbfs_inode_pin(fs, inode, &fd) : 0;

    if (cbfs_setattr_gone_may(fs, inode, err, valid)) { /* its handle no longer opens */
        cbfs_flush_hold_drop(fs, inode);
        cbfs_setattr_gone(req, fs, inode, attr, valid);
        return;
    }
    if (err) {
        if (!(valid & ~CBFS_SETATTR_TIMES)) cbfs_flush_hold_drop(fs, inode);
        fuse_reply_err(req, err);
        return;
    }
    bool held_idx = false;
    if (!held_file && inode->kind == CBFS_KIND_COMPRESSED &&
        (err = cbfs_setattr_hold(fs, inode, valid & FUSE_SET_ATTR_SIZE, &held_file,
                                 &held_idx)) != 0)
        goto reply;
    cbfs_procfd(path, fd);
    /* the owner the sidecar has until it follows this change */
    struct stat was;
    if ((valid & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) &&
        fstatat(fd, "", &was, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
        err = errno;
        goto reply;
    }
    /* KILLPRIV_V2: an unprivileged write, truncate or fallocate clears set-id
     * bits, which the store would not do for the daemon (it has CAP_FSETID) */
    bool changed; /* the attr reply below carries the new mode */
    if (kill && !(valid & FUSE_SET_ATTR_MODE) &&
        (err = cbfs_inode_kill_suidgid(fs, inode, &changed)) != 0)
        goto reply;
    if (valid & FUSE_SET_ATTR_MODE) {
        if ((hfd >= 0 ? fchmod(hfd, attr->st_mode) : chmod(path, attr->st_mode)) == -1) {
            err = errno;
            goto reply;
        }
    }
    if (valid & (FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID)) {
        const uid_t uid = (valid & FUSE_SET_ATTR_UID) ? attr->st_uid : (uid_t)-1;
        const gid_t gid = (valid & FUSE_SET_ATTR_GID) ? attr->st_gid : (gid_t)-1;
        if (fchownat(fd, "", uid, gid, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
            err = errno;
            goto reply;
        }
    }
    if (valid & (FUSE_SET_ATTR_MODE | FUSE_SET_ATTR_UID | FUSE_SET_ATTR_GID))
        cbfs_sidecar_sync(fs, inode, fd, &was);
    if (valid & FUSE_SET_ATTR_SIZE) {
        if (inode->type != S_IFREG) {
            err = inode->type == S_IFDIR ? EISDIR : EINVAL;
        } else if (inode->kind == CBFS_KIND_COMPRESSED) { /* through held_file */
            const uint64_t size = (uint64_t)attr->st_size;
            err = inode->ro_errno ? inode->ro_errno
                                  : cbfs_err_errno(cbfs_file_truncate(held_file, size));
        } else if ((hfd >= 0 ? ftruncate(hfd, attr->st_size)
                             : truncate(path, attr->st_size)) == -1) {
            err = errno;
        } else {
            cbfs_inode_plain_changed(inode);
        }
        if (err) goto reply;
    }
    if (valid & (FUSE_SET_ATTR_ATIME | FUSE_SET_ATTR_MTIME)) {
        struct timespec tv[2] = {{.tv_nsec = UTIME_OMIT}, {.tv_nsec = UTIME_OMIT}};
        if (valid & FUSE_SET_ATTR_ATIME_NOW)
            tv[0].tv_nsec = UTIME_NOW;
        else if (valid & FUSE_SET_ATTR_ATIME)
            tv[0] = attr->st_atim;
        if (valid & FUSE_SET_ATTR_MTIME_NOW)
            tv[1].tv_nsec = UTIME_NOW;
        else if (valid & FUSE_SET_ATTR_MTIME)
            tv[1] = attr->st_mtim;
        if (inode->kind == CBFS_KIND_COMPRESSED && fs->writeback) {
            cbfs_inode_record_times(inode, tv);
        } else if (inode->kind == CBFS_KIND_COMPRESSED) {
            err = cbfs_compressed_settle(fs, inode);
            if (err) goto reply;
        }
        /* AT_EMPTY_PATH (Linux 5.8+) also reaches symlinks, for tar -h */
        if ((hfd >= 0 ? futimens(hfd, tv) : utimensat(fd, "", tv, AT_EMPTY_PATH)) == -1) {
            err = errno;
            goto reply;
        }
    }
    err = cbfs_inode_stat_via(fs, inode, hfd, &st);
reply:;
    /* The data file's fd can still be cached when its sidecar's is not: then
     * the pin above succeeds, and the sidecar's ESTALE (its pin in the hold,
     * or a settle) is all that is left: the object is gone as much as above (helper-45:
     * syncfs failed with ESTALE after unlinks in a subdirectory). Only where
     * the data file has no name left (an NFS store's ESTALE can come from a
     * live file, whose error must stay). */
    struct stat held;
    const bool gone = cbfs_setattr_gone_may(fs, inode, err, valid) &&
                      fstatat(fd, "", &held, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == 0 &&
                      held.st_nlink == 0;
    if (held_file) {
        /* the last close stores what the truncate did; held only for the
         * stat, a close's failure is the writes' (logged there), not this
         * change's, which stands */
        const int perr = cbfs_inode_file_put(fs, inode);
        if (!err && (valid & FUSE_SET_ATTR_SIZE)) err = perr;
    }
    if (held_idx) {
        cbfs_mutex_lock(&inode->lock);
        cbfs_inode_idx_unpin(fs, inode);
        cbfs_mutex_unlock(&inode->lock);
    }
    if (pinned) cbfs_inode_unpin(fs, inode);
    /* the kernel's own, after a change that held its fds for it (flushhold.h) */
    if (!(valid & ~CBFS_SETATTR_TIMES)) cbfs_flush_hold_drop(fs, inode);
    if (gone)
        cbfs_setattr_gone(req, fs, inode, attr, valid);
    else if (err)
        fuse_reply_err(req, err);
    else
        cbfs_reply_attr(req, fs, inode, &st);
}

void cbfs_op_readlink(fuse_req_t req, fuse_ino_t ino)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    char buf[PATH_MAX + 1];
    int fd, err = cbfs_inode_pin(fs, inode, &fd);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    const ssize_t n = readlinkat(fd, "", buf, sizeof buf);
    err = errno;
    cbfs_inode_unpin(fs, inode);
    if (n == -1) {
        fuse_reply_err(req, err);
        return;
    }
    if (n == (ssize_t)sizeof buf) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    buf[n] = '\0';
    fuse_reply_readlink(req, buf);
}

/* Common tail of mknod/mkdir/symlink (dirfd: dir's pinned fd): owner and
 * mode of the new name (mode, inherit: as cbfs_reply_own_new takes them), then its
 * inode (*out, referenced for the entry reply) and attributes. On failure the
 * new name is removed again. Replies nothing: the op replies once it has
 * unpinned dir (cbfs_new_reply). @return 0 or errno. */
static int cbfs_finish_new(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir, int dirfd,
                           const char *name, mode_t mode, bool inherit, struct cbfs_inode **out,
                           struct stat *st)
{
    struct cbfs_inode *inode;
    int fd, err = cbfs_inode_lookup(fs, dir, name, &inode, st);
    if (err) goto fail;
    err = cbfs_inode_pin(fs, inode, &fd);
    if (err == 0) {
        err = cbfs_reply_own_new(req, dirfd, fd, mode, inherit);
        cbfs_inode_unpin(fs, inode);
    }
    if (err == 0) err = cbfs_inode_stat(fs, inode, st);
    if (err) {
        cbfs_inode_unref(fs, inode, 1);
        goto fail;
    }
    *out = inode;
    return 0;
fail:
    (void)unlinkat(dirfd, name, S_ISDIR(mode) ? AT_REMOVEDIR : 0);
    return err;
}

/* The one reply of mknod/mkdir/symlink, sent after the op unpinned the
 * parent: once the kernel has its answer it may forget the parent, and
 * nothing of it may be touched then. err 0: inode (referenced) and st as
 * cbfs_finish_new gave them. */
static void cbfs_new_reply(fuse_req_t req, struct cbfs_fs *fs, int err, struct cbfs_inode *inode,
                           const struct stat *st)
{
    if (err)
        fuse_reply_err(req, err);
    else
        cbfs_reply_entry(req, fs, inode, st);
}

bool cbfs_pin_dir(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir, int *dirfd)
{
    const int err = cbfs_inode_pin(fs, dir, dirfd);
    if (err) fuse_reply_err(req, err);
    return err == 0;
}

/* Pins dir's fd for op (a name for log lines), which creates name in it,
 * after refusing a name cbfs reserves (EPERM); on failure replies the error.
 * @return true if pinned. */
static bool cbfs_pin_dir_new(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir,
                             const char *name, const char *op, int *dirfd)
{
    const int err = cbfs_inode_name_check(fs, dir, name, op);
    if (err) {
        fuse_reply_err(req, err);
        return false;
    }
    return cbfs_pin_dir(req, fs, dir, dirfd);
}

/* mknod of a regular file, as cbfs_finish_new (replies nothing). */
static int cbfs_mknod_regular(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir,
                              int dirfd, const char *name, mode_t mode, struct cbfs_inode **out,
                              struct stat *st)
{
    /* A regular file made by mknod(2) is a new file like any other: with a
     * codec it gets its sidecar, so later writes are compressed. */
    struct cbfs_inode *inode;
    int err = cbfs_create_regular(req, fs, dir, dirfd, name, mode, O_RDWR, &inode, st, NULL);
    if (err) return err;
    /* nobody has it open: close the state the creation installed */
    if (inode->kind == CBFS_KIND_COMPRESSED) err = cbfs_inode_file_put(fs, inode);
    if (err) {
        /* the close that failed may not have written the sidecar, and the
         * caller hears mknod failed: the name goes, as when create fails */
        (void)cbfs_sidecar_unlink(fs, dir, dirfd, name);
        cbfs_inode_unref(fs, inode, 1);
        return err;
    }
    *out = inode;
    return 0;
}

void cbfs_op_mknod(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode, dev_t rdev)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
    struct cbfs_inode *inode = NULL;
    struct stat st;
    int dirfd, err;
    bool inherit;
    if (!cbfs_pin_dir_new(req, fs, dir, name, "mknod", &dirfd)) return;
    if (S_ISREG(mode)) {
        err = cbfs_mknod_regular(req, fs, dir, dirfd, name, mode, &inode, &st);
    } else {
        mode = cbfs_reply_new_mode(req, dirfd, mode, &inherit);
        err = mknodat(dirfd, name, mode, rdev) == -1
                  ? errno
                  : cbfs_finish_new(req, fs, dir, dirfd, name, mode, inherit, &inode, &st);
    }
    cbfs_inode_unpin(fs, dir);
    cbfs_new_reply(req, fs, err, inode, &st);
}

/* The codec override applies to the whole subtree: mkdir passes it down.
 * @return 0 or errno (then the new directory is removed again). */
static int cbfs_mkdir_inherit(int dirfd, const char *name)
{
    char codec[64];
    int err = cbfs_xattr_dir_codec(dirfd, codec, sizeof codec);
    if (err == ENODATA || err == EINVAL) return 0; /* EINVAL: ignored here as in create */
    if (err == 0) {
        const int dfd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (dfd == -1 || fsetxattr(dfd, CBFS_XATTR_CODEC, codec, strlen(codec), 0) == -1)
            err = errno;
        if (dfd >= 0) close(dfd);
    }
    if (err) (void)unlinkat(dirfd, name, AT_REMOVEDIR);
    return err;
}

void cbfs_op_mkdir(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
    struct cbfs_inode *inode = NULL;
    struct stat st;
    int dirfd, err;
    bool inherit;
    if (!cbfs_pin_dir_new(req, fs, dir, name, "mkdir", &dirfd)) return;
    mode = cbfs_reply_new_mode(req, dirfd, mode & 07777, &inherit);
    if (mkdirat(dirfd, name, mode) == -1)
        err = errno;
    else if ((err = cbfs_mkdir_inherit(dirfd, name)) == 0)
        err = cbfs_finish_new(req, fs, dir, dirfd, name, S_IFDIR | mode, inherit, &inode, &st);
    cbfs_inode_unpin(fs, dir);
    cbfs_new_reply(req, fs, err, inode, &st);
}

void cbfs_op_symlink(fuse_req_t req, const char *link, fuse_ino_t parent, const char *name)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
    struct cbfs_inode *inode = NULL;
    struct stat st;
    int dirfd, err;
    if (!cbfs_pin_dir_new(req, fs, dir, name, "symlink", &dirfd)) return;
    if (symlinkat(link, dirfd, name) == -1)
        err = errno;
    else
        err = cbfs_finish_new(req, fs, dir, dirfd, name, S_IFLNK | 0777, false, &inode, &st);
    cbfs_inode_unpin(fs, dir);
    cbfs_new_reply(req, fs, err, inode, &st);
}

/* Before a compressed file gets another name: its sidecar must be known, so
 * that the new name links that one (all names of a file share one index).
 * Where it is not (lost, or the file was reached by file handle alone), the
 * engine state is opened once, which finds or rebuilds it under the file's
 * name. A new name without it would get an index of its own at its first
 * open: rebuilt from frames that may not prove the block size, and out of
 * step with the other name's after the next write. A file reached by handle
 * alone stays without one (its name is not known: "Nameless files",
 * inode.h), so it is refused as its writes are, until a lookup names it.
 * @return 0 or errno. */
static int cbfs_link_find_sidecar(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    struct cbfs_file *file;
    cbfs_mutex_lock(&inode->lock);
    bool known = inode->has_idx;
    cbfs_mutex_unlock(&inode->lock);
    if (known) return 0;
    int err = cbfs_inode_file_get(fs, inode, &file);
    if (err) return err;
    cbfs_mutex_lock(&inode->lock);
    known = inode->has_idx;
    const int ro_errno = inode->ro_errno;
    cbfs_mutex_unlock(&inode->lock);
    err = cbfs_inode_file_put(fs, inode);
    if (err) return err;
    if (known) return 0;
    if (ro_errno != EROFS) return ro_errno; /* no room to make it, or it is not ours */
    cbfs_log_info("link of inode %llu refused: its name and sidecar are not known (it was "
                  "reached by file handle): read-only until a lookup names it",
                  (unsigned long long)inode->ino);
    return EROFS;
}

/* Links inode's data file (fd: pinned) and, for a compressed file, its
 * sidecar as newname in dirfd. Hard links share one sidecar, so that the file
 * works under any name; the sidecar's link goes first. The other way round, a
 * crash between the two links left the data file under newname without a
 * sidecar: rebuilt from its frames, EIO where they do not prove its block
 * size, and cbfs fsck --repair could not give it one (t_crash_unlink_link).
 * This way a crash leaves a link of the sidecar at newname's sidecar name and
 * no data file there: an orphan sidecar, which fsck --repair removes (no file
 * without a sidecar carries its file id) and a later file of that name
 * replaces. @return 0 or errno (nothing left behind). */
static int cbfs_link_at(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd, int dirfd,
                        const char *newname)
{
    char sc[CBFS_STORE_SIDECAR_PATH_MAX];
    struct stat st;
    int err, ifd;
    const bool compressed = inode->kind == CBFS_KIND_COMPRESSED;
    if (compressed && ((err = cbfs_inode_sidecar_path(fs, newname, sc, sizeof sc)) != 0 ||
                       (err = cbfs_inode_sidecar_dir(fs, dirfd)) != 0 ||
                       (err = cbfs_link_find_sidecar(fs, inode)) != 0))
        return err;
    if (!compressed && inode->type == S_IFREG && (err = cbfs_sidecar_clear(fs, dirfd, newname)) != 0)
        return err;
    if (!compressed) return cbfs_fs_link_fd(fs, fd, dirfd, newname) == -1 ? errno : 0;
    /* A sidecar at newname's sidecar name is a stale leftover of a lost file
     * only while newname is free (the kernel holds the directory: it stays
     * so); that of a file there is not touched, and the link fails. */
    if (fstatat(dirfd, newname, &st, AT_SYMLINK_NOFOLLOW) == 0) return EEXIST;
    if (errno != ENOENT) return errno;
    cbfs_mutex_lock(&inode->lock);
    err = cbfs_inode_idx_pin(fs, inode, &ifd);
    if (err == 0) {
        (void)cbfs_fs_unlinkat(fs, dirfd, sc); /* stale leftover of a lost file */
        if (cbfs_fs_link_fd(fs, ifd, dirfd, sc) == -1) err = errno;
        cbfs_inode_idx_unpin(fs, inode);
    }
    cbfs_mutex_unlock(&inode->lock);
    if (err) return err;
    if (cbfs_fs_link_fd(fs, fd, dirfd, newname) == -1) {
        err = errno;
        (void)cbfs_fs_unlinkat(fs, dirfd, sc);
        return err;
    }
    return 0;
}

void cbfs_op_link(fuse_req_t req, fuse_ino_t ino, fuse_ino_t newparent, const char *newname)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, newparent);
    struct stat st;
    int fd, dirfd, err;

    if (!cbfs_pin_dir_new(req, fs, dir, newname, "link", &dirfd)) return;
    struct cbfs_flush_hold flush; /* for the kernel's times SETATTR after it */
    err = cbfs_flush_hold_take(fs, inode, &flush);
    if (err == 0) err = cbfs_inode_pin(fs, inode, &fd);
    if (err == 0) {
        err = cbfs_link_at(fs, inode, fd, dirfd, newname);
        cbfs_inode_unpin(fs, inode);
        /* the caller hears link failed (no fd to spare, an index that cannot
         * be read): the new name goes again, as a failed mknod's does */
        if (err == 0 && (err = cbfs_inode_stat(fs, inode, &st)) != 0)
            (void)cbfs_sidecar_unlink(fs, dir, dirfd, newname);
    }
    cbfs_flush_hold_keep(fs, &flush, err == 0);
    cbfs_inode_unpin(fs, dir);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    cbfs_inode_ref(fs, inode, 1);
    cbfs_reply_entry(req, fs, inode, &st);
}

/* unlink, or rmdir if is_dir, of name in parent; replies. Hidden names do
 * not exist. */
static void cbfs_remove_name(fuse_req_t req, fuse_ino_t parent, const char *name, bool is_dir)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
    int dirfd, err = cbfs_inode_name_check(fs, dir, name, NULL);

    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    if (!cbfs_pin_dir(req, fs, dir, &dirfd)) return;
    /* what the kernel may still hold (an O_PATH fd, a working directory)
     * keeps its fd if this was its last name */
    struct cbfs_inode_hold hold;
    /* one that keeps another name gets the kernel's times SETATTR after it */
    struct cbfs_flush_hold flush;
    err = cbfs_flush_hold_take_name(fs, dirfd, name, true, &flush);
    if (err == 0) {
        cbfs_inode_hold_name(fs, dirfd, name, &hold);
        err = is_dir ? cbfs_err_errno(cbfs_store_rmdir(fs->opt.layout, dirfd, name))
                     : cbfs_sidecar_unlink(fs, dir, dirfd, name);
        cbfs_inode_hold_end(fs, &hold);
        cbfs_flush_hold_keep(fs, &flush, err == 0);
    }
    cbfs_inode_unpin(fs, dir);
    fuse_reply_err(req, err);
}

void cbfs_op_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    cbfs_remove_name(req, parent, name, false);
}

void cbfs_op_rmdir(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    cbfs_remove_name(req, parent, name, true);
}

void cbfs_op_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct statvfs sv;
    const int err = cbfs_inode_statvfs(fs, fs->root, &sv);
    (void)ino;
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    /* layout 1: every name needs room for its sidecar's suffix */
    const size_t max = cbfs_store_name_max(fs->opt.layout);
    if (sv.f_namemax > max) sv.f_namemax = max;
    fuse_reply_statfs(req, &sv);
}

/* Permission checks are the kernel's (default_permissions); this only
 * answers for the read-only mount, for callers that ask. */
void cbfs_op_access(fuse_req_t req, fuse_ino_t ino, int mask)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    (void)ino;
    fuse_reply_err(req, (fs->opt.readonly && (mask & W_OK)) ? EROFS : 0);
}

/* Extended attributes, passed through to the store object via /proc/self/fd
 * (O_PATH fds have no f*xattr). user.cbfs.codec on a directory chooses the
 * codec of new files below it, so its value is checked when it is set. POSIX
 * ACLs are the store's system.posix_acl_* xattrs: the kernel enforces them
 * (FUSE_POSIX_ACL, fs.c), the store keeps them and the mode in step, and a
 * compressed file's sidecar follows its data file's ACL. Symlinks take
 * trusted.* and security.* xattrs as on ext4: the /proc path of an O_PATH fd
 * on a symlink reaches the link itself, never its target (checked). */
#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cbfs/codec.h"
#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/channel.h"
#include "fuse/ops.h"

int cbfs_xattr_dir_codec(int dirfd, char *buf, size_t cap)
{
    char path[CBFS_PROCFD_MAX];
    cbfs_procfd(path, dirfd);
    const ssize_t n = getxattr(path, CBFS_XATTR_CODEC, buf, cap - 1);
    if (n == -1) return errno == ENOTSUP ? ENODATA : errno == ERANGE ? EINVAL : errno;
    buf[n] = '\0';
    return 0;
}

/* The kernel resolves /proc/self/fd/N of an O_PATH fd on a symlink to the
 * link itself (a "magic link" is not followed again), so xattrs reach the
 * link, as lgetxattr would. (The *xattrat syscalls of Linux 6.13 refuse O_PATH
 * fds with AT_EMPTY_PATH: EBADF.) That is the running kernel's behaviour, the
 * same for every link and for the process's life, and one stat that lands on
 * the link proves it (a kernel that follows lands on the target, another
 * inode), so it is checked until it first holds and then taken as known. A
 * failed check is never cached (a stat may fail for other reasons): each
 * call checks again, and should a kernel follow, the symlink shows no xattrs
 * and takes none, as in passthrough_ll. @return true if path reaches inode
 * itself. */
static bool cbfs_xattr_link_ok(const struct cbfs_inode *inode, const char *path)
{
    static _Atomic bool reaches, told;
    struct stat st;
    if (reaches) return true;
    if (stat(path, &st) == 0 && st.st_dev == inode->dev && st.st_ino == inode->ino) {
        reaches = true;
        return true;
    }
    if (!atomic_exchange(&told, true))
        cbfs_log_info("/proc/self/fd does not reach symlinks here: their xattrs are refused");
    return false;
}

/* Pins inode's fd and writes its /proc path to path; on failure replies the
 * error (link_err where a symlink cannot be reached). @return true if pinned
 * (unpin after the call); *fd is the pinned fd. */
static bool cbfs_xattr_path(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *inode,
                            int link_err, char path[CBFS_PROCFD_MAX], int *fd)
{
    const int err = cbfs_inode_pin(fs, inode, fd);
    if (err) {
        fuse_reply_err(req, err);
        return false;
    }
    cbfs_procfd(path, *fd);
    if (inode->type == S_IFLNK && !cbfs_xattr_link_ok(inode, path)) {
        cbfs_inode_unpin(fs, inode);
        fuse_reply_err(req, link_err);
        return false;
    }
    return true;
}

/* listxattr(2) of path as the caller of req sees it: ext4 lists trusted.*
 * names only to CAP_SYS_ADMIN, and the daemon (root) would list them to
 * everyone, so for a caller other than root they are left out (the kernel
 * refuses their values to such a caller anyway). Sets errno on -1. */
static ssize_t cbfs_xattr_list(fuse_req_t req, const char *path, char *buf, size_t size)
{
    if (geteuid() != 0 || fuse_req_ctx(req)->uid == 0) return listxattr(path, buf, size);
    char *all = NULL;
    ssize_t n;
    for (;;) { /* the list may grow between the two calls: ERANGE, again */
        n = listxattr(path, NULL, 0);
        if (n <= 0) break;
        free(all);
        if (!(all = malloc((size_t)n))) {
            errno = ENOMEM;
            return -1;
        }
        n = listxattr(path, all, (size_t)n);
        if (n >= 0 || errno != ERANGE) break;
    }
    if (n <= 0) {
        free(all); /* a retry's buffer; glibc's free keeps errno (2.33 on) */
        return n;
    }
    size_t out = 0;
    for (ssize_t i = 0; i < n;) {
        const size_t len = strnlen(all + i, (size_t)(n - i)) + 1;
        if (strncmp(all + i, "trusted.", 8) != 0) {
            if (size && out + len > size) {
                free(all);
                errno = ERANGE;
                return -1;
            }
            if (size) memcpy(buf + out, all + i, len);
            out += len;
        }
        i += (ssize_t)len;
    }
    free(all);
    return (ssize_t)out;
}

/* Replies to getxattr (name set) or listxattr (name NULL) on inode the FUSE
 * way: size 0 asks for the length, otherwise the value in a size-byte buffer
 * (ERANGE from the store when it does not fit). */
static void cbfs_xattr_reply_call(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *inode,
                                  size_t size, const char *name)
{
    char path[CBFS_PROCFD_MAX];
    int fd;
    char *const buf = size ? malloc(size) : NULL;
    if (size && !buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    if (cbfs_xattr_path(req, fs, inode, name ? ENODATA : ENOTSUP, path, &fd)) {
        const ssize_t n = name ? getxattr(path, name, buf, size)
                               : cbfs_xattr_list(req, path, buf, size);
        const int err = errno;
        cbfs_inode_unpin(fs, inode);
        if (n == -1)
            fuse_reply_err(req, err);
        else if (size == 0)
            fuse_reply_xattr(req, (size_t)n);
        else
            fuse_reply_buf(req, buf, (size_t)n);
    }
    free(buf);
}

/* A value for CBFS_XATTR_CODEC must name a codec this build has, at a level
 * it takes. @return true if it does; else logs why not. */
static bool cbfs_xattr_codec_ok(const char *value, size_t size)
{
    char spec[64], msg[256];
    const struct cbfs_codec_ops *codec;
    int level;
    if (size >= sizeof spec) {
        cbfs_log_info("%s: value too long", CBFS_XATTR_CODEC);
        return false;
    }
    memcpy(spec, value, size);
    spec[size] = '\0';
    if (cbfs_codec_parse(spec, &codec, &level, msg, sizeof msg) != CBFS_OK) {
        cbfs_log_info("%s='%s' refused: %s", CBFS_XATTR_CODEC, spec, msg);
        return false;
    }
    return true;
}

/* @return true if the caller of req is in group gid (primary or
 * supplementary); false also where its groups cannot be read. */
static bool cbfs_xattr_caller_in_group(fuse_req_t req, gid_t gid)
{
    gid_t some[64], *list = some;
    int cap = 64;
    if (fuse_req_ctx(req)->gid == gid) return true;
    int n = fuse_req_getgroups(req, cap, some);
    if (n > cap) {
        cap = n;
        list = malloc((size_t)cap * sizeof *list);
        n = list ? fuse_req_getgroups(req, cap, list) : -ENOMEM;
    }
    bool in = false;
    for (int i = 0; i < n && i < cap && !in; i++) in = list[i] == gid;
    if (list != some) free(list);
    return in;
}

/* What FUSE_SETXATTR_ACL_KILL_SGID asks for, which libfuse 3.14 cannot
 * negotiate (FUSE_SETXATTR_EXT): as on ext4 (posix_acl_update_mode), a caller
 * outside the file's group and without CAP_FSETID (taken as: not root) who
 * sets an access ACL clears the set-group-ID bit. The store leaves it for the
 * daemon, which is root. fd: the pinned object. @return 0 or errno. */
static int cbfs_xattr_acl_kill_sgid(fuse_req_t req, int fd)
{
    struct stat st;
    bool changed;
    if (geteuid() != 0 || fuse_req_ctx(req)->uid == 0) return 0;
    if (fstat(fd, &st) == -1) return errno;
    if (!(st.st_mode & S_ISGID) || cbfs_xattr_caller_in_group(req, st.st_gid)) return 0;
    return cbfs_inode_mode_clear(fd, &st, S_ISGID, &changed);
}

/* The daemon's read-only stats: the xattr CBFS_XATTR_STATS of the mount root. */
static bool cbfs_xattr_is_stats(fuse_ino_t ino, const char *name)
{
    return ino == FUSE_ROOT_ID && strcmp(name, CBFS_XATTR_STATS) == 0;
}

/* setxattr, or removexattr where value is NULL (libfuse never passes a NULL
 * value to setxattr), on inode's store object; replies. A new access ACL
 * changed the mode too (group bits, maybe set-group-ID): the sidecar
 * follows, and the kernel learns it. */
static void cbfs_xattr_change(fuse_req_t req, fuse_ino_t ino, const char *name,
                              const char *value, size_t size, int flags)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    char path[CBFS_PROCFD_MAX];
    int fd;

    if (value && strcmp(name, CBFS_XATTR_CODEC) == 0 && !cbfs_xattr_codec_ok(value, size)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    /* The root's stats are the daemon's, read-only: a set used to land on the
     * store's root directory, unseen behind them, and report success. */
    if (cbfs_xattr_is_stats(ino, name)) {
        fuse_reply_err(req, EPERM);
        return;
    }
    if (!cbfs_xattr_path(req, fs, inode, EPERM, path, &fd)) return;
    struct stat was; /* the owner the sidecar has (an ACL changes none) */
    struct cbfs_flush_hold flush; /* for the kernel's times SETATTR after it */
    int err = fstat(fd, &was) == -1 ? errno : cbfs_flush_hold_take(fs, inode, &flush);
    if (err) {
        cbfs_inode_unpin(fs, inode);
        fuse_reply_err(req, err);
        return;
    }
    const int r = value ? setxattr(path, name, value, size, flags) : removexattr(path, name);
    err = r == -1 ? errno : 0;
    const bool acl = err == 0 && strcmp(name, CBFS_STORE_XATTR_ACL) == 0;
    if (acl && value) err = cbfs_xattr_acl_kill_sgid(req, fd);
    if (acl) cbfs_sidecar_sync(fs, inode, fd, &was);
    cbfs_inode_unpin(fs, inode);
    cbfs_flush_hold_keep(fs, &flush, err == 0); /* the kernel flushes after a success */
    if (acl) cbfs_chan_inval_attr(ino);
    fuse_reply_err(req, err);
}

void cbfs_op_setxattr(fuse_req_t req, fuse_ino_t ino, const char *name, const char *value,
                      size_t size, int flags)
{
    cbfs_xattr_change(req, ino, name, value, size, flags);
}

void cbfs_op_getxattr(fuse_req_t req, fuse_ino_t ino, const char *name, size_t size)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);

    if (cbfs_xattr_is_stats(ino, name)) {
        char text[CBFS_STATS_TEXT_MAX];
        const size_t n = cbfs_ops_stats_format(fs, text, sizeof text);
        if (size == 0)
            fuse_reply_xattr(req, n);
        else if (size < n || n >= sizeof text)
            fuse_reply_err(req, ERANGE);
        else
            fuse_reply_buf(req, text, n);
        return;
    }
    cbfs_xattr_reply_call(req, fs, inode, size, name);
}

void cbfs_op_listxattr(fuse_req_t req, fuse_ino_t ino, size_t size)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);

    cbfs_xattr_reply_call(req, fs, inode, size, NULL);
}

void cbfs_op_removexattr(fuse_req_t req, fuse_ino_t ino, const char *name)
{
    cbfs_xattr_change(req, ino, name, NULL, 0, 0);
}

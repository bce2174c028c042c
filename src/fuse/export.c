/* NFS export: the "." and ".." lookups that rebuild inodes from node ids
 * (see export.h); the file handles behind them are fdcache.c's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/export.h"

/* @return whether the regular file fd is open on starts with a sidecar's
 * header record, or errno in *err. */
static bool cbfs_export_is_sidecar(struct cbfs_fs *fs, int fd, int *err)
{
    char path[CBFS_PROCFD_MAX];
    struct cbfs_index_rec r;
    cbfs_procfd(path, fd);
    const int rfd = cbfs_fs_openat(fs, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOATIME, 0);
    if (rfd == -1) {
        *err = errno;
        return false;
    }
    const cbfs_err e = cbfs_index_read_header(rfd, &r);
    close(rfd);
    /* what is no header record says "no"; a read that failed, neither */
    *err = e && !cbfs_err_is_format(e) && e != CBFS_E_VERSION ? cbfs_err_errno(e) : 0;
    return e == CBFS_OK;
}

/* Is ino an entry of the directory dirfd (any fd on it)? *found says.
 * @return 0 or errno: a directory that cannot be read answers neither way
 * (out of fds among the causes, where a forged handle must not get through). */
static int cbfs_export_in_dir(struct cbfs_fs *fs, int dirfd, ino_t ino, bool *found)
{
    *found = false;
    const int fd = cbfs_fs_openat(fs, dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    if (fd == -1) return errno;
    DIR *const dp = fdopendir(fd);
    if (!dp) {
        const int err = errno;
        close(fd);
        return err;
    }
    struct dirent *e;
    errno = 0;
    while (!*found && (e = readdir(dp)) != NULL) *found = e->d_ino == ino;
    const int err = *found ? 0 : errno; /* readdir's NULL: the end, or errno */
    closedir(dp);
    return err;
}

/* Is the object fd (st: its stat) reached by number one the mount hides:
 * the .cbfs directory, an entry of it, a sidecar or an index directory?
 * @return 0 if not, ESTALE if so, or errno where it cannot be told (never a
 * guess of "not hidden": a handle forged for .cbfs/store.conf stays out). */
static int cbfs_export_check_hidden(struct cbfs_fs *fs, int fd, const struct stat *st)
{
    struct stat cst, pst;
    int rfd, err = 0;
    if (S_ISREG(st->st_mode) && cbfs_export_is_sidecar(fs, fd, &err)) return ESTALE;
    if (err) return err;
    /* layout 2: an index directory (its parent holds it under that name) */
    if (S_ISDIR(st->st_mode) && fs->opt.layout == CBFS_LAYOUT_INDEXDIR &&
        fstatat(fd, "../" CBFS_INDEX_DIR, &cst, AT_SYMLINK_NOFOLLOW) == 0 &&
        cst.st_dev == st->st_dev && cst.st_ino == st->st_ino)
        return ESTALE;
    if ((err = cbfs_inode_pin(fs, fs->root, &rfd)) != 0) return err;
    if (fstatat(rfd, CBFS_STORE_DIR, &cst, AT_SYMLINK_NOFOLLOW) == -1) {
        err = errno == ENOENT ? 0 : errno;
    } else if (cst.st_dev == st->st_dev && cst.st_ino == st->st_ino) {
        err = ESTALE;
    } else if (S_ISDIR(cst.st_mode) && S_ISDIR(st->st_mode)) {
        if (fstatat(fd, "..", &pst, AT_SYMLINK_NOFOLLOW) == -1)
            err = errno;
        else if (pst.st_dev == cst.st_dev && pst.st_ino == cst.st_ino)
            err = ESTALE;
    } else if (S_ISDIR(cst.st_mode)) {
        bool found;
        const int cfd = cbfs_fs_openat(fs, rfd, CBFS_STORE_DIR, O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
        if (cfd == -1) {
            err = errno;
        } else {
            err = cbfs_export_in_dir(fs, cfd, st->st_ino, &found);
            if (err == 0 && found) err = ESTALE;
            close(cfd);
        }
    }
    cbfs_inode_unpin(fs, fs->root);
    return err;
}

/* "." in nodeid: the inode of that id, from the table or rebuilt from the
 * inode number. */
static int cbfs_export_reconnect(struct cbfs_fs *fs, fuse_ino_t nodeid, struct cbfs_inode **out,
                                 struct stat *st)
{
    struct cbfs_inode *inode = cbfs_inode_find_nodeid(fs, nodeid);
    int fd, err;
    if (inode) {
        /* ESTALE if its object is gone, unless the engine still holds it
         * open (an unlinked file being written: stat'ed through its fds) */
        err = cbfs_inode_stat(fs, inode, st);
        if (err) {
            cbfs_inode_unref(fs, inode, 1);
            return err;
        }
        *out = inode;
        return 0;
    }
    /* a local id the table does not hold is gone for good */
    if ((nodeid & CBFS_NODEID_LOCAL) || nodeid > UINT32_MAX) return ESTALE;
    if ((err = cbfs_fdcache_open_ino(&fs->fdc, (uint32_t)nodeid, &fd)) != 0) return err;
    if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
        err = errno;
    } else if (st->st_dev != fs->dev || st->st_ino != (ino_t)nodeid) {
        err = ESTALE; /* not the store's filesystem after all */
    } else {
        err = cbfs_export_check_hidden(fs, fd, st);
        cbfs_inode_dir_nlink(fs, fd, st);
    }
    if (err) {
        close(fd);
        return err;
    }
    if ((err = cbfs_inode_adopt(fs, fd, st, &inode)) != 0) return err;
    if (inode->nodeid != nodeid) { /* a stale inode still holds the number */
        cbfs_inode_unref(fs, inode, 1);
        return ESTALE;
    }
    *out = inode;
    return 0;
}

/* ".." of the directory dir: the root's is the root. */
static int cbfs_export_parent(struct cbfs_fs *fs, struct cbfs_inode *dir, struct cbfs_inode **out,
                              struct stat *st)
{
    struct cbfs_inode *const root = fs->root;
    int dirfd, err;
    if (dir->type != S_IFDIR) return ENOTDIR;
    if (dir != root) {
        if ((err = cbfs_inode_pin(fs, dir, &dirfd)) != 0) return err;
        const int fd = cbfs_fs_openat(fs, dirfd, "..", O_PATH | O_DIRECTORY | O_CLOEXEC, 0);
        err = fd == -1 ? errno : 0;
        cbfs_inode_unpin(fs, dir);
        if (err) return err;
        if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
            err = errno;
            close(fd);
            return err;
        }
        cbfs_inode_dir_nlink(fs, fd, st);
        if (st->st_dev != root->dev || st->st_ino != root->ino)
            return cbfs_inode_adopt(fs, fd, st, out);
        close(fd);
    }
    cbfs_inode_ref(fs, root, 1);
    if ((err = cbfs_inode_stat(fs, root, st)) != 0) {
        cbfs_inode_unref(fs, root, 1);
        return err;
    }
    *out = root;
    return 0;
}

int cbfs_export_lookup(struct cbfs_fs *fs, fuse_ino_t parent, const char *name,
                       struct cbfs_inode **out, struct stat *st)
{
    if (!fs->export) return ENOENT;
    if (strcmp(name, ".") == 0) return cbfs_export_reconnect(fs, parent, out, st);
    /* "..": the kernel holds the directory it asks about */
    struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
    return dir ? cbfs_export_parent(fs, dir, out, st) : ESTALE;
}

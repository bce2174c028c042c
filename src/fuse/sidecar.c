/* A compressed file's sidecar from the FUSE layer: it follows its data file
 * when a name goes (unlink, the sidecar first; rename's aside, restore and
 * drop), is cleared before a plain file takes a name, and takes the data
 * file's owner, mode and ACL. Where a sidecar lives and its name are the
 * inode table's (cbfs_inode_sidecar_path, cbfs_inode_sidecar_dir in inode.h).
 *
 * Dependencies: ops_* -> sidecar -> inode -> fdcache. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/sidecar.h"

void cbfs_sidecar_sync(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd, const struct stat *was)
{
    int ifd;
    if (inode->kind != CBFS_KIND_COMPRESSED) return;
    cbfs_mutex_lock(&inode->lock);
    int err = cbfs_inode_idx_pin(fs, inode, &ifd);
    if (err == 0) {
        const cbfs_err e = cbfs_store_sidecar_match(fd, ifd, was);
        if (e) err = cbfs_err_errno(e);
        cbfs_inode_idx_unpin(fs, inode);
    }
    cbfs_mutex_unlock(&inode->lock);
    if (err && err != ENOENT)
        cbfs_log_warn("cannot give the sidecar of inode %llu the owner, mode and ACL of its data "
                      "file: %s",
                      (unsigned long long)inode->ino, strerror(err));
}

int cbfs_sidecar_remove(struct cbfs_fs *fs, int dirfd, const char *name, bool *removed)
{
    char sc[CBFS_STORE_SIDECAR_PATH_MAX];
    if (removed) *removed = false;
    if (cbfs_inode_sidecar_path(fs, name, sc, sizeof sc) != 0) return 0; /* cannot exist */
    if (cbfs_fs_unlinkat(fs, dirfd, sc) == -1) return errno == ENOENT ? 0 : errno;
    if (removed) *removed = true;
    return 0;
}

int cbfs_sidecar_clear(struct cbfs_fs *fs, int dirfd, const char *name)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0) return 0; /* the op fails EEXIST */
    if (errno != ENOENT) return errno;
    const int err = cbfs_sidecar_remove(fs, dirfd, name, NULL);
    if (err) cbfs_log_err("cannot remove the leftover sidecar of '%s': %s", name, strerror(err));
    return err;
}

int cbfs_sidecar_aside(struct cbfs_fs *fs, int dirfd, const char *sc, char *path, bool *aside)
{
    cbfs_assert_held(&fs->names_lock);
    *aside = false;
    int r;
    do { /* never over another: one a crash left, in the 2^-64 case */
        snprintf(path, CBFS_STORE_ASIDE_MAX, "%s/%s%016llx", CBFS_STORE_DIR, CBFS_STORE_ASIDE,
                 (unsigned long long)cbfs_random64());
        r = cbfs_fs_renameat2(fs, dirfd, sc, fs->opt.store_fd, path, RENAME_NOREPLACE);
        if (r == -1 && errno == EINVAL) /* a store filesystem without it */
            r = cbfs_fs_renameat2(fs, dirfd, sc, fs->opt.store_fd, path, 0);
    } while (r == -1 && errno == EEXIST);
    if (r == 0) *aside = true;
    return r == 0 || errno == ENOENT ? 0 : errno;
}

void cbfs_sidecar_restore(struct cbfs_fs *fs, const char *path, int dirfd, const char *sc,
                          const char *op, const char *name, int err)
{
    if (cbfs_fs_renameat2(fs, fs->opt.store_fd, path, dirfd, sc, 0) == -1)
        cbfs_log_err("%s of '%s' failed (%s), and its sidecar cannot be put back from %s "
                     "(%s): '%s' gets an index from its frames at its next open, if they prove "
                     "one; move it back by hand",
                     op, name, strerror(err), path, strerror(errno), name);
}

void cbfs_sidecar_drop(struct cbfs_fs *fs, const char *path, const char *op, const char *name)
{
    if (cbfs_fs_unlinkat(fs, fs->opt.store_fd, path) == -1)
        cbfs_log_warn("%s of '%s': cannot remove %s, the index of contents that are gone: %s "
                      "(safe to delete)",
                      op, name, path, strerror(errno));
}

/* sidecar.h. The sidecar goes out of the way first (cbfs_sidecar_aside): a
 * crash in between leaves a data file without one, which is found by its
 * frames and rebuilt (a sidecar without its data file would make a later
 * plain file of that name look compressed), and an unlink that fails (an
 * immutable data file) puts it back: removed, a file its frames alone cannot
 * index lost its index. Where the store's root is another filesystem (EXDEV)
 * it is removed, as before. @return 0 or errno. */
int cbfs_sidecar_unlink(struct cbfs_fs *fs, struct cbfs_inode *dir, int dirfd, const char *name)
{
    struct stat st;
    char sc[CBFS_STORE_SIDECAR_PATH_MAX], aside_path[CBFS_STORE_ASIDE_MAX];
    int err = 0;
    bool aside = false, had_sc = false;
    cbfs_mutex_lock(&fs->names_lock);
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1) {
        err = errno;
        goto out;
    }
    if (S_ISREG(st.st_mode) && cbfs_inode_sidecar_path(fs, name, sc, sizeof sc) == 0) {
        err = cbfs_sidecar_aside(fs, dirfd, sc, aside_path, &aside);
        if (err == EXDEV) err = cbfs_sidecar_remove(fs, dirfd, name, &had_sc);
        if (err) {
            cbfs_log_err("cannot remove the sidecar of '%s': %s; the file stays", name,
                         strerror(err));
            goto out;
        }
    }
    if (unlinkat(dirfd, name, 0) == -1) {
        err = errno;
        if (aside)
            cbfs_sidecar_restore(fs, aside_path, dirfd, sc, "unlink", name, err);
        else if (had_sc)
            cbfs_log_warn("unlink of '%s' failed (%s) after its sidecar was removed: the file "
                          "keeps its data and gets its index back from its frames at its next "
                          "open",
                          name, strerror(err));
        goto out;
    }
    if (aside) cbfs_sidecar_drop(fs, aside_path, "unlink", name);
    if (S_ISREG(st.st_mode)) {
        /* An open file keeps working through the engine's fds, as on ext4. */
        struct cbfs_inode *const inode = cbfs_inode_find(fs, st.st_dev, st.st_ino);
        if (inode) {
            cbfs_inode_clear_location(fs, inode, dir, name);
            cbfs_inode_unref(fs, inode, 1);
        }
    }
out:
    cbfs_mutex_unlock(&fs->names_lock);
    return err;
}

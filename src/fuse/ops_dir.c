/* Directory handles: opendir/readdir/readdirplus/releasedir/fsyncdir over a
 * DIR stream of the store directory, skipping the names cbfs hides (.cbfs in
 * the root, index sidecars everywhere). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "fuse/ops.h"

void cbfs_op_opendir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    struct cbfs_handle *h;
    int pfd, err = cbfs_inode_pin(fs, inode, &pfd);
    if (err) goto fail;
    const int fd = cbfs_fs_openat(fs, pfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC, 0);
    err = errno;
    cbfs_inode_unpin(fs, inode);
    if (fd == -1) goto fail;
    DIR *const dp = fdopendir(fd);
    if (!dp) {
        err = errno;
        close(fd);
        goto fail;
    }
    err = cbfs_handle_new(fs, inode, fi->flags, -1, NULL, dp, &h);
    if (err) goto fail;
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) != 0) cbfs_handle_close_dir(fs, h); /* interrupted */
    return;
fail:
    fuse_reply_err(req, err);
}

static bool cbfs_is_dot(const char *name)
{
    return name[0] == '.' && (name[1] == '\0' || (name[1] == '.' && name[2] == '\0'));
}

/* The d_ino the mount lists for entry name of dir (store d_ino d_ino): "." is
 * dir's own number, ".." its parent's, others cbfs_inode_dirent_ino's. Only
 * a directory of another file system than the store root's can have a parent
 * elsewhere (a subvolume's root): its ".." is looked at, one fstatat; the
 * store's own directories (the root's parent included) list theirs as is. */
static ino_t cbfs_readdir_ino(struct cbfs_fs *fs, struct cbfs_inode *dir, DIR *dp,
                              const char *name, ino_t d_ino)
{
    if (strcmp(name, ".") == 0) return cbfs_inode_st_ino(fs, dir);
    if (strcmp(name, "..") == 0) {
        struct stat st;
        if (dir->dev == fs->dev || fstatat(dirfd(dp), "..", &st, AT_SYMLINK_NOFOLLOW) != 0)
            return d_ino;
        return cbfs_inode_map_ino(fs, st.st_dev, st.st_ino);
    }
    return cbfs_inode_dirent_ino(fs, dir, d_ino);
}

static void cbfs_readdir_common(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                                struct fuse_file_info *fi, bool plus)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, ino);
    struct cbfs_handle *const h = cbfs_fi_handle(fi);
    size_t used = 0, npacked = 0;
    int err = 0;

    char *const buf = malloc(size);
    /* The lookup references handed over with readdirplus entries, taken back
     * if the reply does not reach the kernel (an interrupted request): its
     * FORGETs would never come. An entry takes more than 128 bytes. */
    struct cbfs_inode **const packed = plus ? malloc((size / 128 + 1) * sizeof *packed) : NULL;
    if (!buf || (plus && !packed)) {
        free(buf);
        free(packed);
        fuse_reply_err(req, ENOMEM);
        return;
    }
    if (off != h->offset) {
        seekdir(h->dp, off);
        h->entry = NULL;
        h->offset = off;
    }
    for (;;) {
        if (!h->entry) {
            errno = 0;
            h->entry = readdir(h->dp);
            if (!h->entry) {
                err = errno; /* 0 at the end of the stream */
                break;
            }
        }
        const char *const name = h->entry->d_name;
        const off_t next = h->entry->d_off;
        size_t len;
        if (cbfs_inode_name_hidden(fs, dir, name)) {
            h->entry = NULL;
            h->offset = next;
            continue;
        }
        if (plus) {
            struct fuse_entry_param e;
            struct cbfs_inode *inode = NULL;
            struct stat st;
            const int lerr = cbfs_is_dot(name) ? -1 : cbfs_inode_lookup(fs, dir, name, &inode, &st);
            if (lerr == ENOENT) { /* removed since readdir saw it */
                h->entry = NULL;
                h->offset = next;
                continue;
            }
            if (lerr) {
                /* "." and "..", or an entry whose lookup failed (a damaged
                 * file, no fd to spare): the name without attributes (node
                 * id 0: the kernel caches nothing and looks it up when asked,
                 * where that one file gets its error). One bad file must not
                 * end the listing of the rest, as it does not on ext4. */
                memset(&e, 0, sizeof e);
                e.attr.st_ino = cbfs_readdir_ino(fs, dir, h->dp, name, h->entry->d_ino);
                e.attr.st_mode = (mode_t)h->entry->d_type << 12;
                inode = NULL;
            } else {
                cbfs_reply_fill_entry(fs, inode, &st, &e);
            }
            len = fuse_add_direntry_plus(req, buf + used, size - used, name, &e, next);
            if (len > size - used) {
                /* no room: the kernel does not get this entry, nor its ref */
                cbfs_inode_unref(fs, inode, 1);
                break;
            }
            if (inode) packed[npacked++] = inode;
        } else {
            struct stat st = {.st_ino = cbfs_readdir_ino(fs, dir, h->dp, name, h->entry->d_ino),
                              .st_mode = (mode_t)h->entry->d_type << 12};
            len = fuse_add_direntry(req, buf + used, size - used, name, &st, next);
            if (len > size - used) break;
        }
        used += len;
        h->entry = NULL;
        h->offset = next;
    }
    /* Entries already packed are returned; an error shows on the next call. */
    if (err && used == 0) {
        fuse_reply_err(req, err);
    } else if (fuse_reply_buf(req, buf, used) != 0) {
        for (size_t i = 0; i < npacked; i++) cbfs_inode_unref(fs, packed[i], 1);
    }
    free(packed);
    free(buf);
}

void cbfs_op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    cbfs_readdir_common(req, ino, size, off, fi, false);
}

void cbfs_op_readdirplus(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                         struct fuse_file_info *fi)
{
    cbfs_readdir_common(req, ino, size, off, fi, true);
}

void cbfs_op_releasedir(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    cbfs_handle_close_dir(cbfs_req_fs(req), cbfs_fi_handle(fi));
    fuse_reply_err(req, 0);
}

/* The directory's names are two directories in a store of layout 2: its
 * data files' in it, their sidecars' in its CBFS_INDEX_DIR. Both are synced:
 * after rename(tmp, final) and fsync of the directory (an atomic replace), a
 * store filesystem that keeps no more than POSIX asks could come back with
 * final's new data file beside its old sidecar (EIO until cbfs fsck), or a
 * new file without its sidecar. */
void cbfs_op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    const struct cbfs_fs *const fs = cbfs_req_fs(req);
    const struct cbfs_handle *const h = cbfs_fi_handle(fi);
    (void)ino;
    int err = 0;
    if (fs->opt.layout == CBFS_LAYOUT_INDEXDIR) {
        const cbfs_err e = cbfs_store_sync_dir(h->fd, CBFS_INDEX_DIR);
        if (e && e != CBFS_E_NOENT) err = cbfs_err_errno(e);
    }
    if (!err && (datasync ? fdatasync(h->fd) : fsync(h->fd)) == -1) err = errno;
    fuse_reply_err(req, err);
}

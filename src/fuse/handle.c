/* Open files and directories: the one handle constructor, the list of open
 * handles that cbfs_fs_free walks, and the close functions. Opening the
 * file or directory itself is the ops' business (ops_file.c, ops_dir.c). */
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <unistd.h>

#include "fuse/handle.h"

static void cbfs_handle_link(struct cbfs_fs *fs, struct cbfs_handle *h)
{
    cbfs_mutex_lock(&fs->lock);
    h->prev = NULL;
    h->next = fs->handles;
    if (fs->handles) fs->handles->prev = h;
    fs->handles = h;
    cbfs_mutex_unlock(&fs->lock);
}

static void cbfs_handle_unlink(struct cbfs_fs *fs, struct cbfs_handle *h)
{
    cbfs_mutex_lock(&fs->lock);
    if (h->prev)
        h->prev->next = h->next;
    else
        fs->handles = h->next;
    if (h->next) h->next->prev = h->prev;
    h->next = h->prev = NULL;
    cbfs_mutex_unlock(&fs->lock);
}

bool cbfs_handle_any_open(struct cbfs_fs *fs, const struct cbfs_inode *inode)
{
    cbfs_mutex_lock(&fs->lock);
    const struct cbfs_handle *h = fs->handles;
    while (h && h->inode != inode) h = h->next;
    cbfs_mutex_unlock(&fs->lock);
    return h != NULL;
}

int cbfs_handle_new(struct cbfs_fs *fs, struct cbfs_inode *inode, int flags, int fd,
                    struct cbfs_file *file, DIR *dp, struct cbfs_handle **out)
{
    struct cbfs_handle *const h = calloc(1, sizeof *h);
    if (!h) {
        if (dp) closedir(dp);
        if (fd >= 0) close(fd);
        if (file) (void)cbfs_inode_file_put(fs, inode);
        return ENOMEM;
    }
    h->inode = inode;
    h->fd = dp ? dirfd(dp) : fd;
    h->file = file;
    /* failures heard of before it opened are not its (cbfs/errseq.h) */
    if (file) {
        h->err_seen = cbfs_file_err_seq(file);
    } else if (!dp) {
        cbfs_mutex_lock(&inode->lock);
        h->err_seen = cbfs_errseq_sample(&inode->plain_errs);
        cbfs_mutex_unlock(&inode->lock);
        /* what the file's last good sync covered: a failure of its writeback
         * since is one this fd's first sync is told of */
        atomic_init(&h->plain_synced,
                    atomic_load_explicit(&inode->plain_synced, memory_order_acquire));
    }
    h->flags = flags;
    h->dp = dp;
    h->append = file && (flags & O_APPEND) && !fs->writeback;
    cbfs_inode_ref(fs, inode, 1);
    cbfs_handle_link(fs, h);
    *out = h;
    return 0;
}

int cbfs_handle_close_file(struct cbfs_fs *fs, struct cbfs_handle *h)
{
    int err = 0;
    cbfs_handle_unlink(fs, h);
    if (h->file) err = cbfs_inode_file_put(fs, h->inode);
    if (h->fd >= 0) close(h->fd);
    cbfs_inode_unref(fs, h->inode, 1);
    free(h);
    return err;
}

void cbfs_handle_close_dir(struct cbfs_fs *fs, struct cbfs_handle *h)
{
    cbfs_handle_unlink(fs, h);
    closedir(h->dp);
    cbfs_inode_unref(fs, h->inode, 1);
    free(h);
}

int cbfs_handle_close_all(struct cbfs_fs *fs)
{
    int ret = 0;
    /* The session loop has ended: nothing else touches the list now. */
    while (fs->handles) {
        struct cbfs_handle *const h = fs->handles;
        if (cbfs_handle_is_dir(h)) {
            cbfs_handle_close_dir(fs, h);
        } else if (cbfs_handle_close_file(fs, h) != 0) {
            ret = -1;
        }
    }
    return ret;
}

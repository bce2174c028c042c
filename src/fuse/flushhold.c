/* The store descriptors held for the kernel's times SETATTR after a change
 * of names or xattrs; see flushhold.h for why and for the contract. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

#include "cbfs/util.h"
#include "fuse/flushhold.h"
#include "fuse/inode.h"

/* Unpins what h holds and drops its ref. */
static void cbfs_flush_hold_release(struct cbfs_fs *fs, struct cbfs_flush_hold *h)
{
    struct cbfs_inode *const inode = h->inode;
    if (!inode) return;
    if (h->idx) {
        cbfs_mutex_lock(&inode->lock);
        cbfs_inode_idx_unpin(fs, inode);
        cbfs_mutex_unlock(&inode->lock);
    }
    cbfs_inode_unpin(fs, inode);
    cbfs_inode_unref(fs, inode, 1);
    h->inode = NULL;
}

int cbfs_flush_hold_take(struct cbfs_fs *fs, struct cbfs_inode *inode, struct cbfs_flush_hold *h)
{
    struct stat st;
    int fd, ifd;
    memset(h, 0, sizeof *h);
    /* the kernel keeps the times of regular files only (S_NOCMTIME on the rest) */
    if (!fs->writeback || inode->type != S_IFREG) return 0;
    int err = cbfs_inode_pin(fs, inode, &fd);
    if (err) return err;
    bool known = true;
    if (inode->kind == CBFS_KIND_COMPRESSED) {
        cbfs_mutex_lock(&inode->lock);
        if (inode->has_idx && (err = cbfs_inode_idx_pin(fs, inode, &ifd)) == 0) h->idx = true;
        known = inode->file || inode->size_valid;
        cbfs_mutex_unlock(&inode->lock);
    }
    /* the SETATTR's reply carries the logical size: read now if not known */
    if (!err && !known) err = cbfs_inode_stat(fs, inode, &st);
    cbfs_inode_ref(fs, inode, 1);
    h->inode = inode;
    if (err) cbfs_flush_hold_release(fs, h);
    return err;
}

int cbfs_flush_hold_take_name(struct cbfs_fs *fs, int dirfd, const char *name, bool other_names,
                              struct cbfs_flush_hold *h)
{
    struct stat st;
    memset(h, 0, sizeof *h);
    if (!fs->writeback || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
        !S_ISREG(st.st_mode) || (other_names && st.st_nlink < 2))
        return 0;
    struct cbfs_inode *const inode = cbfs_inode_find(fs, st.st_dev, st.st_ino);
    if (!inode) return 0;
    const int err = inode->type == (st.st_mode & S_IFMT) ? cbfs_flush_hold_take(fs, inode, h) : 0;
    cbfs_inode_unref(fs, inode, 1);
    return err;
}

/* fs->lock held. Moves the holds that must go (older than the limit, and
 * the oldest beyond room free slots) to out[]. @return how many. */
static size_t cbfs_flush_hold_expire(struct cbfs_fs *fs, size_t room, struct cbfs_flush_hold *out)
{
    cbfs_assert_held(&fs->lock);
    const uint64_t now = cbfs_now_ns();
    size_t n = 0;
    while (fs->nflush_holds > 0 && (fs->nflush_holds + room > CBFS_FLUSH_HOLDS ||
                                    now - fs->flush_holds[0].at_ns > CBFS_FLUSH_HOLD_NS)) {
        out[n++] = fs->flush_holds[0];
        fs->nflush_holds--;
        memmove(&fs->flush_holds[0], &fs->flush_holds[1],
                fs->nflush_holds * sizeof fs->flush_holds[0]);
    }
    return n;
}

void cbfs_flush_hold_keep(struct cbfs_fs *fs, struct cbfs_flush_hold *h, bool changed)
{
    struct cbfs_flush_hold gone[CBFS_FLUSH_HOLDS];
    size_t n = 0;
    if (!h->inode) return;
    if (changed) {
        h->at_ns = cbfs_now_ns();
        cbfs_mutex_lock(&fs->lock);
        n = cbfs_flush_hold_expire(fs, 1, gone);
        fs->flush_holds[fs->nflush_holds++] = *h;
        cbfs_mutex_unlock(&fs->lock);
        h->inode = NULL;
    }
    for (size_t i = 0; i < n; i++)
        cbfs_flush_hold_release(fs, &gone[i]);
    cbfs_flush_hold_release(fs, h);
}

void cbfs_flush_hold_drop(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    struct cbfs_flush_hold gone[CBFS_FLUSH_HOLDS + 1];
    cbfs_mutex_lock(&fs->lock);
    if (fs->nflush_holds == 0) {
        cbfs_mutex_unlock(&fs->lock);
        return;
    }
    size_t n = cbfs_flush_hold_expire(fs, 0, gone);
    for (size_t i = 0; i < fs->nflush_holds; i++) {
        if (fs->flush_holds[i].inode != inode) continue;
        gone[n++] = fs->flush_holds[i];
        fs->nflush_holds--;
        memmove(&fs->flush_holds[i], &fs->flush_holds[i + 1],
                (fs->nflush_holds - i) * sizeof fs->flush_holds[0]);
        break;
    }
    cbfs_mutex_unlock(&fs->lock);
    for (size_t i = 0; i < n; i++)
        cbfs_flush_hold_release(fs, &gone[i]);
}

void cbfs_flush_hold_drop_all(struct cbfs_fs *fs)
{
    struct cbfs_flush_hold gone[CBFS_FLUSH_HOLDS];
    cbfs_mutex_lock(&fs->lock);
    const size_t n = fs->nflush_holds;
    memcpy(gone, fs->flush_holds, n * sizeof gone[0]);
    fs->nflush_holds = 0;
    cbfs_mutex_unlock(&fs->lock);
    for (size_t i = 0; i < n; i++)
        cbfs_flush_hold_release(fs, &gone[i]);
}

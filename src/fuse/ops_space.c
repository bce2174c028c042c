/* fallocate and lseek(SEEK_DATA/SEEK_HOLE): PLAIN files pass through to the
 * store; COMPRESSED files map them onto the engine (nothing to reserve, so
 * preallocation checks the free space and sets the size; punching writes
 * hole frames). */
#include <errno.h>
#include <fcntl.h>
#include <linux/falloc.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "fuse/channel.h"
#include "fuse/ops.h"

/* A compressed file's preallocation reserves nothing (its blocks are stored
 * compressed when written), but callers such as RMAN rely on ENOSPC from
 * fallocate when the data cannot fit. So the bytes it adds past the current
 * size, counted uncompressed (conservative), must fit in the store's free
 * space. @return 0, ENOSPC or the errno of asking. */
static int cbfs_space_check(struct cbfs_fs *fs, struct cbfs_inode *inode, uint64_t end,
                            uint64_t size)
{
    struct statvfs sv;
    if (end <= size) return 0;
    const int err = cbfs_inode_statvfs(fs, inode, &sv);
    if (err) return err;
    return end - size > (uint64_t)sv.f_bavail * sv.f_frsize ? ENOSPC : 0;
}

void cbfs_op_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                       struct fuse_file_info *fi)
{
    const struct cbfs_handle *const h = cbfs_fi_handle(fi);
    if (offset < 0 || length <= 0) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    const uint64_t off = (uint64_t)offset, len = (uint64_t)length;
    const bool keep = mode & FALLOC_FL_KEEP_SIZE;
    const int how = mode & ~FALLOC_FL_KEEP_SIZE;
    /* What a compressed file's preallocation or zero range would be refused
     * is refused before anything changes, set-id bits included: a size past
     * what it can reach (cbfs_file_extend's rule; a ZERO_RANGE's punch had
     * zeroed the file from the offset on before the extend refused it,
     * helper-55), and a preallocation the store has no room for. */
    int err = 0;
    if (h->file && (how == 0 || how == FALLOC_FL_ZERO_RANGE)) {
        if (!keep && !cbfs_size_fits(off + len, cbfs_file_block_size(h->file)))
            err = EFBIG;
        else if (how == 0)
            err = cbfs_space_check(cbfs_req_fs(req), h->inode, off + len,
                                   cbfs_file_size(h->file));
    }
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    /* Under KILLPRIV_V2 the kernel leaves killing set-id bits on fallocate
     * to the daemon without a flag to say the caller lacks CAP_FSETID; the
     * caller's uid is the nearest sign of it (root keeps them, as on ext4). */
    if (cbfs_chan_killpriv_v2() && fuse_req_ctx(req)->uid != 0 &&
        cbfs_reply_kill_failed(req, ino, h->inode))
        return;
    if (!h->file) {
        const int ferr = fallocate(h->fd, mode, offset, length) == -1 ? errno : 0;
        if (!ferr) cbfs_inode_plain_changed(h->inode);
        fuse_reply_err(req, ferr);
        return;
    }
    cbfs_err e = CBFS_OK;
    switch (how) {
    case 0: /* preallocate: checked above; extend unless KEEP_SIZE */
        break;
    case FALLOC_FL_PUNCH_HOLE:
        if (!keep) {
            fuse_reply_err(req, EOPNOTSUPP); /* Linux requires KEEP_SIZE with punch */
            return;
        }
        e = cbfs_file_punch(h->file, off, len);
        break;
    case FALLOC_FL_ZERO_RANGE:
        e = cbfs_file_punch(h->file, off, len);
        break;
    default: /* collapse, insert, unshare: not for compressed files */
        fuse_reply_err(req, EOPNOTSUPP);
        return;
    }
    /* fallocate never shrinks: with the writeback cache the kernel's
     * writeback may extend the file past off + len between the look at the
     * size here and the resize, which then cut what it had stored; so the
     * look here only spares the drain, cbfs_file_extend decides */
    if (!e && !keep && off + len > cbfs_file_size(h->file))
        e = cbfs_file_extend(h->file, off + len);
    fuse_reply_err(req, cbfs_err_errno(e));
}

void cbfs_op_lseek(fuse_req_t req, fuse_ino_t ino, off_t off, int whence,
                   struct fuse_file_info *fi)
{
    const struct cbfs_handle *const h = cbfs_fi_handle(fi);
    (void)ino;
    if (whence != SEEK_DATA && whence != SEEK_HOLE) {
        fuse_reply_err(req, EINVAL); /* the kernel handles the others itself */
        return;
    }
    /* With the writeback cache the kernel sends FUSE_LSEEK without writing
     * back its dirty pages first, and its i_size leads ours: data written and
     * not yet flushed would read as a hole, or lie past our EOF (ENXIO), and a
     * sparse-aware copy would skip it. ENOSYS makes the kernel answer every
     * later seek itself from its own size (all data, the hole at EOF): no
     * holes reported, never data reported as one. Having the kernel write
     * the pages back first (an inode invalidation from this request) hung
     * the mount for good when every FUSE thread waited in one (tried). */
    if (cbfs_req_fs(req)->writeback) {
        fuse_reply_err(req, ENOSYS);
        return;
    }
    if (!h->file) {
        const off_t r = lseek(h->fd, off, whence);
        if (r == -1)
            fuse_reply_err(req, errno);
        else
            fuse_reply_lseek(req, r);
        return;
    }
    if (off < 0) {
        fuse_reply_err(req, ENXIO);
        return;
    }
    uint64_t pos;
    const cbfs_err e = cbfs_file_seek(h->file, (uint64_t)off, whence == SEEK_DATA, &pos);
    if (e)
        fuse_reply_err(req, cbfs_err_errno(e));
    else
        fuse_reply_lseek(req, (off_t)pos);
}

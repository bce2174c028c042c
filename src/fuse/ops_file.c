/* Regular files: create/open/read/write/flush/fsync/release. PLAIN files are
 * passed through on a real fd; COMPRESSED files go through the engine state
 * that all handles of the inode share (inode_file.c). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/channel.h"
#include "fuse/ops.h"

/* The open(2) flags that reach the store: O_DIRECT is accepted from callers
 * but never passed on (the page cache of the store is ours to use), creation
 * flags are ours to choose. With the writeback cache the kernel reads on
 * write-only handles and does appends itself. */
static int cbfs_open_store_flags(const struct cbfs_fs *fs, int flags)
{
    int f = flags & (O_ACCMODE | O_APPEND | O_TRUNC | O_SYNC | O_DSYNC);
    if (fs->writeback) {
        if ((f & O_ACCMODE) == O_WRONLY) f = (f & ~O_ACCMODE) | O_RDWR;
        f &= ~O_APPEND;
    }
    return f;
}

/* Opens an existing regular file for a handle. @return 0 or errno. */
static int cbfs_open_handle(struct cbfs_fs *fs, struct cbfs_inode *inode, int flags,
                            struct cbfs_handle **out)
{
    char path[CBFS_PROCFD_MAX];
    struct cbfs_file *file;
    int err;

    if (inode->kind != CBFS_KIND_COMPRESSED) {
        int pfd;
        err = cbfs_inode_pin(fs, inode, &pfd);
        if (err) return err;
        cbfs_procfd(path, pfd);
        const int fd =
            cbfs_fs_openat(fs, AT_FDCWD, path, cbfs_open_store_flags(fs, flags) | O_CLOEXEC, 0);
        err = errno;
        cbfs_inode_unpin(fs, inode);
        if (fd == -1) return err;
        return cbfs_handle_new(fs, inode, flags, fd, NULL, NULL, out);
    }
    err = cbfs_inode_file_get(fs, inode, &file);
    if (err) return err;
    if (((flags & O_ACCMODE) != O_RDONLY || (flags & O_TRUNC)) && inode->ro_errno) {
        err = inode->ro_errno;
        goto fail;
    }
    if (flags & O_TRUNC) {
        const cbfs_err e = cbfs_file_truncate(file, 0);
        if (e) {
            err = cbfs_err_errno(e);
            goto fail;
        }
    }
    return cbfs_handle_new(fs, inode, flags, -1, file, NULL, out);
fail:
    (void)cbfs_inode_file_put(fs, inode);
    return err;
}

int cbfs_create_regular(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *dir, int dirfd,
                        const char *name, mode_t mode, int store_flags,
                        struct cbfs_inode **inode, struct stat *st, int *plain_fd)
{
    const struct cbfs_codec_ops *codec = fs->opt.codec;
    int level = fs->opt.level, err, ifd = -1;
    char spec[64], msg[256], sc[CBFS_STORE_SIDECAR_PATH_MAX];

    if (plain_fd) *plain_fd = -1;
    *inode = NULL;
    err = cbfs_xattr_dir_codec(dirfd, spec, sizeof spec);
    if (err == 0) {
        const struct cbfs_codec_ops *c;
        int l;
        if (cbfs_codec_parse(spec, &c, &l, msg, sizeof msg) == CBFS_OK) {
            codec = c;
            level = l;
        } else {
            cbfs_log_warn("ignoring the directory's %s='%s': %s", CBFS_XATTR_CODEC, spec, msg);
        }
    } else if (err == EINVAL) {
        cbfs_log_warn("ignoring the directory's %s: longer than any codec", CBFS_XATTR_CODEC);
    } else if (err != ENODATA) {
        return err; /* which codec the directory asks for cannot be read */
    }
    const bool compressed = codec && codec->id != CBFS_CODEC_NONE;
    if (compressed && ((err = cbfs_inode_sidecar_path(fs, name, sc, sizeof sc)) != 0 ||
                       (err = cbfs_inode_sidecar_dir(fs, dirfd)) != 0))
        return err;
    if (!compressed && (err = cbfs_sidecar_clear(fs, dirfd, name)) != 0) return err;

    const int oflags = compressed ? O_RDWR : store_flags & ~O_TRUNC;
    bool inherit, made_sc = false;
    mode = cbfs_reply_new_mode(req, dirfd, mode, &inherit);
    int fd = cbfs_fs_openat(fs, dirfd, name, oflags | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                            mode & 07777);
    if (fd == -1) return errno;
    err = cbfs_reply_own_new(req, dirfd, fd, mode, inherit);
    if (err) goto fail;
    if (compressed) {
        /* We own the name now (O_EXCL), so any sidecar there is a stale
         * leftover of a lost data file. */
        if (cbfs_fs_unlinkat(fs, dirfd, sc) == -1 && errno != ENOENT) {
            err = errno;
            goto fail;
        }
        ifd = cbfs_fs_openat(fs, dirfd, sc, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
        if (ifd == -1) {
            err = errno; /* EEXIST: another's, raced in since the unlink: left */
            goto fail;
        }
        made_sc = true;
        const cbfs_err e = cbfs_store_sidecar_match(fd, ifd, NULL); /* just made, O_EXCL */
        if (e) {
            err = cbfs_err_errno(e);
            goto fail;
        }
    }
    struct stat made;
    if (fstat(fd, &made) == -1) {
        err = errno;
        goto fail;
    }
    err = cbfs_inode_lookup(fs, dir, name, inode, st);
    if (err) goto fail;
    /* The lookup goes by name: whoever writes the store directly can have
     * put another file there since the openat. The handle and the engine
     * state made for our file must not go to that one's inode (its opener
     * would read and write our fds), nor is it ours to remove. */
    if ((*inode)->dev != made.st_dev || (*inode)->ino != made.st_ino) {
        cbfs_log_err("'%s' was replaced in the store while being created", name);
        cbfs_inode_unref(fs, *inode, 1);
        *inode = NULL;
        if (ifd >= 0) { /* our sidecar (O_EXCL) would pair with that file: it goes */
            struct stat ist, sst;
            if (fstat(ifd, &ist) == 0 &&
                cbfs_fs_fstatat(fs, dirfd, sc, &sst) == 0 &&
                sst.st_dev == ist.st_dev && sst.st_ino == ist.st_ino)
                (void)cbfs_fs_unlinkat(fs, dirfd, sc);
            close(ifd);
        }
        close(fd);
        return EIO;
    }
    if ((*inode)->kind != (compressed ? CBFS_KIND_COMPRESSED : CBFS_KIND_PLAIN)) {
        cbfs_log_err("'%s' changed in the store while being created", name);
        err = EIO;
        goto fail;
    }
    if (compressed) {
        struct cbfs_file *file = NULL;
        /* fd and ifd belong to the engine from here, also on failure */
        const cbfs_err e = cbfs_file_open(fs->opt.eng, fd, ifd, true, true, codec, level, &file);
        fd = ifd = -1;
        if (e) {
            cbfs_log_err("cannot create '%s': %s", name, cbfs_err_str(e));
            err = cbfs_err_errno(e);
            goto fail;
        }
        cbfs_file_set_name(file, name);
        cbfs_inode_file_install(*inode, file);
    } else if (plain_fd) {
        *plain_fd = fd;
        fd = -1;
    }
    if (fd >= 0) close(fd);
    return 0;

fail:
    if (ifd >= 0) close(ifd);
    if (fd >= 0) close(fd);
    if (*inode) cbfs_inode_unref(fs, *inode, 1);
    *inode = NULL;
    /* what this create made goes again; what cannot is said (a sidecar
     * left is an orphan to verify and fsck --repair, and a later create of
     * the name replaces it; a data file left is an empty file of that name) */
    if (made_sc && cbfs_fs_unlinkat(fs, dirfd, sc) == -1 && errno != ENOENT)
        cbfs_log_warn("a create of '%s' failed and left its sidecar behind: %s", name,
                      strerror(errno));
    if (unlinkat(dirfd, name, 0) == -1 && errno != ENOENT)
        cbfs_log_warn("a create of '%s' failed and left the file behind: %s", name,
                      strerror(errno));
    return err;
}

void cbfs_op_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                    struct fuse_file_info *fi)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const dir = cbfs_inode_get(fs, parent);
    struct cbfs_inode *inode = NULL;
    struct cbfs_handle *h = NULL;
    struct fuse_entry_param e;
    struct stat st;
    int fd = -1;

    /* a CREATE only makes a new file (EEXIST below): no set-id bits to
     * kill, but the channel's flag is this request's and must be cleared */
    (void)cbfs_chan_take_kill();
    int dirfd, err = cbfs_inode_name_check(fs, dir, name, "create");
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    err = cbfs_inode_pin(fs, dir, &dirfd);
    if (err) goto reply_err;
    err = cbfs_create_regular(req, fs, dir, dirfd, name, mode, cbfs_open_store_flags(fs, fi->flags),
                              &inode, &st, &fd);
    /* EEXIST: the kernel sends CREATE only for a name it found missing,
     * with the directory locked against every other creator through the
     * mount, so what is there now was put in the store directly, and the
     * kernel has checked no permission on it. Opening it here (as root)
     * would hand the caller a file it may not open, and O_TRUNC would empty
     * it; the caller's next open finds it and is checked. */
    if (err == 0) {
        struct cbfs_file *const file = inode->kind == CBFS_KIND_COMPRESSED ? inode->file : NULL;
        err = cbfs_handle_new(fs, inode, fi->flags, fd, file, NULL, &h);
        /* the caller hears create failed: what it made goes again */
        if (err) (void)cbfs_sidecar_unlink(fs, dir, dirfd, name);
    }
    cbfs_inode_unpin(fs, dir);
    if (err) goto reply_err;
    fi->fh = (uint64_t)(uintptr_t)h;
    cbfs_reply_fill_entry(fs, inode, &st, &e);
    if (fuse_reply_create(req, &e, fi) != 0) {
        /* interrupted: the kernel has neither the entry nor the handle */
        (void)cbfs_handle_close_file(fs, h);
        cbfs_inode_unref(fs, inode, 1);
    }
    return;
reply_err:
    if (h) (void)cbfs_handle_close_file(fs, h);
    cbfs_inode_unref(fs, inode, 1);
    fuse_reply_err(req, err);
}

void cbfs_op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_inode *const inode = cbfs_inode_get(fs, ino);
    struct cbfs_handle *h;
    const bool kill = cbfs_chan_take_kill(); /* O_TRUNC of a set-id file */

    if (fs->opt.readonly && ((fi->flags & O_ACCMODE) != O_RDONLY || (fi->flags & O_TRUNC))) {
        fuse_reply_err(req, EROFS);
        return;
    }
    bool changed = false;
    int err = cbfs_open_handle(fs, inode, fi->flags, &h);
    if (err == 0 && kill && (err = cbfs_inode_kill_suidgid(fs, inode, &changed)) != 0)
        (void)cbfs_handle_close_file(fs, h);
    if (err) {
        fuse_reply_err(req, err);
        return;
    }
    if (changed) cbfs_chan_inval_attr(ino);
    fi->fh = (uint64_t)(uintptr_t)h;
    if (fuse_reply_open(req, fi) != 0) (void)cbfs_handle_close_file(fs, h);
}

/* Replies with the n pieces' got bytes copied into one buffer: for reads of
 * more pieces than writev takes (tiny blocks, huge reads). */
static void cbfs_read_reply_copy(fuse_req_t req, const struct iovec *iov, unsigned n, size_t got)
{
    char *const buf = malloc(got ? got : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t at = 0;
    for (unsigned i = 0; i < n; i++) {
        memcpy(buf + at, iov[i].iov_base, iov[i].iov_len);
        at += iov[i].iov_len;
    }
    fuse_reply_buf(req, buf, at);
    free(buf);
}

void cbfs_op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                  struct fuse_file_info *fi)
{
    const struct cbfs_handle *const h = cbfs_fi_handle(fi);
    (void)ino;
    if (!h->file) {
        /* plain: read whole. The kernel takes a short READ for the file's
         * end (zeros past it under the writeback cache, a cut size without),
         * and a store may read short anywhere (NFS, CIFS, a FUSE store):
         * only the end of the file ends a read early, and an error after
         * part of it is the error. (libfuse's fd buffers read once, and
         * keep the part on an error: the channel does not splice anyway.) */
        char *const buf = malloc(size ? size : 1);
        size_t got = 0;
        const cbfs_err e = buf ? cbfs_pread_upto(h->fd, buf, size, (uint64_t)off, &got)
                               : CBFS_E_NOMEM;
        if (e) {
            fuse_reply_err(req, cbfs_err_errno(e));
        } else {
            cbfs_engine_count_plain_read(cbfs_req_fs(req)->opt.eng, got);
            fuse_reply_buf(req, buf, got);
        }
        free(buf);
        return;
    }
    /* compressed: the reply is written from the decompressed blocks
     * themselves (the cache holds them until the reply is out), with no
     * copy into a reply buffer. Once it is out, h may be gone (the kernel
     * can release the file at once): only v is touched after it. */
    struct cbfs_read_vec v;
    size_t got = 0;
    const cbfs_err e = cbfs_file_read_vec(h->file, size, (uint64_t)off, &v, &got);
    if (e)
        fuse_reply_err(req, cbfs_err_errno(e));
    else if (v.n < IOV_MAX) /* libfuse adds the header's iovec */
        fuse_reply_iov(req, v.iov, (int)v.n);
    else
        cbfs_read_reply_copy(req, v.iov, v.n, got);
    cbfs_read_vec_free(&v);
}

/* Writes all of buf into a plain file at off (through an O_APPEND
 * descriptor: at its end). A store may take part of a write and then fail
 * (ENOSPC, a quota, NFS): a caller's own write is then answered with the part,
 * as write(2) would be, but a page the kernel writes back (writepage) gets
 * the error: the kernel looks only at the error of such a reply, so a short
 * count would drop the rest of it unseen. @return the bytes written, or -1
 * with *err set. */
static ssize_t cbfs_plain_pwrite(int fd, const char *buf, size_t size, off_t off, bool writepage,
                                 int *err)
{
    size_t done;
    const cbfs_err e = cbfs_pwrite_upto(fd, buf, size, (uint64_t)off, &done);
    if (!e || (done && !writepage)) return (ssize_t)done;
    *err = cbfs_err_errno(e);
    return -1;
}

/* A write through wfd into the plain file inode whose bytes could land in
 * its first CBFS_FRAME_ENVELOPE_SIZE: checked first
 * (cbfs_store_check_plain_write) under inode->lock, so that two such writes
 * cannot each pass with the other's bytes not yet there (a truncate needs
 * no exclusion: it only cuts or zeros, and no envelope is zeros). The check
 * reads the file's start where the write does not cover it all, through wfd
 * or, where that is write-only, a read-only open of the same file. @return
 * the bytes written, or -1 with *err set. */
static ssize_t cbfs_plain_write_head(struct cbfs_fs *fs, struct cbfs_inode *inode, int wfd,
                                     const char *buf, size_t size, off_t off, bool writepage,
                                     int *err)
{
    struct stat st;
    ssize_t n = -1;
    int rfd = wfd;

    cbfs_mutex_lock(&inode->lock);
    const int fl = fcntl(wfd, F_GETFL);
    if (fl == -1 || ((fl & O_APPEND) && fstat(wfd, &st) == -1)) {
        *err = errno;
        goto out;
    }
    const uint64_t at = (fl & O_APPEND) ? (uint64_t)st.st_size : (uint64_t)off; /* where it lands */
    const bool reads = at < CBFS_FRAME_ENVELOPE_SIZE && (at > 0 || size < CBFS_FRAME_ENVELOPE_SIZE);
    if (reads && (fl & O_ACCMODE) == O_WRONLY) {
        char path[CBFS_PROCFD_MAX];
        cbfs_procfd(path, wfd);
        rfd = cbfs_fs_openat(fs, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOATIME, 0);
        if (rfd == -1) {
            *err = errno;
            goto out;
        }
    }
    const cbfs_err e = cbfs_store_check_plain_write(rfd, buf, size, at);
    if (e) {
        if (e == CBFS_E_PLAIN_FRAMED)
            cbfs_log_warn("refused a write at offset %llu of plain file (inode %llu): %s",
                          (unsigned long long)at, (unsigned long long)inode->ino,
                          cbfs_err_str(e));
        *err = cbfs_err_errno(e);
        goto out;
    }
    n = cbfs_plain_pwrite(wfd, buf, size, off, writepage, err);
out:
    if (rfd != wfd && rfd != -1) close(rfd);
    cbfs_mutex_unlock(&inode->lock);
    return n;
}

/* A PLAIN file's write. O_APPEND reaches the store's fd only without the
 * writeback cache (cbfs_open_store_flags), and writes at the end wherever off
 * says; a shared mapping's page that the kernel writes back through such a
 * handle (writepage) belongs at off, so it gets a descriptor of its own
 * without O_APPEND. @return the bytes written, or -1 with *err set. */
static ssize_t cbfs_plain_write(struct cbfs_fs *fs, const struct cbfs_handle *h, bool writepage,
                                const char *buf, size_t size, off_t off, int *err)
{
    const bool store_append = (h->flags & O_APPEND) && !fs->writeback;
    int wfd = h->fd;
    if (store_append && writepage) {
        char path[CBFS_PROCFD_MAX];
        cbfs_procfd(path, h->fd);
        wfd = cbfs_fs_openat(fs, AT_FDCWD, path, O_WRONLY | O_CLOEXEC, 0);
        if (wfd == -1) {
            *err = errno;
            return -1;
        }
    }
    /* where an append lands: the end, which only a short file has in its
     * first bytes (looked at again under the lock if so) */
    struct stat st;
    bool head = off < CBFS_FRAME_ENVELOPE_SIZE;
    if (store_append && wfd == h->fd)
        head = fstat(wfd, &st) == -1 || st.st_size < CBFS_FRAME_ENVELOPE_SIZE;
    ssize_t n;
    if (head)
        n = cbfs_plain_write_head(fs, h->inode, wfd, buf, size, off, writepage, err);
    else
        n = cbfs_plain_pwrite(wfd, buf, size, off, writepage, err);
    if (wfd != h->fd) close(wfd);
    return n;
}

/* Whether a plain write's failure (err, from cbfs_plain_write) is the
 * store's: EINVAL is the envelope check's refusal (cbfs_plain_write_head),
 * logged where made and no write error of the store. */
static bool cbfs_plain_store_err(int err)
{
    return err != EINVAL;
}

/* A write of h that failed (err) while nobody waits for its answer: a page
 * the kernel writes back. An error in the reply would stay with the kernel
 * for whichever descriptor of the file asks first (a reader's close, an
 * O_DIRECT read, another descriptor's fsync take it), and the writer's own
 * close would then return 0 with its bytes not stored (helper-27, plain
 * files; helper-30, a compressed file that stores nothing more). So the file
 * counts it, for every handle to hear at its next fsync and every close until
 * then (cbfs/errseq.h), and the WRITE is answered as written: the kernel's page
 * ends as after an error reply (clean, not stored). A plain file's is logged
 * once per run of failures nobody has heard of; the engine logs its own. */
static void cbfs_write_lost(struct cbfs_fs *fs, const struct cbfs_handle *h, off_t off, int err)
{
    const cbfs_err e = cbfs_err_from_errno(err);
    if (h->file) {
        cbfs_file_count_lost_write(h->file, e);
        return;
    }
    struct cbfs_errseq *const es = &h->inode->plain_errs;
    cbfs_mutex_lock(&h->inode->lock);
    const bool first = !cbfs_errseq_unheard(es); /* of a run nobody heard of yet */
    cbfs_errseq_count(es, e);
    cbfs_mutex_unlock(&h->inode->lock);
    if (first && cbfs_plain_store_err(err)) {
        char name[PATH_MAX];
        cbfs_inode_log_name(fs, h->inode, h->fd, name, sizeof name);
        cbfs_log_err("'%s': a page written back at offset %lld could not be stored: %s "
                     "(the file's writers hear it at their close or fsync)",
                     name, (long long)off, cbfs_err_str(e));
    }
}

void cbfs_op_lost_write(void *fs, uint64_t fh, uint64_t off, int err)
{
    cbfs_write_lost(fs, (const struct cbfs_handle *)(uintptr_t)fh, (off_t)off, err);
}

void cbfs_op_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                   struct fuse_file_info *fi)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    const struct cbfs_handle *const h = cbfs_fi_handle(fi);
    if (cbfs_chan_take_kill() && cbfs_reply_kill_failed(req, ino, h->inode)) return;
    ssize_t n = (ssize_t)size;
    int err = 0;
    if (!h->file) {
        n = cbfs_plain_write(fs, h, fi->writepage, buf, size, off, &err);
        if (n > 0) {
            cbfs_inode_plain_changed(h->inode);
            cbfs_engine_count_plain_write(fs->opt.eng, (uint64_t)n);
        }
        if (n == -1 && cbfs_plain_store_err(err)) cbfs_engine_count_write_error(fs->opt.eng);
    } else {
        /* O_APPEND without the writeback cache: the kernel leaves it to us.
         * (Appends from several handles at once are not atomic.) Not for a
         * page the kernel writes back (a shared mapping's, through whichever
         * handle it picks): that one belongs at off. */
        const uint64_t at = h->append && !fi->writepage ? cbfs_file_size(h->file) : (uint64_t)off;
        const cbfs_err e = cbfs_file_write(h->file, buf, size, at);
        if (e) {
            n = -1;
            err = cbfs_err_errno(e);
        }
    }
    if (n == -1 && fi->writepage) {
        cbfs_write_lost(fs, h, off, err);
        n = (ssize_t)size;
    }
    if (n == -1)
        fuse_reply_err(req, err);
    else
        fuse_reply_write(req, (size_t)n);
}

/* What a flush's settle (cbfs_file_sync) puts back: the inode's times. */
struct cbfs_flush_settle {
    struct cbfs_fs *fs;
    struct cbfs_inode *inode;
};

static cbfs_err cbfs_flush_settle(void *arg)
{
    const struct cbfs_flush_settle *const s = arg;
    const int err = cbfs_inode_restore_times(s->fs, s->inode);
    return err ? cbfs_err_from_errno(err) : CBFS_OK;
}

/* flush and fsync of a COMPRESSED file: everything written reaches the store
 * durably, the times the kernel set put back before the syncs; with meta
 * (fsync, not fdatasync or close) the metadata too (a chmod, chown or utimes
 * before it), which an fdatasync leaves to the store's next journal commit: a
 * power cut could bring back the old mode. Every handle hears of a failure
 * once at its fsync (cbfs_file_flush), the one that wrote or not, and at
 * every close (close: a FLUSH) until then. @return 0 or errno. */
static int cbfs_flush_handle(struct cbfs_fs *fs, struct cbfs_handle *h, bool close, bool meta)
{
    struct cbfs_flush_settle s = {.fs = fs, .inode = h->inode};
    const cbfs_err e =
        cbfs_file_sync(h->file, &h->err_seen, close, meta, cbfs_flush_settle, &s);
    return e ? cbfs_err_errno(e) : 0;
}

/* What a PLAIN file's flush or fsync through h reports: err, the store's
 * answer, or else the newest of the file's failed writebacks (cbfs_op_write)
 * that h has not heard of. After an fsync h has heard of them all; a close
 * (FLUSH) leaves them for the fsync (cbfs_errseq_peek). */
static int cbfs_plain_heard(struct cbfs_handle *h, bool close, int err)
{
    struct cbfs_inode *const inode = h->inode;
    cbfs_mutex_lock(&inode->lock);
    if (close && err && cbfs_plain_store_err(err)) {
        /* The store told this handle's fd of a failed writeback once (its
         * errseq), and the fd is the open file's, which a dup or a fork
         * shares: the close of one copy took it, and the writer's fsync
         * then returned 0 (its store fd's second sync). Counted, so that the
         * fsync hears it, as every handle does (cbfs/errseq.h). */
        cbfs_errseq_count(&inode->plain_errs, cbfs_err_from_errno(err));
    }
    const cbfs_err e = cbfs_errseq_hear(&inode->plain_errs, &h->err_seen, close);
    cbfs_mutex_unlock(&inode->lock);
    return err ? err : e ? cbfs_err_errno(e) : 0;
}

void cbfs_op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct cbfs_handle *const h = cbfs_fi_handle(fi);
    (void)ino;
    /* A reader's close reports nothing, as on a local filesystem (its
     * fsync does: each handle hears of a failure on its own). */
    if ((h->flags & O_ACCMODE) == O_RDONLY) {
        fuse_reply_err(req, 0);
        return;
    }
    if (!h->file) {
        /* A writer's close of a PLAIN file is an fdatasync, as a compressed
         * file's is (what a close acknowledged survives a power cut:
         * docs/OPERATIONS.md), unless nothing changed since its handle's last
         * sync. It also reports what the store keeps for close (NFS's write
         * errors), with no fd of its own to take. */
        const int err = cbfs_inode_plain_sync(h->inode, h->fd, &h->plain_synced, true, true);
        if (err) cbfs_engine_count_write_error(cbfs_req_fs(req)->opt.eng);
        fuse_reply_err(req, cbfs_plain_heard(h, true, err));
        return;
    }
    fuse_reply_err(req, cbfs_flush_handle(cbfs_req_fs(req), h, true, false));
}

void cbfs_op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    struct cbfs_handle *const h = cbfs_fi_handle(fi);
    (void)ino;
    if (!h->file) {
        const int err = cbfs_inode_plain_sync(h->inode, h->fd, &h->plain_synced, datasync, false);
        if (err) cbfs_engine_count_write_error(cbfs_req_fs(req)->opt.eng);
        fuse_reply_err(req, cbfs_plain_heard(h, false, err));
        return;
    }
    fuse_reply_err(req, cbfs_flush_handle(cbfs_req_fs(req), h, false, !datasync));
}

void cbfs_op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    /* errors of the final close are logged there; release cannot report */
    (void)cbfs_handle_close_file(cbfs_req_fs(req), cbfs_fi_handle(fi));
    fuse_reply_err(req, 0);
}

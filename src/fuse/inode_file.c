/* What a regular file's inode holds beyond the table (inode.c): its sidecar,
 * the logical size stat shows for a compressed file, the engine state shared
 * by every handle (opened at the first open, closed at the last put), and the
 * attributes the daemon keeps for it (times, set-id bits). Locking: see
 * inode.h. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/inode.h"

int cbfs_inode_idx_pin(struct cbfs_fs *fs, struct cbfs_inode *inode, int *fd)
{
    cbfs_assert_held(&inode->lock);
    if (!inode->has_idx) return ENOENT;
    return cbfs_storeobj_pin(&fs->fdc, &inode->idx, fd);
}

void cbfs_inode_idx_unpin(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    cbfs_assert_held(&inode->lock);
    cbfs_storeobj_unpin(&fs->fdc, &inode->idx);
}

/* inode->lock held. Opens the sidecar (if there is one) with flags through
 * /proc: *fd is -1 when the file has none. @return 0 or errno. */
static int cbfs_inode_idx_open(struct cbfs_fs *fs, struct cbfs_inode *inode, int flags, int *fd)
{
    char path[CBFS_PROCFD_MAX];
    int pfd;
    cbfs_assert_held(&inode->lock);
    *fd = -1;
    if (!inode->has_idx) return 0;
    int err = cbfs_inode_idx_pin(fs, inode, &pfd);
    if (err) return err;
    cbfs_procfd(path, pfd);
    *fd = cbfs_fs_openat(fs, AT_FDCWD, path, flags | O_CLOEXEC, 0);
    if (*fd == -1) err = errno;
    cbfs_inode_idx_unpin(fs, inode);
    return err;
}

/* The end of the log line for a compressed file whose index did not load
 * (e): what the admin can do about it; nothing where the store is not to
 * blame. */
static const char *cbfs_inode_load_advice(cbfs_err e)
{
    switch (e) {
    case CBFS_E_BLOCK_SIZE: /* never guessed: only the admin knows it */
        return " (cbfs fsck, unmounted, finds its sidecar where a crash cut a rename short; "
               "else restore its sidecar, or give the block size it was written with: "
               "cbfs fsck --repair --block-size SIZE)";
    case CBFS_E_UNREACHABLE: /* cbfs_file_load_index: not served, not repairable */
        return " (restore its sidecar to read it all; cbfs cat --keep-going copies out "
               "what can be reached)";
    case CBFS_E_WRONG_FILE: /* the loader's verdict, from what the sidecar records */
        return " (the sidecar looks like a leftover of a lost file: nothing of it is in "
               "this data file; cbfs fsck --repair removes a leftover sidecar)";
    case CBFS_E_MFILE:
    case CBFS_E_NFILE:
    case CBFS_E_NOMEM:
        return "";
    default:
        return " (cbfs fsck checks the store)";
    }
}

/* inode->lock held. Logical size and block size of a compressed file with no
 * open state (fd: its pinned O_PATH fd): read from its index with temporary
 * read-only fds (O_NOATIME: a stat is no read). @return 0 or errno; a failure
 * is logged with the file's name. */
static int cbfs_inode_peek(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd, uint64_t *size,
                           uint32_t *block_size)
{
    char path[CBFS_PROCFD_MAX], logname[PATH_MAX];
    const char *why;
    int err, ifd = -1;
    cbfs_err e = CBFS_OK;
    cbfs_assert_held(&inode->lock);
    cbfs_procfd(path, fd);
    const int dfd = cbfs_fs_openat(fs, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOATIME, 0);
    if (dfd == -1) {
        err = errno;
        why = strerror(err);
        goto out;
    }
    err = cbfs_inode_idx_open(fs, inode, O_RDONLY, &ifd);
    why = strerror(err);
    if (err) goto out;
    e = cbfs_file_peek(fs->opt.eng, dfd, ifd, size, block_size);
    err = cbfs_err_errno(e);
    why = cbfs_err_str(e);
out:
    if (err) {
        /* A file known only by its handle has no sidecar known (found
         * through its name), and where its frames do not tell its block
         * size nothing is lost: a lookup names it (docs/NFS.md). The advice
         * to restore the sidecar was wrong there. */
        cbfs_mutex_lock(&fs->lock);
        const bool nameless = e == CBFS_E_BLOCK_SIZE && !inode->has_idx && !inode->parent;
        cbfs_mutex_unlock(&fs->lock);
        cbfs_inode_log_name(fs, inode, fd, logname, sizeof logname);
        if (nameless)
            cbfs_log_info("cannot read the logical size of '%s' without its sidecar, which its "
                          "name finds (it was reached by file handle): not served until a lookup "
                          "names it",
                          logname);
        else
            cbfs_log_warn("cannot read the logical size of '%s': %s%s", logname, why,
                          cbfs_inode_load_advice(e ? e : cbfs_err_from_errno(err)));
    }
    if (ifd >= 0) close(ifd);
    if (dfd >= 0) close(dfd);
    return err;
}

/* fd: inode's pinned O_PATH fd; st: its fstat. Puts the logical size, the
 * file's block size (st_blksize: SEEK_HOLE/SEEK_DATA answer in blocks) and
 * the sidecar's blocks in. @return 0 or errno: nothing is shown that is not
 * true. */
static int cbfs_inode_stat_compressed(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd,
                                      struct stat *st)
{
    struct stat ist;
    uint64_t size = 0;
    uint32_t bs = 0;
    int err = 0, ifd;
    cbfs_mutex_lock(&inode->lock);
    if (inode->file) {
        size = cbfs_file_size(inode->file);
        bs = cbfs_file_block_size(inode->file);
    } else if (inode->size_valid) {
        size = inode->size;
        bs = inode->block_size;
    } else {
        err = cbfs_inode_peek(fs, inode, fd, &size, &bs);
        if (err == 0) {
            inode->size = size;
            inode->block_size = bs;
            inode->size_valid = true;
        }
    }
    if (err == 0 && inode->has_idx && (err = cbfs_inode_idx_pin(fs, inode, &ifd)) == 0) {
        if (fstat(ifd, &ist) == 0)
            st->st_blocks += ist.st_blocks;
        else
            err = errno;
        cbfs_inode_idx_unpin(fs, inode);
    }
    cbfs_mutex_unlock(&inode->lock);
    if (err == 0) {
        st->st_size = (off_t)size;
        st->st_blksize = (blksize_t)bs;
    }
    return err;
}

/* A COMPRESSED file the engine has open, stat'ed through the engine's own
 * descriptors (cbfs_file_data_fd). @return 0 or errno, or -1: not open. */
static int cbfs_inode_stat_open(struct cbfs_inode *inode, struct stat *st)
{
    int err = -1;
    struct stat ist;
    cbfs_mutex_lock(&inode->lock);
    if (inode->file) {
        const int ifd = cbfs_file_idx_fd(inode->file);
        if (fstat(cbfs_file_data_fd(inode->file), st) == -1 ||
            (ifd >= 0 && fstat(ifd, &ist) == -1)) {
            err = errno;
        } else {
            err = 0;
            if (ifd >= 0) st->st_blocks += ist.st_blocks;
            st->st_size = (off_t)cbfs_file_size(inode->file);
            st->st_blksize = (blksize_t)cbfs_file_block_size(inode->file);
        }
    }
    cbfs_mutex_unlock(&inode->lock);
    return err;
}

int cbfs_inode_stat_via(struct cbfs_fs *fs, struct cbfs_inode *inode, int hfd, struct stat *st)
{
    if (inode->kind == CBFS_KIND_COMPRESSED || hfd < 0) return cbfs_inode_stat(fs, inode, st);
    if (fstat(hfd, st) == -1) return errno;
    cbfs_inode_dir_nlink(fs, hfd, st);
    return 0;
}

int cbfs_inode_stat(struct cbfs_fs *fs, struct cbfs_inode *inode, struct stat *st)
{
    if (inode->kind == CBFS_KIND_COMPRESSED) {
        const int err = cbfs_inode_stat_open(inode, st);
        if (err != -1) return err;
    }
    int fd, err = cbfs_inode_pin(fs, inode, &fd);
    if (err) return err;
    if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1)
        err = errno;
    else if (inode->kind == CBFS_KIND_COMPRESSED)
        err = cbfs_inode_stat_compressed(fs, inode, fd, st);
    else
        cbfs_inode_dir_nlink(fs, fd, st);
    cbfs_inode_unpin(fs, inode);
    return err;
}

void cbfs_inode_log_name(const struct cbfs_fs *fs, const struct cbfs_inode *inode, int fd,
                         char *buf, size_t cap)
{
    const cbfs_err e = cbfs_procfd_path(fd, buf, cap);
    if (buf[0] == '\0' || (e && e != CBFS_E_NAMETOOLONG)) { /* a cut name still names it */
        snprintf(buf, cap, "inode %llu", (unsigned long long)inode->ino);
        return;
    }
    const size_t sl = strlen(fs->store_path);
    if (sl > 0 && strncmp(buf, fs->store_path, sl) == 0 && buf[sl] == '/')
        memmove(buf, buf + sl + 1, strlen(buf + sl + 1) + 1);
}

/* inode->lock held; fd: inode's pinned O_PATH fd. Opens (creating if lost)
 * the sidecar for the engine. On success *ifd is open with the given access
 * mode, or -1 if the sidecar is missing and cannot be created on a read-only
 * store (the engine then rebuilds the index in memory). Where writable is
 * asked and cannot be had, the caller opens read-only: EROFS where the
 * sidecar and the file's name are both unknown (the engine must not write
 * without its sidecar: "Nameless files", inode.h), EACCES where the sidecar
 * is not this file's to write (cbfs_store_sidecar_owned), EEXIST where
 * something else is at the sidecar's name (logged; not ours to take over). */
static int cbfs_inode_open_sidecar(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd,
                                   bool writable, int *ifd)
{
    char name[NAME_MAX + 1], sc[CBFS_STORE_SIDECAR_PATH_MAX];
    struct cbfs_inode *dir = NULL;
    int err, dirfd;

    cbfs_assert_held(&inode->lock);
    if (inode->has_idx) {
        /* The engine writes its index into the sidecar: only into one that
         * is this file's (cbfs_store_sidecar_owned), never into someone
         * else's file that a user who can write the store put at the
         * sidecar's name. EACCES: the caller opens read-only. */
        if (writable) {
            int pfd;
            if ((err = cbfs_inode_idx_pin(fs, inode, &pfd)) != 0) return err;
            const cbfs_err e = cbfs_store_sidecar_owned(fd, pfd);
            cbfs_inode_idx_unpin(fs, inode);
            if (e == CBFS_E_PERM) {
                char logname[PATH_MAX];
                cbfs_inode_log_name(fs, inode, fd, logname, sizeof logname);
                cbfs_log_warn("'%s': its sidecar is not owned as the file is (if it is the "
                              "file's index, chown it to the file's owner): read-only",
                              logname);
                return EACCES;
            }
            if (e) return cbfs_err_errno(e);
        }
        return cbfs_inode_idx_open(fs, inode, writable ? O_RDWR : O_RDONLY, ifd);
    }
    *ifd = -1;
    if (!writable) return 0;
    /* until the sidecar is in place: a rename or unlink must not take the
     * name from under it (fs->names_lock) */
    cbfs_mutex_lock(&fs->names_lock);
    err = cbfs_inode_get_location(fs, inode, &dir, name, sizeof name);
    if (err == ENOENT) {
        cbfs_mutex_unlock(&fs->names_lock);
        cbfs_log_info("inode %llu: its name and sidecar are not known (it was reached by "
                      "file handle, or unlinked): read-only until a lookup names it",
                      (unsigned long long)inode->ino);
        return EROFS;
    }
    if (err) {
        cbfs_mutex_unlock(&fs->names_lock);
        return err;
    }
    err = cbfs_inode_sidecar_path(fs, name, sc, sizeof sc);
    if (err) goto out;
    err = cbfs_inode_pin(fs, dir, &dirfd);
    if (err) goto out;
    err = cbfs_inode_sidecar_dir(fs, dirfd);
    if (err) goto out_unpin;
    /* O_EXCL: what is at the sidecar's name (a sidecar that appeared since
     * the lookup, or a directory, FIFO, symlink put there in the store) is
     * not ours to take over or chown (cbfs_store_sidecar_match) */
    *ifd = cbfs_fs_openat(fs, dirfd, sc, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                          0600);
    if (*ifd == -1) {
        err = errno;
        if (err == EEXIST)
            cbfs_log_warn("'%s': something that is not its sidecar is at the sidecar's name %s: "
                          "read-only until it is removed",
                          name, sc);
        goto out_unpin;
    }
    cbfs_log_info("index sidecar of '%s' is missing: rebuilding it from the frames", name);
    const cbfs_err e = cbfs_store_sidecar_match(fd, *ifd, NULL);
    if (e)
        cbfs_log_warn("cannot give the new sidecar of '%s' the owner, mode and ACL of its data "
                      "file: %s",
                      name, cbfs_err_str(e));
    const int pfd = cbfs_fs_openat(fs, dirfd, sc, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (pfd == -1 || cbfs_storeobj_init(&fs->fdc, &inode->idx, pfd, false) != 0) {
        err = pfd == -1 ? errno : ENOMEM;
        close(*ifd);
        *ifd = -1;
    } else {
        inode->has_idx = true;
    }
out_unpin:
    cbfs_inode_unpin(fs, dir);
out:
    cbfs_mutex_unlock(&fs->names_lock);
    cbfs_inode_unref(fs, dir, 1);
    return err;
}

/* Codec for blocks rewritten in a compressed file on a codec=none mount
 * (the engine needs a real one): the codec and level of the file's first
 * frame, else (no frame yet, or one of a codec not built in) the first codec
 * built in, at its default level. @return 0, or the errno of reading it. */
static int cbfs_inode_own_codec(int dfd, const struct cbfs_codec_ops **codec, int *level)
{
    struct cbfs_frame_hdr h;
    struct stat st;
    *codec = NULL;
    if (fstat(dfd, &st) == -1) return errno;
    const int noatime = cbfs_noatime_begin(dfd); /* no read of the file */
    const cbfs_err e = cbfs_frame_read_hdr(dfd, 0, (uint64_t)st.st_size, &h);
    cbfs_noatime_end(dfd, noatime);
    if (e == CBFS_OK) {
        *codec = cbfs_codec_by_id(h.codec);
        *level = h.level;
        if (*codec && cbfs_codec_check_level(*codec, *level, NULL, 0) != CBFS_OK)
            *level = (*codec)->default_level;
    } else if (cbfs_err_errno(e) != EIO) {
        return cbfs_err_errno(e); /* EIO: damaged first frame; the codec is ours to pick */
    }
    for (unsigned id = CBFS_CODEC_NONE + 1; id <= CBFS_CODEC_MAX_ID; id++) {
        if (*codec && (*codec)->id != CBFS_CODEC_NONE) return 0;
        *codec = cbfs_codec_by_id(id);
        if (*codec) *level = (*codec)->default_level;
    }
    return 0;
}

/* inode->lock held, no engine state yet; fd: inode's pinned O_PATH fd.
 * Opens the engine state (read-write where the store allows). */
static int cbfs_inode_file_open(struct cbfs_fs *fs, struct cbfs_inode *inode, int fd)
{
    char path[CBFS_PROCFD_MAX], logname[PATH_MAX];
    int err, dfd, ifd = -1, ro_errno = EROFS;
    bool writable = !fs->opt.readonly;

    cbfs_assert_held(&inode->lock);
    assert(!inode->file);
    cbfs_procfd(path, fd);
retry:
    dfd = cbfs_fs_openat(fs, AT_FDCWD, path, (writable ? O_RDWR : O_RDONLY) | O_CLOEXEC, 0);
    if (dfd == -1) {
        err = errno;
        if (writable && (err == EROFS || err == EACCES)) {
            writable = false;
            goto retry;
        }
        return err;
    }
    err = cbfs_inode_open_sidecar(fs, inode, fd, writable, &ifd);
    if (err) {
        close(dfd);
        /* (cbfs_inode_open_sidecar's cases) and ENOSPC, EDQUOT: no room for
         * a missing sidecar; the file is still served for reading (its index
         * rebuilt in memory where there is no sidecar to read) */
        if (writable && (err == EROFS || err == EACCES || err == EEXIST || err == ENOSPC ||
                         err == EDQUOT)) {
            if (err == EACCES || err == ENOSPC || err == EDQUOT) ro_errno = err;
            if (err == EEXIST) ro_errno = EACCES; /* logged: what is in the way */
            writable = false;
            goto retry;
        }
        return err;
    }
    struct cbfs_file *f = NULL;
    const struct cbfs_codec_ops *codec = fs->opt.codec;
    int level = fs->opt.level;
    if ((!codec || codec->id == CBFS_CODEC_NONE) &&
        (err = cbfs_inode_own_codec(dfd, &codec, &level)) != 0) {
        if (ifd >= 0) close(ifd);
        close(dfd);
        return err;
    }
    /* dfd and ifd belong to the engine from here on, also on failure */
    const cbfs_err e = cbfs_file_open(fs->opt.eng, dfd, ifd, false, writable, codec, level, &f);
    cbfs_inode_log_name(fs, inode, fd, logname, sizeof logname);
    if (e && writable &&
        (e == CBFS_E_NOSPC || e == CBFS_E_DQUOT || e == CBFS_E_FBIG || e == CBFS_E_IO ||
         e == CBFS_E_ROFS)) {
        /* the repair a writable open does (a torn tail cut, records the
         * sidecar lacks) was refused by the store: a full store, and one
         * that still reads but fails writes (a failing disk, a thin pool out
         * of room, an ext4 going read-only mid-repair), must not make its
         * files unreadable, so load it read-only, repairing nothing. A read
         * error fails that load again, and is answered as before. */
        cbfs_log_warn("'%s': the store refused the repair of its index (%s): read-only until it "
                      "is reopened with the store writable and space free",
                      logname, cbfs_err_str(e));
        ro_errno = cbfs_err_errno(e);
        writable = false;
        goto retry;
    }
    if (e) {
        cbfs_log_err("cannot open '%s': %s%s", logname, cbfs_err_str(e),
                     cbfs_inode_load_advice(e));
        return cbfs_err_errno(e);
    }
    cbfs_file_set_name(f, logname);
    inode->file = f;
    inode->opens = 1;
    inode->ro_errno = writable ? 0 : ro_errno;
    inode->size_valid = false;
    return 0;
}

int cbfs_inode_file_get(struct cbfs_fs *fs, struct cbfs_inode *inode, struct cbfs_file **file)
{
    int fd, err = cbfs_inode_pin(fs, inode, &fd);
    if (err) return err;
    assert(inode->kind == CBFS_KIND_COMPRESSED);
    cbfs_mutex_lock(&inode->lock);
    if (inode->file) {
        inode->opens++;
    } else {
        err = cbfs_inode_file_open(fs, inode, fd);
    }
    if (err == 0) *file = inode->file;
    cbfs_mutex_unlock(&inode->lock);
    cbfs_inode_unpin(fs, inode);
    return err;
}


int cbfs_inode_mode_clear(int fd, const struct stat *st, mode_t clear, bool *changed)
{
    char path[CBFS_PROCFD_MAX];
    const mode_t mode = st->st_mode & 07777 & ~clear;
    *changed = false;
    if (mode == (st->st_mode & 07777)) return 0;
    cbfs_procfd(path, fd);
    if (chmod(path, mode) == -1) return errno;
    *changed = true;
    return 0;
}

int cbfs_inode_kill_suidgid(struct cbfs_fs *fs, struct cbfs_inode *inode, bool *changed)
{
    *changed = false;
    struct stat st;
    int fd, err = cbfs_inode_pin(fs, inode, &fd);
    if (err) return err;
    if (fstatat(fd, "", &st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
        err = errno;
    } else {
        /* set-group-ID without group execute marks mandatory locking, not a
         * privilege: the kernel keeps it (should_remove_suid), and so do we */
        const mode_t clear = S_ISUID | (st.st_mode & S_IXGRP ? S_ISGID : 0);
        err = cbfs_inode_mode_clear(fd, &st, clear, changed);
    }
    cbfs_inode_unpin(fs, inode);
    return err;
}

void cbfs_inode_plain_changed(struct cbfs_inode *inode)
{
    /* release: a sync that sees this count began after the change was made */
    atomic_fetch_add_explicit(&inode->plain_changes, 1, memory_order_release);
}

/* Raises *count to seen, never lowers it (a slower sync of fewer changes). */
static void cbfs_plain_raise(_Atomic uint64_t *count, uint64_t seen)
{
    uint64_t cur = atomic_load_explicit(count, memory_order_relaxed);
    while (cur < seen && !atomic_compare_exchange_weak_explicit(count, &cur, seen,
                                                                memory_order_release,
                                                                memory_order_relaxed)) {
    }
}

int cbfs_inode_plain_sync(struct cbfs_inode *inode, int fd, _Atomic uint64_t *fd_synced,
                          bool datasync, bool if_changed)
{
    const uint64_t seen = atomic_load_explicit(&inode->plain_changes, memory_order_acquire);
    if (if_changed && atomic_load_explicit(fd_synced, memory_order_acquire) >= seen) return 0;
    if ((datasync ? fdatasync(fd) : fsync(fd)) == -1) return errno;
    /* every change counted in seen was made before this sync began */
    cbfs_plain_raise(fd_synced, seen);
    cbfs_plain_raise(&inode->plain_synced, seen);
    return 0;
}

void cbfs_inode_record_times(struct cbfs_inode *inode, const struct timespec tv[2])
{
    struct timespec now;
    clock_gettime(CLOCK_REALTIME, &now);
    cbfs_mutex_lock(&inode->lock);
    if (inode->file) {
        if (!inode->times_set) inode->times[0].tv_nsec = inode->times[1].tv_nsec = UTIME_OMIT;
        for (int i = 0; i < 2; i++)
            if (tv[i].tv_nsec != UTIME_OMIT) inode->times[i] = tv[i].tv_nsec == UTIME_NOW ? now : tv[i];
        inode->times_set = true;
    }
    cbfs_mutex_unlock(&inode->lock);
}

/* inode->lock held. Through via where it is a descriptor of the data file
 * (>= 0: the last close's, cbfs_inode_file_put), else through the engine's
 * data file while it is open (a flush's or fsync's settle): no descriptor of
 * its own, which a daemon out of them has not (a close then failed with
 * EMFILE, helper-65); else through the pinned O_PATH fd. */
static int cbfs_inode_restore_times_locked(struct cbfs_fs *fs, struct cbfs_inode *inode, int via)
{
    int fd = via, err = 0;
    cbfs_assert_held(&inode->lock);
    if (!inode->times_set) return 0;
    if (fd < 0 && inode->file) fd = cbfs_file_data_fd(inode->file);
    const bool pinned = fd < 0;
    if (pinned && (err = cbfs_inode_pin(fs, inode, &fd)) != 0) return err;
    if (utimensat(fd, "", inode->times, AT_EMPTY_PATH) == -1) err = errno;
    if (pinned) cbfs_inode_unpin(fs, inode);
    return err;
}

int cbfs_inode_restore_times(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    cbfs_mutex_lock(&inode->lock);
    const int err = cbfs_inode_restore_times_locked(fs, inode, -1);
    cbfs_mutex_unlock(&inode->lock);
    return err;
}

int cbfs_inode_file_put(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    int err = 0;
    cbfs_mutex_lock(&inode->lock);
    assert(inode->opens > 0 && inode->file);
    if (--inode->opens == 0) {
        struct cbfs_file *const f = inode->file;
        inode->size = cbfs_file_size(f);
        inode->block_size = cbfs_file_block_size(f);
        inode->file = NULL;
        /* The times go back after the close's flush, whose writes move
         * them, through a copy of the data file's descriptor taken before
         * the engine closes its own: reopening the O_PATH fd after it, out
         * of descriptors or with its handle failing (ENOMEM, seen under an
         * fd limit of 64 with caches dropping: helper-65), lost them. The
         * pin stays the fallback where no copy can be had. */
        const int via = inode->times_set ? fcntl(cbfs_file_data_fd(f), F_DUPFD_CLOEXEC, 0) : -1;
        /* Closing under the lock: a concurrent first open waits and then sees
         * everything this close wrote. */
        const cbfs_err e = cbfs_file_close(f);
        inode->size_valid = e == CBFS_OK;
        if (e) {
            cbfs_log_err("closing inode %llu failed, data written through it may be lost: %s",
                         (unsigned long long)inode->ino, cbfs_err_str(e));
            err = cbfs_err_errno(e);
        }
        /* ESTALE: its object is gone (unlinked, and its fd left the fd cache
         * while the file was open): there are no times to keep */
        const int terr = cbfs_inode_restore_times_locked(fs, inode, via);
        if (via >= 0) close(via);
        if (terr && terr != ESTALE)
            cbfs_log_warn("cannot put back the times of inode %llu: %s",
                          (unsigned long long)inode->ino, strerror(terr));
        inode->times_set = false;
    }
    cbfs_mutex_unlock(&inode->lock);
    return err;
}

void cbfs_inode_file_install(struct cbfs_inode *inode, struct cbfs_file *file)
{
    cbfs_mutex_lock(&inode->lock);
    assert(!inode->file && inode->opens == 0);
    inode->file = file;
    inode->opens = 1;
    inode->ro_errno = 0;
    inode->size_valid = false;
    cbfs_mutex_unlock(&inode->lock);
}

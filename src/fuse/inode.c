/* The inode table: lookup and reference counting of store objects, the kind
 * of regular files (plain or compressed) and where their sidecar is; what a
 * regular file's inode holds beyond that is in inode_file.c. Locking: see
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

#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/inode.h"

bool cbfs_inode_name_hidden(const struct cbfs_fs *fs, const struct cbfs_inode *dir,
                            const char *name)
{
    return cbfs_store_name_hidden(fs->opt.layout, name, dir == fs->root);
}

void cbfs_inode_dir_nlink(const struct cbfs_fs *fs, int fd, struct stat *st)
{
    if (!S_ISDIR(st->st_mode)) return;
    const bool root = st->st_dev == fs->root->dev && st->st_ino == fs->root->ino;
    st->st_nlink = cbfs_store_dir_nlink(fs->opt.layout, fd, root, st->st_nlink);
}

int cbfs_inode_name_check(const struct cbfs_fs *fs, const struct cbfs_inode *dir, const char *name,
                          const char *op)
{
    const cbfs_err e = cbfs_store_name_check(fs->opt.layout, name, dir == fs->root, op != NULL);
    if (e == CBFS_E_PERM)
        cbfs_log_info("%s '%s' refused: the name is reserved by cbfs (" CBFS_STORE_RESERVED_RULE
                      ")",
                      op, name);
    return cbfs_err_errno(e);
}

int cbfs_inode_sidecar_path(const struct cbfs_fs *fs, const char *name, char *buf, size_t cap)
{
    return cbfs_err_errno(cbfs_store_sidecar_path(fs->opt.layout, name, buf, cap));
}

int cbfs_inode_sidecar_dir(const struct cbfs_fs *fs, int dirfd)
{
    return cbfs_err_errno(cbfs_store_sidecar_dir(fs->opt.layout, dirfd));
}

/* ---- hash table (fs->lock held) ---- */

static size_t cbfs_itable_slot(const struct cbfs_fs *fs, dev_t dev, ino_t ino)
{
    uint64_t h = ((uint64_t)dev * 0x9E3779B97F4A7C15ull) ^ (uint64_t)ino;
    h *= 0xBF58476D1CE4E5B9ull;
    return (size_t)(h >> 32) & (fs->nbuckets - 1);
}

/* The newest inode of (dev, ino): a stale one (see "Node ids") may follow it
 * in the chain. */
static struct cbfs_inode *cbfs_itable_find(struct cbfs_fs *fs, dev_t dev, ino_t ino)
{
    cbfs_assert_held(&fs->lock);
    struct cbfs_inode *p = fs->buckets[cbfs_itable_slot(fs, dev, ino)];
    while (p && !(p->ino == ino && p->dev == dev)) p = p->hnext;
    return p;
}

/* The inode whose node id is the inode number nodeid (not a local id, not
 * the root's). */
static struct cbfs_inode *cbfs_itable_find_id(struct cbfs_fs *fs, fuse_ino_t nodeid)
{
    cbfs_assert_held(&fs->lock);
    struct cbfs_inode *p = fs->buckets[cbfs_itable_slot(fs, fs->dev, (ino_t)nodeid)];
    while (p && !(p->nodeid == nodeid && p->dev == fs->dev)) p = p->hnext;
    return p;
}

#define CBFS_XINO_BITS 48
#define CBFS_XINO_MAX 0x7fffu /* file systems that fit bits 48-62 */

/* The number the mount shows for inode number ino of file system dev, other
 * than the store root's (cbfs_inode_st_ino's scheme) into *out. @return
 * false past CBFS_XINO_MAX file systems or without memory. */
static bool cbfs_itable_xino(struct cbfs_fs *fs, dev_t dev, ino_t ino, ino_t *out)
{
    cbfs_assert_held(&fs->lock);
    size_t i = 0;
    while (i < fs->nxdevs && fs->xdevs[i] != dev) i++;
    if (i == fs->nxdevs) {
        dev_t *const v = i < CBFS_XINO_MAX ? realloc(fs->xdevs, (i + 1) * sizeof *v) : NULL;
        if (!v) return false;
        v[i] = dev;
        fs->xdevs = v;
        fs->nxdevs = i + 1;
    }
    *out = (ino_t)(CBFS_NODEID_LOCAL | ((uint64_t)(i + 1) << CBFS_XINO_BITS) |
                   ((uint64_t)ino & ((1ull << CBFS_XINO_BITS) - 1)));
    return true;
}

/* inode's st_ino as the mount shows it (cbfs_inode_st_ino), its node id set. */
static ino_t cbfs_itable_shown_ino(struct cbfs_fs *fs, const struct cbfs_inode *inode)
{
    cbfs_assert_held(&fs->lock);
    ino_t x;
    if (inode->dev == fs->dev) return inode->ino;
    return cbfs_itable_xino(fs, inode->dev, inode->ino, &x) ? x : (ino_t)inode->nodeid;
}

/* Gives inode, about to enter the table, its node id: its inode number where
 * that is a stable id no other inode holds, else a local id; and the inode
 * number the mount shows. */
static void cbfs_itable_assign_id(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    cbfs_assert_held(&fs->lock);
    const bool natural = inode->dev == fs->dev && inode->ino > FUSE_ROOT_ID &&
                         (uint64_t)inode->ino < CBFS_NODEID_LOCAL;
    if (natural && !cbfs_itable_find_id(fs, (fuse_ino_t)inode->ino)) {
        inode->nodeid = (fuse_ino_t)inode->ino;
    } else {
        assert(((uintptr_t)inode & CBFS_NODEID_LOCAL) == 0);
        inode->nodeid = (fuse_ino_t)(uintptr_t)inode | CBFS_NODEID_LOCAL;
    }
    inode->shown_ino = cbfs_itable_shown_ino(fs, inode);
}

/* Doubles the table when it is full; on allocation failure it just stays
 * denser (chains get longer, nothing breaks). */
static void cbfs_itable_grow(struct cbfs_fs *fs)
{
    cbfs_assert_held(&fs->lock);
    const size_t n = fs->nbuckets * 2;
    struct cbfs_inode **b = calloc(n, sizeof *b);
    if (!b) return;
    struct cbfs_inode **old = fs->buckets;
    const size_t oldn = fs->nbuckets;
    fs->buckets = b;
    fs->nbuckets = n;
    for (size_t i = 0; i < oldn; i++) {
        struct cbfs_inode *p = old[i];
        while (p) {
            struct cbfs_inode *next = p->hnext;
            const size_t s = cbfs_itable_slot(fs, p->dev, p->ino);
            p->hnext = b[s];
            b[s] = p;
            p = next;
        }
    }
    free(old);
}

static void cbfs_itable_insert(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    cbfs_assert_held(&fs->lock);
    if (fs->count >= fs->nbuckets) cbfs_itable_grow(fs);
    const size_t s = cbfs_itable_slot(fs, inode->dev, inode->ino);
    inode->hnext = fs->buckets[s];
    fs->buckets[s] = inode;
    fs->count++;
}

static void cbfs_itable_remove(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    cbfs_assert_held(&fs->lock);
    struct cbfs_inode **pp = &fs->buckets[cbfs_itable_slot(fs, inode->dev, inode->ino)];
    while (*pp != inode) pp = &(*pp)->hnext;
    *pp = inode->hnext;
    fs->count--;
}

/* Frees an inode that is in no table. Engine state is closed by then (handles
 * hold refs); if not, close it here rather than leak it or its data. That
 * close runs under fs->lock (cbfs_inode_unref_locked), against inode.h's
 * rule of no engine calls there: it stalls the table for one flush, and only
 * a reference-counting bug leads here. */
static void cbfs_inode_destroy(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    if (inode->file) {
        cbfs_log_err("internal: inode %llu freed with open engine state",
                     (unsigned long long)inode->ino);
        (void)cbfs_file_close(inode->file);
    }
    if (inode->has_idx) cbfs_storeobj_release(&fs->fdc, &inode->idx);
    cbfs_storeobj_release(&fs->fdc, &inode->obj);
    free(inode->name);
    cbfs_mutex_destroy(&inode->lock);
    free(inode);
}

/* A new inode for the O_PATH fd (owned from here, also on failure) of the
 * object st describes, of generation gen; pinned_for_life for the root. Its
 * node id is set when it enters the table. NULL if out of memory. */
static struct cbfs_inode *cbfs_inode_alloc(struct cbfs_fs *fs, int fd, const struct stat *st,
                                           uint32_t gen, bool pinned_for_life)
{
    struct cbfs_inode *inode = calloc(1, sizeof *inode);
    if (!inode) {
        close(fd);
        return NULL;
    }
    cbfs_mutex_init(&inode->lock);
    inode->idx.fd = -1;
    if (cbfs_storeobj_init(&fs->fdc, &inode->obj, fd, pinned_for_life) != 0) {
        cbfs_mutex_destroy(&inode->lock);
        free(inode);
        return NULL;
    }
    inode->dev = st->st_dev;
    inode->ino = st->st_ino;
    inode->type = st->st_mode & S_IFMT;
    inode->gen = gen;
    inode->refs = 1;
    return inode;
}

/* fs->lock held. Drops n refs; what reaches zero leaves the table and drops
 * its own ref on its location directory, and so on up. */
static void cbfs_inode_unref_locked(struct cbfs_fs *fs, struct cbfs_inode *inode, uint64_t n)
{
    cbfs_assert_held(&fs->lock);
    while (inode) {
        assert(inode->refs >= n);
        inode->refs -= n;
        if (inode->refs > 0 || inode == fs->root) return;
        struct cbfs_inode *const parent = inode->parent;
        cbfs_itable_remove(fs, inode);
        inode->parent = NULL;
        cbfs_inode_destroy(fs, inode);
        inode = parent;
        n = 1;
    }
}

int cbfs_itable_init(struct cbfs_fs *fs)
{
    struct stat st;
    if (fstat(fs->opt.store_fd, &st) == -1) return errno;
    const int fd = fcntl(fs->opt.store_fd, F_DUPFD_CLOEXEC, 3);
    if (fd == -1) return errno;
    fs->nbuckets = 1024;
    fs->buckets = calloc(fs->nbuckets, sizeof *fs->buckets);
    int err = fs->buckets ? cbfs_fdcache_init(&fs->fdc, fd, cbfs_fdcache_default_cap()) : ENOMEM;
    if (err) {
        free(fs->buckets);
        fs->buckets = NULL;
        close(fd);
        return err;
    }
    fs->root = cbfs_inode_alloc(fs, fd, &st, 0, true);
    if (!fs->root) return ENOMEM;
    fs->root->nodeid = FUSE_ROOT_ID;
    fs->root->shown_ino = st.st_ino;
    fs->dev = st.st_dev;
    cbfs_mutex_lock(&fs->lock); /* no other thread yet: for the table's contract */
    cbfs_itable_insert(fs, fs->root);
    cbfs_mutex_unlock(&fs->lock);
    const char *const why = cbfs_fdcache_ino_probe(&fs->fdc, fd, &st);
    fs->export = why == NULL;
    if (fs->export)
        cbfs_log_info("NFS export: file handles of the mount survive cache drops and restarts");
    else
        cbfs_log_info("NFS export: off, file handles of the mount go stale when the kernel "
                      "drops its caches: %s",
                      why);
    return 0;
}

void cbfs_itable_free(struct cbfs_fs *fs)
{
    if (!fs->buckets) return;
    for (size_t i = 0; i < fs->nbuckets; i++) {
        struct cbfs_inode *p = fs->buckets[i];
        while (p) {
            struct cbfs_inode *const next = p->hnext;
            /* parents are freed by this same walk, not through refs */
            cbfs_inode_destroy(fs, p);
            p = next;
        }
    }
    cbfs_fdcache_destroy(&fs->fdc);
    free(fs->xdevs);
    fs->xdevs = NULL;
    fs->nxdevs = 0;
    free(fs->buckets);
    fs->buckets = NULL;
    fs->root = NULL;
}

struct cbfs_inode *cbfs_inode_get(struct cbfs_fs *fs, fuse_ino_t nodeid)
{
    if (nodeid == FUSE_ROOT_ID) return fs->root;
    if (nodeid & CBFS_NODEID_LOCAL)
        return (struct cbfs_inode *)(uintptr_t)(nodeid & ~CBFS_NODEID_LOCAL);
    cbfs_mutex_lock(&fs->lock);
    struct cbfs_inode *const inode = cbfs_itable_find_id(fs, nodeid);
    cbfs_mutex_unlock(&fs->lock);
    return inode;
}

struct cbfs_inode *cbfs_inode_find_nodeid(struct cbfs_fs *fs, fuse_ino_t nodeid)
{
    if (nodeid & CBFS_NODEID_LOCAL) return NULL;
    cbfs_mutex_lock(&fs->lock);
    struct cbfs_inode *const inode =
        nodeid == FUSE_ROOT_ID ? fs->root : cbfs_itable_find_id(fs, nodeid);
    if (inode) inode->refs++;
    cbfs_mutex_unlock(&fs->lock);
    return inode;
}

fuse_ino_t cbfs_inode_nodeid(const struct cbfs_fs *fs, const struct cbfs_inode *inode)
{
    (void)fs;
    return inode->nodeid;
}

ino_t cbfs_inode_st_ino(const struct cbfs_fs *fs, const struct cbfs_inode *inode)
{
    (void)fs;
    return inode->shown_ino;
}

ino_t cbfs_inode_map_ino(struct cbfs_fs *fs, dev_t dev, ino_t ino)
{
    if (dev == fs->dev) return ino;
    ino_t x;
    cbfs_mutex_lock(&fs->lock);
    const bool ok = cbfs_itable_xino(fs, dev, ino, &x);
    cbfs_mutex_unlock(&fs->lock);
    return ok ? x : ino;
}

ino_t cbfs_inode_dirent_ino(const struct cbfs_fs *fs, const struct cbfs_inode *dir, ino_t d_ino)
{
    const uint64_t low = (1ull << CBFS_XINO_BITS) - 1, shown = (uint64_t)dir->shown_ino;
    /* dir's own number says where its file system's objects are numbered
     * (bits 48-62 set); a directory that got its node id instead (an address
     * below 2^47 with bit 63) has none */
    if (dir->dev == fs->dev || (shown & ~low & ~CBFS_NODEID_LOCAL) == 0) return d_ino;
    return (ino_t)((shown & ~low) | ((uint64_t)d_ino & low));
}

int cbfs_inode_pin(struct cbfs_fs *fs, struct cbfs_inode *inode, int *fd)
{
    return cbfs_storeobj_pin(&fs->fdc, &inode->obj, fd);
}

void cbfs_inode_unpin(struct cbfs_fs *fs, struct cbfs_inode *inode)
{
    cbfs_storeobj_unpin(&fs->fdc, &inode->obj);
}

static int cbfs_fs_openat_once(struct cbfs_fs *fs, int dirfd, const char *name, int flags,
                               mode_t mode)
{
    /* a sidecar path's index directory is never reached through a symlink
     * (cbfs_store_openat); AT_FDCWD paths are /proc/self/fd magic links */
    int fd;
    CBFS_FDCACHE_RETRY(&fs->fdc, fd,
                       dirfd == AT_FDCWD ? openat(dirfd, name, flags, mode)
                                         : cbfs_store_openat(dirfd, name, flags, mode));
    return fd;
}

int cbfs_fs_unlinkat(struct cbfs_fs *fs, int dirfd, const char *path)
{
    int r;
    CBFS_FDCACHE_RETRY(&fs->fdc, r, cbfs_store_unlinkat(dirfd, path, 0));
    return r;
}

int cbfs_fs_renameat2(struct cbfs_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
                      const char *newpath, unsigned flags)
{
    int r;
    CBFS_FDCACHE_RETRY(&fs->fdc, r,
                       cbfs_store_renameat2(olddirfd, oldpath, newdirfd, newpath, flags));
    return r;
}

int cbfs_fs_link_fd(struct cbfs_fs *fs, int fd, int newdirfd, const char *newpath)
{
    char path[CBFS_PROCFD_MAX];
    cbfs_procfd(path, fd);
    int r;
    CBFS_FDCACHE_RETRY(&fs->fdc, r,
                       cbfs_store_linkat(AT_FDCWD, path, newdirfd, newpath, AT_SYMLINK_FOLLOW));
    return r;
}

int cbfs_fs_fstatat(struct cbfs_fs *fs, int dirfd, const char *path, struct stat *st)
{
    int r;
    CBFS_FDCACHE_RETRY(&fs->fdc, r, cbfs_store_fstatat(dirfd, path, st, AT_SYMLINK_NOFOLLOW));
    return r;
}

int cbfs_fs_openat(struct cbfs_fs *fs, int dirfd, const char *name, int flags, mode_t mode)
{
    static atomic_bool noted;
    if (!(flags & O_PATH) && (fs->opt.noatime || (fs->opt.nodiratime && (flags & O_DIRECTORY))))
        flags |= O_NOATIME;
    int fd = cbfs_fs_openat_once(fs, dirfd, name, flags, mode);
    /* O_NOATIME needs the file's owner or CAP_FOWNER: a daemon without it
     * reads such files the way it can */
    if (fd == -1 && errno == EPERM && (flags & O_NOATIME)) {
        fd = cbfs_fs_openat_once(fs, dirfd, name, flags & ~O_NOATIME, mode);
        if (fd >= 0 && (fs->opt.noatime || fs->opt.nodiratime) && !atomic_exchange(&noted, true))
            cbfs_log_info("noatime: reading store files this daemon does not own updates their "
                          "atime (O_NOATIME needs the owner or CAP_FOWNER)");
    }
    return fd;
}

void cbfs_inode_ref(struct cbfs_fs *fs, struct cbfs_inode *inode, uint64_t n)
{
    cbfs_mutex_lock(&fs->lock);
    inode->refs += n;
    cbfs_mutex_unlock(&fs->lock);
}

void cbfs_inode_unref(struct cbfs_fs *fs, struct cbfs_inode *inode, uint64_t n)
{
    if (!inode || n == 0) return;
    cbfs_mutex_lock(&fs->lock);
    cbfs_inode_unref_locked(fs, inode, n);
    cbfs_mutex_unlock(&fs->lock);
}

struct cbfs_inode *cbfs_inode_find(struct cbfs_fs *fs, dev_t dev, ino_t ino)
{
    cbfs_mutex_lock(&fs->lock);
    struct cbfs_inode *const inode = cbfs_itable_find(fs, dev, ino);
    if (inode) inode->refs++;
    cbfs_mutex_unlock(&fs->lock);
    return inode;
}

int cbfs_inode_set_location(struct cbfs_fs *fs, struct cbfs_inode *inode,
                            struct cbfs_inode *dir, const char *name)
{
    cbfs_mutex_lock(&fs->lock);
    const bool same = inode->parent == dir && inode->name && strcmp(inode->name, name) == 0;
    cbfs_mutex_unlock(&fs->lock);
    if (same) return 0;
    char *const copy = strdup(name);
    if (!copy) return ENOMEM;
    cbfs_mutex_lock(&fs->lock);
    struct cbfs_inode *const old = inode->parent;
    free(inode->name);
    inode->name = copy;
    inode->parent = dir;
    dir->refs++;
    if (old) cbfs_inode_unref_locked(fs, old, 1);
    cbfs_mutex_unlock(&fs->lock);
    return 0;
}

int cbfs_inode_get_location(struct cbfs_fs *fs, struct cbfs_inode *inode,
                            struct cbfs_inode **dir, char *buf, size_t cap)
{
    int err = 0;
    cbfs_mutex_lock(&fs->lock);
    if (!inode->parent) {
        err = ENOENT;
    } else if (strlen(inode->name) >= cap) {
        err = ENAMETOOLONG;
    } else {
        strcpy(buf, inode->name);
        *dir = inode->parent;
        (*dir)->refs++;
    }
    cbfs_mutex_unlock(&fs->lock);
    return err;
}

void cbfs_inode_clear_location(struct cbfs_fs *fs, struct cbfs_inode *inode,
                               struct cbfs_inode *dir, const char *name)
{
    cbfs_mutex_lock(&fs->lock);
    if (inode->parent == dir && inode->name && strcmp(inode->name, name) == 0) {
        free(inode->name);
        inode->name = NULL;
        inode->parent = NULL;
        cbfs_inode_unref_locked(fs, dir, 1);
    }
    cbfs_mutex_unlock(&fs->lock);
}

void cbfs_inode_hold_name(struct cbfs_fs *fs, int dirfd, const char *name,
                          struct cbfs_inode_hold *h)
{
    struct stat st;
    h->inode = NULL;
    h->fd = h->ifd = -1;
    if (!fs->fdc.handles || fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == -1 ||
        (!S_ISDIR(st.st_mode) && st.st_nlink > 1))
        return;
    struct cbfs_inode *const inode = cbfs_inode_find(fs, st.st_dev, st.st_ino);
    if (!inode) return;
    /* only fds open now: a reopen by handle costs a descriptor before every
     * removal, which a daemon short of them spends where the kernel then
     * takes the failure as a file's writeback error (the nofile:drop:
     * variant of t_stress_mixed failed with EIO in 10 runs of 17 so,
     * against 3 of 17 before keeping) */
    if (inode->type != (st.st_mode & S_IFMT) ||
        cbfs_storeobj_pin_open(&fs->fdc, &inode->obj, &h->fd) != 0) {
        cbfs_inode_unref(fs, inode, 1);
        return;
    }
    h->inode = inode;
    if (inode->kind != CBFS_KIND_COMPRESSED) return;
    cbfs_mutex_lock(&inode->lock);
    if (!inode->has_idx || cbfs_storeobj_pin_open(&fs->fdc, &inode->idx, &h->ifd) != 0) h->ifd = -1;
    cbfs_mutex_unlock(&inode->lock);
}

/* @return whether the object fd is open on has no name left. */
static bool cbfs_inode_nameless(int fd)
{
    struct stat st;
    return fstat(fd, &st) == 0 && st.st_nlink == 0;
}

void cbfs_inode_hold_end(struct cbfs_fs *fs, struct cbfs_inode_hold *h)
{
    static atomic_bool noted;
    struct cbfs_inode *const inode = h->inode;
    if (!inode) return;
    if (h->ifd >= 0) cbfs_mutex_lock(&inode->lock); /* the sidecar's pin is under it */
    if (cbfs_inode_nameless(h->fd)) {
        struct cbfs_storeobj *const idx =
            h->ifd >= 0 && cbfs_inode_nameless(h->ifd) ? &inode->idx : NULL;
        if (!cbfs_storeobj_keep(&fs->fdc, &inode->obj, idx) && !atomic_exchange(&noted, true))
            cbfs_log_info("%zu fds of removed objects the kernel still holds are kept open, "
                          "the most at once: further ones are left to the fd cache, and their "
                          "stat fails with ESTALE once it lets them go",
                          fs->fdc.cap);
    }
    if (h->ifd >= 0) {
        cbfs_inode_idx_unpin(fs, inode);
        cbfs_mutex_unlock(&inode->lock);
    }
    cbfs_inode_unpin(fs, inode);
    cbfs_inode_unref(fs, inode, 1);
    h->inode = NULL;
}

/* Does the data of the regular file fd (O_PATH) start with the frame
 * envelope, or with a damaged one (cbfs_store_has_frame_envelope)? @return 0
 * or errno. */
static int cbfs_inode_framed(struct cbfs_fs *fs, int fd, bool *framed, bool *damaged)
{
    char path[CBFS_PROCFD_MAX];
    cbfs_procfd(path, fd);
    /* cbfs_fs_openat drops O_NOATIME itself where the daemon may not use it */
    const int rfd = cbfs_fs_openat(fs, AT_FDCWD, path, O_RDONLY | O_CLOEXEC | O_NOATIME, 0);
    if (rfd == -1) return errno;
    const cbfs_err e = cbfs_store_has_frame_envelope(rfd, framed, damaged);
    close(rfd);
    return cbfs_err_errno(e);
}

/* Decides PLAIN or COMPRESSED for a regular file named name in dirfd (fd: its
 * O_PATH fd, fst its stat). Compressed: a sidecar exists next to it (its
 * O_PATH fd goes to *idx_fd, else -1), or the data starts with the frame
 * envelope (sidecar lost: the engine rebuilds it at first open). Any failure
 * to find out is an error, never a guess: a compressed file taken for a plain
 * one would show raw frames, and a write into it would overwrite them. A NULL
 * name (file reached by id alone): see "Nameless files" in inode.h. @return 0
 * or errno. Whether a sidecar is really this file's (and not the leftover of
 * a lost file beside a plain one) is the loader's call, made from what the
 * sidecar records (cbfs_index_open: CBFS_E_WRONG_FILE), not from the first
 * bytes here: a file whose first frame header is damaged starts like a plain
 * one, and is still a compressed file with one bad block. */
static int cbfs_inode_detect(struct cbfs_fs *fs, int dirfd, const char *name, int fd,
                             const struct stat *fst, enum cbfs_kind *kind, int *idx_fd)
{
    char sc[CBFS_STORE_SIDECAR_PATH_MAX];
    struct stat st;
    int err;

    *kind = CBFS_KIND_PLAIN;
    *idx_fd = -1;
    if (!name && fst->st_size == 0) {
        *kind = CBFS_KIND_COMPRESSED;
        return 0;
    }
    /* a name too long for a sidecar cannot have one */
    if (name && cbfs_inode_sidecar_path(fs, name, sc, sizeof sc) == 0) {
        const int ifd = cbfs_fs_openat(fs, dirfd, sc, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        if (ifd == -1 && errno != ENOENT) return errno;
        if (ifd >= 0) {
            if (fstat(ifd, &st) == -1) {
                err = errno;
                close(ifd);
                return err;
            }
            if (S_ISREG(st.st_mode)) {
                *idx_fd = ifd;
                *kind = CBFS_KIND_COMPRESSED;
                return 0;
            }
            close(ifd); /* not a sidecar: a directory or the like of that name */
        }
    }
    bool framed, damaged;
    err = cbfs_inode_framed(fs, fd, &framed, &damaged);
    if (err) return err;
    /* Reached by id alone, a file whose first frame lost part of its
     * envelope may have its sidecar under the name not known here: taken for
     * plain, its raw frames would be served and a write would land in them.
     * As a nameless COMPRESSED file it is read-only until a lookup names it
     * and finds the sidecar (cbfs_inode_attach_idx). The price: a plain file
     * that only looks so, reached by handle first, does not open (no frames
     * index it) while the kernel holds its inode. */
    if (framed || (!name && damaged)) *kind = CBFS_KIND_COMPRESSED;
    return 0;
}

/* fs->lock held. The inode of the object (st, generation gen) in the table
 * with one more ref; NULL if there is none, or only a stale one: an inode of
 * the same inode number whose object is gone (the store reused the number). */
static struct cbfs_inode *cbfs_itable_take(struct cbfs_fs *fs, const struct stat *st,
                                           uint32_t gen)
{
    cbfs_assert_held(&fs->lock);
    struct cbfs_inode *const inode = cbfs_itable_find(fs, st->st_dev, st->st_ino);
    if (!inode || inode->type != (st->st_mode & S_IFMT) || inode->gen != gen) return NULL;
    inode->refs++;
    return inode;
}

/* The inode of the object fd (an O_PATH fd just opened on name in dirfd, or
 * reached without a name: dirfd -1, name NULL; owned from here) with one
 * more ref: the one in the table, or a new one inserted there. @return 0 or
 * errno. */
static int cbfs_inode_intern(struct cbfs_fs *fs, int dirfd, const char *name, int fd,
                             const struct stat *st, struct cbfs_inode **out)
{
    /* the generation tells a reused inode number from the same object */
    const uint32_t gen = cbfs_fdcache_generation(fd);
    cbfs_mutex_lock(&fs->lock);
    struct cbfs_inode *inode = cbfs_itable_take(fs, st, gen);
    cbfs_mutex_unlock(&fs->lock);
    if (inode) {
        close(fd);
        *out = inode;
        return 0;
    }

    /* Build a new inode outside the lock (detection does I/O), then insert
     * it unless a concurrent lookup of the same object won the race. */
    enum cbfs_kind kind = CBFS_KIND_OTHER;
    int idx_fd = -1, err;
    if (S_ISREG(st->st_mode) &&
        (err = cbfs_inode_detect(fs, dirfd, name, fd, st, &kind, &idx_fd))) {
        close(fd);
        return err;
    }
    struct cbfs_inode *const fresh = cbfs_inode_alloc(fs, fd, st, gen, false);
    if (!fresh) {
        if (idx_fd >= 0) close(idx_fd);
        return ENOMEM;
    }
    fresh->kind = kind;
    if (idx_fd >= 0) {
        err = cbfs_storeobj_init(&fs->fdc, &fresh->idx, idx_fd, false);
        if (err) {
            cbfs_inode_destroy(fs, fresh);
            return err;
        }
        fresh->has_idx = true;
    }
    cbfs_mutex_lock(&fs->lock);
    inode = cbfs_itable_take(fs, st, gen);
    if (!inode) {
        cbfs_itable_assign_id(fs, fresh);
        cbfs_itable_insert(fs, fresh);
        inode = fresh;
    }
    cbfs_mutex_unlock(&fs->lock);
    if (inode != fresh) cbfs_inode_destroy(fs, fresh);
    *out = inode;
    return 0;
}

/* A COMPRESSED inode first reached without its name ("Nameless files" in
 * inode.h) learns its sidecar when a lookup finds it as name in dirfd.
 * @return 0 or errno (of opening a sidecar that is there). */
static int cbfs_inode_attach_idx(struct cbfs_fs *fs, struct cbfs_inode *inode, int dirfd,
                                 const char *name)
{
    char sc[CBFS_STORE_SIDECAR_PATH_MAX];
    struct stat st;
    int err = 0;
    if (inode->kind != CBFS_KIND_COMPRESSED ||
        cbfs_inode_sidecar_path(fs, name, sc, sizeof sc) != 0)
        return 0;
    cbfs_mutex_lock(&inode->lock);
    if (!inode->has_idx) {
        const int ifd = cbfs_fs_openat(fs, dirfd, sc, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
        if (ifd == -1) {
            err = errno == ENOENT ? 0 : errno;
        } else if (fstat(ifd, &st) == -1) {
            err = errno;
            close(ifd);
        } else if (!S_ISREG(st.st_mode)) {
            close(ifd); /* not a sidecar: a directory or the like of that name */
        } else if ((err = cbfs_storeobj_init(&fs->fdc, &inode->idx, ifd, false)) == 0) {
            inode->has_idx = true;
        }
    }
    cbfs_mutex_unlock(&inode->lock);
    return err;
}

int cbfs_inode_lookup(struct cbfs_fs *fs, struct cbfs_inode *dir, const char *name,
                      struct cbfs_inode **out, struct stat *st)
{
    struct cbfs_inode *inode = NULL;
    int dirfd, err = cbfs_inode_pin(fs, dir, &dirfd);
    if (err) return err;
    const int fd = cbfs_fs_openat(fs, dirfd, name, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (fd == -1) {
        err = errno;
    } else if (fstatat(fd, "", st, AT_EMPTY_PATH | AT_SYMLINK_NOFOLLOW) == -1) {
        err = errno;
        close(fd);
    } else {
        cbfs_inode_dir_nlink(fs, fd, st);
        if ((err = cbfs_inode_intern(fs, dirfd, name, fd, st, &inode)) == 0 &&
            (err = cbfs_inode_attach_idx(fs, inode, dirfd, name)) != 0)
            cbfs_inode_unref(fs, inode, 1);
    }
    cbfs_inode_unpin(fs, dir);
    if (err) return err;

    if (inode->type == S_IFREG) {
        err = cbfs_inode_set_location(fs, inode, dir, name);
        if (err) goto fail;
    }
    if (inode->kind == CBFS_KIND_COMPRESSED) {
        /* the cached stat is right for everything but size and blocks */
        err = cbfs_inode_stat(fs, inode, st);
        if (err) goto fail;
    }
    *out = inode;
    return 0;
fail:
    cbfs_inode_unref(fs, inode, 1);
    return err;
}

int cbfs_inode_adopt(struct cbfs_fs *fs, int fd, struct stat *st, struct cbfs_inode **out)
{
    struct cbfs_inode *inode;
    int err = cbfs_inode_intern(fs, -1, NULL, fd, st, &inode);
    if (err) return err;
    if (inode->kind == CBFS_KIND_COMPRESSED && (err = cbfs_inode_stat(fs, inode, st)) != 0) {
        cbfs_inode_unref(fs, inode, 1);
        return err;
    }
    *out = inode;
    return 0;
}

int cbfs_inode_statvfs(struct cbfs_fs *fs, struct cbfs_inode *inode, struct statvfs *sv)
{
    int fd, err = cbfs_inode_pin(fs, inode, &fd);
    if (err) return err;
    if (fstatvfs(fd, sv) == -1) err = errno;
    cbfs_inode_unpin(fs, inode);
    return err;
}

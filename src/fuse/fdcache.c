/* The bounded cache of store-object fds behind the inode table; see
 * fdcache.h for the contract and why it exists. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/magic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/vfs.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "fuse/fdcache.h"

#define CBFS_FDCACHE_MIN 16
#define CBFS_FDCACHE_MAX 4096

size_t cbfs_fdcache_default_cap(void)
{
    struct rlimit rl;
    size_t cap = CBFS_FDCACHE_MAX;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY &&
        rl.rlim_cur / 4 < cap)
        cap = (size_t)(rl.rlim_cur / 4);
    return cap < CBFS_FDCACHE_MIN ? CBFS_FDCACHE_MIN : cap;
}

/* The handle of fd's object and its mount id. @return 0 or errno. */
static int cbfs_fdcache_handle_of(int fd, struct file_handle **out, int *mount_id)
{
    struct file_handle *fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
    if (!fh) return ENOMEM;
    fh->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(fd, "", fh, mount_id, AT_EMPTY_PATH) == -1) {
        const int err = errno;
        free(fh);
        return err;
    }
    struct file_handle *const small = realloc(fh, sizeof *fh + fh->handle_bytes);
    *out = small ? small : fh;
    return 0;
}

int cbfs_fdcache_init(struct cbfs_fdcache *c, int root_fd, size_t cap)
{
    struct file_handle *fh = NULL;
    memset(c, 0, sizeof *c);
    c->cap = cap;
    c->lru.next = c->lru.prev = &c->lru;
    cbfs_mutex_init(&c->lock);
    /* Probe with the root itself: name_to_handle_at fails where the store
     * filesystem cannot export handles, open_by_handle_at where the daemon
     * lacks CAP_DAC_READ_SEARCH. */
    c->mount_fd = openat(root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    int err = c->mount_fd == -1 ? errno : cbfs_fdcache_handle_of(c->mount_fd, &fh, &c->mount_id);
    if (err == 0) {
        const int fd = open_by_handle_at(c->mount_fd, fh, O_PATH | O_CLOEXEC);
        if (fd == -1)
            err = errno;
        else
            close(fd);
    }
    free(fh);
    c->handles = err == 0;
    if (!c->handles && c->mount_fd >= 0) {
        close(c->mount_fd);
        c->mount_fd = -1;
    }
    if (c->handles)
        cbfs_log_debug("store objects are reopened by file handle; at most %zu idle fds kept",
                       cap);
    else
        cbfs_log_info("file handles do not work on this store (%s): the daemon keeps one fd per "
                      "file and directory the kernel caches (run it as root to bound that)",
                      strerror(err));
    return 0;
}

void cbfs_fdcache_destroy(struct cbfs_fdcache *c)
{
    assert(c->open == 0 && c->kept == 0 && c->lru.next == &c->lru);
    if (c->mount_fd >= 0) close(c->mount_fd);
    cbfs_mutex_destroy(&c->lock);
}

/* c->lock held. Takes o off the LRU (it is pinned, or its fd is closed). */
static void cbfs_fdcache_lru_remove(struct cbfs_fdcache *c, struct cbfs_storeobj *o)
{
    cbfs_assert_held(&c->lock);
    o->prev->next = o->next;
    o->next->prev = o->prev;
    o->prev = o->next = NULL;
}

/* c->lock held. Closes idle fds, oldest first, until at most keep are open,
 * the kept ones counted too: they take their room from the idle ones, so
 * keeping them does not raise the daemon's fds beyond the cap (under a limit
 * of 64, a kept fd on top of the cap's made the EMFILE its neighbours meet
 * more frequent). @return how many were closed. */
static size_t cbfs_fdcache_evict(struct cbfs_fdcache *c, size_t keep)
{
    size_t n = 0;
    cbfs_assert_held(&c->lock);
    while (c->open + c->kept > keep && c->lru.next != &c->lru) {
        struct cbfs_storeobj *const o = c->lru.next;
        assert(o->pins == 0 && o->fh && o->fd >= 0 && !o->kept);
        cbfs_fdcache_lru_remove(c, o);
        close(o->fd);
        o->fd = -1;
        c->open--;
        n++;
    }
    return n;
}

/* c->lock held. Makes o (fd open, unpinned) the most recently used idle fd,
 * then closes the oldest ones beyond the cap. */
static void cbfs_fdcache_lru_add(struct cbfs_fdcache *c, struct cbfs_storeobj *o)
{
    cbfs_assert_held(&c->lock);
    o->prev = c->lru.prev;
    o->next = &c->lru;
    c->lru.prev->next = o;
    c->lru.prev = o;
    cbfs_fdcache_evict(c, c->cap);
}

bool cbfs_fdcache_relieve(struct cbfs_fdcache *c, int err)
{
    if (err != EMFILE && err != ENFILE) return false;
    cbfs_mutex_lock(&c->lock);
    const size_t n = cbfs_fdcache_evict(c, 0);
    cbfs_mutex_unlock(&c->lock);
    return n > 0;
}

int cbfs_fdcache_open_handle(struct cbfs_fdcache *c, struct file_handle *fh, int *fd)
{
    if (!c->handles) return ESTALE;
    /* Two failures that pass, answered at once, fail the request that needs
     * the reopen, and the kernel's own times SETATTR takes its failure as a
     * writeback error of the file, which the next close of it returns as EIO
     * (helper-65); so a few short waits first, about 30 ms in all, before
     * the error is answered:
     * - out of descriptors with no idle one left to close: every other is a
     *   request's, which ends soon;
     * - ENOMEM, which the kernel also gives, as far as its code is known
     *   here (not traced), where the handle's inode number is being created
     *   again right then (a deleted file's, reused: the inode cache's lookup
     *   meets it I_CREATING and ext4_iget reports that as -ENOMEM); once the
     *   create is done, the answer is the true one (ESTALE: another
     *   generation). Under an fd limit of 64 with caches dropping, an OPEN
     *   was answered ENOMEM (t_stress_mixed's nofile:drop:). */
    for (unsigned i = 0;; i++) {
        CBFS_FDCACHE_RETRY(c, *fd, open_by_handle_at(c->mount_fd, fh, O_PATH | O_CLOEXEC));
        if (*fd != -1 || (errno != EMFILE && errno != ENFILE && errno != ENOMEM) || i == 4)
            break;
        usleep(2000u << i);
    }
    return *fd == -1 ? errno : 0;
}

int cbfs_storeobj_init(struct cbfs_fdcache *c, struct cbfs_storeobj *o, int fd,
                       bool pinned_for_life)
{
    int mount_id;
    memset(o, 0, sizeof *o);
    o->fd = fd;
    if (!c->handles || pinned_for_life) return 0;
    const int err = cbfs_fdcache_handle_of(fd, &o->fh, &mount_id);
    if (err == ENOMEM) {
        close(fd);
        o->fd = -1;
        return ENOMEM;
    }
    if (err || mount_id != c->mount_id) {
        /* another filesystem mounted inside the store: keep the fd */
        free(o->fh);
        o->fh = NULL;
        return 0;
    }
    cbfs_mutex_lock(&c->lock);
    c->open++;
    cbfs_fdcache_lru_add(c, o);
    cbfs_mutex_unlock(&c->lock);
    return 0;
}

void cbfs_storeobj_release(struct cbfs_fdcache *c, struct cbfs_storeobj *o)
{
    if (o->fh) {
        cbfs_mutex_lock(&c->lock);
        assert(o->pins == 0);
        if (o->kept) {
            c->kept--;
        } else if (o->fd >= 0) {
            cbfs_fdcache_lru_remove(c, o);
            c->open--;
        }
        cbfs_mutex_unlock(&c->lock);
        free(o->fh);
        o->fh = NULL;
    }
    if (o->fd >= 0) close(o->fd);
    o->fd = -1;
}

int cbfs_storeobj_pin_open(struct cbfs_fdcache *c, struct cbfs_storeobj *o, int *fd)
{
    if (!o->fh) { /* kept for life */
        *fd = o->fd;
        return o->fd >= 0 ? 0 : EBADF;
    }
    cbfs_mutex_lock(&c->lock);
    const int err = o->fd >= 0 ? 0 : EAGAIN;
    if (!err) {
        if (o->pins++ == 0 && !o->kept) cbfs_fdcache_lru_remove(c, o);
        *fd = o->fd;
    }
    cbfs_mutex_unlock(&c->lock);
    return err;
}

int cbfs_storeobj_pin(struct cbfs_fdcache *c, struct cbfs_storeobj *o, int *fd)
{
    const int open = cbfs_storeobj_pin_open(c, o, fd);
    if (open != EAGAIN) return open;

    /* Evicted: reopened outside the lock, as reconnecting a directory handle
     * walks up the store's tree. */
    int nfd;
    const int err = cbfs_fdcache_open_handle(c, o->fh, &nfd);
    if (err) return err;

    cbfs_mutex_lock(&c->lock);
    if (o->fd >= 0) { /* a concurrent pin reopened it first */
        close(nfd);
        if (o->pins == 0 && !o->kept) cbfs_fdcache_lru_remove(c, o);
    } else {
        o->fd = nfd;
        c->open++;
    }
    o->pins++;
    *fd = o->fd;
    cbfs_fdcache_evict(c, c->cap);
    cbfs_mutex_unlock(&c->lock);
    return 0;
}

void cbfs_storeobj_unpin(struct cbfs_fdcache *c, struct cbfs_storeobj *o)
{
    if (!o->fh) return;
    cbfs_mutex_lock(&c->lock);
    assert(o->pins > 0 && o->fd >= 0);
    if (--o->pins == 0 && !o->kept) cbfs_fdcache_lru_add(c, o);
    cbfs_mutex_unlock(&c->lock);
}

/* c->lock held. @return whether o, pinned, has a handle and is not kept yet. */
static bool cbfs_storeobj_keepable(struct cbfs_fdcache *c, const struct cbfs_storeobj *o)
{
    cbfs_assert_held(&c->lock);
    if (!o || !o->fh) return false;
    assert(o->pins > 0 && o->fd >= 0);
    return !o->kept;
}

bool cbfs_storeobj_keep(struct cbfs_fdcache *c, struct cbfs_storeobj *o, struct cbfs_storeobj *o2)
{
    cbfs_mutex_lock(&c->lock);
    const bool k1 = cbfs_storeobj_keepable(c, o), k2 = cbfs_storeobj_keepable(c, o2);
    const size_t need = (size_t)k1 + (size_t)k2;
    const bool ok = c->kept + need <= c->cap;
    if (ok && need > 0) {
        /* pinned: off the LRU already, and unpin leaves them off it */
        if (k1) o->kept = true;
        if (k2) o2->kept = true;
        c->open -= need;
        c->kept += need;
        cbfs_fdcache_evict(c, c->cap);
    }
    cbfs_mutex_unlock(&c->lock);
    return ok;
}

/* ---- objects by inode number ---- */

#define CBFS_FILEID_INO32_GEN 1 /* include/linux/exportfs.h */
#define CBFS_EXT4_ROOT_INO 2

union cbfs_fdcache_fh {
    struct file_handle fh;
    char buf[sizeof(struct file_handle) + MAX_HANDLE_SZ];
};

/* Reads fh's inode number and generation. @return false for another layout. */
static bool cbfs_fdcache_fh_ino32(const struct file_handle *fh, uint32_t *ino, uint32_t *gen)
{
    if (fh->handle_type != CBFS_FILEID_INO32_GEN || fh->handle_bytes != 8) return false;
    memcpy(ino, fh->f_handle, sizeof *ino);
    memcpy(gen, fh->f_handle + sizeof *ino, sizeof *gen);
    return true;
}

/* @return whether fd's object has a handle (then in *h). */
static bool cbfs_fdcache_fh_of(int fd, union cbfs_fdcache_fh *h)
{
    int mount_id;
    h->fh.handle_bytes = MAX_HANDLE_SZ;
    return name_to_handle_at(fd, "", &h->fh, &mount_id, AT_EMPTY_PATH) == 0;
}

uint32_t cbfs_fdcache_generation(int fd)
{
    union cbfs_fdcache_fh h;
    uint32_t ino, gen;
    if (!cbfs_fdcache_fh_of(fd, &h)) return 0;
    if (cbfs_fdcache_fh_ino32(&h.fh, &ino, &gen)) return gen;
    const uint64_t x = cbfs_hash64(h.fh.f_handle, h.fh.handle_bytes) ^ (uint32_t)h.fh.handle_type;
    const uint32_t g = (uint32_t)(x ^ (x >> 32));
    return g ? g : 1;
}

const char *cbfs_fdcache_ino_probe(const struct cbfs_fdcache *c, int root_fd,
                                   const struct stat *root_st)
{
    struct statfs sfs;
    union cbfs_fdcache_fh h;
    uint32_t ino, gen;
    if (!c->handles) return "file handles do not work on this store (see the line above)";
    if (fstatfs(root_fd, &sfs) == -1 || sfs.f_type != EXT4_SUPER_MAGIC)
        return "the store is not on ext4, where a file can be opened by its inode number alone";
    if (!cbfs_fdcache_fh_of(root_fd, &h) || !cbfs_fdcache_fh_ino32(&h.fh, &ino, &gen) ||
        ino != root_st->st_ino)
        return "the store's file handles have an unknown layout";
    if (root_st->st_ino != CBFS_EXT4_ROOT_INO)
        return "the store is not the root of its filesystem (an inode number could name a "
               "file outside it): give the store a filesystem of its own";
    return NULL;
}

int cbfs_fdcache_open_ino(struct cbfs_fdcache *c, uint32_t ino, int *fd)
{
    union cbfs_fdcache_fh h;
    const uint32_t v[2] = {ino, 0};
    h.fh.handle_bytes = sizeof v;
    h.fh.handle_type = CBFS_FILEID_INO32_GEN;
    memcpy(h.fh.f_handle, v, sizeof v);
    return cbfs_fdcache_open_handle(c, &h.fh, fd);
}

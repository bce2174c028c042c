/* The fd cache behind the inode table: store objects the daemon can reach
 * without holding an fd for each, through a bounded LRU of O_PATH fds that
 * are reopened by file handle after eviction.
 *
 * Every object the kernel knows keeps a file handle (name_to_handle_at) and
 * an O_PATH fd that lives in the LRU while nobody uses it; a later use
 * reopens it with open_by_handle_at. So the daemon's fds are bounded by the
 * cache size (the kept objects below included) plus what callers hold open,
 * not by how many inodes the kernel
 * caches (a `ls -lR` of a backup tree, or pg_basebackup's thousands of
 * relation files, must not run the daemon out of descriptors).
 *
 * Where handles do not work (an unprivileged daemon: open_by_handle_at needs
 * CAP_DAC_READ_SEARCH; a store filesystem that cannot export them; an object
 * on another mount inside the store) the object's fd is simply kept for its
 * whole life, as before: correct, just unbounded.
 *
 * An object that lost its last name through the daemon (unlink, rmdir, a
 * rename over it) has a handle that no longer opens once its fd is closed:
 * the store frees it. While the kernel still references it (an O_PATH fd, a
 * working directory) its fd is kept for the rest of the object's life
 * instead (cbfs_storeobj_keep): off the LRU, closed at release, its fd
 * counted against the cap (the idle ones make room). At most cap objects
 * are kept so at once; past that, one is left to the LRU as before (its stat
 * answers ESTALE once evicted).
 *
 * Locking: c->lock protects the fields marked so; it is a leaf (nothing is
 * called under it but close() of O_PATH fds; lock order: fuse/inode.h). fh
 * is set by cbfs_storeobj_init and freed by cbfs_storeobj_release; callers
 * keep those two and every pin from racing each other (the inode table's own
 * rules do that). */
#ifndef CBFS_FUSE_FDCACHE_H
#define CBFS_FUSE_FDCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "cbfs/mutex.h"

struct file_handle;

struct cbfs_storeobj {
    struct file_handle *fh; /* NULL: no handle, fd stays open for the object's life */
    /* Protected by the cache's lock; fd is read without it where it cannot
     * change: an object without fh (its fd never closes), one being set up
     * (not shared yet) or released (off the LRU, unpinned). */
    int fd;                 /* O_PATH|O_CLOEXEC on the object, or -1 while evicted */
    unsigned pins;          /* users of fd right now; pinned objects are never evicted */
    bool kept;              /* with fh: fd stays open until release (cbfs_storeobj_keep) */
    struct cbfs_storeobj *prev, *next; /* LRU links while open, unpinned, with fh, not kept */
};

struct cbfs_fdcache { /* mount_fd, mount_id, handles, cap: immutable after init */
    int mount_fd;            /* the store root, O_RDONLY (open_by_handle_at refuses an
                                O_PATH one); owned; -1 without handles */
    int mount_id;            /* its mount: handles of other mounts are not used */
    bool handles;            /* open_by_handle_at works on this store for this daemon */
    size_t cap;              /* most fds of objects with a handle open while idle, the
                                kept ones (cbfs_storeobj_keep) included */
    struct cbfs_mutex lock;
    size_t open;              /* protected by lock: open fds of objects with a handle,
                                 not kept (idle or pinned) */
    size_t kept;              /* protected by lock: objects with a handle kept open for life */
    struct cbfs_storeobj lru; /* protected by lock: list head, least recently used first */
};

/* Default number of idle fds kept: a quarter of the soft RLIMIT_NOFILE (the
 * rest is for files callers open, which the engine holds two fds each for),
 * within [16, 4096]. */
size_t cbfs_fdcache_default_cap(void);

/* Sets up the cache for the store whose root is root_fd (any fd on it; not
 * kept) and probes whether handles work there. @return 0 or errno. */
int cbfs_fdcache_init(struct cbfs_fdcache *c, int root_fd, size_t cap);
/* Every object must have been released. */
void cbfs_fdcache_destroy(struct cbfs_fdcache *c);

/* Makes o a store object for fd (an O_PATH fd just opened on it; owned from
 * here, also on failure). pinned_for_life: never evict (the root). @return 0
 * or errno (ENOMEM). */
int cbfs_storeobj_init(struct cbfs_fdcache *c, struct cbfs_storeobj *o, int fd,
                       bool pinned_for_life);
/* Closes o's fd and frees its handle; o must be unpinned. o may be a zeroed
 * object that was never initialised (fd -1, fh NULL). */
void cbfs_storeobj_release(struct cbfs_fdcache *c, struct cbfs_storeobj *o);

/* Keeps the fds of o and o2 (NULL: none; o's sidecar, say), both pinned,
 * open for the rest of their lives: never evicted, closed by
 * cbfs_storeobj_release. For objects whose handle no longer opens (they lost
 * their last name) while something still needs them. Both or neither: at most
 * c->cap objects with a handle are kept at once. Objects without a handle
 * are kept anyway. @return whether they are kept now. */
bool cbfs_storeobj_keep(struct cbfs_fdcache *c, struct cbfs_storeobj *o, struct cbfs_storeobj *o2);

/* Pins o's fd only where it is open now, never reopening it: for what is
 * worth a descriptor only if it costs none (cbfs_inode_hold_name). @return 0,
 * or EAGAIN where it was evicted (nothing pinned). */
int cbfs_storeobj_pin_open(struct cbfs_fdcache *c, struct cbfs_storeobj *o, int *fd);

/* Pins o's fd (reopening it from the handle if it was evicted): *fd stays
 * open until the matching cbfs_storeobj_unpin. @return 0, or the errno of
 * the reopen: EMFILE/ENFILE (after evicting every idle fd and retrying),
 * ESTALE (the object is gone from the store), ENOMEM. */
int cbfs_storeobj_pin(struct cbfs_fdcache *c, struct cbfs_storeobj *o, int *fd);
void cbfs_storeobj_unpin(struct cbfs_fdcache *c, struct cbfs_storeobj *o);

/* Opens the object of fh (a handle of this store's filesystem) as an O_PATH
 * fd in *fd, closing idle fds and retrying once when the daemon is out of
 * them. @return 0, ESTALE (the object is gone, or handles do not work here),
 * or the errno of open_by_handle_at. */
int cbfs_fdcache_open_handle(struct cbfs_fdcache *c, struct file_handle *fh, int *fd);

/* ---- objects by inode number (NFS export: fuse/export.h) ----
 *
 * ext4's file handles have the FILEID_INO32_GEN layout (u32 inode number, u32
 * generation), and ext4 takes generation 0 as "any" (ext4_nfs_get_inode), so
 * a handle can be made from an inode number alone; the FUSE kernel module
 * compares generations itself. XFS has that layout for small inode numbers
 * but takes 0 as a real generation, as btrfs and tmpfs check theirs. */

/* @return the generation of the object fd is open on (O_PATH included): its
 * i_generation where its file handle has the FILEID_INO32_GEN layout; for any
 * other layout (XFS's 64-bit inode numbers, btrfs, tmpfs, NFS) a hash of the
 * handle's bytes, never 0, which name the object, its generation included;
 * 0 where the store has no handles. It is what tells a reused inode number
 * from the object that had it (inode.h), for the daemon and for the kernel,
 * which is given it in entry replies: with 0 on such a store, a new file
 * that got a deleted one's number while the kernel still held the old inode
 * was taken for it, its cached pages with it. */
uint32_t cbfs_fdcache_generation(int fd);

/* Decides whether an inode number alone may name an object of the store
 * whose root is root_fd (root_st: its stat) for c: handles work, ext4, and
 * the store is the root of its filesystem (a number names any file of the
 * filesystem; none may be outside the store). @return NULL if so, else why
 * not (a phrase for the log). */
const char *cbfs_fdcache_ino_probe(const struct cbfs_fdcache *c, int root_fd,
                                   const struct stat *root_st);

/* Opens inode number ino of the store's filesystem, whatever its generation,
 * as an O_PATH fd in *fd (only where cbfs_fdcache_ino_probe said yes).
 * @return 0 or errno as cbfs_fdcache_open_handle (ESTALE: no such object). */
int cbfs_fdcache_open_ino(struct cbfs_fdcache *c, uint32_t ino, int *fd);

/* For callers whose own open failed with err: if err is EMFILE/ENFILE, closes
 * every idle fd of the cache. @return true if that freed any (worth one retry). */
bool cbfs_fdcache_relieve(struct cbfs_fdcache *c, int err);
/* r = call, and call once more where it failed for want of fds and the cache
 * let some go: the one retry rule for every call that needs a new fd. call is
 * an int expression that is -1 with errno on failure; it is evaluated again. */
#define CBFS_FDCACHE_RETRY(c, r, call)                                                 \
    do {                                                                               \
        (r) = (call);                                                                  \
        if ((r) == -1 && cbfs_fdcache_relieve((c), errno)) (r) = (call);               \
    } while (0)

#endif

/* Inode table of the FUSE layer: one struct cbfs_inode per store object the
 * kernel holds a reference to, keyed by the store's (st_dev, st_ino), with an
 * O_PATH fd and, for compressed files, the engine state shared by all handles.
 *
 * Locks of src/fuse. This is the one place their order is written; the
 * other files point here. Left before right, never the reverse; never two
 * inode locks:
 *
 *     inode->lock  ->  fs->names_lock  ->  fs->lock  ->  fs->fdc.lock
 *     inode->lock  ->  engine locks (file->lock, cache, pool; see cbfs/engine.h)
 *
 * Each field says which lock protects it: inode->lock the per-inode state,
 * fs->lock the table, refs and locations and the open-handles list
 * (handle.h), fs->fdc.lock the fd cache's LRU (fdcache.h). fs->names_lock
 * keeps the names of regular files still while a sidecar is created for one
 * (see its field). All four are
 * struct cbfs_mutex: a function documented "X held" checks it with
 * cbfs_assert_held() (live in test builds: CBFS_ASSERTS).
 *
 * fs->lock blocks on nothing but fs->fdc.lock (a leaf), and does no I/O other
 * than closing O_PATH fds; no engine calls. inode->lock may be held across
 * cbfs_file_open/close/truncate/size (they must see one consistent state) and
 * a write into a plain file's first bytes (ops_file.c: the check of what it
 * would start with and the write), but never across
 * cbfs_file_read/write/flush, which the engine serialises itself and which
 * may wait for the pool. No lock is held while replying to the
 * kernel.
 *
 * Lifetime: refs counts kernel lookups (nlookup: every entry reply adds one,
 * forget drops n), open handles, and regular files whose location names this
 * directory. At zero the inode leaves the table and is freed. The root inode
 * is never freed before cbfs_fs_free. Helpers in src/fuse return 0 or a
 * positive errno: this layer is the errno boundary, and cbfs_err would lose
 * ENOTDIR, ENOTEMPTY, EXDEV...
 *
 * Node ids (how the kernel, and the file handles it gives out for NFS, name
 * an inode): the root is FUSE_ROOT_ID; an object on the store root's
 * filesystem is its inode number there, the same after the kernel dropped its
 * caches and after a daemon restart; generation is cbfs_fdcache_generation's
 * (the store's i_generation on ext4, a hash of the file handle on other
 * layouts, 0 without handles; the root's is 0). Local ids
 * (the inode's address | CBFS_NODEID_LOCAL), valid for this daemon's life
 * only, go to what cannot have a stable one: objects of another filesystem
 * mounted inside the store (their inode numbers could collide with the
 * store's), inode numbers 0, 1 and >= 2^63, and a new object whose inode
 * number a stale inode still holds (the store reused a deleted file's number,
 * other generation or type, before the kernel forgot the old one). A handle
 * to a local id goes stale with the kernel's cache. How an inode is rebuilt
 * from its id alone (a "." lookup): export.h.
 *
 * Nameless files: a regular file reached by id alone (export.h) has no
 * location, so its sidecar is unknown until a lookup names it. Its kind then
 * comes from its data: framed, empty (it may have a sidecar) or starting with
 * a damaged envelope (a compressed file with a bad first header) is
 * COMPRESSED, anything else PLAIN. Such a COMPRESSED file opens read-only (the
 * index rebuilt from the frames in memory): writing without the sidecar would
 * leave it stale, and writing raw bytes into what may be a compressed file
 * would lose them at its next open. */
#ifndef CBFS_FUSE_INODE_H
#define CBFS_FUSE_INODE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include "cbfs/errseq.h"
#include "cbfs/mutex.h"
#include "fuse/cbfs_fuse.h"
#include "fuse/fdcache.h"
#include "fuse/flushhold.h"

enum cbfs_kind {
    CBFS_KIND_OTHER = 0,  /* not a regular file */
    CBFS_KIND_PLAIN,      /* passed through byte for byte */
    CBFS_KIND_COMPRESSED, /* frames + sidecar, served by the engine */
};

struct cbfs_inode {
    /* Immutable once the inode is in the table. */
    struct cbfs_storeobj obj; /* the store object (O_PATH, reached through the fd
                                 cache: pin it with cbfs_inode_pin) */
    dev_t dev;
    ino_t ino;
    fuse_ino_t nodeid;   /* see "Node ids" above */
    ino_t shown_ino;     /* st_ino as the mount shows it (cbfs_inode_st_ino); set with
                            nodeid, immutable after */
    uint32_t gen;        /* generation in entry replies */
    mode_t type;         /* st_mode & S_IFMT */
    enum cbfs_kind kind; /* decided when the inode is first looked up */

    /* Protected by fs->lock. */
    struct cbfs_inode *hnext;  /* hash chain */
    uint64_t refs;             /* see "Lifetime" above */
    struct cbfs_inode *parent; /* regular files: directory of the latest lookup, create
                                  or rename (holds one ref on it); NULL if unknown */
    char *name;                /* the name there (malloc'd); NULL with parent */

    /* Protected by lock. */
    struct cbfs_mutex lock;
    bool has_idx;            /* COMPRESSED: idx is the sidecar (any hard link of the
                                file reaches the same one); false if missing */
    struct cbfs_storeobj idx; /* pinned, unpinned and replaced only under lock */
    struct cbfs_file *file;  /* engine state while opens > 0, else NULL. Holders of an
                                open reference (handle, cbfs_inode_file_get) may use
                                it without the lock: it stays put until they drop it */
    unsigned opens;          /* open references on file */
    int ro_errno;            /* 0: file was opened read-write; else it is read-only and
                                this is what a write open gets (EROFS; ENOSPC or
                                EDQUOT where the store had no room for the sidecar
                                or the index's repair, EACCES where the sidecar is
                                not the file's, cbfs_store_sidecar_owned, or
                                something else is at its name). Set with file
                                (lock); as file, stable for holders of an open
                                reference */
    bool size_valid;         /* size and block_size cache the logical size and the
                                file's block size (file == NULL only) */
    uint64_t size;
    uint32_t block_size;
    struct cbfs_errseq plain_errs; /* PLAIN: the kernel's pages the store failed to take
                                (a WRITE with writepage): every handle hears them once,
                                at its next fsync, and at every close until then, as the
                                engine's (cbfs/errseq.h) */
    /* PLAIN: the store's changes made through the daemon (writes, truncates,
     * fallocates that succeeded: cbfs_inode_plain_changed), and the count the
     * last successful fdatasync or fsync of the file began after (where a new
     * handle's own count starts). A writer's close syncs unless its handle's
     * own count has caught up (cbfs_inode_plain_sync, handle.h). Atomic: a
     * write counts without the lock. */
    _Atomic uint64_t plain_changes;
    _Atomic uint64_t plain_synced;
    bool times_set;          /* writeback cache: times[] were set while file is open */
    struct timespec times[2]; /* atime, mtime as the kernel last set them (UTIME_OMIT:
                                 not set); put back after the engine writes the store */
    /* Atomic (relaxed; no lock, as every entry and attr reply writes them):
     * st_mode, st_uid, st_gid of the last such reply (reply.c; 0: none yet),
     * what a SETATTR of an object gone from the store answers with
     * (ops_entry.c, cbfs_setattr_gone). A reply racing a chown may mix old
     * and new: that answer is for an object already gone. */
    _Atomic mode_t shown_mode;
    _Atomic uid_t shown_uid;
    _Atomic gid_t shown_gid;
};

struct cbfs_handle; /* an open file or directory: fuse/handle.h */

/* The filesystem: options, the inode table and the list of open handles.
 * cbfs_fs_new creates it (fs.c), one per session. */
struct cbfs_fs {
    struct cbfs_fs_options opt; /* immutable after cbfs_fs_new */
    char *store_path;           /* owned copy of opt.store_path ("" if none); immutable */
    bool writeback;             /* writeback cache negotiated; set by init before
                                   any other request, read-only after */
    bool posix_acl;             /* FUSE_POSIX_ACL (and DONT_MASK) negotiated; as writeback */
    struct cbfs_inode *root;    /* FUSE_ROOT_ID; set by cbfs_itable_init, never freed
                                   before cbfs_fs_free */
    dev_t dev;                  /* the root's st_dev: its objects' ids are inode numbers;
                                   as root */
    bool export;                /* ids can be looked up by "." (export.h); set by
                                   cbfs_itable_init, read-only after (unit tests set it
                                   on a scratch store before any lookup) */
    uint64_t started_ns;        /* immutable: cbfs_now_ns() at cbfs_fs_new, for stats */

    struct cbfs_fdcache fdc;    /* O_PATH fds of every inode's objects (own lock) */

    /* Held by rename and unlink across their store calls and location
     * updates, and by the engine's first open of a file whose sidecar is lost
     * from reading the file's location until the new sidecar is in place: a
     * sidecar is never created at a name its data file no longer has. Does
     * store I/O; taken with no inode lock or under one (order above). */
    struct cbfs_mutex names_lock;

    struct cbfs_mutex lock;
    dev_t *xdevs;                /* protected by lock: the other file systems met inside
                                    the store, in the order met; never reused for the
                                    daemon's life (cbfs_inode_st_ino) */
    size_t nxdevs;               /* protected by lock */
    struct cbfs_inode **buckets; /* protected by lock: hash table by (dev, ino) */
    size_t nbuckets, count;      /* protected by lock */
    struct cbfs_handle *handles; /* protected by lock: open handles, linked through their
                                    next/prev (handle.c); NULL if none */
    /* protected by lock: what is held for the kernel's times SETATTRs to come,
     * oldest first (flushhold.h) */
    struct cbfs_flush_hold flush_holds[CBFS_FLUSH_HOLDS];
    size_t nflush_holds;
};

/* ---- table (inode.c) ---- */

/* Sets up the table and the root inode from opt->store_fd (duplicated). */
int cbfs_itable_init(struct cbfs_fs *fs);
/* Frees every inode (engine state must already be closed). */
void cbfs_itable_free(struct cbfs_fs *fs);

#define CBFS_NODEID_LOCAL (UINT64_C(1) << 63) /* see "Node ids" above */

/* Maps a node id the kernel holds (it looked it up and has not forgotten
 * it) to its inode, without a ref; NULL if the table has no such inode (a
 * bug: the kernel and the table disagree). */
struct cbfs_inode *cbfs_inode_get(struct cbfs_fs *fs, fuse_ino_t nodeid);
/* @return the inode of nodeid with one more ref, or NULL if the table does
 * not hold it; local ids are not looked up (NULL): for ids the kernel may
 * not hold, such as those in file handles. */
struct cbfs_inode *cbfs_inode_find_nodeid(struct cbfs_fs *fs, fuse_ino_t nodeid);
fuse_ino_t cbfs_inode_nodeid(const struct cbfs_fs *fs, const struct cbfs_inode *inode);
/* The inode number the mount shows for inode (st_ino of its attributes): the
 * store's, for an object on the store root's filesystem. Every object of the
 * mount has the mount's st_dev, and another file system mounted inside the
 * store numbers its inodes apart (a btrfs subvolume's root is 256 as every
 * subvolume's, a snapshot's files have their originals' numbers: tar took a
 * snapshot's file for a hard link of its original and restored the
 * original's bytes for it, find and du skipped such trees as loops), so an
 * object of another file system shows bit 63, that file system's place in
 * fs->xdevs (bits 48-62) and the low 48 bits of its inode number there:
 * unique in the mount (an inode number there past 2^48 aside), the same for
 * every name and after the kernel forgets the inode, for the daemon's life
 * (a remount may number the file systems in another order). Past 32767 such
 * file systems, or without memory, an object gets its node id, unique but
 * not kept once the kernel forgets it. The scheme assumes that the store's own
 * inode numbers stay below 2^63 (ext4's are 32 bits, xfs's and btrfs's far
 * below it); a store on a file system that hands out higher ones (a FUSE
 * file system that hashes them) could show one that equals a mapped number. */
ino_t cbfs_inode_st_ino(const struct cbfs_fs *fs, const struct cbfs_inode *inode);
/* The number the mount shows for inode ino of file system dev (as
 * cbfs_inode_st_ino; the raw number past the table's limit): for names the
 * table holds no inode of, such as a directory's "..". Takes fs->lock. */
ino_t cbfs_inode_map_ino(struct cbfs_fs *fs, dev_t dev, ino_t ino);
/* The d_ino the mount lists for an entry of directory dir whose store d_ino
 * is d_ino: as cbfs_inode_st_ino shows the objects of dir's file system (a
 * mount point inside dir keeps the number dir's file system lists for it;
 * "." and ".." are the caller's: cbfs_readdir_ino). */
ino_t cbfs_inode_dirent_ino(const struct cbfs_fs *fs, const struct cbfs_inode *dir, ino_t d_ino);

/* Pins the O_PATH fd of inode's store object: *fd stays valid until
 * cbfs_inode_unpin (the caller holds a ref on inode meanwhile). @return 0 or
 * an errno: EMFILE/ENFILE, ESTALE if the object is gone from the store. */
int cbfs_inode_pin(struct cbfs_fs *fs, struct cbfs_inode *inode, int *fd);
void cbfs_inode_unpin(struct cbfs_fs *fs, struct cbfs_inode *inode);

/* openat() of store objects: when the daemon is out of fds it closes the fd
 * cache's idle ones and tries once more; on noatime (nodiratime: for
 * O_DIRECTORY) mounts it adds O_NOATIME, as may callers that only peek, and
 * where the kernel refuses that (EPERM: not the owner, no CAP_FOWNER) opens
 * without it. A "DIR/NAME" name (a sidecar's in layout 2) is opened through
 * DIR without following a symlink there (cbfs_store_openat: ENOTDIR);
 * AT_FDCWD names are /proc/self/fd paths. @return the fd, or -1 with errno
 * set. */
int cbfs_fs_openat(struct cbfs_fs *fs, int dirfd, const char *name, int flags, mode_t mode);
/* The store's calls on a name or a "DIR/NAME" sidecar or aside path, which
 * follow no symlink at DIR (cbfs_store_unlinkat, _renameat2, _fstatat with
 * AT_SYMLINK_NOFOLLOW; link: of the object fd, as linkat of its /proc/self/fd
 * path with AT_SYMLINK_FOLLOW), tried once more after the fd cache let go of
 * idle fds where the daemon is out of them (DIR's fd). @return as the call:
 * 0, or -1 with errno set. */
int cbfs_fs_unlinkat(struct cbfs_fs *fs, int dirfd, const char *path);
int cbfs_fs_renameat2(struct cbfs_fs *fs, int olddirfd, const char *oldpath, int newdirfd,
                      const char *newpath, unsigned flags);
int cbfs_fs_link_fd(struct cbfs_fs *fs, int fd, int newdirfd, const char *newpath);
int cbfs_fs_fstatat(struct cbfs_fs *fs, int dirfd, const char *path, struct stat *st);

/* Looks up name in dir in the store and returns its inode with one more ref
 * (the caller hands it to the kernel in an entry reply, or drops it) and its
 * attributes as the mount shows them. Regular files get their kind decided
 * (new inodes) and their location set to (dir, name). Hidden names are not
 * checked here. @return 0 or an errno. */
int cbfs_inode_lookup(struct cbfs_fs *fs, struct cbfs_inode *dir, const char *name,
                      struct cbfs_inode **out, struct stat *st);

/* Like cbfs_inode_lookup for an object reached without a name (by its file
 * handle, or as a directory's ".."): fd is an O_PATH fd on it (owned from
 * here, also on failure), st its lstat, overwritten with the attributes as
 * the mount shows them. A new regular file gets no location ("Nameless files"
 * above). @return 0 or an errno. */
int cbfs_inode_adopt(struct cbfs_fs *fs, int fd, struct stat *st, struct cbfs_inode **out);

/* Adds n refs (n kernel lookups, or a handle). */
void cbfs_inode_ref(struct cbfs_fs *fs, struct cbfs_inode *inode, uint64_t n);
/* Drops n refs; frees the inode (and drops its parent) at zero. */
void cbfs_inode_unref(struct cbfs_fs *fs, struct cbfs_inode *inode, uint64_t n);

/* @return the inode for (dev, ino) if it is in the table, with one more ref
 * (drop it with cbfs_inode_unref); NULL if absent. */
struct cbfs_inode *cbfs_inode_find(struct cbfs_fs *fs, dev_t dev, ino_t ino);

/* Records (dir, name) as where inode's sidecar lives (regular files). */
int cbfs_inode_set_location(struct cbfs_fs *fs, struct cbfs_inode *inode,
                            struct cbfs_inode *dir, const char *name);
/* Copies the location: *dir gets a ref (drop it with cbfs_inode_unref) and the
 * name is written to buf. @return ENOENT if unknown, ENAMETOOLONG. */
int cbfs_inode_get_location(struct cbfs_fs *fs, struct cbfs_inode *inode,
                            struct cbfs_inode **dir, char *buf, size_t cap);
/* Forgets a location that no longer exists (after unlink of that name). */
void cbfs_inode_clear_location(struct cbfs_fs *fs, struct cbfs_inode *inode,
                               struct cbfs_inode *dir, const char *name);

/* What the daemon holds of an object across the removal of one of its
 * names (unlink, rmdir, a rename over it). An object left without a name is
 * freed by the store once the daemon closes its fd, and its handle no longer
 * opens: the kernel may still reference it (an O_PATH descriptor, a working
 * directory, a file being closed), and its fstat there answered ESTALE once
 * the fd cache had let its fd go (helper-45). Held across the removal, such
 * an object's fd (and its sidecar's) stays open until the kernel forgets it
 * (cbfs_storeobj_keep: at most the fd cache's size of them at once). */
struct cbfs_inode_hold {
    struct cbfs_inode *inode; /* with a ref and its fd pinned; NULL: nothing held */
    int fd;                   /* inode's pinned O_PATH fd */
    int ifd;                  /* its sidecar's, pinned too; -1: none */
};
/* Before name in dirfd (the caller's pinned fd) is removed, holds the inode
 * of the object there. Nothing is held where the table has no inode of it,
 * where handles do not work (every fd is kept anyway), where another name
 * is left (not a directory, st_nlink > 1: the kernel serialises the removals
 * of one inode's names), or where its fd cannot be pinned (ESTALE: gone
 * already; EMFILE after cbfs_fdcache_open_handle's waits): the removal goes
 * on as before. Takes inode->lock; call with no lock held. */
void cbfs_inode_hold_name(struct cbfs_fs *fs, int dirfd, const char *name,
                          struct cbfs_inode_hold *h);
/* After the removal, whatever its outcome: the held object keeps its fd, and
 * its sidecar's, where each has no name left (st_nlink 0); then the hold is
 * dropped. Takes inode->lock; call with no lock held. */
void cbfs_inode_hold_end(struct cbfs_fs *fs, struct cbfs_inode_hold *h);

/* fstatvfs of the store file system under inode (statfs asks at the root,
 * fallocate's free-space check at the file). @return 0 or errno. */
int cbfs_inode_statvfs(struct cbfs_fs *fs, struct cbfs_inode *inode, struct statvfs *sv);

/* ---- a regular file's state beyond the table (inode_file.c) ---- */

/* Store-relative path of inode for log lines (fd: any fd on it, an O_PATH
 * one or an open file's), from /proc; "inode N" where that fails. */
void cbfs_inode_log_name(const struct cbfs_fs *fs, const struct cbfs_inode *inode, int fd,
                         char *buf, size_t cap);

/* Attributes as the mount shows them: for COMPRESSED files st_size is the
 * logical size and st_blocks counts data file + sidecar. A compressed file
 * the engine has open is stat'ed through the engine's descriptors, with no
 * new one (a daemon out of descriptors answered an open file's fstat, and the
 * SETATTR of a truncate it had made, with EMFILE: helper-51). @return 0 or
 * errno. */
int cbfs_inode_stat(struct cbfs_fs *fs, struct cbfs_inode *inode, struct stat *st);
/* cbfs_inode_stat of an object the caller holds open: hfd, a handle's
 * descriptor of a PLAIN file or a directory (-1: none), is stat'ed instead
 * of a pinned one. */
int cbfs_inode_stat_via(struct cbfs_fs *fs, struct cbfs_inode *inode, int hfd, struct stat *st);

/* inode->lock held. Pins the O_PATH fd of a COMPRESSED inode's sidecar.
 * @return 0, ENOENT if it has none, or errno as cbfs_inode_pin. */
int cbfs_inode_idx_pin(struct cbfs_fs *fs, struct cbfs_inode *inode, int *fd);
void cbfs_inode_idx_unpin(struct cbfs_fs *fs, struct cbfs_inode *inode);

/* Clears the bits of clear (of 07777) from the mode of the store object
 * pinned as fd, whose stat the caller took (it picks clear from it), through
 * its /proc/self/fd path: the one chmod both set-id kills use. No call when
 * none of them is set. *changed: a bit was set and is gone. @return 0 or errno. */
int cbfs_inode_mode_clear(int fd, const struct stat *st, mode_t clear, bool *changed);

/* Clears the set-user-ID bit, and set-group-ID where the group may execute,
 * of inode's store object: the daemon's job under FUSE_HANDLE_KILLPRIV_V2
 * when an unprivileged caller writes, truncates or fallocates (the daemon
 * itself has CAP_FSETID, so the store would keep them). *changed: a bit was
 * set and is gone. @return 0 or errno. */
int cbfs_inode_kill_suidgid(struct cbfs_fs *fs, struct cbfs_inode *inode, bool *changed);

/* With the writeback cache the kernel owns a file's times and sends them in
 * SETATTR, also before dirty pages it still holds reach the engine; the
 * engine's later frame writes would bump the store's mtime. Record remembers
 * the times set on an open COMPRESSED file (tv as for utimensat; UTIME_NOW
 * is resolved now); restore puts them back on the store file after the
 * engine wrote (flush, fsync, last close). @return 0 or errno. */
void cbfs_inode_record_times(struct cbfs_inode *inode, const struct timespec tv[2]);
int cbfs_inode_restore_times(struct cbfs_fs *fs, struct cbfs_inode *inode);

/* A PLAIN file's change that a writer's close must make durable: a write,
 * truncate or fallocate of the store file that succeeded. */
void cbfs_inode_plain_changed(struct cbfs_inode *inode);
/* Syncs a PLAIN file through fd (fdatasync, or fsync unless datasync), or
 * nothing where if_changed and a sync through fd that began after every
 * change counted so far has succeeded (*fd_synced: a writer's close of a
 * file nobody changed since its handle's last sync). A file changed through
 * another descriptor is synced all the same: the store syncs the file, not
 * the descriptor. Another descriptor's good sync is no reason to skip: the
 * store reports a writeback error once to each of its open files (Linux's
 * errseq), so only fd's own sync has heard fd's. @return 0 or errno. */
int cbfs_inode_plain_sync(struct cbfs_inode *inode, int fd, _Atomic uint64_t *fd_synced,
                          bool datasync, bool if_changed);

/* Takes an open reference on the engine state of a COMPRESSED inode, opening
 * it on first use (O_RDWR, or read-only if the store/mount is). *file is valid
 * until cbfs_inode_file_put. @return 0 or errno. */
int cbfs_inode_file_get(struct cbfs_fs *fs, struct cbfs_inode *inode, struct cbfs_file **file);
/* Drops an open reference; the last one closes the engine state (flushing it;
 * a failure is logged, as release cannot report it). @return 0 or errno of that
 * close. */
int cbfs_inode_file_put(struct cbfs_fs *fs, struct cbfs_inode *inode);
/* Installs freshly created engine state (create()) as the first open
 * reference. The inode must have none. */
void cbfs_inode_file_install(struct cbfs_inode *inode, struct cbfs_file *file);

/* ---- helpers shared by the ops files ---- */

/* true for names the mount hides (cbfs_store_name_hidden for the store's
 * layout): ".cbfs" in the root, the sidecar names or index directory anywhere. */
bool cbfs_inode_name_hidden(const struct cbfs_fs *fs, const struct cbfs_inode *dir,
                            const char *name);
/* Makes st, the store's attributes of the object on fd, show the link count
 * the mount has for a directory: without its hidden subdirectories
 * (cbfs_store_dir_nlink). Other types are left as they are. */
void cbfs_inode_dir_nlink(const struct cbfs_fs *fs, int fd, struct stat *st);
/* The check of every name an operation receives (cbfs_store_name_check):
 * op NULL for a name that must exist (hidden: ENOENT), else the operation
 * creating it, for the log line of a refused reserved name (EPERM).
 * @return 0, ENAMETOOLONG, ENOENT or EPERM. */
int cbfs_inode_name_check(const struct cbfs_fs *fs, const struct cbfs_inode *dir, const char *name,
                          const char *op);
/* Writes the path of name's sidecar relative to its directory
 * (cbfs_store_sidecar_path); cap: CBFS_STORE_SIDECAR_PATH_MAX. @return 0 or
 * ENAMETOOLONG (the name cannot have a sidecar). */
int cbfs_inode_sidecar_path(const struct cbfs_fs *fs, const char *name, char *buf, size_t cap);
/* Makes sure a sidecar can be created in dirfd (cbfs_store_sidecar_dir).
 * @return 0 or errno. */
int cbfs_inode_sidecar_dir(const struct cbfs_fs *fs, int dirfd);

#endif

/* The store: the directory that backs a mount. Two parts.
 *
 * Layout (layout.c): the one home of the rules that say which names in a
 * store belong to cbfs and which files are cbfs files. The daemon, the cbfs
 * tool and the fuzzers all call these; none spells a rule again.
 *
 * Metadata (store.c): STORE/.cbfs/ with the daemon lock (one daemon per
 * store) and store.conf (format version, uuid, the defaults chosen at the
 * first mount). Everything is reached relative to one O_PATH descriptor on the
 * store root, opened before an in-place mount hides the directory.
 *
 * Typical use (the daemon's main):
 *   cbfs_store_open(path) -> cbfs_store_lock -> cbfs_store_read_conf
 *   -> (first mount) cbfs_store_conf_init + cbfs_store_write_conf
 *   -> ... mount, serve ... -> cbfs_store_close (drops the lock). */
#ifndef CBFS_STORE_H
#define CBFS_STORE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"
#include "cbfs/format.h"

#define CBFS_STORE_DIR ".cbfs"          /* in the store root only; see below */
#define CBFS_STORE_CONF "store.conf"    /* inside CBFS_STORE_DIR */
#define CBFS_STORE_LOCK "lock"          /* inside CBFS_STORE_DIR */
/* Inside CBFS_STORE_DIR, this prefix and 16 hex digits: the sidecar at a
 * rename's target, moved out of the way until the data file's rename is
 * done (put back if it fails). A crash in between leaves it: the target's
 * index as it was (the daemon warns of it at mount; OPERATIONS.md). */
#define CBFS_STORE_ASIDE "rename-aside-"
#define CBFS_STORE_ASIDE_MAX (sizeof CBFS_STORE_DIR "/" CBFS_STORE_ASIDE "0123456789abcdef")
#define CBFS_STORE_CONF_VERSION 1u      /* newest store.conf format this cbfs reads */

/* ---- layout (layout.c) ----
 *
 * A store is in one of two layouts (store.conf's layout=, CBFS_LAYOUT_* below;
 * a store.conf without the key is layout 1). The rules (docs/FORMAT.md,
 * "Store layout"):
 *
 * - CBFS_STORE_DIR is cbfs's only in the store root, the one place the daemon
 *   keeps its metadata. There the mount hides it and refuses to create it,
 *   whatever its type, and the tool skips it. Below the root ".cbfs" is an
 *   ordinary name. (Both layouts.)
 * - Layout 1 (CBFS_LAYOUT_SUFFIX): the sidecar of dir/NAME is
 *   dir/NAME.cbfsidx. Every name that ends in CBFS_INDEX_SUFFIX, in any
 *   directory, is a sidecar name (".cbfsidx" itself too: the sidecar of no
 *   file, so always an orphan). A data file name is at most NAME_MAX minus
 *   the suffix (247 bytes), so that its sidecar name fits.
 * - Layout 2 (CBFS_LAYOUT_INDEXDIR): the sidecar of dir/NAME is
 *   dir/.cbfsidx/NAME, in a per-directory index directory made on demand.
 *   The one name CBFS_INDEX_DIR is reserved, in every directory; names
 *   ending in the suffix are ordinary. A data file name is up to NAME_MAX.
 * - The mount hides the reserved names from readdir and lookup (ENOENT) and
 *   refuses to create them (EPERM); a name longer than the layout allows is
 *   ENAMETOOLONG from every operation (cbfs_store_name_check).
 * - A regular file is a cbfs (compressed) file when its sidecar exists, or
 *   when its data starts with a frame envelope (the sidecar was lost and is
 *   rebuilt from the frames). Any other regular file is plain.
 * - A sidecar has its data file's owner, mode and access ACL
 *   (cbfs_store_sidecar_match). */

/* A cbfs mount's file system type in /proc/mounts is "fuse." subtype; the
 * daemon sets this subtype unless told another (-o subtype=), and the tools
 * find a mount's store by the type. */
#define CBFS_FS_SUBTYPE "cbfs"
#define CBFS_FS_TYPE "fuse." CBFS_FS_SUBTYPE

#define CBFS_LAYOUT_SUFFIX 1u   /* NAME.cbfsidx beside NAME */
#define CBFS_LAYOUT_INDEXDIR 2u /* .cbfsidx/NAME: per-directory index directory */
#define CBFS_LAYOUT_NEWEST CBFS_LAYOUT_INDEXDIR /* what new stores get */
#define CBFS_INDEX_DIR ".cbfsidx"               /* layout 2's index directory */
/* The index directory's mode (owner: its directory's): others may reach a
 * sidecar but not list them, so each sidecar's own mode and ACL (the data
 * file's, cbfs_store_sidecar_match) decide who reads it, as in layout 1. */
#define CBFS_INDEX_DIR_MODE 0711

#define CBFS_STORE_SUFFIX_LEN (sizeof CBFS_INDEX_SUFFIX - 1)
/* room for any sidecar path (cbfs_store_sidecar_path) and its NUL */
#define CBFS_STORE_SIDECAR_PATH_MAX (sizeof CBFS_INDEX_DIR + NAME_MAX + 1)
#define CBFS_STORE_NAME_MAX (NAME_MAX - CBFS_STORE_SUFFIX_LEN) /* 247: layout 1 */

/* The rule in words, for messages that refuse a name. */
#define CBFS_STORE_RESERVED_RULE                                                                  \
    "\"" CBFS_STORE_DIR "\" in the store root and, in every directory, \"" CBFS_INDEX_DIR     \
    "\" (layout 2) or names ending in it (layout 1) are its own"

/* @return true if layout is one this cbfs knows (CBFS_LAYOUT_SUFFIX or
 * CBFS_LAYOUT_INDEXDIR). */
bool cbfs_store_layout_known(unsigned layout);

/* @return the longest data file name of the layout: 247 or NAME_MAX. */
size_t cbfs_store_name_max(unsigned layout);

/* @return true if name ends in CBFS_INDEX_SUFFIX (".cbfsidx" included): a
 * sidecar name in layout 1. */
bool cbfs_store_is_sidecar_name(const char *name);

/* @return true for the names the mount hides from readdir and lookup and
 * refuses to create: CBFS_STORE_DIR when in_root (name is an entry of the
 * store root); anywhere, sidecar names (layout 1) or CBFS_INDEX_DIR
 * (layout 2). */
bool cbfs_store_name_hidden(unsigned layout, const char *name, bool in_root);

/* The link count the mount shows for the directory dirfd (in_root: the
 * store root) whose store count is nlink: a directory counts one link per
 * subdirectory (its ".."), and the hidden ones (CBFS_INDEX_DIR in layout 2,
 * CBFS_STORE_DIR in the root) are not the mount's. */
nlink_t cbfs_store_dir_nlink(unsigned layout, int dirfd, bool in_root, nlink_t nlink);

/* @return true if path, a '/'-separated path below a store root of layout
 * (relative: from the root; or absolute), names a sidecar or another object
 * that only sidecars may use: its last component is a name
 * cbfs_store_name_hidden hides below the root, (layout 2) a directory on the
 * path is an index directory, or (a relative path) its first component is one
 * hidden in the root (CBFS_STORE_DIR). For the tools, which are given paths,
 * not names. */
bool cbfs_store_path_reserved(unsigned layout, const char *path);

/* The check every name that arrives at the mount goes through.
 * @return CBFS_E_NAMETOOLONG (longer than cbfs_store_name_max), else for a
 * hidden name CBFS_E_PERM if creating (the name is refused) or CBFS_E_NOENT
 * (it does not exist), else CBFS_OK. */
cbfs_err cbfs_store_name_check(unsigned layout, const char *name, bool in_root, bool creating);

/* Writes the path of data file name's sidecar, relative to the directory
 * holding name, into buf: "NAME.cbfsidx" (layout 1) or ".cbfsidx/NAME"
 * (layout 2); usable as the name of any *at call on that directory.
 * @return CBFS_E_NAMETOOLONG if name is longer than the layout allows or the
 * result does not fit cap (nothing written then). */
cbfs_err cbfs_store_sidecar_path(unsigned layout, const char *name, char *buf, size_t cap);

/* Makes sure sidecars can be created in directory dirfd (any fd, O_PATH
 * included): layout 2 makes its CBFS_INDEX_DIR (mode CBFS_INDEX_DIR_MODE
 * whatever the umask, the directory's owner and group when run as root) unless there; layout 1 has
 * nothing to do. @return CBFS_OK or the error (CBFS_E_EXIST if the name is
 * taken by something that is not a directory). */
cbfs_err cbfs_store_sidecar_dir(unsigned layout, int dirfd);

/* The *at calls for a path in dirfd that is a name or "DIR/NAME" (a sidecar
 * path of layout 2, an aside path in the store root): DIR is opened with
 * O_NOFOLLOW | O_DIRECTORY, never through a symlink. Whoever can write the
 * store directly (a group-writable store, a user's own directory in a store
 * others can reach, an in-place store) could otherwise make an index
 * directory or .cbfs a symlink, and the daemon (root) would open, chown,
 * rename or unlink files outside the store. A symlink there fails ENOTDIR.
 * The last name is used as the call uses it (openat: pass O_NOFOLLOW).
 * @return as the system call, -1 with errno set on failure. */
int cbfs_store_openat(int dirfd, const char *path, int flags, mode_t mode);
int cbfs_store_fstatat(int dirfd, const char *path, struct stat *st, int flags);
int cbfs_store_unlinkat(int dirfd, const char *path, int flags);
int cbfs_store_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                         unsigned int flags);
/* linkat(olddirfd, oldpath, ...): only newpath is split (oldpath is taken
 * as given, e.g. a /proc/self/fd path with AT_SYMLINK_FOLLOW). */
int cbfs_store_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                      int flags);
/* The directory holding path's last name, opened ahead for calls relative to
 * it that must need no new descriptor when they come (a rename's sidecar,
 * once its data file has moved): *at is dirfd itself for a plain name, else
 * an fd of path's one directory, opened as cbfs_store_openat opens it;
 * *path moves on to the last name. Give it back with cbfs_store_at_close.
 * @return 0, or -1 with errno set. */
int cbfs_store_at_open(int dirfd, const char **path, int *at);
void cbfs_store_at_close(int dirfd, int at);

/* rmdir of name in dirfd with ext4's answer for a directory that looks empty
 * through the mount: one that holds only sidecars whose data files are gone
 * (layout 1: beside them; layout 2: in its index directory, which goes too)
 * is removed with them. @return CBFS_OK or the error of rmdir (CBFS_E_NOTEMPTY,
 * CBFS_E_NOTDIR, ...). */
cbfs_err cbfs_store_rmdir(unsigned layout, int dirfd, const char *name);

/* The part of cbfs_store_rmdir that a rename over a directory needs too:
 * if directory name in dirfd lists as empty through the mount (only
 * sidecars whose data files are gone, as above), removes them, leaving it
 * empty in the store. @return CBFS_OK, CBFS_E_NOTEMPTY if it holds
 * anything else, or an I/O error. */
cbfs_err cbfs_store_empty_dir(unsigned layout, int dirfd, const char *name);

/* For a store with no store.conf, which a mount would take for a new one (of
 * the newest layout): does the tree below root_fd hold a sidecar of layout 1
 * (a regular file NAME.cbfsidx beside NAME)? A store of layout 1 that lost
 * its .cbfs/ (a copy made with cp -a STORE/(star) skips it) would then be
 * served as layout 2: every compressed file EIO, its sidecars shown as
 * files. Looks at CBFS_STORE_PROBE_MAX entries at most (a tree of plain
 * files made a store is walked no further), CBFS_STORE_PROBE_DEPTH
 * directories deep, and, where root_fd is not a store root itself, none
 * inside a store below it (cbfs_store_nested_root: its sidecars are its own
 * store's, not the tree's). index_dir (NULL: not wanted): whether the same
 * walk met a directory CBFS_INDEX_DIR (where *found, only up to the
 * sidecar), so that a reader who wants both facts walks the tree once.
 * @return CBFS_OK with *found (and the store-relative path of one in
 * example), or an I/O error. */
#define CBFS_STORE_PROBE_MAX 10000u
#define CBFS_STORE_PROBE_DEPTH 64u

/* Directories below its start a walk of a store's whole tree goes into at
 * most (the tools' walk, fsck --upgrade): a deeper tree is an error, not a
 * stack overflow (each level holds a frame and an fd). */
#define CBFS_STORE_DEPTH_MAX 4096u
cbfs_err cbfs_store_find_layout1(int root_fd, bool *found, bool *index_dir, char *example,
                                 size_t cap);

/* For a store of layout 1: does the tree hold a directory CBFS_INDEX_DIR?
 * Layout 1 reserves the name (no file of the mount has it), so only
 * cbfs fsck --upgrade made it: an upgrade cut short, whose sidecars are
 * partly at their new homes; a mount before it is run again would misplace
 * sidecars for good (a rename, a new file of a moved sidecar's name). As
 * cbfs_store_find_layout1, CBFS_STORE_PROBE_MAX entries at most. */
cbfs_err cbfs_store_find_index_dir(int root_fd, bool *found, char *example, size_t cap);

/* Writes the sidecar name of data file name (name + CBFS_INDEX_SUFFIX) into
 * buf: layout 1's name. @return CBFS_E_NAMETOOLONG if name is longer than
 * CBFS_STORE_NAME_MAX or the result does not fit cap (nothing written then). */
cbfs_err cbfs_store_sidecar_name(const char *name, char *buf, size_t cap);

/* Writes the data file name of a sidecar name (the name without the suffix;
 * "" for ".cbfsidx") into buf. @return CBFS_E_INVAL if sidecar is not a
 * sidecar name, CBFS_E_NAMETOOLONG if the result does not fit cap. */
cbfs_err cbfs_store_data_name(const char *sidecar, char *buf, size_t cap);

/* Reads the start of the file open at fd (readable): *framed = whether it
 * starts with a frame envelope (cbfs_frame_is_envelope); a file shorter than
 * one is not framed. *damaged (if not NULL) = whether it starts with a damaged
 * one instead (cbfs_frame_envelope_damaged: what the tools report of a plain
 * file). @return a read error (then both are false): the caller decides,
 * never a guess here. */
cbfs_err cbfs_store_has_frame_envelope(int fd, bool *framed, bool *damaged);

/* May buf[0, size) be written at off into the plain file open (readable) at
 * fd? Not if the file would then start with a frame envelope: the layout
 * (FORMAT.md 1) would take it for a compressed file whose sidecar is lost,
 * and read its bytes back decoded. The bytes the write leaves as they are
 * come from fd; a write at or past the envelope's end reads nothing. The
 * caller keeps other writes into [0, CBFS_FRAME_ENVELOPE_SIZE) of the file
 * out until its own write is done. @return CBFS_OK, CBFS_E_PLAIN_FRAMED, or
 * a read error (never a guess). */
cbfs_err cbfs_store_check_plain_write(int fd, const void *buf, size_t size, uint64_t off);

/* @return true if dirfd is a store root: it holds a CBFS_STORE_DIR directory
 * (not a symlink). */
bool cbfs_store_is_root(int dirfd);

/* Is the directory dirfd, met below the start of a walk of a tree, the root
 * of a store of its own, read by its own store.conf (its layout, its block
 * size) and not as a part of the tree walked? Only where that tree is in no
 * store (outside: no store root at its start or above it, a directory that
 * holds stores, /srv of /srv/db1 and /srv/db2): below a store root .cbfs is
 * an ordinary name (cbfs_store_root_of takes the outermost root), and a store
 * root is what cbfs_store_is_root says. The layout probe of a tree that is
 * not a store (cbfs_store_find_layout1) does not look into one; the tools'
 * walk reads it by its own rules (tool_walk). */
bool cbfs_store_nested_root(bool outside, int dirfd);

/* The layout of the files of one directory outside any store (a file the
 * tools are given there), from that directory alone: CBFS_LAYOUT_INDEXDIR if
 * it holds a CBFS_INDEX_DIR directory (only layout 2 and an upgrade make
 * one), else CBFS_LAYOUT_SUFFIX (a sidecar beside its file). A whole tree is
 * cbfs_store_layout_of's. */
unsigned cbfs_store_dir_layout(int dirfd);

/* The POSIX ACLs of a store object, as the store keeps them (and the mount
 * shows them: cbfs passes them through). */
#define CBFS_STORE_XATTR_ACL "system.posix_acl_access"
#define CBFS_STORE_XATTR_ACL_DEFAULT "system.posix_acl_default"

/* The sidecar rule for permissions: a sidecar has the owner and group (when
 * run as root: only root can give files away), the permission bits (no
 * set-id bits) and the POSIX access ACL of its data file, so that the store
 * lets nobody read an index whose data it refuses them. Gives them to the
 * sidecar idx_fd from the data file data_fd (either may be an O_PATH fd). A
 * store without ACLs keeps owner and mode only. owner: NULL for a sidecar
 * this process has just created (O_CREAT | O_EXCL); else the stat of the
 * data file as it was before the change being followed, whose owner the
 * sidecar must have (cbfs_store_sidecar_owned's rule), or CBFS_E_PERM with
 * nothing changed. @return CBFS_OK or the error of the first step that
 * failed. */
cbfs_err cbfs_store_sidecar_match(int data_fd, int idx_fd, const struct stat *owner);

/* May cbfs write into the existing sidecar idx_fd of the data file data_fd
 * (either may be an O_PATH fd), or change its owner and mode? Only if it is a
 * regular file with the data file's owner, or (cbfs not running as root,
 * which cannot give the sidecars it makes away) cbfs's own. Anything else at
 * a sidecar's name was put there by someone who writes the store directly
 * (another's file moved to it): cbfs run as root would write into a file
 * that is not this one's index. The daemon then serves the file read-only,
 * fsck leaves it. @return CBFS_OK, CBFS_E_PERM, or the error of a stat. */
cbfs_err cbfs_store_sidecar_owned(int data_fd, int idx_fd);

/* cbfs_store_sidecar_owned's rule on stats: may the file of stat ist be the
 * sidecar of the data file of stat st? */
bool cbfs_store_sidecar_owner_ok(const struct stat *st, const struct stat *ist);

/* ---- metadata (store.c) ---- */

/* The contents of store.conf. Text, one key=value per line, '#' comments;
 * unknown keys are ignored so newer minor additions stay readable. */
struct cbfs_store_conf {
    unsigned format_version;            /* CBFS_STORE_CONF_VERSION when written */
    unsigned layout;                    /* CBFS_LAYOUT_*; 1 when the key is missing */
    char uuid[33];                      /* 32 lower-case hex digits + NUL */
    char created[32];                   /* RFC 3339 UTC, e.g. 2024-05-01T10:00:00Z */
    const struct cbfs_codec_ops *codec; /* default codec for new files */
    int level;                          /* its level */
    uint32_t block_size;                /* default block size */
};

struct cbfs_store;

/* Opens the store root with O_PATH|O_DIRECTORY (a symlink given by the user
 * is followed: the path is the user's choice). Creates nothing.
 * @return CBFS_E_NOENT, CBFS_E_ACCES, CBFS_E_INVAL (not a directory), ... */
cbfs_err cbfs_store_open(const char *path, struct cbfs_store **out);

/* The O_PATH descriptor on the store root: valid as dirfd for *at calls until
 * cbfs_store_close. Owned by the store. */
int cbfs_store_fd(const struct cbfs_store *st);

/* The store root of the directory at abs (an absolute, resolved path): the
 * outermost of abs itself (with self) and the directories above it that is a
 * store root (cbfs_store_is_root). Outermost, because below a root ".cbfs"
 * is an ordinary name a user may have made through the mount. The tools
 * resolve a path to its store with it; the daemon refuses a directory with a
 * root above it (two daemons would serve its files). @return false if there
 * is none, else true with the root's length (a prefix of abs) in *root_len. */
bool cbfs_store_root_of(const char *abs, bool self, size_t *root_len);

/* fsyncs the directory name in dirfd (any fd on it; "." for dirfd itself,
 * symlinks not followed): a real descriptor, since O_PATH ones cannot be
 * fsynced. @return CBFS_OK, CBFS_E_NOENT if it does not exist, or an error. */
cbfs_err cbfs_store_sync_dir(int dirfd, const char *name);

/* Takes the store root's flock (LOCK_EX|LOCK_NB; where the root's file
 * system allows it), creates .cbfs/ (0700) if needed and takes .cbfs/lock with
 * flock(LOCK_EX|LOCK_NB), then writes our pid into it. The root's lock keeps
 * a second daemon out even after .cbfs/ was renamed or removed under us. The
 * locks belong to the open file descriptions, so they survive fork(): a
 * daemonized child keeps them (call cbfs_store_set_pid there). readonly: a
 * store on a read-only filesystem is locked through a read-only descriptor
 * (no pid written).
 * @return CBFS_E_BUSY with *holder = the running daemon's pid (0 if unknown),
 * CBFS_E_ROFS if .cbfs/ does not exist and cannot be created, I/O errors. */
cbfs_err cbfs_store_lock(struct cbfs_store *st, bool readonly, pid_t *holder);
/* The same for a check that must leave the store as it was (cbfs fsck
 * without --repair): takes the root's flock and .cbfs/lock's where they can
 * be had, creates nothing and writes no pid (a mount then names the holder
 * from /proc/locks). A store without .cbfs/lock is locked by its root's
 * flock alone, or (where the root cannot be flocked) not at all: no daemon
 * serves it (a daemon makes the lock file before it serves), and one that
 * mounts meanwhile makes it and takes it itself; the check, which writes
 * nothing, can then at worst report a problem of a file being written, as
 * cbfs verify of a live store can, never change a byte.
 * @return CBFS_E_BUSY with *holder as cbfs_store_lock gives it, I/O errors. */
cbfs_err cbfs_store_lock_existing(struct cbfs_store *st, pid_t *holder);
/* Does st hold .cbfs/lock's flock (after cbfs_store_lock, always; after
 * cbfs_store_lock_existing, where the store has the file)? Every daemon takes
 * that lock before it serves the store and keeps it until it has stopped
 * serving (mount.cbfs drops it only after its FUSE session is destroyed and
 * its files are flushed), and refuses a store that is a directory of
 * another: while it is held no daemon changes the store, so a tool meets no
 * rename or unlink of a live mount half done. (The root's flock alone does
 * not say as much: a daemon that cannot read the root goes on without it.) */
bool cbfs_store_lock_excludes_daemons(const struct cbfs_store *st);
/* Who holds a store's lock, for the one wording of "in use" in the daemon and
 * the tools. */
enum cbfs_store_holder {
    CBFS_HOLDER_DAEMON,  /* mount.cbfs or mount.fuse.cbfs: unmount it */
    CBFS_HOLDER_TOOL,    /* cbfs fsck or cbfs mkfs: wait for it */
    CBFS_HOLDER_UNKNOWN, /* the pid is not known or not shown here (another pid
                            namespace, hidepid), or another program */
};
/* Names the holder (as cbfs_store_lock gave it) into buf, from its
 * /proc/PID/cmdline: "a cbfs daemon (pid N)", "cbfs fsck (pid N)", "process N
 * (PROGRAM)", "process N" or "an unknown process". @return its kind. */
enum cbfs_store_holder cbfs_store_holder_describe(pid_t holder, char *buf, size_t cap);

/* Whether a crash mid-rename left files in .cbfs/ (CBFS_STORE_ASIDE...; only
 * regular files count, as only those can be sidecars put aside):
 * if so, msg (cap bytes) says which and where to read what to do, for the
 * daemon's log and fsck alike (path: the store's, as the user gave it).
 * After cbfs_store_lock; false where .cbfs/ cannot be read. */
bool cbfs_store_asides(const struct cbfs_store *st, const char *path, char *msg, size_t cap);

/* Rewrites the pid in the lock file (after a daemonizing fork). Best effort:
 * the pid only makes the "in use" message more useful. */
void cbfs_store_set_pid(struct cbfs_store *st, pid_t pid);

/* Reads .cbfs/store.conf. *found = false (and CBFS_OK) when it does not exist
 * yet, i.e. this is the first mount. On a malformed file writes one sentence
 * naming the line and the fix into msg.
 * @return CBFS_E_VERSION (format_version newer than this cbfs),
 * CBFS_E_CODEC_MISSING/UNKNOWN (codec not built in), CBFS_E_INVAL (malformed),
 * I/O errors. */
cbfs_err cbfs_store_read_conf(struct cbfs_store *st, struct cbfs_store_conf *conf, bool *found,
                              char *msg, size_t msg_cap);

/* What the layout rules (docs/FORMAT.md 1) make of a tree: the one place the
 * daemon and the tools take them from. */
enum cbfs_layout_state {
    CBFS_LAYOUT_CONF,      /* store.conf says which, and nothing contradicts it */
    CBFS_LAYOUT_NO_CONF,   /* no store.conf and no sidecar of layout 1: the newest
                            * layout, what a first mount writes (a new store, or one of
                            * layout 2 that lost its .cbfs/) */
    CBFS_LAYOUT_LOST_CONF, /* no store.conf, but sidecars of layout 1: a store of layout
                            * 1 that lost it. Its files read as layout 1's; a mount or
                            * mkfs would write layout 2 over it (every compressed file
                            * EIO), so both refuse it */
    CBFS_LAYOUT_CUT_SHORT, /* store.conf says layout 1 and a CBFS_INDEX_DIR exists: an
                            * upgrade cut short, some sidecars at their new homes. Only
                            * cbfs fsck --upgrade may touch it (cbfs_store_upgrade) */
};

struct cbfs_store_layout {
    unsigned layout;              /* CBFS_LAYOUT_*: the layout its files are read with */
    uint32_t block_size;          /* store.conf's default block size; 0 without one */
    enum cbfs_layout_state state;
    char example[PATH_MAX];       /* LOST_CONF, CUT_SHORT: the store-relative path of a
                                   * sidecar or index directory that shows it */
    bool index_dir_seen;          /* the probe met a directory CBFS_INDEX_DIR (no store.conf,
                                   * or one of layout 1; false where there was no probe):
                                   * the tools read a tree outside any store as layout 2
                                   * only then */
};

/* The layout of the tree at root_fd whose store.conf is conf (NULL: it has
 * none). Probes at most CBFS_STORE_PROBE_MAX entries (cbfs_store_find_layout1
 * without a store.conf, cbfs_store_find_index_dir with one of layout 1).
 * @return CBFS_OK with *out filled, or the probe's I/O error: then nothing is
 * told (never a guess). */
cbfs_err cbfs_store_layout_of(int root_fd, const struct cbfs_store_conf *conf,
                              struct cbfs_store_layout *out);

/* The same for readers that do not lock the tree (the cbfs tool): reads its
 * store.conf, if it has one (a tree without .cbfs/ has none). Errors as
 * cbfs_store_read_conf or cbfs_store_layout_of, msg one sentence that names
 * what failed (".cbfs/store.conf: line 2: ..."). */
cbfs_err cbfs_store_read_layout(int root_fd, struct cbfs_store_layout *out, char *msg,
                                size_t msg_cap);

/* The one wording of why a store in state LOST_CONF or CUT_SHORT is refused,
 * and what to run, into msg: "store ROOT: ...". */
void cbfs_store_layout_refusal(const struct cbfs_store_layout *l, const char *root, char *msg,
                               size_t cap);

/* Fills a fresh conf: current version, a new random uuid, created = now, and
 * the given codec/level/block size. */
void cbfs_store_conf_init(struct cbfs_store_conf *conf, const struct cbfs_codec_ops *codec,
                          int level, uint32_t block_size);

/* Writes .cbfs/store.conf atomically: temporary file, fsync, rename, fsync of
 * .cbfs/. Requires the lock. */
cbfs_err cbfs_store_write_conf(struct cbfs_store *st, const struct cbfs_store_conf *conf);

/* Removes the store.conf a first mount wrote when that mount then failed (no
 * /dev/fuse, say): its settings were that attempt's, not the store's, and
 * they stayed the defaults of every later mount. Requires the lock. Best
 * effort: @return CBFS_OK or the error of removing it. */
cbfs_err cbfs_store_unwrite_conf(struct cbfs_store *st);

/* ---- layout upgrade (upgrade.c) ---- */

/* Converts a locked, unmounted store from layout 1 to CBFS_LAYOUT_NEWEST:
 * renames every NAME.cbfsidx to .cbfsidx/NAME (removes ".cbfsidx" files, the
 * sidecars of no file), fsyncs each directory and its index directory, and
 * then writes store.conf with the new layout. Crash-safe by construction: a
 * rerun after an interrupted one finishes the job. A store already in the
 * newest layout is left alone. display: the store path for msg.
 * @return CBFS_OK with *moved = the sidecars moved, or the error with one
 * sentence in msg. */
cbfs_err cbfs_store_upgrade(struct cbfs_store *st, const char *display, uint64_t *moved,
                            char *msg, size_t msg_cap);

/* Drops the lock and closes every descriptor. If this store's .cbfs/ was
 * created by cbfs_store_lock and no store.conf was written since (a first
 * mount that failed, or a read-only one), .cbfs/ is removed again.
 * NULL is a no-op. */
void cbfs_store_close(struct cbfs_store *st);

#endif

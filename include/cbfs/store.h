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
#include <sys/types.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"
#include "cbfs/format.h"

#define CBFS_STORE_DIR ".cbfs"          /* in the store root only; see below */
#define CBFS_STORE_CONF "store.conf"    /* inside CBFS_STORE_DIR */
#define CBFS_STORE_LOCK "lock"          /* inside CBFS_STORE_DIR */
#define CBFS_STORE_CONF_VERSION 1u      /* newest store.conf format this cbfs reads */

/* ---- layout (layout.c) ----
 *
 * The rules (docs/FORMAT.md, "Store layout"):
 *
 * - CBFS_STORE_DIR is cbfs's only in the store root, the one place the daemon
 *   keeps its metadata. There the mount hides it and refuses to create it,
 *   whatever its type, and the tool skips it. Below the root ".cbfs" is an
 *   ordinary name.
 * - Every name that ends in CBFS_INDEX_SUFFIX, in any directory, is a sidecar
 *   name: the sidecar of the data file named by the rest. ".cbfsidx" itself is
 *   one too (the sidecar of no file, so always an orphan): one suffix test,
 *   no exception. The mount hides and refuses all of them; the tool never
 *   takes one for a data file and reports those whose data file is missing.
 * - A data file name is at most CBFS_STORE_NAME_MAX bytes, so that its sidecar
 *   name fits a directory entry (NAME_MAX).
 * - A regular file is a cbfs (compressed) file when its sidecar exists, or
 *   when its data starts with a frame envelope (the sidecar was lost and is
 *   rebuilt from the frames). Any other regular file is plain.
 * - A sidecar has its data file's owner, mode and access ACL
 *   (cbfs_store_sidecar_match). */

#define CBFS_STORE_SUFFIX_LEN (sizeof CBFS_INDEX_SUFFIX - 1)
#define CBFS_STORE_NAME_MAX (NAME_MAX - CBFS_STORE_SUFFIX_LEN) /* 247 */

/* The rule in words, for messages that refuse a name. */
#define CBFS_STORE_RESERVED_RULE                                                                  \
    "\"" CBFS_STORE_DIR "\" in the store root and names ending in \"" CBFS_INDEX_SUFFIX        \
    "\" are its own"

/* @return true if name ends in CBFS_INDEX_SUFFIX (".cbfsidx" included). */
bool cbfs_store_is_sidecar_name(const char *name);

/* @return true for the names the mount hides from readdir and lookup and
 * refuses to create: CBFS_STORE_DIR when in_root (name is an entry of the
 * store root), sidecar names anywhere. */
bool cbfs_store_name_hidden(const char *name, bool in_root);

/* Writes the sidecar name of data file name (name + CBFS_INDEX_SUFFIX) into
 * buf. @return CBFS_E_NAMETOOLONG if name is longer than CBFS_STORE_NAME_MAX
 * or the result does not fit cap (nothing written then). */
cbfs_err cbfs_store_sidecar_name(const char *name, char *buf, size_t cap);

/* Writes the data file name of a sidecar name (the name without the suffix;
 * "" for ".cbfsidx") into buf. @return CBFS_E_INVAL if sidecar is not a
 * sidecar name, CBFS_E_NAMETOOLONG if the result does not fit cap. */
cbfs_err cbfs_store_data_name(const char *sidecar, char *buf, size_t cap);

/* Reads the start of the file open at fd (readable): *framed = whether it
 * starts with a frame envelope (cbfs_frame_is_envelope); a file shorter than
 * one is not framed. @return a read error (then *framed is false): the caller
 * decides, never a guess here. */
cbfs_err cbfs_store_has_frame_envelope(int fd, bool *framed);

/* @return true if dirfd is a store root: it holds a CBFS_STORE_DIR directory
 * (not a symlink). */
bool cbfs_store_is_root(int dirfd);

/* The POSIX ACLs of a store object, as the store keeps them (and the mount
 * shows them: cbfs passes them through). */
#define CBFS_STORE_XATTR_ACL "system.posix_acl_access"
#define CBFS_STORE_XATTR_ACL_DEFAULT "system.posix_acl_default"

/* The sidecar rule for permissions: a sidecar has the owner and group (when
 * run as root: only root can give files away), the permission bits (no
 * set-id bits) and the POSIX access ACL of its data file, so that the store
 * lets nobody read an index whose data it refuses them. Gives them to the
 * sidecar idx_fd from the data file data_fd (either may be an O_PATH fd). A
 * store without ACLs keeps owner and mode only. @return CBFS_OK or the error
 * of the first step that failed. */
cbfs_err cbfs_store_sidecar_match(int data_fd, int idx_fd);

/* ---- metadata (store.c) ---- */

/* The contents of store.conf. Text, one key=value per line, '#' comments;
 * unknown keys are ignored so newer minor additions stay readable. */
struct cbfs_store_conf {
    unsigned format_version;            /* CBFS_STORE_CONF_VERSION when written */
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

/* Creates .cbfs/ (0700) if needed and takes .cbfs/lock with
 * flock(LOCK_EX|LOCK_NB), then writes our pid into it. The lock belongs to
 * the open file description, so it survives fork(): a daemonized child keeps
 * it (call cbfs_store_set_pid there). readonly: a store on a read-only
 * filesystem is locked through a read-only descriptor (no pid written).
 * @return CBFS_E_BUSY with *holder = the running daemon's pid (0 if unknown),
 * CBFS_E_ROFS if .cbfs/ does not exist and cannot be created, I/O errors. */
cbfs_err cbfs_store_lock(struct cbfs_store *st, bool readonly, pid_t *holder);

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

/* Fills a fresh conf: current version, a new random uuid, created = now, and
 * the given codec/level/block size. */
void cbfs_store_conf_init(struct cbfs_store_conf *conf, const struct cbfs_codec_ops *codec,
                          int level, uint32_t block_size);

/* Writes .cbfs/store.conf atomically: temporary file, fsync, rename, fsync of
 * .cbfs/. Requires the lock. */
cbfs_err cbfs_store_write_conf(struct cbfs_store *st, const struct cbfs_store_conf *conf);

/* Drops the lock and closes every descriptor. If this store's .cbfs/ was
 * created by cbfs_store_lock and no store.conf was written since (a first
 * mount that failed, or a read-only one), .cbfs/ is removed again.
 * NULL is a no-op. */
void cbfs_store_close(struct cbfs_store *st);

#endif

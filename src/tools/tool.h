/* Shared pieces of the `cbfs` command: exit codes, path resolution (store
 * paths and paths inside a mounted cbfs), the store walk, the "open a data
 * file + its sidecar and load the index" helper, the per-file checker that
 * verify and fsck share, the pool runner and small output helpers. The tool
 * uses only the public core API (include/cbfs), never FUSE. */
#ifndef CBFS_TOOL_H
#define CBFS_TOOL_H

#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/stat.h>

#include "cbfs/err.h"
#include "cbfs/format.h"
#include "cbfs/store.h"

struct cbfs_pool;

/* Exit codes of every subcommand except fsck (which mirrors e2fsck). */
enum { TOOL_EXIT_OK = 0, TOOL_EXIT_PROBLEMS = 1, TOOL_EXIT_USAGE = 2 };
/* --workers of bench and verify: threads of the tool's own pool. A plain
 * number: the help texts spell it with TOOL_STR. */
#define TOOL_WORKERS_MAX 1024
/* A macro's value as a string literal, for help texts. */
#define TOOL_STR_(x) #x
#define TOOL_STR(x) TOOL_STR_(x)
/* fsck's, as e2fsck's. */
enum { FSCK_CLEAN = 0, FSCK_CORRECTED = 1, FSCK_UNCORRECTED = 4, FSCK_ERROR = 8 };

/* Subcommand entry points: argv[0] is the subcommand name. @return exit code. */
int tool_stat_main(int argc, char **argv);
int tool_verify_main(int argc, char **argv);
int tool_cat_main(int argc, char **argv);
int tool_bench_main(int argc, char **argv);
int tool_stats_main(int argc, char **argv);
int tool_mkfs_main(int argc, char **argv);
int tool_fsck_main(int argc, char **argv);

struct cbfs_stats;
/* Prints n samples, s[i] read from mount point mnts[i], in the Prometheus text
 * format (prom.c): one HELP/TYPE pair per metric, one line per mount. */
void tool_stats_prometheus(char *const *mnts, const struct cbfs_stats *s, size_t n);

/* ---- messages (out.c) ---- */

/* "cbfs SUB: message\n" on stderr. */
void tool_err(const char *sub, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void tool_verr(const char *sub, const char *fmt, va_list ap) __attribute__((format(printf, 2, 0)));

/* Output to stdout whose failure (a full disk, a closed pipe) is remembered
 * with its errno, for the one word on it: stdio drops a failed buffer and
 * the errno with it, so a later fflush could only say EIO. tool_out_flush
 * flushes stdio's stdout; tool_out_write writes len bytes past stdio (cat).
 * @return true / CBFS_OK while nothing failed. */
bool tool_out_flush(void);
cbfs_err tool_out_write(const void *p, size_t len);
/* The errno of the first failure writing stdout; 0 if none. */
int tool_out_errno(void);
/* Writes s as a JSON string literal (quotes included). */
void tool_json_str(FILE *f, const char *s);
/* The length of the valid UTF-8 sequence at p (1 to 4), 0 if none starts there. */
size_t tool_utf8_len(const unsigned char *p);
/* A file name as the tools print it, into buf: a control character (C0, DEL,
 * C1), a byte that is not UTF-8 and a backslash written as \n, \t, \\ or
 * \xNN (ls -b's rule), so that a name can neither end a line and fake another
 * file's result nor drive a terminal. @return its length, or (size_t)-1 if it
 * did not fit (buf then holds a cut, NUL-terminated name). */
size_t tool_name_escape(char *buf, size_t cap, const char *name);
/* A path as shown (made of tool_name_escape's names) as a JSON string of the
 * name's own bytes (tool_json_str): JSON stays lossless. */
void tool_json_path(FILE *f, const char *shown);
bool tool_utf8_valid(const char *s);
/* "1.5 GiB" style, into buf. @return buf. */
const char *tool_fmt_bytes(uint64_t n, char *buf, size_t cap);
/* True if arg is "-h" or "--help". */
bool tool_is_help(const char *arg);
/* Prints the usage text to stdout when asked for (--help: exit 0) or to
 * stderr after a usage error (exit 2). @return the exit code. */
int tool_usage(const char *text, bool asked);

/* --plot: starts gnuplot writing a width x height PNG (pngcairo, text not
 * "enhanced") to png. @return the pipe for the rest of the script, or NULL
 * after a message for sub (gnuplot missing: which package to install). */
FILE *tool_gnuplot_open(const char *sub, const char *png, int width, int height);
/* Ends the script. @return false after a message if gnuplot failed. */
bool tool_gnuplot_close(const char *sub, FILE *g, const char *png);
/* Writes s as a gnuplot double-quoted string literal (for the script, not data). */
void tool_gnuplot_str(FILE *g, const char *s);

/* ---- locating files (walk.c) ---- */

/* What the tool knows about the store a file is in, from store.conf. */
struct tool_store {
    unsigned layout;        /* CBFS_LAYOUT_*; layout 1 outside a store */
    struct cbfs_bs_hint bs; /* for rebuilding a lost sidecar: store.conf's block size
                               (a candidate; 0 outside a store), or cat's --block-size
                               (asserted); fsck's --block-size is bs.otherwise */
};

/* A user path resolved to a store: dirfd is an O_PATH descriptor on the
 * directory holding the entry (or on the entry itself when it is a
 * directory, then name is "."); display is the path for messages. */
struct tool_loc {
    int dirfd;
    char *name;       /* entry name relative to dirfd */
    char *display;    /* as the user gave it (a mapped path stays the user's) */
    bool is_dir;
    bool via_mount;   /* the path was inside a mounted cbfs, mapped to its store */
    bool in_store;    /* the entry or a directory above it is a store root */
    bool at_root;     /* the entry is the store root itself (a directory) */
    bool one_store;   /* set by the caller before tool_walk: a store met below a tree
                         in no store is an error, not walked (fsck: one store under
                         its lock) */
    bool no_daemon;   /* set by the caller before tool_walk: it holds a lock that keeps
                         every daemon off the store (cbfs_store_lock_excludes_daemons),
                         so an orphan sidecar met is not looked at again after a pause
                         (tool_orphan_settled): no live mount is finishing a rename */
    struct tool_store store;
    enum cbfs_layout_state layout_state; /* what the layout rules made of its tree */
};

/* Resolves path: a path inside a mounted cbfs (fuse.cbfs in
 * /proc/self/mountinfo) is mapped to its store (the fsname; that store's
 * directory a bind mount shows), where the mount's claim is taken (made by
 * root, the store's owner or the caller: else CBFS_E_PERM); any other path is
 * taken as a store path. Its layout is its store's (cbfs_store_read_layout);
 * outside a store, layout 2 only where an index directory shows it (a file:
 * in its own directory). A store whose upgrade was cut short is refused
 * unless cut_short_ok (cbfs fsck --upgrade, which finishes it; cat, which
 * salvages: loc->layout_state says so). Writes one sentence to msg on
 * failure (e.g. an in-place mount hides its store).
 * @return CBFS_E_NOENT, CBFS_E_NOTSUP, CBFS_E_PERM, ... */
cbfs_err tool_loc_resolve(const char *path, bool cut_short_ok, struct tool_loc *loc, char *msg,
                          size_t msg_cap);
void tool_loc_free(struct tool_loc *loc);
/* After a walk that found no cbfs file: if loc is not in a store either,
 * prints "PATH is not a cbfs store or file" for sub. @return true if so. */
bool tool_loc_not_cbfs(const struct tool_loc *loc, const char *sub, uint64_t cbfs_files);

/* What the walk hands to its callback. */
enum tool_ent_kind {
    TOOL_ENT_FILE,           /* a regular file: data file or plain file */
    TOOL_ENT_ORPHAN_SIDECAR, /* a sidecar whose data file does not exist */
    TOOL_ENT_ORPHAN_EMPTY,   /* one of those that holds no record (cbfs_index_holds_no_record):
                                crash debris of a file never flushed */
    TOOL_ENT_ASIDE,          /* a sidecar in the store's .cbfs/ that a rename over its file
                                or its unlink moved aside (CBFS_STORE_ASIDE), left there by
                                a crash (fsck's, never the walk's) */
    TOOL_ENT_ORPHAN_NOT_REGULAR, /* not a regular file (a directory, symlink, FIFO, ...) at a
                                    sidecar's name, and no data file of its name: cbfs makes
                                    none, so it indexes nothing; never opened nor followed */
};

/* What fsck and verify say of an orphan sidecar of that kind. */
const char *tool_orphan_what(enum tool_ent_kind kind);
/* What a file of mode st_mode is, for a message: "a directory", "a FIFO", ... */
const char *tool_mode_what(mode_t mode);
/* store: the store's layout and block size hint; dirfd: the entry's directory (for an orphan sidecar:
 * the directory holding it); name: entry name in it; display: full path for
 * messages. @return nonzero to stop the walk with that value. */
typedef int (*tool_walk_fn)(void *arg, const struct tool_store *store, int dirfd,
                            const char *name, const char *display, enum tool_ent_kind kind);

/* Visits loc: the file itself, or every entry below a directory, sorted by
 * name, not following symlinks, skipping what the mount hides (cbfs/store.h:
 * .cbfs in the store root, sidecar names; orphan sidecars are reported as
 * such). Below a directory in no store, a store root (cbfs_store_nested_root)
 * is walked by its own layout and store.conf's block size (the store handed
 * to fn), its .cbfs/ skipped (loc->one_store: not walked, an error). The
 * mount point of a cbfs is not walked (its files are its store's): said on
 * stderr, an error for an in-place mount, which hides its store. Errors
 * reading a directory are printed (sub) and counted in *errors. @return the
 * callback's nonzero value, else 0. */
int tool_walk(const struct tool_loc *loc, const char *sub, tool_walk_fn fn, void *arg,
              unsigned *errors);
/* tool_walk that prints none of its errors, only counts them: a walk of what
 * another walk of loc reports (a pre-walk, fsck's orphan pass), whose errors
 * that walk prints. */
int tool_walk_silent(const struct tool_loc *loc, tool_walk_fn fn, void *arg, unsigned *errors);

/* Resolves and walks every path: an optional pre-walk (pre, e.g. to size a
 * progress bar), then fn; a path that cannot be resolved, or that is neither
 * in a store nor holds a cbfs file (*cbfs_files, the caller's count, did not
 * grow), is reported and counted. @return the number of errors. */
struct tool_walk_req {
    const char *sub;
    tool_walk_fn fn, pre; /* pre may be NULL */
    void *arg, *pre_arg;
    const uint64_t *cbfs_files;
};
unsigned tool_walk_paths(char *const *paths, int n, const struct tool_walk_req *req);

/* A data file opened with its sidecar and its index loaded. */
struct tool_file {
    struct tool_store store;   /* the layout says where the sidecar is */
    int dirfd;                 /* where it was opened (borrowed from the caller, valid */
    const char *name;          /* while tf is open): a late sidecar is looked for there */
    int data_fd, idx_fd;       /* idx_fd -1 when there is no sidecar */
    struct stat data_st, idx_st; /* idx_st zero without a sidecar */
    bool is_cbfs;              /* false: a plain file (codec=none or never cbfs) */
    bool envelope_damaged;     /* plain, but it starts with a damaged frame envelope
                                  (cbfs_frame_envelope_damaged): likely a compressed file
                                  that lost its sidecar and its first bytes */
    uint64_t frame_inside;     /* plain, no sidecar, zeros where a frame envelope would be,
                                  and a frame header that decodes at this offset, within
                                  one frame's reach (TOOL_LOAD_FULL only); 0: none. Likely
                                  a compressed file that lost its sidecar and its first
                                  sectors, but a plain file can hold frames too (a copy of
                                  a data file, a disk image): a problem for verify and
                                  fsck, a warning for cat */
    cbfs_err load_err;         /* cbfs_index_load's error (is_cbfs, index unusable) */
    bool side_failed;          /* after a failed tool_file_open: what failed was the
                                  sidecar (a FIFO, a dangling symlink, unreadable), which
                                  the message names (tool_file_open_err) */
    struct cbfs_index idx;     /* valid when is_cbfs && !load_err */
    struct cbfs_index_report rep;
};

/* How much of the data file loading the index reads: every frame header
 * (cbfs_index_load: verify, fsck, cat), or, as the daemon opens files, the
 * checksummed sidecar and only the first and last frame headers
 * (cbfs_index_open: stat, which reports sizes and kinds, so that stat of a
 * large store reads its sidecars and not all its data; verify is the check). */
enum tool_load { TOOL_LOAD_FULL, TOOL_LOAD_FAST };

/* Opens dirfd/name read-only (O_NOFOLLOW) and its sidecar, decides plain
 * vs cbfs (a sidecar, or a data file that starts with a cbfs frame) and
 * loads the index without repairing anything. A missing sidecar is not an
 * error (rep.sidecar_missing; its rebuild takes store->bs as the hint).
 * @return open/stat errors only (CBFS_E_NOT_REGULAR: not a regular file, see
 * tool_file_open_regular; tf->side_failed says which); format problems land in
 * tf->load_err (CBFS_E_BLOCK_SIZE: see tool_file_load_advice). */
cbfs_err tool_file_open(const struct tool_store *store, int dirfd, const char *name,
                        enum tool_load load, struct tool_file *tf);
/* Opens path in dirfd (a name, or a sidecar path: cbfs_store_openat) with
 * flags into *fd only if it is a regular file, never following a symlink and
 * never opening anything else (a FIFO there would block the open). @return
 * CBFS_OK, CBFS_E_NOT_REGULAR, or the error of the open (CBFS_E_NOENT: no
 * such name); *fd is -1 on failure. */
cbfs_err tool_file_open_regular(int dirfd, const char *path, int flags, int *fd);
/* Ends a summary line of verify or fsck: says how many errors left things
 * unchecked (never a clean summary where something could not be read), then
 * the newline. */
void tool_summary_end(unsigned errors);

/* Prints the store layer's refusal of a store in lay's state
 * (cbfs_store_layout_refusal: a cut-short upgrade, a lost store.conf) as
 * sub's error. */
void tool_layout_refusal(const char *sub, const struct cbfs_store_layout *lay, const char *root);

/* Says why tool_file_open of the file shown as display failed (e), naming the
 * sidecar where that is what failed. */
void tool_file_open_err(const char *sub, const struct tool_store *store, const char *display,
                        const struct tool_file *tf, cbfs_err e);
/* tool_file_open for a walk callback: on failure prints
 * "cbfs SUB: DISPLAY: error" and counts it in *errors. @return true if open. */
bool tool_file_open_walked(const struct tool_store *store, int dirfd, const char *name,
                           enum tool_load load,
                           const char *display, const char *sub,
                           unsigned *errors, struct tool_file *tf);
void tool_file_close(struct tool_file *tf);
/* The one rule for a tool that found a cbfs file damaged while a daemon may be
 * writing it: a rewritten block's old frame is punched once its new record is
 * down, a frame being appended reads torn (the data file grows page by page
 * under one pwrite), the sidecar lags its frames, a rename moves the data file
 * before its sidecar, an unlink moves the sidecar away before the data file.
 * Looks again where the data file or its sidecar changed since the load
 * (size, mtime, ctime), or changes within a pause of TOOL_SETTLE_MS where one
 * of them changed (ctime) in the last TOOL_RECENT_S seconds (a writer stalled
 * mid-frame leaves the stats as they were), or where the sidecar at tf's name
 * (in tf->dirfd) is another than tf's, or there is one now where tf had none:
 * then tf's index is loaded again, from the same data fd (the file it opened)
 * and the sidecar its name has now (while the name names that file; one moved
 * away goes on with its own sidecar). A removed file is gone. At most
 * TOOL_LOOKS looks per *looks (the caller's count, from 0). With old, the
 * index replaced is moved there (the caller frees it), else freed. The walk's
 * orphan sidecars follow the same rule (tool_orphan_settled). */
enum tool_look {
    TOOL_LOOK_AGAIN,         /* tf holds a newer index: check it again */
    TOOL_LOOK_STANDS,        /* the file is quiet (or could not be loaded again): what
                                was seen stands */
    TOOL_LOOK_KEPT_CHANGING, /* it changed under every look: what was seen stands */
    TOOL_LOOK_GONE,          /* its data file was removed since: nothing to report */
};
enum tool_look tool_file_look_again(struct tool_file *tf, unsigned *looks,
                                    struct cbfs_index *old);
#define TOOL_LOOKS 3
#define TOOL_SETTLE_MS 100
#define TOOL_RECENT_S 2
/* Was st changed (its ctime, which no user can set: a write, a rename, a
 * link count) in the last TOOL_RECENT_S seconds? (walk.c; the look again of
 * a file, file.c, and of an orphan sidecar, walk.c) */
bool tool_recent(const struct stat *st);
/* The pause before a tool looks again at what a writer may be changing. */
void tool_settle(void);
/* What the user can do about tf->load_err, as a clause to end a message
 * with ("" when there is nothing to add). */
const char *tool_file_load_advice(const struct tool_file *tf);
/* What the tools say of a file with tf->envelope_damaged. */
extern const char tool_envelope_damaged_msg[];
/* ... and of one with tf->frame_inside (a printf format of that offset). */
#define TOOL_FRAME_INSIDE_FMT                                                                  \
    "no sidecar, it starts with zeros where a cbfs frame envelope would be, and a cbfs frame " \
    "header starts at offset %" PRIu64 ": most likely a compressed file that lost its "       \
    "sidecar and its first bytes, which the store's rule takes for a plain file (the mount "   \
    "serves its raw frames); restore its sidecar, or the file from another copy (a plain "    \
    "file that holds cbfs frames, a copy of a data file or an image of a disk that holds "    \
    "one, reads so too)"
/* --block-size SIZE of fsck and cat: the block size a lost sidecar was
 * written with, as the user's word (asserted), which replaces store.conf's
 * candidate (docs/FORMAT.md 3.3). On a bad value prints why for sub.
 * @return true if valid. */
bool tool_block_size_arg(const char *sub, const char *arg, struct cbfs_bs_hint *bs);
/* Writes the sidecar's path for messages (display: the data file's) into buf. */
void tool_file_side_display(const struct tool_file *tf, const char *display, char *buf,
                            size_t cap);

/* Physical bytes: data file + sidecar. */
uint64_t tool_file_physical(const struct tool_file *tf);

/* ---- parallel runs (par.c) ---- */

/* Calls fn(arg, slot, i) for every i < n on the pool's threads; slot (<
 * cbfs_pool_threads) names the worker so fn can keep per-slot scratch. While
 * waiting, tick(arg) (if not NULL) runs on the caller's thread every 200 ms. */
cbfs_err tool_par_run(struct cbfs_pool *pool, size_t n,
                      void (*fn)(void *arg, unsigned slot, size_t i), void *arg,
                      void (*tick)(void *arg));
/* Online CPUs (at least 1). */
unsigned tool_ncpus(void);

/* ---- checking a file (check.c): verify and fsck ---- */

struct tool_problem {
    char *where; /* file named in the message (data file or its sidecar) */
    uint64_t offset; /* byte offset in that file; UINT64_MAX: none */
    char *what;
};

struct tool_check {
    struct tool_problem *v;
    size_t n, cap;
    size_t unlisted;      /* problems printed at once, with no memory to keep them in v:
                             counted all the same (tool_check_count) */
    bool unrepairable;    /* a block's payload is corrupt: only a backup helps */
    bool unindexed_ok;    /* set by the caller (verify): frames past the sidecar's records
                             that decode are not a problem. A writer's frames wait for their
                             records until its next sync (docs/ENGINE.md), and a killed one's
                             are indexed by the next open; fsck, which indexes them, lists them */
    uint64_t blocks, logical_bytes, frame_bytes; /* what was read */
};

/* Problems found: those in v and those printed at once (unlisted). */
size_t tool_check_count(const struct tool_check *chk);

/* Checks tf (opened without repair): the load report (sidecar missing or
 * behind the frames, torn records, tail garbage — pinpointing the first bad
 * record or frame), then reads every live block on the pool with
 * cbfs_block_read (header checksum, payload decode, XXH3). progress (may be
 * NULL) is advanced by frame bytes as they are read. */
cbfs_err tool_check_file(struct cbfs_pool *pool, const char *display, const struct tool_file *tf,
                         struct tool_check *chk, uint64_t *progress, void (*tick)(void *arg),
                         void *tick_arg);
/* tool_check_file of a file a daemon may be writing (cbfs verify of a mounted
 * store): where it finds problems and tool_file_look_again loads tf again, it
 * is checked again, and only the last check's problems count; if the file
 * changed under every look, a last problem says so. */
cbfs_err tool_check_file_live(struct cbfs_pool *pool, const char *display, struct tool_file *tf,
                              struct tool_check *chk, uint64_t *progress,
                              void (*tick)(void *arg), void *tick_arg);
void tool_check_add(struct tool_check *chk, const char *where, uint64_t offset, const char *fmt,
                    ...) __attribute__((format(printf, 4, 5)));
/* Prints each problem as "FILE: offset N: what" (or "FILE: what") to f. */
void tool_check_print(const struct tool_check *chk, FILE *f);
void tool_check_free(struct tool_check *chk);

#endif

/* cbfs fsck's run, shared by its files: fsck.c checks and repairs the files
 * of a store; fsck_orphan.c settles its orphan sidecars first, and
 * fsck_misplaced.c, in the same walk, the sidecars at the wrong name of a
 * file that is there. */
#ifndef CBFS_TOOLS_FSCK_H
#define CBFS_TOOLS_FSCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "cbfs/err.h"
#include "tools/tool.h"

/* A data file an orphan sidecar was found to be the sidecar of, and that
 * still lacks it (a check, or a move that failed). */
struct tool_fsck_owner {
    dev_t dev;
    ino_t ino;
};

struct tool_fsck {
    bool repair;
    struct cbfs_pool *pool;
    unsigned errors;
    uint64_t files, cbfs_files, problems, fixed, left;
    /* the files whose sidecar an orphan is, not moved there: their check
     * waits for the move (tool_fsck_owner_waits) */
    struct tool_fsck_owner *owners;
    size_t nowners;
};

/* Reports every orphan sidecar of the store loc (locked by the caller) and,
 * with f->repair, settles it: moved to the file whose frames carry its file
 * id where a crash cut a rename short (one file of the store without a
 * sidecar: first in its own directory, else anywhere in the store), else
 * removed; so is each sidecar a crash left aside in .cbfs/ (a rename over a
 * compressed file or an unlink of one cut short), found in the whole store.
 * Kept, with the reason, where whose it is cannot be told. Runs
 * before the files are checked, so that a file is checked with the sidecar
 * that was its. Counts in f; walk errors are the check's walk's to print. */
void tool_fsck_orphans(struct tool_fsck *f, const struct tool_loc *loc);

/* Is the data file of stat st one whose sidecar an orphan is, not moved
 * there? (f->owners) */
bool tool_fsck_owner_waits(const struct tool_fsck *f, const struct stat *st);

void tool_fsck_free(struct tool_fsck *f);

/* ---- shared by fsck_orphan.c and fsck_misplaced.c ---- */

/* The file id in the header record of sidecar dirfd/name, and its stat.
 * @return CBFS_OK, a format error (cbfs_err_is_format: it has no header that
 * decodes), or the error that kept it from being read. */
cbfs_err tool_fsck_sidecar_id(int dirfd, const char *name, uint64_t *id, struct stat *st);
/* The file id of data file dirfd/name's first frame, and its stat. @return
 * CBFS_OK with *has (false: not there, not a regular file, or a first frame
 * that does not decode), or the error that kept it from being read. */
cbfs_err tool_fsck_data_id(int dirfd, const char *name, bool *has, uint64_t *id, struct stat *st);
/* Is dirfd/name a regular file without a sidecar whose first frame decodes?
 * @return CBFS_OK with *has, and then its file id in *id and its stat in *st;
 * or the error that kept it from being told. */
cbfs_err tool_fsck_frames_id(unsigned layout, int dirfd, const char *name, bool *has, uint64_t *id,
                             struct stat *st);
/* Is dirfd/path (not followed) the file of stat st? */
bool tool_fsck_same_at(int dirfd, const char *path, const struct stat *st);
/* Why a move of a sidecar failed, as fsck says it (CBFS_E_STALE: a name was
 * another file; CBFS_E_CHANGED: the file moved was another). */
const char *tool_fsck_move_why(cbfs_err e);
/* dirfd's path as the kernel names it (malloc'd), and its stat. */
cbfs_err tool_fsck_dir_name(int dirfd, char **path, struct stat *st);
/* Opens the directory path into *fd if it is still the one of dev/ino. */
cbfs_err tool_fsck_dir_open(const char *path, dev_t dev, ino_t ino, int *fd);

/* ---- fsck_misplaced.c ---- */

/* In the orphan pass's walk, for data file dirfd/name of the store at loc:
 * where its sidecar carries another file id than its frames and has its
 * owner, reports it and, with f->repair, moves it aside into .cbfs/, where
 * the pass settles it with the other asides, by file id. */
void tool_fsck_foreign(struct tool_fsck *f, const struct tool_loc *loc,
                       const struct tool_store *store, int dirfd, const char *name,
                       const char *display);

/* Names of hard-linked compressed files without a sidecar, noted in the
 * orphan pass's walk, matched with their other name in its walk of the whole
 * store, then settled. */
struct tool_fsck_linkless;
struct tool_fsck_links {
    struct tool_fsck_linkless *v;
    size_t n, cap;
};
/* Notes dirfd/name if it is such a name (nothing where memory runs out: the
 * file's check then says its sidecar is lost). */
void tool_fsck_linkless_note(struct tool_fsck_links *ls, const struct tool_store *store, int dirfd,
                             const char *name, const char *display);
/* In the store's walk: records dirfd/name's sidecar for a noted name of the
 * same file whose frames carry that sidecar's id and whose owner it has. */
void tool_fsck_linkless_match(struct tool_fsck_links *ls, unsigned layout, int dirfd,
                              const char *name);
/* Reports each noted name whose other name's sidecar was found and, with
 * f->repair, links that sidecar to it; frees ls. */
void tool_fsck_linkless_settle(struct tool_fsck *f, unsigned layout, struct tool_fsck_links *ls);

#endif

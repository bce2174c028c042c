/* cbfs fsck's run, shared by its two files: fsck.c checks and repairs the
 * files of a store; fsck_orphan.c settles its orphan sidecars first. */
#ifndef CBFS_TOOLS_FSCK_H
#define CBFS_TOOLS_FSCK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

#endif

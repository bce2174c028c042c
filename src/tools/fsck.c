/* `cbfs fsck`: checks an UNMOUNTED store (it takes the store lock, so a
 * running daemon makes it refuse) — every data file against its sidecar and
 * every live block — and with --repair rebuilds missing or damaged sidecars
 * from the frames, cuts torn data tails and removes orphan and leftover
 * sidecars (docs/FORMAT.md, "Leftover sidecars"; an orphan whose file a
 * crash renamed is moved to it instead, and so is a sidecar a crash left
 * aside in .cbfs/: fsck_orphan.c). Damaged
 * payloads and damaged frames in the middle of a file cannot be repaired
 * without losing data: they are reported and left alone. Exit codes as
 * e2fsck: 0 clean, 1 errors corrected, 4 errors left uncorrected, 8 usage or
 * operational error. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdint.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/pool.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "tools/fsck.h"
#include "tools/tool.h"

static const char tool_fsck_help[] =
    "usage: cbfs fsck [--repair|-y] [--block-size SIZE] STORE\n"
    "       cbfs fsck --upgrade STORE\n"
    "Checks every data file of an unmounted store against its sidecar and reads every\n"
    "block. With --repair: rebuilds missing or damaged sidecars from the frames, cuts\n"
    "torn tails, removes orphan sidecars and those a crashed rename or unlink left in\n"
    ".cbfs/ (or moves one to the file of the store, of its owner, whose frames carry its\n"
    "file id: a rename or unlink cut short), and leftover sidecars (a sidecar of a lost\n"
    "file that shows nothing of it in the data file beside it). Damaged payloads are\n"
    "reported, never 'fixed'. A lost sidecar is rebuilt only when the frames prove the\n"
    "block size or back store.conf's; else give the size the files were written with:\n"
    "--block-size SIZE (taken only for files whose frames tell no size of their own).\n"
    "exit status: 0 clean, 1 errors corrected, 4 errors left uncorrected,\n"
    "             8 usage or operational error (e.g. the store is mounted)\n"
    "With --upgrade: converts a store of layout 1 (NAME.cbfsidx sidecars, names up to 247\n"
    "bytes) to layout 2 (DIR/.cbfsidx/NAME, names up to 255); rerun it if it was cut short.\n";

/* Can cbfs_index_load(repair) fix what tf's load found, without losing
 * frames? Also true for "nothing to fix". */
static bool tool_fsck_repairable(const struct tool_file *tf)
{
    if (tf->load_err) return tf->load_err == CBFS_E_WRONG_FILE;
    /* cbfs_index_load decides whether a tail is torn (no frame magic in it:
     * cut on repair) or damage with frames behind it (tail_kept: never cut);
     * past frames it cannot reach it repairs nothing (frames_unreachable). */
    return (tf->rep.data_tail_bytes == 0 || !tf->rep.tail_kept) && !tf->rep.frames_unreachable;
}

static bool tool_fsck_index_clean(const struct tool_file *tf)
{
    const struct cbfs_index_report *const r = &tf->rep;
    return !tf->load_err && !r->sidecar_missing && !r->records_dropped && !r->frames_rescanned &&
           !r->data_tail_bytes;
}

/* Rebuilds dirfd/name's sidecar from its frames (repair mode load): a
 * sidecar of another file is replaced, a missing one is created with the
 * data file's owner, mode and ACL (cbfs_store_sidecar_match). The sidecar of
 * another file is removed only once the frames alone gave an index (loaded
 * in memory first): if they do not, the pair stays as it was for the user to
 * look at, not a data file bereft of the only record of its block size. */
static cbfs_err tool_fsck_rebuild(int dirfd, const char *name, const struct tool_file *tf)
{
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    int idx_fd = -1;
    cbfs_err e = cbfs_store_sidecar_path(tf->store.layout, name, side, sizeof side);
    if (e == CBFS_OK) e = cbfs_store_sidecar_dir(tf->store.layout, dirfd);
    if (e) return e;
    int data_fd;
    if ((e = tool_file_open_regular(dirfd, name, O_RDWR, &data_fd)) != CBFS_OK) return e;
    if (tf->load_err == CBFS_E_WRONG_FILE) {
        /* not this file's, and maybe not its owner's either: a user who can
         * make a name in a directory (a shared one, sticky) can put a file
         * beside another's sidecar whose data file was moved away (a rename
         * cut short: the only record of its block size) */
        if (!cbfs_store_sidecar_owner_ok(&tf->data_st, &tf->idx_st)) {
            e = CBFS_E_PERM;
            goto out;
        }
        e = cbfs_index_load(data_fd, -1, false, &tf->store.bs, &idx, &rep);
        if (e) goto out;
        cbfs_index_free(&idx);
        if (cbfs_store_unlinkat(dirfd, side, 0) != 0) {
            e = cbfs_err_from_errno(errno);
            goto out;
        }
    }
    e = tool_file_open_regular(dirfd, side, O_RDWR, &idx_fd);
    if (e == CBFS_OK) {
        e = cbfs_store_sidecar_owned(data_fd, idx_fd); /* only this file's index is written */
    } else if (e == CBFS_E_NOENT) {
        idx_fd = cbfs_store_openat(dirfd, side, O_RDWR | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC,
                                   0600);
        e = idx_fd < 0 ? cbfs_err_from_errno(errno)
                       : cbfs_store_sidecar_match(data_fd, idx_fd, NULL);
    }
    if (e) goto out;
    e = cbfs_index_load(data_fd, idx_fd, true, &tf->store.bs, &idx, &rep);
    if (!e) cbfs_index_free(&idx);
out:
    if (idx_fd >= 0) close(idx_fd);
    close(data_fd);
    return e;
}

/* Repairs one file's index and checks the result with a fresh load.
 * @return true if the index is clean now. */
static bool tool_fsck_fix(int dirfd, const char *name, const char *display,
                          const struct tool_file *tf)
{
    const cbfs_err e = tool_fsck_rebuild(dirfd, name, tf);
    if (e) {
        tool_err("fsck", "%s: repair failed: %s", display,
                 e == CBFS_E_PERM ? "its sidecar is not owned as the file is (if it is the file's "
                                    "index, chown it to the file's owner)"
                                  : cbfs_err_str(e));
        return false;
    }
    struct tool_file again;
    if (tool_file_open(&tf->store, dirfd, name, TOOL_LOAD_FULL, &again) != CBFS_OK) return false;
    const bool ok = tool_fsck_index_clean(&again);
    printf("%s: %s: index rebuilt from %" PRIu64 " frame(s)%s\n", display,
           ok ? "repaired" : "NOT repaired",
           again.is_cbfs && !again.load_err ? again.idx.live_frames : 0,
           tf->rep.data_tail_bytes ? ", torn tail cut" : "");
    tool_file_close(&again);
    return ok;
}

/* The loader's verdict that tf's sidecar is a leftover of another file
 * (rep.leftover, docs/FORMAT.md "Leftover sidecars"): no record of it has its
 * frame, intact or damaged, in the data file and the data holds no frame. So
 * the sidecar says nothing about this data, and removing it is the repair:
 * the file is then what its bytes are. A file whose first frame is damaged
 * is not this case (its other frames match or the damage keeps a trace) and
 * goes through the usual check. @return true if tf is such a pair (handled). */
static bool tool_fsck_leftover(struct tool_fsck *f, int dirfd, const char *name,
                               const char *display, const struct tool_file *tf)
{
    char side[PATH_MAX], path[CBFS_STORE_SIDECAR_PATH_MAX];
    if (!tf->is_cbfs || tf->load_err != CBFS_E_WRONG_FILE || !tf->rep.leftover) return false;
    tool_file_side_display(tf, display, side, sizeof side);
    printf("%s: leftover sidecar: %s belongs to another file (none of its records has a frame "
           "in this data file, and the data holds no frame)",
           display, side);
    f->problems++;
    cbfs_err e = CBFS_OK;
    /* A sidecar of another owner is not this file's by the store's rule
     * either: a user who can make a name beside another's sidecar (a shared
     * directory, sticky) whose data file was moved away (a rename cut short:
     * the only record of its block size) would have it removed by root. */
    if (!cbfs_store_sidecar_owner_ok(&tf->data_st, &tf->idx_st)) {
        printf("; not removed: it does not have the data file's owner (a sidecar has its data "
               "file's owner: it may be another user's, whose file was renamed; move it to "
               "that file's sidecar name, or remove it, by hand)\n");
        f->left++;
        return true;
    }
    if (!f->repair) {
        printf("; --repair removes it (the %jd bytes of the data file stay as they are)\n",
               (intmax_t)tf->data_st.st_size);
        f->left++;
        return true;
    }
    e = cbfs_store_sidecar_path(tf->store.layout, name, path, sizeof path);
    if (!e && cbfs_store_unlinkat(dirfd, path, 0) != 0) e = cbfs_err_from_errno(errno);
    if (e) {
        printf("\n");
        tool_err("fsck", "%s: cannot remove the leftover sidecar %s: %s", display, side,
                 cbfs_err_str(e));
        f->left++;
        return true;
    }
    printf(" (removed: the file is now its %jd bytes as they are)\n",
           (intmax_t)tf->data_st.st_size);
    f->fixed++;
    return true;
}

static int tool_fsck_one(void *arg, const struct tool_store *store, int dirfd, const char *name,
                         const char *display, enum tool_ent_kind kind)
{
    struct tool_fsck *const f = arg;
    if (kind != TOOL_ENT_FILE) return 0; /* tool_fsck_orphans' */
    struct stat st;
    if (f->nowners && fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        tool_fsck_owner_waits(f, &st)) {
        printf("%s: not checked: its sidecar is the orphan sidecar said above, not moved back "
               "yet\n",
               display);
        f->files++;
        f->cbfs_files++;
        return 0;
    }
    struct tool_file tf;
    if (!tool_file_open_walked(store, dirfd, name, TOOL_LOAD_FULL, display, "fsck", &f->errors, &tf)) return 0;
    f->files++;
    if (tool_fsck_leftover(f, dirfd, name, display, &tf)) {
        tool_file_close(&tf);
        return 0;
    }
    f->cbfs_files += tf.is_cbfs;
    struct tool_check chk;
    memset(&chk, 0, sizeof chk);
    const cbfs_err e = tool_check_file(f->pool, display, &tf, &chk, NULL, NULL, NULL);
    if (e) {
        tool_err("fsck", "%s: %s", display, cbfs_err_str(e));
        f->errors++;
    }
    tool_check_print(&chk, stdout);
    f->problems += tool_check_count(&chk);
    if (tf.is_cbfs && !tool_fsck_index_clean(&tf)) {
        const bool can = tool_fsck_repairable(&tf);
        if (tf.load_err == CBFS_E_BLOCK_SIZE && tf.store.bs.otherwise)
            printf("%s: not repaired: its frames contradict --block-size (a block of it is "
                   "larger, or every block but the last holds exactly one smaller size: was it "
                   "written with that one? cbfs cat --block-size copies out one file)\n",
                   display);
        else if (tf.load_err == CBFS_E_BLOCK_SIZE)
            printf("%s: not repaired: its sidecar is lost and its frames do not tell its block "
                   "size; restore the sidecar from a copy, or rerun with --repair --block-size "
                   "SIZE (the size it was written with: the mount's block_size)\n",
                   display);
        else if (!can)
            printf("%s: damaged frame inside the file: not repaired (cutting there would drop "
                   "the good frames after it)\n",
                   display);
        if (can && f->repair && tool_fsck_fix(dirfd, name, display, &tf))
            f->fixed++;
        else
            f->left++;
    }
    if (chk.unrepairable) {
        printf("%s: damaged block payload(s) cannot be repaired: restore the file from another "
               "copy\n",
               display);
        f->left++;
    }
    tool_check_free(&chk);
    tool_file_close(&tf);
    return 0;
}

/* --upgrade of the locked store st. @return the exit status. */
static int tool_fsck_upgrade(struct cbfs_store *st, const char *path)
{
    char msg[PATH_MAX + 256];
    uint64_t moved;
    const cbfs_err e = cbfs_store_upgrade(st, path, &moved, msg, sizeof msg);
    if (e) {
        /* msg names a file of the store: shown as the walk shows names */
        char *const shown = malloc(4 * sizeof msg);
        if (shown) (void)tool_name_escape(shown, 4 * sizeof msg, msg);
        tool_err("fsck", "upgrade of %s stopped: %s; fix that and run it again (it goes on "
                 "where it stopped)",
                 path, shown ? shown : msg);
        free(shown);
        return FSCK_ERROR;
    }
    printf("fsck %s: store layout %u: %" PRIu64 " sidecar(s) moved\n", path, CBFS_LAYOUT_NEWEST,
           moved);
    return FSCK_CLEAN;
}

int tool_fsck_main(int argc, char **argv)
{
    static const struct option opts[] = {{"repair", no_argument, NULL, 'r'},
                                         {"upgrade", no_argument, NULL, 'u'},
                                         {"block-size", required_argument, NULL, 'b'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct tool_fsck f;
    memset(&f, 0, sizeof f);
    int ch;
    bool upgrade = false;
    struct cbfs_bs_hint block_size = {0};
    optind = 1;
    while ((ch = getopt_long(argc, argv, "hy", opts, NULL)) != -1) {
        if (ch == 'r' || ch == 'y')
            f.repair = true;
        else if (ch == 'u')
            upgrade = true;
        else if (ch == 'b') {
            if (!tool_block_size_arg("fsck", optarg, &block_size)) return FSCK_ERROR;
        } else
            return tool_usage(tool_fsck_help, ch == 'h') ? FSCK_ERROR : FSCK_CLEAN;
    }
    if (optind + 1 != argc) return tool_usage(tool_fsck_help, false) ? FSCK_ERROR : FSCK_CLEAN;
    /* An upgrade checks and repairs nothing: taking --repair with it in
     * silence would tell the user a repair ran that did not. */
    if (upgrade && (f.repair || block_size.size)) {
        tool_err("fsck", "--upgrade takes no %s: run it, then cbfs fsck --repair",
                 f.repair ? "--repair" : "--block-size");
        return FSCK_ERROR;
    }
    const char *const path = argv[optind];
    struct tool_loc loc;
    char msg[512];
    if (tool_loc_resolve(path, upgrade, &loc, msg, sizeof msg) != CBFS_OK) {
        tool_err("fsck", "%s", msg);
        return FSCK_ERROR;
    }
    /* for the files whose frames tell no size; store.conf's stays the candidate */
    if (block_size.asserted) loc.store.bs.otherwise = block_size.size;
    int rc = FSCK_ERROR;
    struct cbfs_store *st = NULL;
    if (!loc.is_dir || loc.via_mount) {
        tool_err("fsck", "%s: give the store directory of an unmounted store", path);
        goto out;
    }
    /* Below the root, .cbfs/ is an ordinary name (a user's file may be
     * .cbfs/lock), and the store's lock, which keeps fsck off a mounted
     * store, is the root's. */
    if (loc.in_store && !loc.at_root) {
        tool_err("fsck", "%s is a directory inside a store: give the store's root directory",
                 path);
        goto out;
    }
    cbfs_err e = cbfs_store_open(path, &st);
    pid_t holder = 0;
    /* A check writes nothing to the store, not even a lock file: it takes
     * the locks that are there (cbfs_store_lock_existing says why that is
     * enough). A repair or an upgrade writes, and makes the lock if need be. */
    if (!e)
        e = f.repair || upgrade ? cbfs_store_lock(st, false, &holder)
                                : cbfs_store_lock_existing(st, &holder);
    if (e == CBFS_E_BUSY) {
        char who[128];
        switch (cbfs_store_holder_describe(holder, who, sizeof who)) {
        case CBFS_HOLDER_DAEMON:
            tool_err("fsck", "%s is mounted: %s holds %s/%s; unmount it first", path, who,
                     CBFS_STORE_DIR, CBFS_STORE_LOCK);
            break;
        case CBFS_HOLDER_TOOL:
            tool_err("fsck", "%s is in use by %s: run fsck when that has finished", path, who);
            break;
        case CBFS_HOLDER_UNKNOWN:
            tool_err("fsck",
                     "%s is in use: %s holds the lock on its root or on %s/%s (a mount, or a "
                     "cbfs tool)",
                     path, who, CBFS_STORE_DIR, CBFS_STORE_LOCK);
            break;
        }
        goto out;
    }
    if (e) {
        tool_err("fsck", "%s: cannot lock the store: %s", path, cbfs_err_str(e));
        goto out;
    }
    if (upgrade) {
        rc = tool_fsck_upgrade(st, path);
        goto out;
    }
    /* A tree without .cbfs/ may have got one from --repair's lock: the walk
     * skips it as a store root's, not a directory of the store's files. */
    loc.at_root = true;
    /* a store below a tree in no store is its own, not this lock's */
    loc.one_store = true;
    /* no mount is live to finish a rename the walks meet half done */
    loc.no_daemon = cbfs_store_lock_excludes_daemons(st);
    /* The layout again, under the lock, by the mount's rules: what was read
     * before it may be gone (an fsck --upgrade that held the lock meanwhile
     * moved the sidecars), and a repair by the old layout would put
     * sidecars where the mount never looks. */
    struct cbfs_store_layout *const lay = malloc(sizeof *lay);
    e = lay ? cbfs_store_read_layout(cbfs_store_fd(st), lay, msg, sizeof msg) : CBFS_E_NOMEM;
    if (e) {
        tool_err("fsck", "%s: %s", path, lay ? msg : cbfs_err_str(e));
        free(lay);
        goto out;
    }
    if (lay->state == CBFS_LAYOUT_CUT_SHORT) {
        tool_layout_refusal("fsck", lay, path);
        free(lay);
        goto out;
    }
    loc.store.layout = lay->layout;
    loc.store.bs.size = lay->block_size;
    free(lay);
    e = cbfs_pool_create(tool_ncpus(), &f.pool);
    if (e) {
        tool_err("fsck", "cannot start workers: %s", cbfs_err_str(e));
        goto out;
    }
    tool_fsck_orphans(&f, &loc);
    tool_walk(&loc, "fsck", tool_fsck_one, &f, &f.errors);
    cbfs_pool_destroy(f.pool);
    char aside[PATH_MAX + 512]; /* no problem of a file: the file it came from is checked */
    if (cbfs_store_asides(st, path, aside, sizeof aside)) printf("%s\n", aside);
    if (tool_loc_not_cbfs(&loc, "fsck", f.cbfs_files)) goto out;
    printf("fsck %s: %" PRIu64 " file(s), %" PRIu64 " problem(s), %" PRIu64 " repaired, %" PRIu64
           " left uncorrected%s",
           path, f.files, f.problems, f.fixed, f.left,
           f.left && !f.repair ? " (run with --repair)" : "");
    tool_summary_end(f.errors);
    rc = f.errors ? FSCK_ERROR : f.left ? FSCK_UNCORRECTED : f.fixed ? FSCK_CORRECTED : FSCK_CLEAN;
out:
    tool_fsck_free(&f);
    cbfs_store_close(st);
    tool_loc_free(&loc);
    return rc;
}

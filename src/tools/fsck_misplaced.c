/* cbfs fsck's sidecars at the wrong name of a file that is there: a
 * sidecar that carries another file's id than its data file's frames, and a
 * name of a hard-linked file without the link of its sidecar that its other
 * name has. Both are what a power cut leaves on a store file system that
 * makes a renamed or linked data file's new name durable without its
 * sidecar's (btrfs logs only the names of the inode an fsync names:
 * t_powercut_rename_btrfs, helper-72). The orphan pass (fsck_orphan.c) meets
 * them in its walk of the store, before the files are checked; what it
 * shares with them is in fsck.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "tools/fsck.h"
#include "tools/tool.h"

/* A name of a hard-linked compressed file without a sidecar, whose other
 * name may have one (tool_fsck_linkless_note), and that one once the store's walk
 * found it. */
struct tool_fsck_linkless {
    uint64_t id; /* its frames' */
    char *dir, *name, *display;
    dev_t dev; /* dir's */
    ino_t ino;
    struct stat st; /* the data file's */
    bool found;
    char *sdir, *sname; /* the other name's directory, and its sidecar's path from there */
    dev_t sdev;         /* sdir's */
    ino_t sino;
    struct stat sst; /* the sidecar's */
};

/* ---- a sidecar that is another file's ---- */

/* Is the sidecar of data file dirfd/name another file's: do it and the
 * file's first frame both carry a file id, and different ones? (side: the
 * sidecar's path from dirfd; *sid, *sst: its id and stat; *dst: the data
 * file's stat.) @return CBFS_OK with *foreign; a file or sidecar that is not
 * there or does not decode is "no" (the file's check says what it is). */
static cbfs_err tool_fsck_foreign_of(unsigned layout, int dirfd, const char *name, char *side,
                                     size_t cap, bool *foreign, uint64_t *sid, struct stat *sst,
                                     struct stat *dst)
{
    bool has;
    uint64_t id;
    *foreign = false;
    cbfs_err e = cbfs_store_sidecar_path(layout, name, side, cap);
    if (e == CBFS_E_NAMETOOLONG) return CBFS_OK;
    if (e) return e;
    e = tool_fsck_sidecar_id(dirfd, side, sid, sst);
    if (e == CBFS_E_NOENT || e == CBFS_E_NOT_REGULAR || cbfs_err_is_format(e)) return CBFS_OK;
    if (e) return e;
    e = tool_fsck_data_id(dirfd, name, &has, &id, dst);
    if (!e && has) *foreign = id != *sid;
    return e;
}

/* A data file whose sidecar carries another file id than its frames, the
 * sidecar of the file's own owner: a rename over a compressed file, or an
 * exchange of two, cut short by a power cut on a store file system that
 * made the data file's new name durable without its sidecar's (btrfs, where
 * an fsync of the renamed file logs that file's names only:
 * t_powercut_rename's over_fsync and exchange_fsync). The file's own
 * sidecar is then an orphan, or aside, or at the other name of an exchange;
 * the one here may be the only record of another file's block size. A
 * repair moves it aside into .cbfs/ (CBFS_STORE_ASIDE, as a rename does),
 * where it is settled with the other asides, by file id: moved to the file
 * that carries its id and has no sidecar, or removed as the index of
 * contents that are gone; and the orphan that is this file's finds it
 * without a sidecar. Before, the file's check rebuilt its index from its
 * frames, which fails where they do not prove its block size (EIO, and
 * fsck --repair exit 4), and removed its real sidecar as nobody's. A sidecar
 * of another owner is left to the file's check (t_tool_fsck_foreign_sidecar). */
void tool_fsck_foreign(struct tool_fsck *f, const struct tool_loc *loc,
                       const struct tool_store *store, int dirfd, const char *name,
                       const char *display)
{
    char side[CBFS_STORE_SIDECAR_PATH_MAX], aside[CBFS_STORE_ASIDE_MAX];
    struct stat sst, dst;
    uint64_t sid;
    bool foreign;
    cbfs_err e = tool_fsck_foreign_of(store->layout, dirfd, name, side, sizeof side, &foreign, &sid,
                                      &sst, &dst);
    if (e || !foreign || !cbfs_store_sidecar_owner_ok(&dst, &sst)) return;
    f->problems++;
    printf("%s: its sidecar carries another file's id than its frames (a rename or exchange cut "
           "short by a power cut: it may be another file's index)",
           display);
    if (!f->repair) {
        printf("; --repair moves it aside into %s/ and gives it to the file whose frames carry "
               "its id, or removes it\n",
               CBFS_STORE_DIR);
        f->left++;
        return;
    }
    int r;
    do { /* a fresh name, never over another */
        snprintf(aside, sizeof aside, "%s/%s%016llx", CBFS_STORE_DIR, CBFS_STORE_ASIDE,
                 (unsigned long long)cbfs_random64());
        r = cbfs_store_renameat2(dirfd, side, loc->dirfd, aside, RENAME_NOREPLACE);
    } while (r != 0 && errno == EEXIST);
    e = r != 0 ? cbfs_err_from_errno(errno) : CBFS_OK;
    /* the file moved must be the one read (a user writing the store) */
    if (!e && !tool_fsck_same_at(loc->dirfd, aside, &sst))
        e = cbfs_store_renameat2(loc->dirfd, aside, dirfd, side, RENAME_NOREPLACE) == 0
                ? CBFS_E_STALE
                : CBFS_E_CHANGED;
    if (e) {
        printf("\n");
        tool_err("fsck", "%s: cannot move its sidecar aside: %s", display, tool_fsck_move_why(e));
        f->left++;
        return;
    }
    printf(" (moved aside to %s, settled below)\n", aside);
    f->fixed++;
}

/* ---- a hard link without its sidecar's ---- */

/* A compressed file with more than one name, this one without a sidecar: a
 * link of it (the sidecar's link first, then the data file's) cut short by a
 * power cut on a store file system that made the data file's new name
 * durable without the sidecar's (btrfs, where an fsync of the file through
 * the new name logs that inode's names only: t_powercut_rename's
 * link_fsync). Its other name's sidecar, found by the store's walk (the same
 * file, a sidecar that carries its frames' file id), is linked to it; before,
 * its index was rebuilt from its frames, which fails where they do not prove
 * its block size (exit 4, EIO). Recorded here, settled after the walk
 * (tool_fsck_linkless_settle). */
void tool_fsck_linkless_note(struct tool_fsck_links *ls, const struct tool_store *store, int dirfd,
                             const char *name, const char *display)
{
    bool has;
    uint64_t id;
    struct stat st, dst;
    if (tool_fsck_frames_id(store->layout, dirfd, name, &has, &id, &st) || !has || st.st_nlink < 2)
        return;
    if (ls->n == ls->cap) {
        const size_t cap = ls->cap ? 2 * ls->cap : 8;
        struct tool_fsck_linkless *const l = realloc(ls->v, cap * sizeof *l);
        if (!l) return; /* the file's check says its sidecar is lost */
        ls->v = l;
        ls->cap = cap;
    }
    struct tool_fsck_linkless *const l = &ls->v[ls->n];
    memset(l, 0, sizeof *l);
    if (tool_fsck_dir_name(dirfd, &l->dir, &dst) != CBFS_OK) return;
    l->name = strdup(name);
    l->display = strdup(display);
    if (!l->name || !l->display) {
        free(l->dir);
        free(l->name);
        free(l->display);
        return;
    }
    l->id = id;
    l->st = st;
    l->dev = dst.st_dev;
    l->ino = dst.st_ino;
    ls->n++;
}

/* In the store's walk: is dirfd/name another name of a linkless file, with
 * a sidecar of its id and owner? Then that sidecar is recorded for it. */
void tool_fsck_linkless_match(struct tool_fsck_links *ls, unsigned layout, int dirfd,
                                     const char *name)
{
    struct stat st, sst, dst;
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    uint64_t sid;
    if (cbfs_store_fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 || st.st_nlink < 2) return;
    for (size_t i = 0; i < ls->n; i++) {
        struct tool_fsck_linkless *const l = &ls->v[i];
        if (l->found || l->st.st_dev != st.st_dev || l->st.st_ino != st.st_ino) continue;
        if (cbfs_store_sidecar_path(layout, name, side, sizeof side) != CBFS_OK ||
            tool_fsck_sidecar_id(dirfd, side, &sid, &sst) != CBFS_OK || sid != l->id ||
            !cbfs_store_sidecar_owner_ok(&st, &sst) ||
            tool_fsck_dir_name(dirfd, &l->sdir, &dst) != CBFS_OK)
            continue;
        l->sname = strdup(side);
        if (!l->sname) continue;
        l->sdev = dst.st_dev;
        l->sino = dst.st_ino;
        l->sst = sst;
        l->found = true;
    }
}

/* Links l's other name's sidecar to l's sidecar name (never over one
 * there), with the checks of tool_fsck_sidecar_move. @return CBFS_OK or why not. */
static cbfs_err tool_fsck_linkless_link(unsigned layout, const struct tool_fsck_linkless *l)
{
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    int sdir, ddir;
    cbfs_err e = tool_fsck_dir_open(l->sdir, l->sdev, l->sino, &sdir);
    if (e) return e;
    e = tool_fsck_dir_open(l->dir, l->dev, l->ino, &ddir);
    if (e) {
        close(sdir);
        return e;
    }
    e = cbfs_store_sidecar_path(layout, l->name, side, sizeof side);
    if (!e) e = cbfs_store_sidecar_dir(layout, ddir);
    if (!e &&
        (!tool_fsck_same_at(sdir, l->sname, &l->sst) || !tool_fsck_same_at(ddir, l->name, &l->st)))
        e = CBFS_E_STALE;
    if (!e && cbfs_store_linkat(sdir, l->sname, ddir, side, 0) != 0) e = cbfs_err_from_errno(errno);
    if (!e && !tool_fsck_same_at(ddir, side, &l->sst))
        e = cbfs_store_unlinkat(ddir, side, 0) == 0 ? CBFS_E_STALE : CBFS_E_CHANGED;
    close(sdir);
    close(ddir);
    return e;
}

static void tool_fsck_linkless_settle_one(struct tool_fsck *f, unsigned layout,
                                      const struct tool_fsck_linkless *l)
{
    if (!l->found) return; /* the file's check says its sidecar is lost */
    f->problems++;
    printf("%s: a name of a compressed file without its sidecar's link, which its other "
           "name has (a link cut short by a power cut)",
           l->display);
    if (!f->repair) {
        printf("; --repair links it\n");
        f->left++;
        return;
    }
    const cbfs_err e = tool_fsck_linkless_link(layout, l);
    if (e) {
        printf("\n");
        tool_err("fsck", "%s: cannot link its other name's sidecar: %s", l->display,
                 tool_fsck_move_why(e));
        f->left++;
        return;
    }
    printf(" (linked)\n");
    f->fixed++;
}

void tool_fsck_linkless_settle(struct tool_fsck *f, unsigned layout, struct tool_fsck_links *ls)
{
    for (size_t i = 0; i < ls->n; i++) {
        struct tool_fsck_linkless *const l = &ls->v[i];
        tool_fsck_linkless_settle_one(f, layout, l);
        free(l->dir);
        free(l->name);
        free(l->display);
        free(l->sdir);
        free(l->sname);
    }
    free(ls->v);
    *ls = (struct tool_fsck_links){0};
}

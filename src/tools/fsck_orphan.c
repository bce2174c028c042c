/* cbfs fsck's orphan sidecars: sidecars whose data file is missing. Most are
 * debris of an unlink or a create cut short by a crash (docs/FORMAT.md), and
 * --repair removes them. But a crash between a rename's two steps leaves the
 * data file at the new name and its sidecar under the old one
 * (docs/OPERATIONS.md), and that sidecar may be the only record of the
 * file's block size: removed, the file stays unreadable (EIO) unless the user
 * knows the size it was written with. Such a file is found by the file id its
 * frames carry, first in the orphan's own directory, then, for a rename
 * across directories, in the whole store (a second walk, made only where an
 * orphan with a file id is still nobody's).
 *
 * The pass runs before fsck checks the files: checked first, the renamed file
 * was reported "sidecar lost, not repaired" and counted as left, and the
 * sidecar then moved to it (a file whose name sorts before its old one's
 * sidecar).
 *
 * The sidecars a rename over a compressed file or an unlink of one moved
 * aside into the store's .cbfs/ (CBFS_STORE_ASIDE) and a crash left there are
 * settled the same way, by the store's walk: a crash before the data file was
 * replaced or removed leaves that file without a sidecar and its only record
 * of its block size aside (moved back to it: the file whose frames carry its
 * file id); after, it is the index of contents that are gone (removed).
 *
 * fsck runs as root over stores whose directories users write (helper-67):
 * a file of another owner than the sidecar's is never taken for its file
 * (the store's rule: a file id is readable wherever the file is), and a move
 * checks both names right before it and the file moved right after it. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
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

/* The file id in the header record of sidecar dirfd/name, and its stat.
 * @return CBFS_OK, a format error (cbfs_err_is_format: it has no header that
 * decodes), or the error that kept it from being read. */
cbfs_err tool_fsck_sidecar_id(int dirfd, const char *name, uint64_t *id, struct stat *st)
{
    struct cbfs_index_rec r;
    int fd;
    cbfs_err e = tool_file_open_regular(dirfd, name, O_RDONLY, &fd);
    if (e) return e;
    e = fstat(fd, st) != 0 ? cbfs_err_from_errno(errno) : cbfs_index_read_header(fd, &r);
    close(fd);
    if (!e) *id = r.file_id;
    return e;
}

cbfs_err tool_fsck_data_id(int dirfd, const char *name, bool *has, uint64_t *id, struct stat *st)
{
    struct cbfs_frame_hdr fh;
    int fd;
    *has = false;
    cbfs_err e = tool_file_open_regular(dirfd, name, O_RDONLY, &fd);
    if (e == CBFS_E_NOENT || e == CBFS_E_NOT_REGULAR) return CBFS_OK;
    if (e) return e;
    e = cbfs_frame_read_hdr(fd, 0, UINT64_MAX, &fh);
    if (!e && fstat(fd, st) != 0) e = cbfs_err_from_errno(errno);
    close(fd);
    if (cbfs_err_is_format(e)) return CBFS_OK;
    if (!e) {
        *has = true;
        *id = fh.file_id;
    }
    return e;
}

/* Is dirfd/name a regular file without a sidecar whose first frame decodes?
 * @return CBFS_OK with *has, and then its file id in *id and its stat in
 * *st; or the error that kept it from being told (a name gone meanwhile,
 * not a regular file, or a first frame that does not decode is "no"). */
cbfs_err tool_fsck_frames_id(unsigned layout, int dirfd, const char *name, bool *has, uint64_t *id,
                             struct stat *st)
{
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    *has = false;
    const cbfs_err e = cbfs_store_sidecar_path(layout, name, side, sizeof side);
    if (e == CBFS_E_NAMETOOLONG) return CBFS_OK; /* no sidecar can be its */
    if (e) return e;
    if (cbfs_store_fstatat(dirfd, side, st, AT_SYMLINK_NOFOLLOW) == 0) return CBFS_OK;
    if (errno != ENOENT) return cbfs_err_from_errno(errno);
    return tool_fsck_data_id(dirfd, name, has, id, st);
}

/* Is dirfd/path (not followed) the file of stat st? */
bool tool_fsck_same_at(int dirfd, const char *path, const struct stat *st)
{
    struct stat now;
    return cbfs_store_fstatat(dirfd, path, &now, AT_SYMLINK_NOFOLLOW) == 0 &&
           now.st_dev == st->st_dev && now.st_ino == st->st_ino;
}

/* Moves sidecar sdir/sname (sst: its stat when its file id was read) to the
 * sidecar name of data file ddir/dname (dst: its stat when its frames were
 * read), never over a sidecar there. Whose the sidecar is was decided on
 * those two files (their owners: the store's rule), but rename(2) takes
 * names, and a user who writes either directory can put another file at a
 * name meanwhile (between the walks, seconds on a large store): root would
 * then move a file of that user's into another's directory as the index of
 * a file there. So each name must still be its file right before the move,
 * and the file moved must be sst's after it (one swapped in at the last
 * moment is moved back). @return CBFS_OK; CBFS_E_STALE where a name was
 * another file (nothing moved, or moved back); CBFS_E_CHANGED where the
 * file moved was another and could not be moved back (it is at the data
 * file's sidecar name); or the error of a step. */
static cbfs_err tool_fsck_sidecar_move(unsigned layout, int sdir, const char *sname,
                                       const struct stat *sst, int ddir, const char *dname,
                                       const struct stat *dst)
{
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    cbfs_err e = cbfs_store_sidecar_path(layout, dname, side, sizeof side);
    if (!e) e = cbfs_store_sidecar_dir(layout, ddir);
    if (e) return e;
    if (!tool_fsck_same_at(sdir, sname, sst) || !tool_fsck_same_at(ddir, dname, dst))
        return CBFS_E_STALE;
    if (cbfs_store_renameat2(sdir, sname, ddir, side, RENAME_NOREPLACE) != 0)
        return cbfs_err_from_errno(errno);
    if (tool_fsck_same_at(ddir, side, sst)) return CBFS_OK;
    return cbfs_store_renameat2(ddir, side, sdir, sname, RENAME_NOREPLACE) == 0 ? CBFS_E_STALE
                                                                                : CBFS_E_CHANGED;
}

/* Why the move of an orphan failed (tool_fsck_sidecar_move), as fsck says it. */
const char *tool_fsck_move_why(cbfs_err e)
{
    if (e == CBFS_E_STALE)
        return "it, that file or a directory of theirs was moved or replaced while fsck ran (a "
               "user writing the store); nothing moved, run fsck again";
    if (e == CBFS_E_CHANGED)
        return "another file took its name as it was moved (a user writing the store), and "
               "that file, moved there in its place, cannot be moved back: look at that "
               "sidecar and remove it by hand";
    return cbfs_err_str(e);
}

/* ---- what becomes of one orphan: each prints its line and counts it ---- */

/* Whose it is could not be told (where: "its directory", "the store"): kept,
 * never taken for "no one's". */
static void tool_fsck_orphan_unknown(struct tool_fsck *f, const char *display,
                                     enum tool_ent_kind kind, const char *where, const char *why)
{
    printf("%s: %s\n", display, tool_orphan_what(kind));
    tool_err("fsck", "%s: cannot tell whether a file of %s is its: %s; left as it is", display,
             where, why);
    f->errors++;
    f->left++;
}

/* It is the sidecar of owner (shown: its display; st: its stat), moved there
 * unless moved (its error; CBFS_OK also where f->repair is off: nothing is
 * moved then). */
static void tool_fsck_orphan_owned(struct tool_fsck *f, const char *display,
                                   enum tool_ent_kind kind, const char *shown,
                                   const struct stat *st, cbfs_err moved)
{
    printf("%s: %s; it is the sidecar of %s, whose frames carry its file id (%s)%s\n", display,
           tool_orphan_what(kind), shown,
           kind == TOOL_ENT_ASIDE ? "the crash came before its data file was replaced or removed"
                                  : "a rename cut short by a crash",
           !f->repair ? ": --repair moves it there"
           : moved    ? ""
                      : " (moved there)");
    if (f->repair && moved)
        tool_err("fsck", "%s: cannot move it to %s's sidecar: %s", display, shown,
                 tool_fsck_move_why(moved));
    if (f->repair && !moved) {
        f->fixed++;
        return;
    }
    f->left++;
    /* the file's check waits for its sidecar; without room to note that,
     * it is checked as it is (its sidecar said lost) */
    struct tool_fsck_owner *const o = realloc(f->owners, (f->nowners + 1) * sizeof *f->owners);
    if (!o) return;
    f->owners = o;
    f->owners[f->nowners++] = (struct tool_fsck_owner){.dev = st->st_dev, .ino = st->st_ino};
}

/* Nobody's: removed by a repair (dirfd: its directory; -1 where that could
 * not be opened again, dir_err saying why). */
static void tool_fsck_orphan_none(struct tool_fsck *f, int dirfd, cbfs_err dir_err,
                                  const char *name, const char *display, enum tool_ent_kind kind)
{
    printf("%s: %s%s", display, tool_orphan_what(kind),
           kind == TOOL_ENT_ASIDE ? "; no file of the store without a sidecar carries its file "
                                    "id: the index of contents that are gone"
                                  : "");
    if (!f->repair) {
        printf("\n");
        f->left++;
        return;
    }
    const cbfs_err e = dirfd < 0                       ? dir_err
                       : unlinkat(dirfd, name, 0) == 0 ? CBFS_OK
                                                       : cbfs_err_from_errno(errno);
    printf("%s\n", e ? "" : " (removed)");
    if (e) {
        /* tool_fsck_dir_open's: its path names another directory now */
        tool_err("fsck", "%s: cannot remove it: %s", display,
                 dirfd < 0 && e == CBFS_E_STALE
                     ? "its directory was moved or replaced while fsck ran (a user writing the "
                       "store); nothing removed, run fsck again"
                     : cbfs_err_str(e));
        f->left++;
    } else {
        f->fixed++;
    }
}

/* Not a regular file (mode: its lstat's; 0 where gone meanwhile) at a
 * sidecar's name whose data file is missing, or at an aside's name in .cbfs/:
 * cbfs makes none, so it indexes nothing and holds no file's block size, and
 * nothing of it is cbfs's to settle. It is never opened (a FIFO would block
 * the open, a device's open has effects of its own), followed (a symlink may
 * lead anywhere, out of the store) or removed, also by --repair (a directory
 * may hold anything; whatever it is, someone put it there by hand): a
 * problem left, for the user. */
static void tool_fsck_not_regular(struct tool_fsck *f, const char *display, bool aside, mode_t mode)
{
    printf("%s: %s at %s: left as it is, never opened, followed or removed by fsck (cbfs "
           "never makes one; look at it and remove it by hand)\n",
           display, tool_mode_what(mode),
           aside ? "a name where a rename or unlink puts a sidecar aside"
                 : "a sidecar's name, without a data file of its name");
    f->left++;
}

/* ---- the orphan's own directory ---- */

/* Finds the file of the directory of orphan sidecar dirfd/name (file id id,
 * stat sst) that has no sidecar, whose frames carry id and whose owner the
 * sidecar has (the store's rule: a file of another user that carries the id
 * is not taken, the store's walk says so), and in repair mode moves the
 * sidecar there. @return CBFS_OK with *found (then *to: that file's name,
 * *st: its stat, *moved: the move's error, CBFS_OK also without f->repair),
 * or the error that kept it from being told. */
static cbfs_err tool_fsck_owner_here(const struct tool_fsck *f, unsigned layout, int dirfd,
                                     const char *name, uint64_t id, const struct stat *sst,
                                     bool *found, char *to, size_t cap, struct stat *st,
                                     cbfs_err *moved)
{
    *found = false;
    *moved = CBFS_OK;
    /* layout 2: dirfd is the index directory, its data files are in its parent */
    const bool indexdir = layout == CBFS_LAYOUT_INDEXDIR;
    const int data = openat(dirfd, indexdir ? ".." : ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (data < 0) return cbfs_err_from_errno(errno);
    char **names = NULL;
    size_t n = 0;
    const int rd = openat(data, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cbfs_err e = rd < 0 ? cbfs_err_from_errno(errno) : cbfs_dir_read_names(rd, &names, &n);
    for (size_t i = 0; i < n && !e && !*found; i++) {
        if (strcmp(names[i], CBFS_STORE_DIR) == 0 || strcmp(names[i], CBFS_INDEX_DIR) == 0 ||
            (!indexdir && cbfs_store_is_sidecar_name(names[i])))
            continue;
        uint64_t fid;
        bool has;
        e = tool_fsck_frames_id(layout, data, names[i], &has, &fid, st);
        if (e || !has || fid != id || !cbfs_store_sidecar_owner_ok(st, sst)) continue;
        *found = true;
        if (snprintf(to, cap, "%s", names[i]) >= (int)cap) {
            e = CBFS_E_NAMETOOLONG;
            break;
        }
        if (f->repair)
            *moved = tool_fsck_sidecar_move(layout, dirfd, name, sst, data, names[i], st);
    }
    cbfs_dir_free_names(names, n);
    close(data);
    return e;
}

/* ---- the whole store ---- */

/* An orphan with a file id that no file of its own directory has, waiting
 * for the walk of the whole store. Its directory is named by the path the
 * kernel gives for it: the walk's descriptors are gone by the time it is
 * settled, and the store is locked, so nothing moves meanwhile (the path is
 * still checked to name the same directory). */
struct tool_fsck_lost {
    uint64_t id;
    enum tool_ent_kind kind;
    char *dir, *name, *display;
    dev_t dev; /* dir's */
    ino_t ino;
    struct stat sst; /* the sidecar's */
    /* files of the store without a sidecar whose frames carry id: those the
     * sidecar may be the sidecar of (the store's rule: it has their owner,
     * cbfs_store_sidecar_owner_ok), and the others, never its file. A user
     * who can read another's file id (a sidecar or data file of mode 0644)
     * can write a file that carries it: taken, root's fsck moved another's
     * sidecar into that user's directory, or that user's own into another's
     * as the index of a file there (and then removed the real one as
     * nobody's). */
    unsigned nowners, nstrangers;
    char *xdisplay;                /* the first of the others */
    cbfs_err owner_err;            /* the first of them could not be recorded */
    char *odir, *oname, *odisplay; /* the first of them */
    dev_t odev;                    /* odir's */
    ino_t oino;
    struct stat ost; /* the file's */
};

struct tool_fsck_pass {
    struct tool_fsck *f;
    const struct tool_loc *loc; /* the store's root */
    struct tool_fsck_links links; /* names without their sidecar's link (fsck_misplaced.c) */
    struct tool_fsck_lost *lost; /* in walk order */
    size_t n, cap;
    struct tool_fsck_lost **by_id; /* lost sorted by id, for the store's walk */
    unsigned walk_errors;          /* of the silent walks: directories not read */
    cbfs_err file_err;             /* the first file the store's walk could not read */
    char *file_err_display;
};

/* dirfd's path as the kernel names it, and its stat. */
cbfs_err tool_fsck_dir_name(int dirfd, char **path, struct stat *st)
{
    char buf[PATH_MAX];
    if (fstat(dirfd, st) != 0) return cbfs_err_from_errno(errno);
    const cbfs_err e = cbfs_procfd_path(dirfd, buf, sizeof buf);
    if (e) return e;
    *path = strdup(buf);
    return *path ? CBFS_OK : CBFS_E_NOMEM;
}

/* Opens the directory path into *fd if it is still the one of dev/ino. */
cbfs_err tool_fsck_dir_open(const char *path, dev_t dev, ino_t ino, int *fd)
{
    struct stat st;
    *fd = open(path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (*fd < 0) return cbfs_err_from_errno(errno);
    const cbfs_err e = fstat(*fd, &st) != 0                   ? cbfs_err_from_errno(errno)
                       : st.st_dev != dev || st.st_ino != ino ? CBFS_E_STALE
                                                              : CBFS_OK;
    if (e) {
        close(*fd);
        *fd = -1;
    }
    return e;
}

static cbfs_err tool_fsck_lost_add(struct tool_fsck_pass *p, int dirfd, const char *name,
                                   const char *display, enum tool_ent_kind kind, uint64_t id,
                                   const struct stat *sst)
{
    if (p->n == p->cap) {
        const size_t cap = p->cap ? 2 * p->cap : 16;
        struct tool_fsck_lost *const l = realloc(p->lost, cap * sizeof *l);
        if (!l) return CBFS_E_NOMEM;
        p->lost = l;
        p->cap = cap;
    }
    struct tool_fsck_lost *const l = &p->lost[p->n];
    memset(l, 0, sizeof *l);
    struct stat st;
    cbfs_err e = tool_fsck_dir_name(dirfd, &l->dir, &st);
    if (e) return e;
    l->name = strdup(name);
    l->display = strdup(display);
    if (!l->name || !l->display) {
        free(l->dir);
        free(l->name);
        free(l->display);
        return CBFS_E_NOMEM;
    }
    l->id = id;
    l->sst = *sst;
    l->kind = kind;
    l->dev = st.st_dev;
    l->ino = st.st_ino;
    p->n++;
    return CBFS_OK;
}

/* The walk of the orphans (the store's check walks its files after it). */
static int tool_fsck_orphan_seen(void *arg, const struct tool_store *store, int dirfd,
                                 const char *name, const char *display, enum tool_ent_kind kind)
{
    struct tool_fsck_pass *const p = arg;
    struct tool_fsck *const f = p->f;
    if (kind == TOOL_ENT_FILE) {
        tool_fsck_foreign(f, p->loc, store, dirfd, name, display);
        tool_fsck_linkless_note(&p->links, store, dirfd, name, display);
        return 0;
    }
    f->problems++;
    uint64_t id;
    struct stat sst;
    if (kind == TOOL_ENT_ORPHAN_NOT_REGULAR) {
        if (fstatat(dirfd, name, &sst, AT_SYMLINK_NOFOLLOW) != 0) sst.st_mode = 0;
        tool_fsck_not_regular(f, display, false, sst.st_mode);
        return 0;
    }
    cbfs_err e = tool_fsck_sidecar_id(dirfd, name, &id, &sst);
    if (cbfs_err_is_format(e)) { /* no file id: no file can be told its */
        tool_fsck_orphan_none(f, dirfd, CBFS_OK, name, display, kind);
        return 0;
    }
    char owner[NAME_MAX + 1];
    struct stat st;
    cbfs_err moved;
    bool found = false;
    if (!e)
        e = tool_fsck_owner_here(f, store->layout, dirfd, name, id, &sst, &found, owner,
                                 sizeof owner, &st, &moved);
    if (e) {
        tool_fsck_orphan_unknown(f, display, kind, "its directory", cbfs_err_str(e));
    } else if (found) {
        /* the file's name is shown as the walk shows names */
        char shown[4 * NAME_MAX + 1];
        (void)tool_name_escape(shown, sizeof shown, owner);
        tool_fsck_orphan_owned(f, display, kind, shown, &st, moved);
    } else if ((e = tool_fsck_lost_add(p, dirfd, name, display, kind, id, &sst)) != CBFS_OK) {
        tool_fsck_orphan_unknown(f, display, kind, "the store", cbfs_err_str(e));
    }
    return 0;
}

static int tool_fsck_lost_cmp(const void *a, const void *b)
{
    const uint64_t x = (*(struct tool_fsck_lost *const *)a)->id;
    const uint64_t y = (*(struct tool_fsck_lost *const *)b)->id;
    return x < y ? -1 : x > y;
}

/* The first file met that carries l's id, recorded for the move. */
static cbfs_err tool_fsck_lost_owner(struct tool_fsck_lost *l, int dirfd, const char *name,
                                     const char *display, const struct stat *st)
{
    struct stat dst;
    const cbfs_err e = tool_fsck_dir_name(dirfd, &l->odir, &dst);
    if (e) return e;
    l->oname = strdup(name);
    l->odisplay = strdup(display);
    if (!l->oname || !l->odisplay) return CBFS_E_NOMEM; /* freed with l */
    l->odev = dst.st_dev;
    l->oino = dst.st_ino;
    l->ost = *st;
    return CBFS_OK;
}

/* The walk of the store's files for the lost orphans' ids. */
static int tool_fsck_orphan_match(void *arg, const struct tool_store *store, int dirfd,
                                  const char *name, const char *display, enum tool_ent_kind kind)
{
    struct tool_fsck_pass *const p = arg;
    if (kind != TOOL_ENT_FILE) return 0;
    if (p->links.n) tool_fsck_linkless_match(&p->links, store->layout, dirfd, name);
    if (!p->by_id) return 0; /* the walk is the linkless ones' only */
    bool has;
    uint64_t id;
    struct stat st;
    const cbfs_err e = tool_fsck_frames_id(store->layout, dirfd, name, &has, &id, &st);
    if (e) {
        if (!p->file_err) {
            p->file_err = e;
            p->file_err_display = strdup(display);
        }
        return 0;
    }
    if (!has) return 0;
    /* the first of the lost ones with id, then each after it with id */
    size_t lo = 0, hi = p->n;
    while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (p->by_id[mid]->id < id)
            lo = mid + 1;
        else
            hi = mid;
    }
    for (; lo < p->n && p->by_id[lo]->id == id; lo++) {
        struct tool_fsck_lost *const l = p->by_id[lo];
        if (!cbfs_store_sidecar_owner_ok(&st, &l->sst)) {
            if (l->nstrangers++ == 0) l->xdisplay = strdup(display); /* NULL: shown "?" */
        } else if (l->nowners++ == 0) {
            l->owner_err = tool_fsck_lost_owner(l, dirfd, name, display, &st);
        }
    }
    return 0;
}

/* What the store's walk found for l: done, and said. */
static void tool_fsck_lost_settle(struct tool_fsck_pass *p, unsigned layout,
                                  struct tool_fsck_lost *l)
{
    struct tool_fsck *const f = p->f;
    if (l->nowners > 1) {
        printf("%s: %s; the frames of %u files without a sidecar carry its file id (%s is "
               "one): which one's it is cannot be told; left as it is (move it to that file's "
               "sidecar name by hand)\n",
               l->display, tool_orphan_what(l->kind), l->nowners, l->odisplay ? l->odisplay : "?");
        f->left++;
        return;
    }
    if (l->nowners == 1 && l->owner_err) {
        tool_fsck_orphan_unknown(f, l->display, l->kind, "the store", cbfs_err_str(l->owner_err));
        return;
    }
    if (l->nowners == 0 && (p->walk_errors || p->file_err)) {
        char why[PATH_MAX + 128];
        if (p->file_err && p->file_err_display)
            (void)snprintf(why, sizeof why, "%s: %s", p->file_err_display,
                           cbfs_err_str(p->file_err));
        else if (p->file_err)
            (void)snprintf(why, sizeof why, "%s", cbfs_err_str(p->file_err));
        else
            (void)snprintf(why, sizeof why, "not every directory could be read (said below)");
        tool_fsck_orphan_unknown(f, l->display, l->kind, "the store", why);
        return;
    }
    if (l->nowners == 0 && l->nstrangers) { /* maybe a file chowned behind the store's back */
        char n[32] = "";
        if (l->nstrangers > 1) (void)snprintf(n, sizeof n, " (one of %u)", l->nstrangers);
        printf("%s: %s; the frames of %s%s carry its file id, but the sidecar does not have "
               "that file's owner (a sidecar has its data file's owner): not moved there, nor "
               "removed; left as it is\n",
               l->display, tool_orphan_what(l->kind), l->xdisplay ? l->xdisplay : "?", n);
        f->left++;
        return;
    }
    int sdir;
    const cbfs_err se = f->repair ? tool_fsck_dir_open(l->dir, l->dev, l->ino, &sdir) : CBFS_OK;
    if (!f->repair) sdir = -1;
    if (l->nowners == 0) {
        tool_fsck_orphan_none(f, sdir, se, l->name, l->display, l->kind);
    } else {
        cbfs_err moved = se;
        if (f->repair && !se) {
            int ddir;
            moved = tool_fsck_dir_open(l->odir, l->odev, l->oino, &ddir);
            if (!moved) {
                moved =
                    tool_fsck_sidecar_move(layout, sdir, l->name, &l->sst, ddir, l->oname, &l->ost);
                close(ddir);
            }
        }
        tool_fsck_orphan_owned(f, l->display, l->kind, l->odisplay, &l->ost, moved);
    }
    if (sdir >= 0) close(sdir);
}

/* The sidecars a crash left aside in the store's .cbfs/ (loc: the store
 * root), each added to p's lost ones for the store's walk; one without a file
 * id, which no file can be told to own, settled at once. */
static void tool_fsck_asides(struct tool_fsck_pass *p, const struct tool_loc *loc)
{
    struct tool_fsck *const f = p->f;
    const int meta =
        openat(loc->dirfd, CBFS_STORE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char **names = NULL;
    size_t n = 0;
    const int rd = meta < 0 ? -1 : openat(meta, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const cbfs_err e = rd < 0 ? cbfs_err_from_errno(errno) : cbfs_dir_read_names(rd, &names, &n);
    if (e) {
        if (e != CBFS_E_NOENT) {
            tool_err("fsck", "%s/%s: %s", loc->display, CBFS_STORE_DIR, cbfs_err_str(e));
            f->errors++;
        }
        if (meta >= 0) close(meta);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        if (strncmp(names[i], CBFS_STORE_ASIDE, sizeof CBFS_STORE_ASIDE - 1) != 0) continue;
        char display[PATH_MAX];
        f->problems++;
        if (snprintf(display, sizeof display, "%s/%s/%s", loc->display, CBFS_STORE_DIR, names[i]) >=
            (int)sizeof display) {
            tool_err("fsck", "%s/%s/%s: %s", loc->display, CBFS_STORE_DIR, names[i],
                     cbfs_err_str(CBFS_E_NAMETOOLONG));
            f->errors++;
            f->left++;
            continue;
        }
        uint64_t id;
        struct stat sst;
        if (fstatat(meta, names[i], &sst, AT_SYMLINK_NOFOLLOW) == 0 && !S_ISREG(sst.st_mode)) {
            tool_fsck_not_regular(f, display, true, sst.st_mode);
            continue;
        }
        cbfs_err ie = tool_fsck_sidecar_id(meta, names[i], &id, &sst);
        if (cbfs_err_is_format(ie))
            tool_fsck_orphan_none(f, meta, CBFS_OK, names[i], display, TOOL_ENT_ASIDE);
        else if (ie || (ie = tool_fsck_lost_add(p, meta, names[i], display, TOOL_ENT_ASIDE, id,
                                                &sst)) != CBFS_OK)
            tool_fsck_orphan_unknown(f, display, TOOL_ENT_ASIDE, "the store", cbfs_err_str(ie));
    }
    cbfs_dir_free_names(names, n);
    close(meta);
}

void tool_fsck_orphans(struct tool_fsck *f, const struct tool_loc *loc)
{
    struct tool_fsck_pass p = {.f = f, .loc = loc};
    tool_walk_silent(loc, tool_fsck_orphan_seen, &p, &p.walk_errors);
    tool_fsck_asides(&p, loc);
    if (p.n) {
        p.by_id = malloc(p.n * sizeof *p.by_id);
        if (p.by_id) {
            for (size_t i = 0; i < p.n; i++)
                p.by_id[i] = &p.lost[i];
            qsort(p.by_id, p.n, sizeof *p.by_id, tool_fsck_lost_cmp);
        } else {
            p.file_err = CBFS_E_NOMEM; /* each settled below as "cannot tell" */
        }
    }
    if (p.by_id || p.links.n) tool_walk_silent(loc, tool_fsck_orphan_match, &p, &p.walk_errors);
    tool_fsck_linkless_settle(f, loc->store.layout, &p.links);
    for (size_t i = 0; i < p.n; i++) {
        struct tool_fsck_lost *const l = &p.lost[i];
        tool_fsck_lost_settle(&p, loc->store.layout, l);
        free(l->dir);
        free(l->name);
        free(l->display);
        free(l->odir);
        free(l->oname);
        free(l->odisplay);
        free(l->xdisplay);
    }
    free(p.lost);
    free(p.by_id);
    free(p.file_err_display);
}

bool tool_fsck_owner_waits(const struct tool_fsck *f, const struct stat *st)
{
    for (size_t i = 0; i < f->nowners; i++)
        if (f->owners[i].dev == st->st_dev && f->owners[i].ino == st->st_ino) return true;
    return false;
}

void tool_fsck_free(struct tool_fsck *f)
{
    free(f->owners);
    f->owners = NULL;
    f->nowners = 0;
}

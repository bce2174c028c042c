/* rename, with RENAME_NOREPLACE and RENAME_EXCHANGE: the data file moves and
 * a compressed file's sidecar follows it. Room for the sidecar's new name is
 * made before anything moves (a full store fails the rename whole), and a
 * replaced file's sidecar is set aside, not removed, so that a rename that
 * fails puts it back; an exchange sets both sides' aside until the data
 * files are exchanged. What a crash between the steps leaves: docs/ENGINE.md
 * (known limits) and docs/OPERATIONS.md. */
#include <errno.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/ops.h"

/* What rename needs to know about one side. */
struct cbfs_rename_side {
    struct cbfs_inode *dir;
    int fd; /* dir's pinned fd */
    const char *name;
    char sc[CBFS_STORE_SIDECAR_PATH_MAX];
    bool exists, reg, has_sc;
    struct stat st;
};

static int cbfs_rename_probe(struct cbfs_fs *fs, struct cbfs_rename_side *s)
{
    struct stat sst;
    s->exists = fstatat(s->fd, s->name, &s->st, AT_SYMLINK_NOFOLLOW) == 0;
    if (!s->exists && errno != ENOENT) return errno;
    s->reg = s->exists && S_ISREG(s->st.st_mode);
    /* a name too long for a sidecar leaves sc empty: it cannot have one */
    if (cbfs_inode_sidecar_path(fs, s->name, s->sc, sizeof s->sc) != 0) s->sc[0] = '\0';
    s->has_sc = false;
    if (s->reg && s->sc[0]) {
        if (cbfs_fs_fstatat(fs, s->fd, s->sc, &sst) == 0)
            s->has_sc = S_ISREG(sst.st_mode);
        else if (errno != ENOENT)
            return errno;
    }
    return 0;
}

/* Points the inode of a moved regular file at its new name. */
static void cbfs_rename_relocate(struct cbfs_fs *fs, const struct stat *st,
                                 struct cbfs_inode *dir, const char *name)
{
    struct cbfs_inode *const inode = cbfs_inode_find(fs, st->st_dev, st->st_ino);
    if (!inode) return;
    if (cbfs_inode_set_location(fs, inode, dir, name) != 0)
        cbfs_log_warn("out of memory recording the new name of '%s'", name);
    cbfs_inode_unref(fs, inode, 1);
}

/* The target's sidecar out of the way for a rename (cbfs_sidecar_aside).
 * Where the store cannot take it (EXDEV), a plain source's target sidecar is
 * removed instead, as before there was an aside, and a compressed source's is
 * left for its own sidecar's rename to replace (*aside false either way).
 * @return 0 or errno. */
static int cbfs_rename_aside(struct cbfs_fs *fs, const struct cbfs_rename_side *s,
                             bool compressed_source, char *path, bool *aside)
{
    int err = cbfs_sidecar_aside(fs, s->fd, s->sc, path, aside);
    if (err != EXDEV) return err;
    if (compressed_source) return 0;
    bool removed;
    err = cbfs_sidecar_remove(fs, s->fd, s->name, &removed);
    if (!err && removed)
        cbfs_log_warn("'%s': its sidecar was removed, not moved aside (its directory is on "
                      "another filesystem than the store's root): should the rename fail, "
                      "it gets an index from its frames at its next open, if they prove one",
                      s->name);
    return err;
}

/* Removes a leftover sidecar at s's name if s is there and not a regular
 * file (which owns none). fs->names_lock held. @return 0 or errno. */
static int cbfs_rename_drop_leftover(struct cbfs_fs *fs, const struct cbfs_rename_side *s)
{
    cbfs_assert_held(&fs->names_lock);
    if (!s->exists || s->reg) return 0;
    bool removed;
    const int err = cbfs_sidecar_remove(fs, s->fd, s->name, &removed);
    if (err)
        cbfs_log_err("rename: cannot remove the leftover sidecar of '%s': %s", s->name,
                     strerror(err));
    else if (removed)
        cbfs_log_warn("rename: removed a leftover sidecar beside '%s' (no regular file owns "
                      "it)", s->name);
    return err;
}

/* Before a's data file moves to b's name: room for a's sidecar's entry at
 * b's sidecar name, made by a link of the sidecar there, removed again at
 * once (a directory keeps the block it grew by, and the sidecar's rename
 * takes the same name). On a full store the rename then fails here,
 * with nothing moved, instead of succeeding with the sidecar left behind
 * (the file rebuilt from its frames, EIO where they do not prove its block
 * size). fs->names_lock held. @return 0, ENOSPC/EDQUOT, or the errno of
 * removing the link again; other failures of the link (EXDEV, EMLINK, a store
 * without hard links) are left to the renames to report. */
static int cbfs_rename_make_room(struct cbfs_fs *fs, const struct cbfs_rename_side *a,
                                 const struct cbfs_rename_side *b, int aat, const char *aname,
                                 int bat, const char *bname)
{
    cbfs_assert_held(&fs->names_lock);
    /* aat, bat: the sidecar names' directories, held (struct cbfs_rename_sc) */
    int fd;
    CBFS_FDCACHE_RETRY(&fs->fdc, fd, openat(aat, aname, O_PATH | O_NOFOLLOW | O_CLOEXEC));
    if (fd == -1) return 0; /* the sidecar's rename reports it */
    int err = 0;
    if (cbfs_fs_link_fd(fs, fd, bat, bname) == 0) {
        /* a link left there would make the sidecar's rename a no-op (both
         * names one file): the rename fails instead */
        if (cbfs_fs_unlinkat(fs, bat, bname) == -1) {
            err = errno;
            cbfs_log_warn("a rename to '%s' failed and left a link of the sidecar of '%s' "
                          "behind (an orphan sidecar to cbfs fsck --repair): %s",
                          b->name, a->name, strerror(err));
        }
    } else if (errno == ENOSPC || errno == EDQUOT) {
        err = errno;
    }
    close(fd);
    return err;
}

/* Where a rename's sidecars move between: the directories that hold the two
 * sidecar names, opened before the data file moves (cbfs_store_at_open), so
 * that the sidecar's own rename after it needs no new descriptor. Opened
 * there, a daemon out of descriptors (EMFILE: a busy mount under its fd
 * limit) moved the data file and left its sidecar at the old name: the
 * file, rebuilt from its frames at its next open, failed with EIO where they
 * do not prove its block size (t_rename_emfile). */
struct cbfs_rename_sc {
    int aat, bat;              /* a's and b's; -1: not opened (no sidecar moves) */
    const char *aname, *bname; /* the sidecar names there */
};

/* An exchange's sidecars, each side's that has one, moved aside
 * (cbfs_sidecar_aside) before the data files are exchanged, and from there to
 * their new names after. Exchanged in place after the data files, a crash in
 * between left each name with the other file's sidecar (both EIO, and cbfs
 * fsck --repair could not rebuild them where the frames do not prove the
 * block size), or a plain file beside a compressed one's sidecar (a leftover,
 * which fsck --repair removed: the only record of the other file's block
 * size). An aside is found again by the file id its file's frames carry
 * (fsck --repair moves it there), wherever the crash came (t_crash_rename).
 * *xa, *xb: true where a's, b's is at apath, bpath. Where the store cannot
 * take one (EXDEV) none is moved (those moved are put back), and the
 * sidecars are exchanged in place as before. @return 0 or errno (nothing
 * moved). */
static int cbfs_rename_xchg_aside(struct cbfs_fs *fs, const struct cbfs_rename_side *a,
                                  const struct cbfs_rename_side *b, char *apath, bool *xa,
                                  char *bpath, bool *xb)
{
    *xa = *xb = false;
    int err = a->has_sc ? cbfs_sidecar_aside(fs, a->fd, a->sc, apath, xa) : 0;
    if (!err && b->has_sc) err = cbfs_sidecar_aside(fs, b->fd, b->sc, bpath, xb);
    if (!err) return 0;
    if (*xa) cbfs_sidecar_restore(fs, apath, a->fd, a->sc, "exchange", a->name, err);
    if (*xb) cbfs_sidecar_restore(fs, bpath, b->fd, b->sc, "exchange", b->name, err);
    *xa = *xb = false;
    return err == EXDEV ? 0 : err;
}

/* The moves of cbfs_rename_at, with sc opened where a sidecar moves.
 * fs->names_lock held. @return 0 or errno. */
static int cbfs_rename_moves(struct cbfs_fs *fs, struct cbfs_rename_side *a,
                             struct cbfs_rename_side *b, unsigned int flags, bool same,
                             const struct cbfs_rename_sc *sc)
{
    cbfs_assert_held(&fs->names_lock);
    int err;
    /* Anything but a directory that takes b's name: a sidecar there (a
     * replaced compressed file's, or a leftover) goes out of the way first.
     * For a plain file, a symlink, a fifo, so that a crash in between leaves
     * no plain file beside it, and none is left behind at all. For a
     * compressed file, so that a crash between its data file's rename and its
     * sidecar's leaves b's name with a's frames and no sidecar (rebuilt from
     * the frames at the next open), not with the replaced file's sidecar,
     * which the open refuses as a leftover (EIO until cbfs fsck --repair).
     * It is moved aside, not removed, so that a failed rename can put it
     * back: b may be a file its frames alone cannot index (damage, a block
     * size they do not prove). */
    const bool clear_b = !S_ISDIR(a->st.st_mode) && b->sc[0] && !same &&
                         !(flags & RENAME_EXCHANGE) &&
                         !(b->exists && ((flags & RENAME_NOREPLACE) || S_ISDIR(b->st.st_mode)));
    bool aside = false;
    char aside_path[CBFS_STORE_ASIDE_MAX];
    if (clear_b && (err = cbfs_rename_aside(fs, b, a->has_sc, aside_path, &aside)) != 0) {
        cbfs_log_err("rename '%s' -> '%s': cannot move the sidecar at the target aside: %s",
                     a->name, b->name, strerror(err));
        return err;
    }
    /* Exchanged names keep their sidecars' names: a leftover sidecar at a
     * name that holds no regular file (a crash's, or of a lost file) would
     * end up beside a plain file moved there, which would then read as
     * compressed with another file's index. Such a name owns no sidecar. */
    if ((flags & RENAME_EXCHANGE) && ((err = cbfs_rename_drop_leftover(fs, a)) != 0 ||
                                      (err = cbfs_rename_drop_leftover(fs, b)) != 0))
        return err;
    /* A sidecar that goes to a name where none was moved away (a free name, a
     * plain file's, an exchange with a side that has none) needs an entry
     * no removal frees: room for it first. */
    const bool xchg = flags & RENAME_EXCHANGE;
    if (!same && !aside && a->has_sc && !(xchg && b->has_sc) &&
        (err = cbfs_rename_make_room(fs, a, b, sc->aat, sc->aname, sc->bat, sc->bname)) != 0)
        return err;
    if (!same && xchg && b->has_sc && !a->has_sc &&
        (err = cbfs_rename_make_room(fs, b, a, sc->bat, sc->bname, sc->aat, sc->aname)) != 0)
        return err;
    bool xa = false, xb = false;
    char apath[CBFS_STORE_ASIDE_MAX], bpath[CBFS_STORE_ASIDE_MAX];
    if (!same && xchg && (err = cbfs_rename_xchg_aside(fs, a, b, apath, &xa, bpath, &xb)) != 0) {
        cbfs_log_err("exchange of '%s' and '%s': cannot move their sidecars aside: %s", a->name,
                     b->name, strerror(err));
        return err;
    }
    int moved = renameat2(a->fd, a->name, b->fd, b->name, flags);
    if (moved == -1 && (errno == ENOTEMPTY || errno == EEXIST) && S_ISDIR(a->st.st_mode) &&
        b->exists && S_ISDIR(b->st.st_mode) && !(flags & (RENAME_NOREPLACE | RENAME_EXCHANGE))) {
        /* a directory that lists as empty is replaced, as rmdir removes it */
        const cbfs_err e = cbfs_store_empty_dir(fs->opt.layout, b->fd, b->name);
        if (e) return cbfs_err_errno(e);
        moved = renameat2(a->fd, a->name, b->fd, b->name, flags);
    }
    if (moved == -1) {
        err = errno;
        if (aside) cbfs_sidecar_restore(fs, aside_path, b->fd, b->sc, "rename over", b->name, err);
        if (xa) cbfs_sidecar_restore(fs, apath, a->fd, a->sc, "exchange", a->name, err);
        if (xb) cbfs_sidecar_restore(fs, bpath, b->fd, b->sc, "exchange", b->name, err);
        return err;
    }
    if (aside) cbfs_sidecar_drop(fs, aside_path, "rename over", b->name);
    if (same) return 0;
    int r = 0;
    if (xa || xb) {
        /* from the store root's .cbfs/, through the directories held open
         * (struct cbfs_rename_sc): no new descriptor */
        if (xa && renameat2(fs->opt.store_fd, apath, sc->bat, sc->bname, 0) == -1)
            cbfs_log_err("exchange of '%s' and '%s': the sidecar of '%s' stays in %s (%s): "
                         "cbfs fsck --repair moves it to '%s'",
                         a->name, b->name, a->name, apath, strerror(errno), b->name);
        if (xb && renameat2(fs->opt.store_fd, bpath, sc->aat, sc->aname, 0) == -1)
            cbfs_log_err("exchange of '%s' and '%s': the sidecar of '%s' stays in %s (%s): "
                         "cbfs fsck --repair moves it to '%s'",
                         a->name, b->name, b->name, bpath, strerror(errno), a->name);
    } else if (flags & RENAME_EXCHANGE) {
        if (a->has_sc && b->has_sc)
            r = renameat2(sc->aat, sc->aname, sc->bat, sc->bname, RENAME_EXCHANGE);
        else if (a->has_sc)
            r = renameat2(sc->aat, sc->aname, sc->bat, sc->bname, 0);
        else if (b->has_sc)
            r = renameat2(sc->bat, sc->bname, sc->aat, sc->aname, 0);
    } else if (a->has_sc) {
        r = renameat2(sc->aat, sc->aname, sc->bat, sc->bname, 0); /* the target's went first */
    }
    /* The rename has happened (the replaced file is gone, the names moved):
     * it succeeds, as the caller and the kernel's dentries must see it. */
    if (r == -1)
        cbfs_log_err("rename '%s' -> '%s': the data file moved but its sidecar did not (%s); "
                     "the file will be rebuilt from its frames at next open (if they do not "
                     "prove its block size: move the sidecar to its new name by hand, or "
                     "cbfs fsck --repair --block-size SIZE)",
                     a->name, b->name, strerror(errno));
    /* Locations follow the names. A replaced target loses its name (it keeps
     * working through open fds). */
    if (b->exists && b->reg && !(flags & RENAME_EXCHANGE)) {
        struct cbfs_inode *const old = cbfs_inode_find(fs, b->st.st_dev, b->st.st_ino);
        if (old) {
            cbfs_inode_clear_location(fs, old, b->dir, b->name);
            cbfs_inode_unref(fs, old, 1);
        }
    }
    if (a->reg) cbfs_rename_relocate(fs, &a->st, b->dir, b->name);
    if ((flags & RENAME_EXCHANGE) && b->reg) cbfs_rename_relocate(fs, &b->st, a->dir, a->name);
    return 0;
}

/* rename with both directories pinned, fs->names_lock held. @return 0 or errno. */
static int cbfs_rename_at(struct cbfs_fs *fs, struct cbfs_rename_side *a,
                          struct cbfs_rename_side *b, unsigned int flags)
{
    cbfs_assert_held(&fs->names_lock);
    int err;
    if ((err = cbfs_rename_probe(fs, a)) != 0 || (err = cbfs_rename_probe(fs, b)) != 0) return err;
    if (!a->exists) return ENOENT;
    if ((a->has_sc && !b->sc[0]) || ((flags & RENAME_EXCHANGE) && b->has_sc && !a->sc[0]))
        return ENAMETOOLONG;
    /* the sidecars' new homes exist before the data files move */
    if ((a->has_sc && (err = cbfs_inode_sidecar_dir(fs, b->fd)) != 0) ||
        ((flags & RENAME_EXCHANGE) && b->has_sc && (err = cbfs_inode_sidecar_dir(fs, a->fd)) != 0))
        return err;
    /* Same file under both names: rename(2) does nothing, and neither may we. */
    const bool same = b->exists && a->st.st_dev == b->st.st_dev && a->st.st_ino == b->st.st_ino;
    struct cbfs_rename_sc sc = {.aat = -1, .bat = -1, .aname = a->sc, .bname = b->sc};
    if (!same && (a->has_sc || ((flags & RENAME_EXCHANGE) && b->has_sc))) {
        int r;
        CBFS_FDCACHE_RETRY(&fs->fdc, r, cbfs_store_at_open(a->fd, &sc.aname, &sc.aat));
        if (r == 0) CBFS_FDCACHE_RETRY(&fs->fdc, r, cbfs_store_at_open(b->fd, &sc.bname, &sc.bat));
        if (r == -1) {
            err = errno;
            if (sc.aat != -1) cbfs_store_at_close(a->fd, sc.aat);
            return err;
        }
    }
    err = cbfs_rename_moves(fs, a, b, flags, same, &sc);
    if (sc.aat != -1) cbfs_store_at_close(a->fd, sc.aat);
    if (sc.bat != -1) cbfs_store_at_close(b->fd, sc.bat);
    return err;
}

void cbfs_op_rename(fuse_req_t req, fuse_ino_t parent, const char *name, fuse_ino_t newparent,
                    const char *newname, unsigned int flags)
{
    struct cbfs_fs *const fs = cbfs_req_fs(req);
    struct cbfs_rename_side a = {.dir = cbfs_inode_get(fs, parent), .name = name};
    struct cbfs_rename_side b = {.dir = cbfs_inode_get(fs, newparent), .name = newname};
    int err;

    if (flags & ~(unsigned)(RENAME_NOREPLACE | RENAME_EXCHANGE)) {
        fuse_reply_err(req, EINVAL);
        return;
    }
    if ((err = cbfs_inode_name_check(fs, a.dir, name, "rename")) != 0 ||
        (err = cbfs_inode_name_check(fs, b.dir, newname, "rename to")) != 0) {
        fuse_reply_err(req, err);
        return;
    }
    if (!cbfs_pin_dir(req, fs, a.dir, &a.fd)) return;
    err = cbfs_inode_pin(fs, b.dir, &b.fd);
    if (err == 0) {
        /* a replaced target the kernel may still hold keeps its fd (before
         * names_lock: the hold takes the target's inode->lock) */
        struct cbfs_inode_hold hold = {.inode = NULL};
        /* the kernel's times SETATTRs after it: of the object moved, of the
         * one exchanged with it, of a replaced one that keeps another name
         * (flushhold.h; before names_lock too) */
        struct cbfs_flush_hold fa, fb;
        err = cbfs_flush_hold_take_name(fs, a.fd, name, false, &fa);
        if (err == 0 && (err = cbfs_flush_hold_take_name(fs, b.fd, newname,
                                                         !(flags & RENAME_EXCHANGE), &fb)) != 0)
            cbfs_flush_hold_keep(fs, &fa, false);
        if (err == 0) {
            if (!(flags & (RENAME_NOREPLACE | RENAME_EXCHANGE)))
                cbfs_inode_hold_name(fs, b.fd, newname, &hold);
            cbfs_mutex_lock(&fs->names_lock);
            err = cbfs_rename_at(fs, &a, &b, flags);
            cbfs_mutex_unlock(&fs->names_lock);
            cbfs_inode_hold_end(fs, &hold);
            cbfs_flush_hold_keep(fs, &fa, err == 0);
            cbfs_flush_hold_keep(fs, &fb, err == 0);
        }
        cbfs_inode_unpin(fs, b.dir);
    }
    cbfs_inode_unpin(fs, a.dir);
    fuse_reply_err(req, err);
}

/* Finding files for the cbfs command: maps a user path (in a store, or inside
 * a mounted cbfs via /proc/self/mountinfo, where its claim is taken) to a
 * store location, and walks a store tree (sorted, no symlinks followed, the
 * names the mount hides skipped: see the layout rules in cbfs/store.h).
 * Opening what it finds: file.c. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/statfs.h>
#include <time.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "cbfs/util.h"
#include "tools/tool.h"

/* Is abs at or below mnt? @return the length of mnt's prefix in abs, or 0. */
static size_t tool_under(const char *abs, const char *mnt)
{
    const size_t n = strlen(mnt);
    if (strcmp(mnt, "/") == 0) return 1;
    if (strncmp(abs, mnt, n) == 0 && (abs[n] == '\0' || abs[n] == '/')) return n;
    return 0;
}

/* A fuse.cbfs mount as /proc/self/mountinfo shows it. */
struct tool_mount {
    char *point;      /* its mount point */
    char *store;      /* its source field (the fsname): the store it claims to serve */
    char *root;       /* the directory of that store it shows: "/", or the one below
                         that a bind mount of a directory of the mount shows */
    const char *rest; /* the part of the path looked up below the mount point */
    long uid;         /* user_id= of its super options: who made it; -1 not shown */
};

static void tool_mount_free(struct tool_mount *m)
{
    free(m->point);
    free(m->store);
    free(m->root);
    memset(m, 0, sizeof *m);
}

/* The user_id= of a FUSE mount's super options (who made it), or -1. */
static long tool_mount_uid(const char *opts)
{
    for (const char *p = opts; p && *p; p = strchr(p, ',') ? strchr(p, ',') + 1 : NULL) {
        if (strncmp(p, "user_id=", 8) != 0) continue;
        char *end;
        errno = 0;
        const unsigned long v = strtoul(p + 8, &end, 10);
        return errno || end == p + 8 || (*end && *end != ',') || v > INT32_MAX ? -1 : (long)v;
    }
    return -1;
}

/* Finds the innermost fuse.cbfs mount containing abs (the last one listed at
 * that mount point: the topmost), from /proc/self/mountinfo, which, unlike
 * /proc/self/mounts, says which directory a bind mount shows and who
 * made a FUSE mount. @return true with *m filled (tool_mount_free). */
static bool tool_find_mount(const char *abs, struct tool_mount *m)
{
    memset(m, 0, sizeof *m);
    FILE *const mi = fopen("/proc/self/mountinfo", "re");
    if (!mi) return false;
    char *line = NULL;
    size_t lcap = 0, best = 0;
    struct cbfs_mountinfo e;
    while (getline(&line, &lcap, mi) > 0) {
        if (!cbfs_mountinfo_parse(line, &e) || strcmp(e.type, CBFS_FS_TYPE) != 0) continue;
        const size_t n = tool_under(abs, e.point);
        if (n == 0 || n < best) continue;
        char *const p = strdup(e.point), *const s = strdup(e.source), *const r = strdup(e.root);
        if (!p || !s || !r) {
            free(p);
            free(s);
            free(r);
            continue;
        }
        tool_mount_free(m);
        *m = (struct tool_mount){.point = p,
                                 .store = s,
                                 .root = r,
                                 .rest = abs + (strcmp(e.point, "/") == 0 ? 0 : n),
                                 .uid = tool_mount_uid(e.super)};
        best = n;
    }
    free(line);
    fclose(mi);
    return m->store != NULL;
}

/* Takes m's word for the store it serves: *real (PATH_MAX bytes) gets that
 * store's path without symlinks. Anyone may make a FUSE mount of type
 * fuse.cbfs (fusermount3; mount.cbfs -o fsname=, or any FUSE server of
 * subtype cbfs) that names another's store: root's cbfs fsck --repair or cat
 * of a path in it would then act on that store. So the claim is taken only
 * from a mount made by root, by the owner of the directory it names (the
 * store's root: whose store it is to name), or by the caller (who then acts with its own
 * rights on what it could name itself). The kernel gives user_id= in the
 * user namespace the mount was made in: a tool run in another namespace's
 * mount namespace (nsenter into a container's) reads that namespace's uids.
 * @return CBFS_OK; CBFS_E_NOENT where the store cannot be reached,
 * CBFS_E_PERM where the claim is not taken; why says so (a clause, cap bytes). */
static cbfs_err tool_mount_claim(const struct tool_mount *m, char *real, char *why, size_t cap)
{
    struct stat st;
    if (m->store[0] != '/' || !realpath(m->store, real) || stat(real, &st) != 0) {
        snprintf(why, cap, "claims the store '%s', which cannot be reached", m->store);
        return CBFS_E_NOENT;
    }
    if (m->uid == 0 || (m->uid >= 0 && ((uid_t)m->uid == st.st_uid || (uid_t)m->uid == geteuid())))
        return CBFS_OK;
    char who[32] = "an unknown uid";
    if (m->uid >= 0) snprintf(who, sizeof who, "uid %ld", m->uid);
    snprintf(why, cap,
             "was made by %s and claims the store %s, which uid %u owns: not taken as that "
             "store's (only a mount made by root, by the store's owner or by yourself is)",
             who, real, (unsigned)st.st_uid);
    return CBFS_E_PERM;
}

/* Maps abs inside a cbfs mount to the same path in its store (malloc'd in
 * *out; the store root is its first *root_len bytes), or leaves *out NULL
 * when abs is not on a cbfs mount. A mount whose claim is not taken
 * (tool_mount_claim) or that hides its store is refused: msg says why. */
static cbfs_err tool_map_mount(const char *abs, char **out, size_t *root_len, char *msg,
                               size_t cap)
{
    struct tool_mount m;
    *out = NULL;
    if (!tool_find_mount(abs, &m)) return CBFS_OK;
    char real[PATH_MAX], why[2 * PATH_MAX];
    cbfs_err e = tool_mount_claim(&m, real, why, sizeof why);
    if (e) {
        snprintf(msg, cap, "%s is on the cbfs mount %s: it %s", abs, m.point, why);
    } else if (strcmp(real, m.point) == 0) {
        snprintf(msg, cap,
                 "%s is on an in-place cbfs mount: its store %s is hidden by the mount; "
                 "unmount it first (or mount the store elsewhere)",
                 abs, real);
        e = CBFS_E_NOTSUP;
    } else {
        /* a bind mount of a directory of the mount shows that directory */
        const char *const below = strcmp(m.root, "/") == 0 ? "" : m.root;
        const size_t len = strlen(real) + strlen(below) + strlen(m.rest) + 1;
        *out = malloc(len);
        if (*out) {
            snprintf(*out, len, "%s%s%s", real, below, m.rest);
            *root_len = strlen(real);
        } else {
            e = CBFS_E_NOMEM;
        }
    }
    tool_mount_free(&m);
    return e;
}

bool tool_loc_not_cbfs(const struct tool_loc *loc, const char *sub, uint64_t cbfs_files)
{
    if (cbfs_files || loc->in_store) return false;
    tool_err(sub, "%s is not a cbfs store or file (no .cbfs/ directory, no compressed file)",
             loc->display);
    return true;
}

/* The layout rules of the tree at rfd as the tools read it: a store's (in_store:
 * rfd is its root) by cbfs_store_read_layout, the mount's rules, with its
 * store.conf's block size as the candidate for a lost sidecar; outside any
 * store (a store that lost its .cbfs/, a copy of part of one) nothing says
 * which: layout 2 only where an index directory shows it (within the probe's
 * reach) and no sidecar of layout 1 says otherwise, else layout 1, as such
 * trees always were, and no block size. One walk of the tree tells both. The
 * one rule for a path given (tool_loc_resolve) and a store the walk meets
 * (tool_walk_store). @return as cbfs_store_read_layout (why: one sentence),
 * *lay as it found it (its state for the caller's refusal), *store filled. */
static cbfs_err tool_tree_layout(int rfd, bool in_store, struct cbfs_store_layout *lay,
                                 struct tool_store *store, char *why, size_t cap)
{
    const cbfs_err e = cbfs_store_read_layout(rfd, lay, why, cap);
    if (e) return e;
    if (!in_store && lay->state == CBFS_LAYOUT_NO_CONF && !lay->index_dir_seen)
        lay->layout = CBFS_LAYOUT_SUFFIX;
    *store = (struct tool_store){.layout = lay->layout,
                                 .bs = {.size = in_store ? lay->block_size : 0}};
    return CBFS_OK;
}

cbfs_err tool_loc_resolve(const char *path, bool cut_short_ok, struct tool_loc *loc, char *msg,
                          size_t cap)
{
    memset(loc, 0, sizeof *loc);
    loc->dirfd = -1;
    char abs[PATH_MAX];
    char *mapped = NULL;
    size_t root_len = 0;
    cbfs_err e;
    if (!realpath(path, abs)) {
        e = cbfs_err_from_errno(errno);
        snprintf(msg, cap, "%s: %s", path, cbfs_err_str(e));
        return e;
    }
    e = tool_map_mount(abs, &mapped, &root_len, msg, cap);
    if (e) return e;
    const char *const p = mapped ? mapped : abs;
    struct stat st;
    if (lstat(p, &st) != 0) {
        e = cbfs_err_from_errno(errno);
        snprintf(msg, cap, "%s: %s", p, cbfs_err_str(e));
        goto fail;
    }
    loc->via_mount = mapped != NULL;
    loc->in_store = loc->via_mount || cbfs_store_root_of(p, true, &root_len);
    loc->at_root = loc->in_store && S_ISDIR(st.st_mode) && strlen(p) == root_len;
    /* The tree whose layout counts: the store's; outside any store, the
     * directory given (tool_tree_layout), or a file's own directory alone
     * (cbfs_store_dir_layout), not a walk of whatever tree holds it. */
    char root[PATH_MAX];
    const bool lone_file = !loc->in_store && !S_ISDIR(st.st_mode);
    if (loc->in_store)
        snprintf(root, sizeof root, "%.*s", (int)root_len, p);
    else if (!lone_file)
        snprintf(root, sizeof root, "%s", p);
    else {
        const char *const sl = strrchr(p, '/');
        snprintf(root, sizeof root, "%.*s", sl == p ? 1 : (int)(sl - p), p);
    }
    struct cbfs_store_layout *const lay = calloc(1, sizeof *lay); /* PATH_MAX inside */
    if (!lay) goto nomem;
    const int rfd = open(root, O_PATH | O_DIRECTORY | O_CLOEXEC);
    char why[512] = "";
    e = rfd < 0 ? cbfs_err_from_errno(errno) : CBFS_OK;
    if (!e && lone_file) {
        lay->layout = loc->store.layout = cbfs_store_dir_layout(rfd);
        lay->state = CBFS_LAYOUT_NO_CONF;
    } else if (!e) {
        e = tool_tree_layout(rfd, loc->in_store, lay, &loc->store, why, sizeof why);
    }
    if (rfd >= 0) close(rfd);
    if (e) {
        snprintf(msg, cap, "%s: %s", root, why[0] ? why : cbfs_err_str(e));
        free(lay);
        goto fail;
    }
    loc->layout_state = lay->state;
    if (lay->state == CBFS_LAYOUT_CUT_SHORT && !cut_short_ok) {
        cbfs_store_layout_refusal(lay, root, msg, cap);
        free(lay);
        e = CBFS_E_INVAL;
        goto fail;
    }
    free(lay);
    /* shown as the walk shows the names below it */
    const size_t dcap = 4 * strlen(path) + 1;
    loc->display = malloc(dcap);
    if (!loc->display) goto nomem;
    (void)tool_name_escape(loc->display, dcap, path);
    /* A sidecar, an index directory or the store's own .cbfs/ is no file or
     * directory of the mount: walked as one, its bytes would be taken for
     * data. Outside a store the path is absolute: no root to tell .cbfs/ by. */
    const char *rel = loc->in_store ? p + root_len : p;
    if (loc->in_store && *rel == '/') rel++;
    if (!loc->at_root && cbfs_store_path_reserved(loc->store.layout, rel)) {
        snprintf(msg, cap,
                 S_ISDIR(st.st_mode) ? "%s is the store's own (an index directory or %s/), not "
                                       "a directory of its files"
                                     : "%s is an index sidecar or the store's own (in %s/); "
                                       "name a data file instead",
                 path, CBFS_STORE_DIR);
        e = CBFS_E_INVAL;
        goto fail;
    }
    if (S_ISDIR(st.st_mode)) {
        loc->is_dir = true;
        loc->name = strdup(".");
        loc->dirfd = open(p, O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else if (S_ISREG(st.st_mode)) {
        const char *const slash = strrchr(p, '/');
        loc->name = strdup(slash + 1);
        char dir[PATH_MAX];
        snprintf(dir, sizeof dir, "%.*s", slash == p ? 1 : (int)(slash - p), p);
        loc->dirfd = open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    } else {
        snprintf(msg, cap, "%s is neither a regular file nor a directory", path);
        e = CBFS_E_INVAL;
        goto fail;
    }
    if (!loc->name) goto nomem;
    if (loc->dirfd < 0) {
        e = cbfs_err_from_errno(errno);
        snprintf(msg, cap, "%s: %s", p, cbfs_err_str(e));
        goto fail;
    }
    free(mapped);
    return CBFS_OK;
nomem:
    e = CBFS_E_NOMEM;
    snprintf(msg, cap, "%s", cbfs_err_str(e));
fail:
    free(mapped);
    tool_loc_free(loc);
    return e;
}

void tool_loc_free(struct tool_loc *loc)
{
    if (loc->dirfd >= 0) close(loc->dirfd);
    free(loc->name);
    free(loc->display);
    memset(loc, 0, sizeof *loc);
    loc->dirfd = -1;
}

struct tool_walker {
    const struct tool_store *store;
    bool outside;      /* the tree walked is in no store: a store met below it is
                          its own (cbfs_store_nested_root) */
    bool refuse_stores; /* such a store is not walked, an error (tool_loc.one_store) */
    bool no_daemon;     /* no daemon serves the store walked (tool_loc.no_daemon) */
    const char *sub;
    bool silent; /* errors counted, not printed (tool_walk_silent) */
    tool_walk_fn fn;
    void *arg;
    unsigned *errors;
};

/* An error of walker w: counted, and printed for w->sub unless w is silent. */
__attribute__((format(printf, 2, 3))) static void tool_walk_err(const struct tool_walker *w,
                                                                const char *fmt, ...)
{
    (*w->errors)++;
    if (w->silent) return;
    va_list ap;
    va_start(ap, fmt);
    tool_verr(w->sub, fmt, ap);
    va_end(ap);
}

/* dir "/" name into buf, name as the tools print it (tool_name_escape).
 * @return false if it did not fit (buf then holds a cut display). */
static bool tool_display_join(char *buf, size_t cap, const char *dir, const char *name)
{
    const int n = snprintf(buf, cap, "%s/", dir);
    if (n < 0 || (size_t)n >= cap) return false;
    return tool_name_escape(buf + n, cap - (size_t)n, name) != (size_t)-1;
}

bool tool_recent(const struct stat *st)
{
    struct timespec now;
    if (clock_gettime(CLOCK_REALTIME, &now) != 0) return true;
    /* a ctime ahead of the clock (a store on NFS, its server's clock ahead)
     * is recent too */
    return now.tv_sec - st->st_ctim.tv_sec <= TOOL_RECENT_S;
}

void tool_settle(void)
{
    (void)nanosleep(&(struct timespec){0, TOOL_SETTLE_MS * 1000000L}, NULL);
}

/* Is the sidecar sname in sdir (stat sst) still without its data file dname in
 * ddir? Where the sidecar or ddir changed in the last TOOL_RECENT_S seconds,
 * after a pause (tool_settle): a rename through a mount moves the data file
 * and then its sidecar, and an unlink removes them one after the other, so a
 * walk beside a live mount meets the sidecar alone for a moment
 * (tool_file_look_again's rule, for names). Where w's caller keeps every
 * daemon off the store (fsck under .cbfs/lock) there is no such moment: what
 * it meets stays as it is, and the pause (each recent orphan's, in each of
 * fsck's two or three walks) would only cost time. */
static bool tool_orphan_settled(const struct tool_walker *w, int sdir, const char *sname, int ddir,
                                const char *dname, const struct stat *sst)
{
    struct stat st;
    if (w->no_daemon) return true;
    if (!tool_recent(sst) && !(fstat(ddir, &st) == 0 && tool_recent(&st))) return true;
    tool_settle();
    return fstatat(sdir, sname, &st, AT_SYMLINK_NOFOLLOW) == 0 && st.st_ino == sst->st_ino &&
           fstatat(ddir, dname, &st, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT;
}

/* The kind of an orphan sidecar of stat st. */
static enum tool_ent_kind tool_orphan_kind(const struct stat *st)
{
    return cbfs_index_holds_no_record((uint64_t)st->st_size) ? TOOL_ENT_ORPHAN_EMPTY
                                                             : TOOL_ENT_ORPHAN_SIDECAR;
}

const char *tool_orphan_what(enum tool_ent_kind kind)
{
    if (kind == TOOL_ENT_ORPHAN_NOT_REGULAR)
        return "not a regular file where cbfs keeps a sidecar, and no data file of its name "
               "(cbfs never makes one: it indexes nothing; not opened, not followed)";
    if (kind == TOOL_ENT_ASIDE)
        return "sidecar moved aside by a rename over its file or by its unlink, which a crash "
               "cut short";
    return kind == TOOL_ENT_ORPHAN_EMPTY
               ? "orphan sidecar: its data file is missing, and it indexes nothing (as a "
                 "crash leaves of a file created and never flushed: nothing of it was "
                 "acknowledged)"
               : "orphan sidecar: its data file is missing";
}

const char *tool_mode_what(mode_t mode)
{
    switch (mode & S_IFMT) {
    case S_IFREG:
        return "a regular file";
    case S_IFDIR:
        return "a directory";
    case S_IFLNK:
        return "a symbolic link";
    case S_IFIFO:
        return "a FIFO";
    case S_IFSOCK:
        return "a socket";
    case S_IFCHR:
        return "a character device";
    case S_IFBLK:
        return "a block device";
    default:
        return "not a regular file";
    }
}

/* Layout 2: reports the sidecars in dirfd's index directory (display: its
 * path) whose data file is not in dirfd. Never inlined: its PATH_MAX buffer
 * would then sit in every level of tool_walk_dir's recursion (a 2500-deep
 * tree overran the stack, t_tool_deep_tree). */
__attribute__((noinline)) static int tool_walk_index(const struct tool_walker *w, int dirfd,
                                                     const char *display)
{
    struct stat st;
    if (fstatat(dirfd, CBFS_INDEX_DIR, &st, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISDIR(st.st_mode))
        return 0;
    const int idx = openat(dirfd, CBFS_INDEX_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    char **names = NULL;
    size_t n = 0;
    const int rd = idx < 0 ? -1 : openat(idx, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const cbfs_err e = rd < 0 ? cbfs_err_from_errno(errno) : cbfs_dir_read_names(rd, &names, &n);
    if (e) {
        tool_walk_err(w, "%s: cannot read directory: %s", display, cbfs_err_str(e));
        if (idx >= 0) close(idx);
        return 0;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        char path[PATH_MAX];
        /* cut: shown cut, as tool_walk_dir shows its entries (skipped, an
         * orphan deeper than PATH_MAX was not said at all, helper-67) */
        (void)tool_display_join(path, sizeof path, display, names[i]);
        struct stat dst;
        if (fstatat(idx, names[i], &st, AT_SYMLINK_NOFOLLOW) != 0 ||
            fstatat(dirfd, names[i], &dst, AT_SYMLINK_NOFOLLOW) == 0 || errno != ENOENT)
            continue; /* raced away, or its data file is there (whose open checks it) */
        /* not regular: no mount makes one, none is halfway through a rename */
        if (!S_ISREG(st.st_mode))
            rc = w->fn(w->arg, w->store, idx, names[i], path, TOOL_ENT_ORPHAN_NOT_REGULAR);
        else if (tool_orphan_settled(w, idx, names[i], dirfd, names[i], &st))
            rc = w->fn(w->arg, w->store, idx, names[i], path, tool_orphan_kind(&st));
    }
    cbfs_dir_free_names(names, n);
    close(idx);
    return rc;
}

static int tool_walk_dir(const struct tool_walker *w, int dirfd, const char *display,
                         bool in_root, unsigned depth);

/* The directory sub (display: its path), met by a walk of a tree in no store,
 * is a store root (cbfs_store_nested_root): its files are read by its own
 * rules, as if it had been given (tool_tree_layout: its layout and its
 * store.conf's block size), its .cbfs/ skipped as the root's; below it .cbfs
 * is an ordinary name again. A store whose upgrade was cut short, or whose
 * store.conf cannot be read, is not walked: an error, as it is given alone.
 * fsck (refuse_stores) checks one store under its lock: a store below is not
 * its to check or repair. Never inlined: its buffers would sit in every
 * level of tool_walk_dir's recursion. */
__attribute__((noinline)) static int tool_walk_store(const struct tool_walker *w, int sub,
                                                     const char *display, unsigned depth)
{
    if (w->refuse_stores) {
        tool_walk_err(w, "%s is a store of its own (it holds %s/): not checked; run cbfs %s on it",
                      display, CBFS_STORE_DIR, w->sub);
        return 0;
    }
    struct cbfs_store_layout *const lay = malloc(sizeof *lay); /* PATH_MAX inside */
    struct tool_store store;
    char why[512] = "";
    const cbfs_err e = lay ? tool_tree_layout(sub, true, lay, &store, why, sizeof why)
                           : CBFS_E_NOMEM;
    if (e || lay->state == CBFS_LAYOUT_CUT_SHORT) {
        if (e) {
            tool_walk_err(w, "%s: %s", display, why[0] ? why : cbfs_err_str(e));
        } else {
            (*w->errors)++;
            if (!w->silent) tool_layout_refusal(w->sub, lay, display);
        }
        free(lay);
        return 0;
    }
    free(lay);
    struct tool_walker in = *w;
    in.store = &store;
    in.outside = false;
    in.no_daemon = false; /* a lock on the tree above is none of this store's */
    return tool_walk_dir(&in, sub, display, true, depth);
}

/* Is the directory sub (st: its stat; display: its path; parent: the
 * directory holding it) the mount point of a cbfs? Its files read through the mount as the daemon
 * serves them, decoded, never as they are stored: such a directory is not
 * walked. The files are its store's, walked where the store is (said on
 * stderr); an in-place mount hides its store: an error, as where it is
 * given (tool_map_mount). Never inlined, as tool_walk_store. */
__attribute__((noinline)) static bool tool_walk_mount(const struct tool_walker *w, int sub,
                                                      const struct stat *st, int parent,
                                                      const char *display)
{
    struct stat pst;
    struct statfs sf;
    if (fstat(parent, &pst) != 0 || st->st_dev == pst.st_dev ||
        fstatfs(sub, &sf) != 0 || sf.f_type != FUSE_SUPER_MAGIC)
        return false;
    char abs[PATH_MAX];
    if (cbfs_procfd_path(sub, abs, sizeof abs) != CBFS_OK || !abs[0]) return false;
    struct tool_mount m;
    if (!tool_find_mount(abs, &m)) return false;
    if (*m.rest != '\0') { /* another FUSE file system: a tree like any other */
        tool_mount_free(&m);
        return false;
    }
    char real[PATH_MAX], why[2 * PATH_MAX];
    const cbfs_err ce = tool_mount_claim(&m, real, why, sizeof why);
    if (ce == CBFS_E_PERM) {
        /* not walked either: its files are whatever its server says */
        tool_walk_err(w, "%s is a cbfs mount: it %s; not walked", display, why);
    } else if (ce == CBFS_OK && strcmp(real, abs) == 0) {
        tool_walk_err(w,
                      "%s is an in-place cbfs mount: its store is hidden by the mount, not "
                      "checked; unmount it first",
                      display);
    } else if (!w->silent) {
        tool_err(w->sub,
                 "%s is a cbfs mount of %s%s: not walked (its files are that store's; name the "
                 "store to check it)",
                 display, m.store, strcmp(m.root, "/") == 0 ? "" : m.root);
    }
    tool_mount_free(&m);
    return true;
}

/* in_root: dirfd is the store root, where the store's metadata is hidden;
 * depth: directories above dirfd in the walk. The path of an entry is on the
 * heap: PATH_MAX bytes on the stack per level overflowed it in a deep tree. */
static int tool_walk_dir(const struct tool_walker *w, int dirfd, const char *display,
                         bool in_root, unsigned depth)
{
    if (depth > CBFS_STORE_DEPTH_MAX) {
        tool_walk_err(w, "%s: more than %u directories deep: not walked", display,
                      CBFS_STORE_DEPTH_MAX);
        return 0;
    }
    const int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    char **names = NULL;
    size_t n = 0;
    char *const path = malloc(PATH_MAX);
    const cbfs_err e = !path    ? CBFS_E_NOMEM
                       : fd < 0 ? cbfs_err_from_errno(errno)
                                : cbfs_dir_read_names(fd, &names, &n);
    if (e) {
        if (fd >= 0 && !path) close(fd);
        free(path);
        tool_walk_err(w, "%s: cannot read directory: %s", display, cbfs_err_str(e));
        return 0;
    }
    int rc = 0;
    for (size_t i = 0; i < n && rc == 0; i++) {
        const char *const name = names[i];
        const bool sidecar =
            w->store->layout == CBFS_LAYOUT_SUFFIX && cbfs_store_is_sidecar_name(name);
        (void)tool_display_join(path, PATH_MAX, display, name); /* cut: shown cut */
        if (w->store->layout == CBFS_LAYOUT_INDEXDIR && strcmp(name, CBFS_INDEX_DIR) == 0) {
            rc = tool_walk_index(w, dirfd, path);
            continue;
        }
        if (cbfs_store_name_hidden(w->store->layout, name, in_root) && !sidecar) continue; /* .cbfs/ */
        struct stat st;
        if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* raced away */
        if (sidecar && !S_ISREG(st.st_mode)) {
            /* Hidden by the mount too, and never walked into: where its data file
             * is gone it is reported (no mount makes one: no settle); where the
             * data file is there, that file's open reports it. A directory named
             * just ".cbfsidx" is a layout-2 index directory, the layout rules'. */
            char data[NAME_MAX + 1];
            struct stat dst;
            if (cbfs_store_data_name(name, data, sizeof data) == CBFS_OK &&
                (data[0] ? fstatat(dirfd, data, &dst, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT
                         : !S_ISDIR(st.st_mode)))
                rc = w->fn(w->arg, w->store, dirfd, name, path, TOOL_ENT_ORPHAN_NOT_REGULAR);
            continue;
        }
        if (S_ISDIR(st.st_mode)) {
            const int sub = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) {
                tool_walk_err(w, "%s: %s", path, cbfs_err_str(cbfs_err_from_errno(errno)));
                continue;
            }
            if (tool_walk_mount(w, sub, &st, dirfd, path))
                ; /* a cbfs mount: its files are its store's */
            else if (cbfs_store_nested_root(w->outside, sub))
                rc = tool_walk_store(w, sub, path, depth + 1);
            else
                rc = tool_walk_dir(w, sub, path, false, depth + 1);
            close(sub);
        } else if (S_ISREG(st.st_mode)) {
            if (!sidecar) {
                rc = w->fn(w->arg, w->store, dirfd, name, path, TOOL_ENT_FILE);
                continue;
            }
            /* A sidecar: only interesting when its data file is gone (".cbfsidx"
             * names none, so it always is). */
            char data[NAME_MAX + 1];
            struct stat dst;
            if (cbfs_store_data_name(name, data, sizeof data) == CBFS_OK &&
                (data[0] == '\0' ||
                 (fstatat(dirfd, data, &dst, AT_SYMLINK_NOFOLLOW) != 0 && errno == ENOENT &&
                  tool_orphan_settled(w, dirfd, name, dirfd, data, &st))))
                rc = w->fn(w->arg, w->store, dirfd, name, path,
                           data[0] ? tool_orphan_kind(&st) : TOOL_ENT_ORPHAN_SIDECAR);
        }
    }
    cbfs_dir_free_names(names, n);
    free(path);
    return rc;
}

static int tool_walk_loc(const struct tool_loc *loc, const char *sub, bool silent, tool_walk_fn fn,
                         void *arg, unsigned *errors)
{
    if (!loc->is_dir)
        return fn(arg, &loc->store, loc->dirfd, loc->name, loc->display, TOOL_ENT_FILE);
    const struct tool_walker w = {.store = &loc->store,
                                  .outside = !loc->in_store,
                                  .refuse_stores = loc->one_store,
                                  .no_daemon = loc->no_daemon,
                                  .sub = sub,
                                  .silent = silent,
                                  .fn = fn,
                                  .arg = arg,
                                  .errors = errors};
    return tool_walk_dir(&w, loc->dirfd, loc->display, loc->at_root, 0);
}

int tool_walk(const struct tool_loc *loc, const char *sub, tool_walk_fn fn, void *arg,
              unsigned *errors)
{
    return tool_walk_loc(loc, sub, false, fn, arg, errors);
}

int tool_walk_silent(const struct tool_loc *loc, tool_walk_fn fn, void *arg, unsigned *errors)
{
    return tool_walk_loc(loc, "", true, fn, arg, errors);
}

unsigned tool_walk_paths(char *const *paths, int n, const struct tool_walk_req *req)
{
    unsigned errors = 0;
    for (int i = 0; i < n; i++) {
        struct tool_loc loc;
        char msg[512];
        if (tool_loc_resolve(paths[i], false, &loc, msg, sizeof msg) != CBFS_OK) {
            tool_err(req->sub, "%s", msg);
            errors++;
            continue;
        }
        /* the walk after it prints and counts the errors of both */
        unsigned pre_errors = 0;
        if (req->pre) tool_walk_silent(&loc, req->pre, req->pre_arg, &pre_errors);
        const uint64_t before = *req->cbfs_files;
        tool_walk(&loc, req->sub, req->fn, req->arg, &errors);
        if (tool_loc_not_cbfs(&loc, req->sub, *req->cbfs_files - before)) errors++;
        tool_loc_free(&loc);
    }
    return errors;
}

void tool_summary_end(unsigned errors)
{
    if (errors) printf(", %u error(s): not all was checked (see above)", errors);
    putchar('\n');
}

void tool_layout_refusal(const char *sub, const struct cbfs_store_layout *lay, const char *root)
{
    char why[2 * PATH_MAX + 512];
    cbfs_store_layout_refusal(lay, root, why, sizeof why);
    tool_err(sub, "%s", why);
}

bool tool_block_size_arg(const char *sub, const char *arg, struct cbfs_bs_hint *bs)
{
    uint64_t v;
    if (cbfs_parse_size(arg, &v) == CBFS_OK && cbfs_block_size_valid(v)) {
        *bs = (struct cbfs_bs_hint){.size = (uint32_t)v, .asserted = true};
        return true;
    }
    char lo[24], hi[24];
    tool_err(sub, "--block-size wants a power of two from %s to %s, not '%s'",
             cbfs_format_size(CBFS_BLOCK_MIN, lo, sizeof lo),
             cbfs_format_size(CBFS_BLOCK_MAX, hi, sizeof hi), arg);
    return false;
}

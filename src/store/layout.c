/* Store layout: which names in a store are cbfs's own (the metadata directory
 * in the root, sidecar names or the index directory everywhere), where a
 * file's sidecar lives in each layout, and which regular files are cbfs
 * files. The rules are written out in include/cbfs/store.h and
 * docs/FORMAT.md; this file is their only implementation, with the one
 * rule for a sidecar's owner, mode and ACL. */
#include <assert.h>
#include <errno.h>
#include <limits.h>
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "cbfs/util.h"

bool cbfs_store_is_sidecar_name(const char *name)
{
    const size_t n = strlen(name);
    return n >= CBFS_STORE_SUFFIX_LEN &&
           memcmp(name + n - CBFS_STORE_SUFFIX_LEN, CBFS_INDEX_SUFFIX, CBFS_STORE_SUFFIX_LEN) == 0;
}

bool cbfs_store_layout_known(unsigned layout)
{
    return layout == CBFS_LAYOUT_SUFFIX || layout == CBFS_LAYOUT_INDEXDIR;
}

size_t cbfs_store_name_max(unsigned layout)
{
    assert(cbfs_store_layout_known(layout));
    return layout == CBFS_LAYOUT_SUFFIX ? CBFS_STORE_NAME_MAX : NAME_MAX;
}

bool cbfs_store_name_hidden(unsigned layout, const char *name, bool in_root)
{
    if (in_root && strcmp(name, CBFS_STORE_DIR) == 0) return true;
    if (layout == CBFS_LAYOUT_SUFFIX) return cbfs_store_is_sidecar_name(name);
    return strcmp(name, CBFS_INDEX_DIR) == 0;
}

nlink_t cbfs_store_dir_nlink(unsigned layout, int dirfd, bool in_root, nlink_t nlink)
{
    struct stat st;
    if (layout != CBFS_LAYOUT_SUFFIX && nlink > 2 &&
        fstatat(dirfd, CBFS_INDEX_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode))
        nlink--;
    if (in_root && nlink > 2 && fstatat(dirfd, CBFS_STORE_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
        S_ISDIR(st.st_mode))
        nlink--;
    return nlink;
}

bool cbfs_store_path_reserved(unsigned layout, const char *path)
{
    const char *const slash = strrchr(path, '/');
    const char *const last = slash ? slash + 1 : path;
    if (cbfs_store_name_hidden(layout, last, false)) return true;
    if (path[0] != '/') { /* from the root: its first component may be the store's own */
        const size_t first = strcspn(path, "/");
        char name[NAME_MAX + 1];
        if (first < sizeof name) {
            memcpy(name, path, first);
            name[first] = '\0';
            if (cbfs_store_name_hidden(layout, name, true)) return true;
        }
    }
    if (layout == CBFS_LAYOUT_SUFFIX) return false; /* a sidecar sits beside its file */
    for (const char *c = path; c < last;) {
        const char *const end = strchr(c, '/');
        if ((size_t)(end - c) == sizeof CBFS_INDEX_DIR - 1 &&
            memcmp(c, CBFS_INDEX_DIR, sizeof CBFS_INDEX_DIR - 1) == 0)
            return true;
        c = end + 1;
    }
    return false;
}

cbfs_err cbfs_store_name_check(unsigned layout, const char *name, bool in_root, bool creating)
{
    if (strlen(name) > cbfs_store_name_max(layout)) return CBFS_E_NAMETOOLONG;
    if (cbfs_store_name_hidden(layout, name, in_root)) return creating ? CBFS_E_PERM : CBFS_E_NOENT;
    return CBFS_OK;
}

cbfs_err cbfs_store_sidecar_path(unsigned layout, const char *name, char *buf, size_t cap)
{
    if (layout == CBFS_LAYOUT_SUFFIX) return cbfs_store_sidecar_name(name, buf, cap);
    const size_t n = strlen(name);
    if (n > NAME_MAX || sizeof CBFS_INDEX_DIR + n >= cap) return CBFS_E_NAMETOOLONG;
    memcpy(buf, CBFS_INDEX_DIR "/", sizeof CBFS_INDEX_DIR);
    memcpy(buf + sizeof CBFS_INDEX_DIR, name, n + 1);
    return CBFS_OK;
}

cbfs_err cbfs_store_sidecar_dir(unsigned layout, int dirfd)
{
    struct stat st;
    if (layout == CBFS_LAYOUT_SUFFIX) return CBFS_OK;
    if (fstatat(dirfd, CBFS_INDEX_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return S_ISDIR(st.st_mode) ? CBFS_OK : CBFS_E_EXIST;
    if (errno != ENOENT) return cbfs_err_from_errno(errno);
    if (mkdirat(dirfd, CBFS_INDEX_DIR, CBFS_INDEX_DIR_MODE) == -1)
        return errno == EEXIST ? CBFS_OK : cbfs_err_from_errno(errno); /* a racing creator */
    /* mode and owner through an fd opened without following: the name may
     * have become a symlink since the mkdirat (a user writing the store) */
    const int fd = openat(dirfd, CBFS_INDEX_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd == -1) return cbfs_err_from_errno(errno);
    cbfs_err e = CBFS_OK;
    if (fchmod(fd, CBFS_INDEX_DIR_MODE) == -1) /* not the umask's */
        e = cbfs_err_from_errno(errno);
    /* the directory's owner: whoever may list the directory owns its index */
    else if (geteuid() == 0 && fstatat(dirfd, "", &st, AT_EMPTY_PATH) == 0 &&
             fchown(fd, st.st_uid, st.st_gid) == -1)
        e = cbfs_err_from_errno(errno);
    close(fd);
    return e;
}

/* The directory that holds path's last name, for a call relative to it:
 * dirfd itself for a plain name, else an fd of path's one directory
 * component opened without following a symlink (cbfs_store_at_done closes
 * it); *path moves on to the last name. @return the fd, or -1 (errno). */
static int cbfs_store_at_dir(int dirfd, const char **path)
{
    const char *const slash = strchr(*path, '/');
    if (!slash) return dirfd;
    const size_t n = (size_t)(slash - *path);
    char dir[NAME_MAX + 1];
    if (n == 0 || n > NAME_MAX || strchr(slash + 1, '/') || slash[1] == '\0') {
        errno = EINVAL; /* only the paths cbfs makes: one directory, one name */
        return -1;
    }
    memcpy(dir, *path, n);
    dir[n] = '\0';
    const int fd = openat(dirfd, dir, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd != -1) *path = slash + 1;
    return fd;
}

/* Closes at unless it is dirfd, keeping errno. @return r (the call's). */
static int cbfs_store_at_done(int dirfd, int at, int r)
{
    if (at != dirfd) {
        const int saved = errno;
        close(at);
        errno = saved;
    }
    return r;
}

int cbfs_store_openat(int dirfd, const char *path, int flags, mode_t mode)
{
    const int at = cbfs_store_at_dir(dirfd, &path);
    return at == -1 ? -1 : cbfs_store_at_done(dirfd, at, openat(at, path, flags, mode));
}

int cbfs_store_fstatat(int dirfd, const char *path, struct stat *st, int flags)
{
    const int at = cbfs_store_at_dir(dirfd, &path);
    return at == -1 ? -1 : cbfs_store_at_done(dirfd, at, fstatat(at, path, st, flags));
}

int cbfs_store_unlinkat(int dirfd, const char *path, int flags)
{
    const int at = cbfs_store_at_dir(dirfd, &path);
    return at == -1 ? -1 : cbfs_store_at_done(dirfd, at, unlinkat(at, path, flags));
}

int cbfs_store_renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                         unsigned int flags)
{
    const int oat = cbfs_store_at_dir(olddirfd, &oldpath);
    if (oat == -1) return -1;
    const int nat = cbfs_store_at_dir(newdirfd, &newpath);
    const int r = nat == -1 ? -1
                            : cbfs_store_at_done(newdirfd, nat,
                                                 renameat2(oat, oldpath, nat, newpath, flags));
    return cbfs_store_at_done(olddirfd, oat, r);
}

int cbfs_store_at_open(int dirfd, const char **path, int *at)
{
    *at = cbfs_store_at_dir(dirfd, path);
    return *at == -1 ? -1 : 0;
}

void cbfs_store_at_close(int dirfd, int at)
{
    (void)cbfs_store_at_done(dirfd, at, 0);
}

int cbfs_store_linkat(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
                      int flags)
{
    const int at = cbfs_store_at_dir(newdirfd, &newpath);
    if (at == -1) return -1;
    return cbfs_store_at_done(newdirfd, at, linkat(olddirfd, oldpath, at, newpath, flags));
}

/* Unlinks the entries of directory fd (consumed): every one, or only those
 * of sidecar names. The caller has found them all stale (cbfs_store_only_index). */
static cbfs_err cbfs_store_unlink_entries(int fd, bool sidecars_only)
{
    DIR *const d = fdopendir(fd);
    if (!d) {
        close(fd);
        return cbfs_err_from_errno(errno);
    }
    cbfs_err e = CBFS_OK;
    for (struct dirent *de; e == CBFS_OK && (de = readdir(d)) != NULL;) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        if (sidecars_only && !cbfs_store_is_sidecar_name(de->d_name)) continue;
        if (unlinkat(dirfd(d), de->d_name, 0) == -1) e = cbfs_err_from_errno(errno);
    }
    closedir(d);
    return e;
}

/* @return true if directory fd holds nothing a listing shows: no entry but
 * CBFS_INDEX_DIR (layout 2), or but regular files of sidecar names (layout 1:
 * with no data file beside them, every one is an orphan; a store whose
 * filesystem gives no d_type keeps them, as before). */
static bool cbfs_store_only_index(unsigned layout, int fd)
{
    const int dup = openat(fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *const d = dup >= 0 ? fdopendir(dup) : NULL;
    if (!d) {
        if (dup >= 0) close(dup);
        return false;
    }
    bool only = true;
    for (struct dirent *de; only && (de = readdir(d)) != NULL;)
        only = strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0 ||
               (layout == CBFS_LAYOUT_SUFFIX
                    ? de->d_type == DT_REG && cbfs_store_is_sidecar_name(de->d_name)
                    : strcmp(de->d_name, CBFS_INDEX_DIR) == 0);
    closedir(d);
    return only;
}

cbfs_err cbfs_store_rmdir(unsigned layout, int dirfd, const char *name)
{
    if (unlinkat(dirfd, name, AT_REMOVEDIR) == 0) return CBFS_OK;
    if (errno != ENOTEMPTY && errno != EEXIST) return cbfs_err_from_errno(errno);
    const cbfs_err e = cbfs_store_empty_dir(layout, dirfd, name);
    if (e) return e;
    return unlinkat(dirfd, name, AT_REMOVEDIR) == 0 ? CBFS_OK : cbfs_err_from_errno(errno);
}

/* cbfs_store_empty_dir with the daemon's own permissions. */
static cbfs_err cbfs_store_empty_dir_once(unsigned layout, int dirfd, const char *name)
{
    /* A directory that lists as empty is removable (and replaceable by a
     * rename), as on any filesystem: what keeps it in the store are
     * sidecars only (orphans, or layout 2's index directory). */
    const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return cbfs_err_from_errno(errno);
    cbfs_err e = CBFS_E_NOTEMPTY;
    if (cbfs_store_only_index(layout, fd)) {
        /* layout 1: the orphan sidecars; layout 2: the index directory's
         * entries, then the index directory */
        const bool suffix = layout == CBFS_LAYOUT_SUFFIX;
        const int sub = openat(fd, suffix ? "." : CBFS_INDEX_DIR,
                               O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        e = sub < 0 ? cbfs_err_from_errno(errno) : cbfs_store_unlink_entries(sub, suffix);
        if (e == CBFS_OK && !suffix && unlinkat(fd, CBFS_INDEX_DIR, AT_REMOVEDIR) == -1)
            e = cbfs_err_from_errno(errno);
    }
    close(fd);
    return e;
}

cbfs_err cbfs_store_empty_dir(unsigned layout, int dirfd, const char *name)
{
    cbfs_err e = cbfs_store_empty_dir_once(layout, dirfd, name);
    if (e != CBFS_E_ACCES) return e;
    /* A directory its owner made read-only (0555, or 0333 and the like)
     * after emptying it: rmdir needs only the parent's write permission,
     * but listing and removing its sidecars needs the directory's, which a
     * daemon without CAP_DAC_OVERRIDE (a user's own mount) lacks. Such a
     * daemon owns the store's directories: it lets itself in for the
     * removal and puts the mode back before the caller's rmdir or rename. */
    const int pfd = openat(dirfd, name, O_PATH | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (pfd < 0) return e;
    struct stat st;
    char path[CBFS_PROCFD_MAX];
    cbfs_procfd(path, pfd);
    if (fstat(pfd, &st) == 0 && st.st_uid == geteuid() &&
        chmod(path, (st.st_mode & 07777) | S_IRWXU) == 0) {
        e = cbfs_store_empty_dir_once(layout, pfd, ".");
        if (chmod(path, st.st_mode & 07777) == -1 && e == CBFS_OK) e = cbfs_err_from_errno(errno);
    }
    close(pfd);
    return e;
}

/* What cbfs_store_probe_in looks for, and what it found. */
struct cbfs_store_probe {
    bool index_dir; /* a directory CBFS_INDEX_DIR; else a sidecar of layout 1 */
    unsigned budget; /* entries left to look at */
    bool found;
    bool saw_index_dir; /* a directory CBFS_INDEX_DIR was met, whatever was looked for */
    bool outside; /* the tree is in no store: a store below it is its own tree
                     (cbfs_store_nested_root), not looked into */
    char *example; /* the store-relative path of the first found */
    size_t cap;
};

/* Depth-first below at (display: its store-relative path, "" for the root). */
static cbfs_err cbfs_store_probe_in(struct cbfs_store_probe *p, int at, const char *display,
                                    unsigned depth)
{
    const int fd = openat(at, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *const d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return cbfs_err_from_errno(errno);
    }
    cbfs_err e = CBFS_OK;
    for (struct dirent *de; !p->found && !e && p->budget && (de = readdir(d)) != NULL;) {
        p->budget--;
        const char *const n = de->d_name;
        if (strcmp(n, ".") == 0 || strcmp(n, "..") == 0 ||
            (depth == 0 && strcmp(n, CBFS_STORE_DIR) == 0))
            continue;
        struct stat st;
        if (fstatat(dirfd(d), n, &st, AT_SYMLINK_NOFOLLOW) != 0) continue; /* raced away */
        const bool is_index_dir = S_ISDIR(st.st_mode) && strcmp(n, CBFS_INDEX_DIR) == 0;
        p->saw_index_dir |= is_index_dir;
        if (p->index_dir && is_index_dir) {
            p->found = true;
        } else if (!p->index_dir && S_ISREG(st.st_mode) && cbfs_store_is_sidecar_name(n)) {
            /* layout 1's: its data file beside it; not a data file of layout 2
             * named so (its own sidecar in the index directory) */
            char data[NAME_MAX + 1], l2[NAME_MAX + sizeof CBFS_INDEX_DIR + 1];
            snprintf(l2, sizeof l2, "%s/%s", CBFS_INDEX_DIR, n);
            p->found = cbfs_store_data_name(n, data, sizeof data) == CBFS_OK && data[0] &&
                       fstatat(dirfd(d), data, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
                       S_ISREG(st.st_mode) &&
                       cbfs_store_fstatat(dirfd(d), l2, &st, AT_SYMLINK_NOFOLLOW) != 0;
        } else if (S_ISDIR(st.st_mode) && depth < CBFS_STORE_PROBE_DEPTH && !is_index_dir) {
            const int sub = openat(dirfd(d), n, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
            if (sub < 0) continue; /* not ours to judge */
            if (cbfs_store_nested_root(p->outside, sub)) { /* its store.conf says */
                close(sub);
                continue;
            }
            char path[PATH_MAX];
            snprintf(path, sizeof path, "%s%s%s", display, *display ? "/" : "", n);
            e = cbfs_store_probe_in(p, sub, path, depth + 1);
            close(sub);
            continue;
        }
        if (p->found) snprintf(p->example, p->cap, "%s%s%s", display, *display ? "/" : "", n);
    }
    closedir(d);
    return e;
}

/* saw_index_dir (NULL: not wanted): whether a directory CBFS_INDEX_DIR was
 * met on the way, so that a caller who wants both facts walks once. */
static cbfs_err cbfs_store_probe(int root_fd, bool index_dir, bool *found, bool *saw_index_dir,
                                 char *example, size_t cap)
{
    struct cbfs_store_probe p = {.index_dir = index_dir,
                                 .budget = CBFS_STORE_PROBE_MAX,
                                 .outside = !cbfs_store_is_root(root_fd),
                                 .example = example,
                                 .cap = cap};
    if (cap) example[0] = '\0';
    const cbfs_err e = cbfs_store_probe_in(&p, root_fd, "", 0);
    *found = p.found;
    if (saw_index_dir) *saw_index_dir = p.saw_index_dir;
    return e;
}

cbfs_err cbfs_store_find_layout1(int root_fd, bool *found, bool *index_dir, char *example,
                                 size_t cap)
{
    return cbfs_store_probe(root_fd, false, found, index_dir, example, cap);
}

cbfs_err cbfs_store_find_index_dir(int root_fd, bool *found, char *example, size_t cap)
{
    return cbfs_store_probe(root_fd, true, found, NULL, example, cap);
}

cbfs_err cbfs_store_sidecar_name(const char *name, char *buf, size_t cap)
{
    const size_t n = strlen(name);
    if (n > CBFS_STORE_NAME_MAX || n + CBFS_STORE_SUFFIX_LEN >= cap) return CBFS_E_NAMETOOLONG;
    memcpy(buf, name, n);
    memcpy(buf + n, CBFS_INDEX_SUFFIX, CBFS_STORE_SUFFIX_LEN + 1);
    return CBFS_OK;
}

cbfs_err cbfs_store_data_name(const char *sidecar, char *buf, size_t cap)
{
    if (!cbfs_store_is_sidecar_name(sidecar)) return CBFS_E_INVAL;
    const size_t n = strlen(sidecar) - CBFS_STORE_SUFFIX_LEN;
    if (n >= cap) return CBFS_E_NAMETOOLONG;
    memcpy(buf, sidecar, n);
    buf[n] = '\0';
    return CBFS_OK;
}

cbfs_err cbfs_store_has_frame_envelope(int fd, bool *framed, bool *damaged)
{
    uint8_t head[CBFS_FRAME_ENVELOPE_SIZE];
    const cbfs_err e = cbfs_pread_full(fd, head, sizeof head, 0);
    *framed = e == CBFS_OK && cbfs_frame_is_envelope(head, sizeof head);
    if (damaged) *damaged = e == CBFS_OK && cbfs_frame_envelope_damaged(head, sizeof head);
    return e == CBFS_E_TRUNCATED ? CBFS_OK : e;
}

cbfs_err cbfs_store_check_plain_write(int fd, const void *buf, size_t size, uint64_t off)
{
    uint8_t head[CBFS_FRAME_ENVELOPE_SIZE] = {0}; /* a hole, or past the end: zeros */
    if (off >= sizeof head || size == 0) return CBFS_OK;
    const size_t end = off + size < sizeof head ? (size_t)off + size : sizeof head;
    if (off > 0 || end < sizeof head) { /* the file's own bytes around the write */
        const cbfs_err e = cbfs_pread_full(fd, head, sizeof head, 0);
        /* shorter than the envelope before the write and after it */
        if (e == CBFS_E_TRUNCATED && end < sizeof head) return CBFS_OK;
        if (e && e != CBFS_E_TRUNCATED) return e;
    }
    memcpy(head + off, buf, end - (size_t)off);
    return cbfs_frame_is_envelope(head, sizeof head) ? CBFS_E_PLAIN_FRAMED : CBFS_OK;
}

bool cbfs_store_is_root(int dirfd)
{
    struct stat st;
    return fstatat(dirfd, CBFS_STORE_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

bool cbfs_store_nested_root(bool outside, int dirfd)
{
    return outside && cbfs_store_is_root(dirfd);
}

unsigned cbfs_store_dir_layout(int dirfd)
{
    struct stat st;
    return fstatat(dirfd, CBFS_INDEX_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode)
               ? CBFS_LAYOUT_INDEXDIR
               : CBFS_LAYOUT_SUFFIX;
}

/* Copies the access ACL of the data file (path dpath) to the sidecar (ipath),
 * or removes the sidecar's where the data file has none. @return 0 or errno;
 * a store without ACLs (ENOTSUP) is not an error. */
static int cbfs_store_sidecar_acl(const char *dpath, const char *ipath)
{
    const ssize_t n = getxattr(dpath, CBFS_STORE_XATTR_ACL, NULL, 0);
    if (n == -1 && (errno == ENODATA || errno == ENOTSUP)) {
        if (removexattr(ipath, CBFS_STORE_XATTR_ACL) == -1 && errno != ENODATA && errno != ENOTSUP)
            return errno;
        return 0;
    }
    if (n == -1) return errno;
    char *const acl = malloc((size_t)n + 1); /* + 1: never malloc(0) */
    if (!acl) return ENOMEM;
    int err = 0;
    const ssize_t got = getxattr(dpath, CBFS_STORE_XATTR_ACL, acl, (size_t)n);
    if (got == -1)
        err = errno; /* ERANGE if it grew meanwhile: the caller's next change syncs again */
    else if (setxattr(ipath, CBFS_STORE_XATTR_ACL, acl, (size_t)got, 0) == -1)
        err = errno;
    free(acl);
    return err;
}

/* The one rule of cbfs_store_sidecar_owned: a regular file owned by uid
 * (the data file's owner) or, where cbfs does not run as root and so cannot
 * give the sidecars it makes away, by cbfs's own uid. */
static bool cbfs_store_owned_by(const struct stat *ist, uid_t uid)
{
    const uid_t self = geteuid();
    return S_ISREG(ist->st_mode) && (ist->st_uid == uid || (self != 0 && ist->st_uid == self));
}

bool cbfs_store_sidecar_owner_ok(const struct stat *st, const struct stat *ist)
{
    return cbfs_store_owned_by(ist, st->st_uid);
}

cbfs_err cbfs_store_sidecar_owned(int data_fd, int idx_fd)
{
    struct stat st, ist;
    if (fstat(data_fd, &st) == -1 || fstat(idx_fd, &ist) == -1) return cbfs_err_from_errno(errno);
    return cbfs_store_sidecar_owner_ok(&st, &ist) ? CBFS_OK : CBFS_E_PERM;
}

cbfs_err cbfs_store_sidecar_match(int data_fd, int idx_fd, const struct stat *owner)
{
    char dpath[CBFS_PROCFD_MAX], ipath[CBFS_PROCFD_MAX];
    struct stat st, ist;
    if (fstat(data_fd, &st) == -1) return cbfs_err_from_errno(errno);
    if (owner) {
        if (fstat(idx_fd, &ist) == -1) return cbfs_err_from_errno(errno);
        if (!cbfs_store_owned_by(&ist, owner->st_uid)) return CBFS_E_PERM;
    }
    if (geteuid() == 0 && fchownat(idx_fd, "", st.st_uid, st.st_gid, AT_EMPTY_PATH) == -1)
        return cbfs_err_from_errno(errno);
    cbfs_procfd(dpath, data_fd);
    cbfs_procfd(ipath, idx_fd);
    /* the ACL first: setting one rewrites the group bits of the mode, and
     * chmod with the data file's bits then leaves the copied ACL as it is */
    const int err = cbfs_store_sidecar_acl(dpath, ipath);
    if (err) return cbfs_err_from_errno(err);
    if (chmod(ipath, st.st_mode & 0777) == -1) return cbfs_err_from_errno(errno);
    return CBFS_OK;
}

/* The store's own metadata under STORE/.cbfs/: the one-daemon-per-store lock
 * and store.conf (version, uuid, first-mount defaults). Every access is
 * relative to the store root descriptor, so in-place mounts work. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <linux/magic.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/settings.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

#define CBFS_STORE_CONF_TMP CBFS_STORE_CONF ".tmp"
#define CBFS_STORE_CONF_MAX (64u << 10) /* a store.conf is a few lines; refuse junk */

struct cbfs_store {
    int root_fd; /* O_PATH|O_DIRECTORY on the store root */
    int meta_fd; /* O_RDONLY|O_DIRECTORY on .cbfs/ (fsync-able); -1 before lock */
    int lock_fd; /* .cbfs/lock, flock(LOCK_EX) held while >= 0 */
    int root_lock_fd; /* O_RDONLY on the store root, flock(LOCK_EX) held while >= 0 */
    bool lock_writable;
    bool fresh; /* we created .cbfs/ and wrote no store.conf yet: close removes it,
                   so a first mount that fails validation leaves no trace */
};

cbfs_err cbfs_store_open(const char *path, struct cbfs_store **out)
{
    struct cbfs_store *st = calloc(1, sizeof *st);
    if (!st) return CBFS_E_NOMEM;
    st->meta_fd = -1;
    st->lock_fd = -1;
    st->root_lock_fd = -1;
    st->root_fd = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
    if (st->root_fd < 0) {
        const cbfs_err e = errno == ENOTDIR ? CBFS_E_INVAL : cbfs_err_from_errno(errno);
        free(st);
        return e;
    }
    *out = st;
    return CBFS_OK;
}

int cbfs_store_fd(const struct cbfs_store *st)
{
    return st->root_fd;
}

cbfs_err cbfs_store_unwrite_conf(struct cbfs_store *st)
{
    if (st->meta_fd < 0) return CBFS_E_INVAL;
    if (unlinkat(st->meta_fd, CBFS_STORE_CONF, 0) != 0) return cbfs_err_from_errno(errno);
    return fsync(st->meta_fd) == 0 ? CBFS_OK : cbfs_err_from_errno(errno);
}

bool cbfs_store_root_of(const char *abs, bool self, size_t *root_len)
{
    char dir[PATH_MAX];
    bool found = false;
    snprintf(dir, sizeof dir, "%s", abs);
    for (bool look = self;; look = true) {
        const int fd = look ? open(dir, O_PATH | O_DIRECTORY | O_CLOEXEC) : -1;
        if (fd >= 0) {
            if (cbfs_store_is_root(fd)) {
                found = true;
                *root_len = strlen(dir);
            }
            close(fd);
        }
        char *const slash = strrchr(dir, '/');
        if (!slash || strcmp(dir, "/") == 0) return found;
        if (slash == dir)
            dir[1] = '\0';
        else
            *slash = '\0';
    }
}

cbfs_err cbfs_store_sync_dir(int dirfd, const char *name)
{
    const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) return cbfs_err_from_errno(errno);
    cbfs_err e = CBFS_OK;
    if (fsync(fd) < 0) e = cbfs_err_from_errno(errno);
    close(fd);
    return e;
}

/* Reads the pid a running daemon wrote into the lock file; 0 if unreadable. */
static pid_t cbfs_store_read_pid(int fd)
{
    char buf[32];
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    if (n <= 0) return 0;
    buf[n] = '\0';
    char *end;
    const long v = strtol(buf, &end, 10);
    if (end == buf || v <= 0) return 0;
    return (pid_t)v;
}

bool cbfs_store_asides(const struct cbfs_store *st, const char *path, char *msg, size_t cap)
{
    if (st->meta_fd < 0) return false;
    const int fd = openat(st->meta_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    DIR *const d = fd >= 0 ? fdopendir(fd) : NULL;
    if (!d) {
        if (fd >= 0) close(fd);
        return false;
    }
    char first[NAME_MAX + 1] = "";
    unsigned n = 0;
    for (const struct dirent *de; (de = readdir(d)) != NULL;) {
        if (strncmp(de->d_name, CBFS_STORE_ASIDE, sizeof CBFS_STORE_ASIDE - 1) != 0) continue;
        /* only a regular file is a sidecar a rename put aside, which fsck --repair
         * settles; anything else at such a name is no index (fsck reports it) */
        struct stat sb;
        if (fstatat(dirfd(d), de->d_name, &sb, AT_SYMLINK_NOFOLLOW) != 0 || !S_ISREG(sb.st_mode))
            continue;
        if (n++ == 0) snprintf(first, sizeof first, "%s", de->d_name);
    }
    closedir(d);
    if (n)
        snprintf(msg, cap,
                 "%s/%s/%s%s: %u index file(s) a rename or unlink cut short by a crash moved "
                 "aside; the file it was renaming over or removing may have lost its sidecar: "
                 "cbfs fsck --repair (unmounted) moves it back or removes it (see \"A file the "
                 "mount answers with EIO\" in OPERATIONS.md)",
                 path, CBFS_STORE_DIR, first, n > 1 ? " and others" : "", n);
    return n > 0;
}

void cbfs_store_set_pid(struct cbfs_store *st, pid_t pid)
{
    if (st->lock_fd < 0 || !st->lock_writable) return;
    char buf[32];
    const int n = snprintf(buf, sizeof buf, "%ld\n", (long)pid);
    /* Best effort: the pid only improves the "in use" message. */
    if (ftruncate(st->lock_fd, 0) == 0) (void)cbfs_pwrite_full(st->lock_fd, buf, (size_t)n, 0);
}

enum cbfs_store_holder cbfs_store_holder_describe(pid_t holder, char *buf, size_t cap)
{
    if (holder <= 0) {
        snprintf(buf, cap, "an unknown process");
        return CBFS_HOLDER_UNKNOWN;
    }
    /* argv: "[/sbin/]mount.cbfs ...", "/sbin/mount.fuse.cbfs ..." (fstab's
     * fuse.cbfs type) or "cbfs SUB ..." */
    char path[64], argv[256];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)holder);
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    const ssize_t n = fd >= 0 ? read(fd, argv, sizeof argv - 1) : -1;
    if (fd >= 0) close(fd);
    if (n <= 0) {
        snprintf(buf, cap, "process %ld", (long)holder);
        return CBFS_HOLDER_UNKNOWN;
    }
    argv[n] = '\0';
    const char *const slash = strrchr(argv, '/');
    const char *const prog = slash ? slash + 1 : argv;
    const char *const sub = argv + strlen(argv) + 1; /* argv[1], or past the end */
    if (strcmp(prog, "mount.cbfs") == 0 || strcmp(prog, "mount.fuse.cbfs") == 0) {
        snprintf(buf, cap, "a cbfs daemon (pid %ld)", (long)holder);
        return CBFS_HOLDER_DAEMON;
    }
    if (strcmp(prog, "cbfs") == 0 && sub < argv + n &&
        (strcmp(sub, "fsck") == 0 || strcmp(sub, "mkfs") == 0)) {
        snprintf(buf, cap, "cbfs %s (pid %ld)", sub, (long)holder);
        return CBFS_HOLDER_TOOL;
    }
    snprintf(buf, cap, "process %ld (%.64s)", (long)holder, prog);
    return CBFS_HOLDER_UNKNOWN;
}

static bool cbfs_store_pid_alive(pid_t pid)
{
    return pid > 0 && (kill(pid, 0) == 0 || errno == EPERM);
}

/* The pid of the process whose flock(LOCK_EX) holds fd's file, from
 * /proc/locks ("1: FLOCK  ADVISORY  WRITE PID MAJ:MIN:INO 0 EOF", the device
 * in hex); 0 if not found. btrfs names the file system's device there and
 * the subvolume's in stat, so they never match (helper-45): on btrfs alone
 * the one write flock on a file of that inode number is taken, and none
 * where there are several (subvolume roots all have inode 256; only a
 * message's pid hangs on it). */
static pid_t cbfs_store_flock_holder(int fd)
{
    struct stat sb;
    struct statfs sf;
    if (fstat(fd, &sb) != 0) return 0;
    const bool btrfs = fstatfs(fd, &sf) == 0 && sf.f_type == BTRFS_SUPER_MAGIC;
    FILE *const f = fopen("/proc/locks", "re");
    if (!f) return 0;
    pid_t pid = 0, same_ino = 0;
    unsigned n_same_ino = 0;
    char line[256];
    while (!pid && fgets(line, sizeof line, f)) {
        char kind[16], mode[16];
        long p;
        unsigned maj, min;
        unsigned long long ino;
        if (sscanf(line, "%*d: %15s %*s %15s %ld %x:%x:%llu", kind, mode, &p, &maj, &min, &ino) !=
                6 ||
            strcmp(kind, "FLOCK") != 0 || strcmp(mode, "WRITE") != 0 ||
            ino != (unsigned long long)sb.st_ino || p <= 0)
            continue;
        if (maj == major(sb.st_dev) && min == minor(sb.st_dev))
            pid = (pid_t)p;
        else if (n_same_ino++ == 0)
            same_ino = (pid_t)p;
    }
    fclose(f);
    return pid ? pid : btrfs && n_same_ino == 1 ? same_ino : 0;
}

/* Takes the store root's own flock: the root is what a mount names, and it
 * stays the same directory whatever happens to .cbfs/ inside it (renamed or
 * removed under a running daemon, a second daemon would otherwise make a
 * fresh .cbfs/, lock that, and serve the same files beside the first).
 * .cbfs/lock stays the lock that older versions take and that carries the
 * holder's pid. A root we cannot open for reading, or a file system that
 * cannot flock a directory opened read-only (NFS turns flock into a POSIX
 * lock, which needs a writable descriptor), leaves only .cbfs/lock, as
 * before. @return CBFS_OK, or CBFS_E_BUSY with *holder the holder's pid
 * (0: unknown). */
static cbfs_err cbfs_store_lock_root(struct cbfs_store *st, pid_t *holder)
{
    st->root_lock_fd = openat(st->root_fd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (st->root_lock_fd < 0) return CBFS_OK; /* a root we may search, not read */
    while (flock(st->root_lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EINTR) continue;
        const bool busy = errno == EWOULDBLOCK;
        if (busy) {
            /* .cbfs/lock's pid first: /proc/locks names the process that
             * took the flock, which a daemonized mount took before its fork
             * (that parent is gone); it is the one left where .cbfs/ went */
            const int fd = openat(st->root_fd, CBFS_STORE_DIR "/" CBFS_STORE_LOCK,
                                  O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
            if (fd >= 0) {
                *holder = cbfs_store_read_pid(fd);
                close(fd);
            }
            if (!cbfs_store_pid_alive(*holder))
                *holder = cbfs_store_flock_holder(st->root_lock_fd);
            if (!cbfs_store_pid_alive(*holder)) *holder = 0;
        }
        close(st->root_lock_fd);
        st->root_lock_fd = -1;
        return busy ? CBFS_E_BUSY : CBFS_OK;
    }
    return CBFS_OK;
}

/* flock(LOCK_EX|LOCK_NB) on st->lock_fd. @return CBFS_OK, or CBFS_E_BUSY with
 * *holder the pid its holder wrote into it (0: none). */
static cbfs_err cbfs_store_flock_file(struct cbfs_store *st, pid_t *holder)
{
    while (flock(st->lock_fd, LOCK_EX | LOCK_NB) < 0) {
        if (errno == EINTR) continue;
        if (errno != EWOULDBLOCK) return cbfs_err_from_errno(errno);
        *holder = cbfs_store_read_pid(st->lock_fd);
        return CBFS_E_BUSY;
    }
    return CBFS_OK;
}

/* Drops what a lock that failed had taken. @return e. */
static cbfs_err cbfs_store_lock_undo(struct cbfs_store *st, cbfs_err e)
{
    if (st->lock_fd >= 0) close(st->lock_fd);
    if (st->meta_fd >= 0) close(st->meta_fd);
    if (st->root_lock_fd >= 0) close(st->root_lock_fd);
    st->lock_fd = st->meta_fd = st->root_lock_fd = -1;
    return e;
}

cbfs_err cbfs_store_lock(struct cbfs_store *st, bool readonly, pid_t *holder)
{
    cbfs_err e;
    *holder = 0;
    bool created = false;
    if ((e = cbfs_store_lock_root(st, holder)) != CBFS_OK) return e;
    if (mkdirat(st->root_fd, CBFS_STORE_DIR, 0700) == 0) {
        created = true;
    } else if (errno != EEXIST && errno != EROFS) {
        e = cbfs_err_from_errno(errno);
        goto fail;
    }

    /* O_NOFOLLOW: a symlink named .cbfs must not redirect the lock elsewhere. */
    st->meta_fd =
        openat(st->root_fd, CBFS_STORE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st->meta_fd < 0) {
        if (errno == ENOENT)
            e = CBFS_E_ROFS; /* mkdir failed with EROFS */
        else
            e = (errno == ENOTDIR || errno == ELOOP) ? CBFS_E_INVAL : cbfs_err_from_errno(errno);
        goto fail;
    }
    /* A new .cbfs/ must survive a crash before anything inside it counts. */
    if (created && (e = cbfs_store_sync_dir(st->root_fd, ".")) != CBFS_OK) goto fail;

    st->lock_writable = true;
    st->lock_fd = openat(st->meta_fd, CBFS_STORE_LOCK, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC,
                         0600);
    if (st->lock_fd < 0 && errno == EROFS && readonly) {
        st->lock_writable = false;
        st->lock_fd = openat(st->meta_fd, CBFS_STORE_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    }
    if (st->lock_fd < 0) {
        e = cbfs_err_from_errno(errno);
        goto fail;
    }
    if ((e = cbfs_store_flock_file(st, holder)) != CBFS_OK) goto fail;
    cbfs_store_set_pid(st, getpid());
    st->fresh = created;
    return CBFS_OK;

fail:
    return cbfs_store_lock_undo(st, e);
}

bool cbfs_store_lock_excludes_daemons(const struct cbfs_store *st)
{
    return st->lock_fd >= 0;
}

cbfs_err cbfs_store_lock_existing(struct cbfs_store *st, pid_t *holder)
{
    cbfs_err e;
    *holder = 0;
    if ((e = cbfs_store_lock_root(st, holder)) != CBFS_OK) return e;
    st->meta_fd =
        openat(st->root_fd, CBFS_STORE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (st->meta_fd < 0) {
        if (errno == ENOENT) return CBFS_OK; /* no .cbfs/: the root's flock alone */
        e = (errno == ENOTDIR || errno == ELOOP) ? CBFS_E_INVAL : cbfs_err_from_errno(errno);
        goto fail;
    }
    /* Writable where we may, though nothing is written through it (no pid
     * either): NFS turns flock into a POSIX lock, which wants a writable
     * descriptor. No O_CREAT. */
    st->lock_writable = false;
    st->lock_fd = openat(st->meta_fd, CBFS_STORE_LOCK, O_RDWR | O_NOFOLLOW | O_CLOEXEC);
    if (st->lock_fd < 0 && (errno == EROFS || errno == EACCES))
        st->lock_fd = openat(st->meta_fd, CBFS_STORE_LOCK, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (st->lock_fd < 0) {
        if (errno == ENOENT) return CBFS_OK;
        e = cbfs_err_from_errno(errno);
        goto fail;
    }
    if ((e = cbfs_store_flock_file(st, holder)) != CBFS_OK) goto fail;
    return CBFS_OK;

fail:
    return cbfs_store_lock_undo(st, e);
}

/* The file's own keys, and the settings lines, kept as raw strings until the
 * whole file is read: the version must be judged before any other value is
 * interpreted. */
struct cbfs_store_raw {
    char version[32], uuid[33], created[32], layout[32];
    bool has_version, has_uuid, has_layout, has_created;
    struct {
        char key[32], val[64];
    } set[CBFS_SET_COUNT_]; /* settings lines (CBFS_SCOPE_STORE), one per key */
    unsigned nset;
};

static void cbfs_store_trim(char **s)
{
    char *p = *s;
    while (*p == ' ' || *p == '\t') p++;
    char *end = p + strlen(p);
    while (end > p && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\r')) end--;
    *end = '\0';
    *s = p;
}

/* Copies val into dst (cap bytes). @return false, with msg, if too long. */
static bool cbfs_store_keep(char *dst, size_t cap, const char *key, const char *val, char *msg,
                            size_t msg_cap)
{
    if (strlen(val) >= cap) {
        snprintf(msg, msg_cap, "value of %s is too long", key);
        return false;
    }
    memcpy(dst, val, strlen(val) + 1);
    return true;
}

/* Files one key=value line. Unknown keys are ignored: later cbfs versions may
 * add some. A key given twice is refused: which one counts is no guess to
 * make (the last won: layout=1 appended to a layout-2 file read the store as
 * layout 1). */
static cbfs_err cbfs_store_line(struct cbfs_store_raw *raw, const char *key, const char *val,
                                char *msg, size_t cap)
{
    bool ok = true;
    bool again = (strcmp(key, "format_version") == 0 && raw->has_version) ||
                 (strcmp(key, "uuid") == 0 && raw->has_uuid) ||
                 (strcmp(key, "layout") == 0 && raw->has_layout) ||
                 (strcmp(key, "created") == 0 && raw->has_created);
    for (unsigned i = 0; i < raw->nset && !again; i++) again = strcmp(raw->set[i].key, key) == 0;
    if (again) {
        snprintf(msg, cap, "%s is given twice", key);
        return CBFS_E_INVAL;
    }
    if (strcmp(key, "format_version") == 0) {
        ok = cbfs_store_keep(raw->version, sizeof raw->version, key, val, msg, cap);
        raw->has_version = true;
    } else if (strcmp(key, "uuid") == 0) {
        ok = cbfs_store_keep(raw->uuid, sizeof raw->uuid, key, val, msg, cap);
        raw->has_uuid = true;
    } else if (strcmp(key, "layout") == 0) {
        ok = cbfs_store_keep(raw->layout, sizeof raw->layout, key, val, msg, cap);
        raw->has_layout = true;
    } else if (strcmp(key, "created") == 0) {
        ok = cbfs_store_keep(raw->created, sizeof raw->created, key, val, msg, cap);
        raw->has_created = true;
    } else if (cbfs_settings_known(key, CBFS_SCOPE_STORE)) {
        const unsigned i = raw->nset++; /* one per key: a second one was refused above */
        ok = cbfs_store_keep(raw->set[i].key, sizeof raw->set[i].key, key, key, msg, cap) &&
             cbfs_store_keep(raw->set[i].val, sizeof raw->set[i].val, key, val, msg, cap);
    } /* else unknown here, a mount option among them: a later version may make
       * it a store default, and its store.conf must still mount */
    return ok ? CBFS_OK : CBFS_E_INVAL;
}

/* Splits the text into lines and files the known keys. */
static cbfs_err cbfs_store_scan(char *text, struct cbfs_store_raw *raw, char *msg, size_t cap)
{
    char *save = NULL;
    for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save)) {
        cbfs_store_trim(&line);
        if (*line == '\0' || *line == '#') continue;
        char *eq = strchr(line, '=');
        if (!eq) {
            snprintf(msg, cap, "line '%s' is not key=value", line);
            return CBFS_E_INVAL;
        }
        *eq = '\0';
        char *key = line, *val = eq + 1;
        cbfs_store_trim(&key);
        cbfs_store_trim(&val);
        const cbfs_err e = cbfs_store_line(raw, key, val, msg, cap);
        if (e) return e;
    }
    return CBFS_OK;
}

/* A version number val of key (format_version, layout): 1 to newest.
 * @return CBFS_E_INVAL (not a number, or 0), CBFS_E_VERSION (newer than this
 * cbfs knows), with one sentence in msg. */
static cbfs_err cbfs_store_parse_version(const char *key, const char *val, unsigned newest,
                                         unsigned *out, char *msg, size_t cap)
{
    long v;
    if (!cbfs_parse_long(val, 0, LONG_MAX, &v)) {
        snprintf(msg, cap, "%s '%s' is not a number", key, val);
        return CBFS_E_INVAL;
    }
    if ((unsigned long)v > newest) {
        snprintf(msg, cap,
                 "%s %ld is newer than this cbfs understands (%u); "
                 "upgrade cbfs to mount this store",
                 key, v, newest);
        return CBFS_E_VERSION;
    }
    if (v == 0) {
        snprintf(msg, cap, "%s 0 is invalid", key);
        return CBFS_E_INVAL;
    }
    *out = (unsigned)v;
    return CBFS_OK;
}

static cbfs_err cbfs_store_parse(char *text, struct cbfs_store_conf *conf, char *msg, size_t cap)
{
    struct cbfs_store_raw raw = {0};
    cbfs_err e = cbfs_store_scan(text, &raw, msg, cap);
    if (e) return e;

    if (!raw.has_version) {
        snprintf(msg, cap, "format_version is missing");
        return CBFS_E_INVAL;
    }
    e = cbfs_store_parse_version("format_version", raw.version, CBFS_STORE_CONF_VERSION,
                                 &conf->format_version, msg, cap);
    if (e) return e;
    /* a store.conf without layout= predates layouts: layout 1 */
    conf->layout = CBFS_LAYOUT_SUFFIX;
    if (raw.has_layout &&
        (e = cbfs_store_parse_version("layout", raw.layout, CBFS_LAYOUT_NEWEST, &conf->layout,
                                      msg, cap)) != CBFS_OK)
        return e;

    if (raw.has_uuid) {
        const size_t n = strlen(raw.uuid);
        if (n != 32 || strspn(raw.uuid, "0123456789abcdef") != 32) {
            snprintf(msg, cap, "uuid '%s' is not 32 lower-case hex digits", raw.uuid);
            return CBFS_E_INVAL;
        }
    }
    snprintf(conf->uuid, sizeof conf->uuid, "%s", raw.uuid);
    snprintf(conf->created, sizeof conf->created, "%s", raw.created);

    /* Missing defaults are the built-in ones, as at a first mount. */
    struct cbfs_settings set;
    cbfs_settings_init(&set);
    for (unsigned i = 0; i < raw.nset; i++) {
        e = cbfs_settings_set(&set, CBFS_SCOPE_STORE, raw.set[i].key, raw.set[i].val, msg, cap);
        if (e) return e;
    }
    e = cbfs_settings_resolve(&set, NULL, msg, cap);
    if (e) return e;
    conf->codec = set.codec;
    conf->level = set.level;
    conf->block_size = set.block_size;
    return CBFS_OK;
}

/* cbfs_store_read_conf from the metadata directory dirfd. */
static cbfs_err cbfs_store_read_conf_in(int dirfd, struct cbfs_store_conf *conf, bool *found,
                                        char *msg, size_t msg_cap)
{
    cbfs_err e;
    char *text = NULL;
    *found = false;
    if (msg_cap) msg[0] = '\0';
    const int fd = openat(dirfd, CBFS_STORE_CONF, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0) {
        if (errno == ENOENT) return CBFS_OK;
        e = cbfs_err_from_errno(errno);
        snprintf(msg, msg_cap, "cannot open it: %s", strerror(errno));
        return e;
    }
    struct stat sb;
    if (fstat(fd, &sb) < 0) {
        e = cbfs_err_from_errno(errno);
        goto out;
    }
    if (!S_ISREG(sb.st_mode) || (uint64_t)sb.st_size > CBFS_STORE_CONF_MAX) {
        snprintf(msg, msg_cap, "it is not a regular file of at most %u bytes",
                 CBFS_STORE_CONF_MAX);
        e = CBFS_E_INVAL;
        goto out;
    }
    text = malloc((size_t)sb.st_size + 1);
    if (!text) {
        e = CBFS_E_NOMEM;
        goto out;
    }
    e = cbfs_pread_full(fd, text, (size_t)sb.st_size, 0);
    if (e) goto out;
    text[sb.st_size] = '\0';
    if (memchr(text, '\0', (size_t)sb.st_size)) {
        snprintf(msg, msg_cap, "it contains NUL bytes");
        e = CBFS_E_INVAL;
        goto out;
    }
    memset(conf, 0, sizeof *conf);
    e = cbfs_store_parse(text, conf, msg, msg_cap);
    if (e == CBFS_OK) *found = true;
out:
    free(text);
    close(fd);
    return e;
}

cbfs_err cbfs_store_read_conf(struct cbfs_store *st, struct cbfs_store_conf *conf, bool *found,
                              char *msg, size_t msg_cap)
{
    if (st->meta_fd < 0) return CBFS_E_INVAL; /* contract: lock first */
    return cbfs_store_read_conf_in(st->meta_fd, conf, found, msg, msg_cap);
}

cbfs_err cbfs_store_layout_of(int root_fd, const struct cbfs_store_conf *conf,
                              struct cbfs_store_layout *out)
{
    out->layout = conf ? conf->layout : CBFS_LAYOUT_NEWEST;
    out->block_size = conf ? conf->block_size : 0;
    out->state = conf ? CBFS_LAYOUT_CONF : CBFS_LAYOUT_NO_CONF;
    out->example[0] = '\0';
    out->index_dir_seen = false;
    bool found = false;
    cbfs_err e = CBFS_OK;
    if (!conf) {
        e = cbfs_store_find_layout1(root_fd, &found, &out->index_dir_seen, out->example,
                                    sizeof out->example);
        if (!e && found) {
            out->layout = CBFS_LAYOUT_SUFFIX;
            out->state = CBFS_LAYOUT_LOST_CONF;
        }
    } else if (conf->layout == CBFS_LAYOUT_SUFFIX) {
        e = cbfs_store_find_index_dir(root_fd, &found, out->example, sizeof out->example);
        if (!e && found) out->state = CBFS_LAYOUT_CUT_SHORT;
        out->index_dir_seen = !e && found;
    }
    return e;
}

cbfs_err cbfs_store_read_layout(int root_fd, struct cbfs_store_layout *out, char *msg,
                                size_t msg_cap)
{
    struct cbfs_store_conf conf;
    bool found = false;
    cbfs_err e = CBFS_OK;
    if (msg_cap) msg[0] = '\0';
    const int meta = openat(root_fd, CBFS_STORE_DIR, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (meta >= 0) {
        char why[384] = "";
        e = cbfs_store_read_conf_in(meta, &conf, &found, why, sizeof why);
        close(meta);
        if (e && msg_cap)
            snprintf(msg, msg_cap, "%s/%s: %s", CBFS_STORE_DIR, CBFS_STORE_CONF,
                     why[0] ? why : cbfs_err_str(e));
    } else if (errno != ENOENT) {
        e = cbfs_err_from_errno(errno);
        if (msg_cap) snprintf(msg, msg_cap, "cannot open %s: %s", CBFS_STORE_DIR, cbfs_err_str(e));
    }
    if (!e) {
        e = cbfs_store_layout_of(root_fd, found ? &conf : NULL, out);
        if (e && msg_cap)
            snprintf(msg, msg_cap, "cannot tell its layout: %s", cbfs_err_str(e));
    }
    return e;
}

void cbfs_store_layout_refusal(const struct cbfs_store_layout *l, const char *root, char *msg,
                               size_t cap)
{
    if (l->state == CBFS_LAYOUT_CUT_SHORT)
        snprintf(msg, cap,
                 "store %s: an upgrade to layout 2 was cut short (%s is there, and store.conf "
                 "still says layout 1): run cbfs fsck --upgrade on it again before anything "
                 "else",
                 root, l->example);
    else if (l->state == CBFS_LAYOUT_LOST_CONF)
        snprintf(msg, cap,
                 "store %s has no %s/%s but holds index sidecars of layout 1 (%s): it lost its "
                 "store.conf, and would be served as a new store of layout 2 (every compressed "
                 "file EIO). Write 'format_version=1' into %s/%s/%s (no layout= key: layout 1), "
                 "mount it, and convert it with cbfs fsck --upgrade",
                 root, CBFS_STORE_DIR, CBFS_STORE_CONF, l->example, root, CBFS_STORE_DIR,
                 CBFS_STORE_CONF);
    else
        snprintf(msg, cap, "store %s: its layout is %u", root, l->layout);
}

void cbfs_store_conf_init(struct cbfs_store_conf *conf, const struct cbfs_codec_ops *codec,
                          int level, uint32_t block_size)
{
    memset(conf, 0, sizeof *conf);
    conf->format_version = CBFS_STORE_CONF_VERSION;
    conf->layout = CBFS_LAYOUT_NEWEST;
    snprintf(conf->uuid, sizeof conf->uuid, "%016" PRIx64 "%016" PRIx64, cbfs_random64(),
             cbfs_random64());
    const time_t now = time(NULL);
    struct tm tm;
    if (gmtime_r(&now, &tm))
        strftime(conf->created, sizeof conf->created, "%Y-%m-%dT%H:%M:%SZ", &tm);
    conf->codec = codec;
    conf->level = level;
    conf->block_size = block_size;
}

cbfs_err cbfs_store_write_conf(struct cbfs_store *st, const struct cbfs_store_conf *conf)
{
    cbfs_err e;
    if (st->meta_fd < 0) return CBFS_E_INVAL; /* contract: lock first */
    char buf[512], uuid[48] = "", created[48] = "";
    /* A store.conf written by hand (mount.cbfs's advice for a layout-1 store
     * that lost it: "format_version=1") has neither: an empty key would not
     * read back ("uuid '' is not 32 lower-case hex digits"), and the store
     * that fsck --upgrade wrote so was left mounting nowhere (fuzz_store_conf,
     * helper-46). */
    if (conf->uuid[0]) snprintf(uuid, sizeof uuid, "uuid=%s\n", conf->uuid);
    if (conf->created[0]) snprintf(created, sizeof created, "created=%s\n", conf->created);
    const int n = snprintf(buf, sizeof buf,
                           "# cbfs store configuration (written by the first mount, cbfs mkfs\n"
                           "# or cbfs fsck --upgrade).\n"
                           "# codec, level and block_size are the defaults for mounts that do\n"
                           "# not give them; never edit format_version or uuid.\n"
                           "format_version=%u\n"
                           "layout=%u\n"
                           "%s%s"
                           "codec=%s\n"
                           "level=%d\n"
                           "block_size=%" PRIu32 "\n",
                           conf->format_version, conf->layout, uuid, created, conf->codec->name,
                           conf->level, conf->block_size);
    if (n < 0 || (size_t)n >= sizeof buf) return CBFS_E_INVAL;

    const int fd = openat(st->meta_fd, CBFS_STORE_CONF_TMP,
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return cbfs_err_from_errno(errno);
    e = cbfs_pwrite_full(fd, buf, (size_t)n, 0);
    if (e) goto fail_fd;
    if (fsync(fd) < 0) {
        e = cbfs_err_from_errno(errno);
        goto fail_fd;
    }
    if (close(fd) < 0) {
        e = cbfs_err_from_errno(errno);
        goto fail;
    }
    if (renameat(st->meta_fd, CBFS_STORE_CONF_TMP, st->meta_fd, CBFS_STORE_CONF) < 0) {
        e = cbfs_err_from_errno(errno);
        goto fail;
    }
    st->fresh = false;
    if (fsync(st->meta_fd) < 0) return cbfs_err_from_errno(errno);
    return CBFS_OK;

fail_fd:
    close(fd);
fail:
    unlinkat(st->meta_fd, CBFS_STORE_CONF_TMP, 0);
    return e;
}

void cbfs_store_close(struct cbfs_store *st)
{
    if (!st) return;
    if (st->lock_fd >= 0) {
        /* Clear the pid so a stale one is never reported; the flock itself
         * goes away with the last descriptor of this open file description. */
        if (st->lock_writable && ftruncate(st->lock_fd, 0) < 0) { /* best effort */
        }
        /* Unlink before unlocking: nobody can lock a file we are removing. */
        if (st->fresh) unlinkat(st->meta_fd, CBFS_STORE_LOCK, 0);
        close(st->lock_fd);
        if (st->fresh) unlinkat(st->root_fd, CBFS_STORE_DIR, AT_REMOVEDIR);
    }
    if (st->meta_fd >= 0) close(st->meta_fd);
    if (st->root_lock_fd >= 0) close(st->root_lock_fd); /* after .cbfs/ is settled */
    if (st->root_fd >= 0) close(st->root_fd);
    free(st);
}

/* cbfs-nullfs: a do-nothing FUSE filesystem (low-level API, libfuse 3.14) that measures the
 * FUSE round-trip ceiling for perf/run. One flat root directory; writes are accepted and
 * discarded (only the file size is kept), reads return zeros, max_write is 1 MiB. */
#define FUSE_USE_VERSION 314

#include <errno.h>
#include <limits.h>
#include <fuse_lowlevel.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "cbfs/settings.h"
#include "cbfs/util.h"

/* Same request size as the cbfs daemon (src/fuse/fs.c), so both see the same round trips. */
#define NULLFS_MAX_WRITE (1u << 20)
#define NULLFS_NAME_MAX 255
#define NULLFS_TIMEOUT 1.0

/* One file. Inodes are never freed (a benchmark creates a handful of files), so the kernel's
 * lookup counts need no tracking and forget is a no-op. ino = index + 2 (1 is the root). */
struct nullfs_file {
    char name[NULLFS_NAME_MAX + 1]; /* "" once unlinked */
    mode_t mode;
    uint64_t size;
    struct timespec mtime;
};

struct nullfs {
    pthread_mutex_t lock; /* protects files, nfiles, cap and every nullfs_file field */
    struct nullfs_file *files;
    size_t nfiles;
    size_t cap;
    uid_t uid; /* owner of the root directory: whoever mounted */
    gid_t gid;
};

/* Read replies point into this; it is never written, so every thread may share it.
 * Every reply copies from the same 1 MiB, which stays in the CPU's cache (and
 * every serving thread pins the same 256 pages): a ceiling no filesystem that
 * serves real bytes can reach. CBFS_NULLFS_READ_BUFFER=SIZE (ddbench's
 * nullfs-memSIZE) replies from SIZE bytes of distinct, written memory instead
 * (at off modulo SIZE), as a filesystem serving data from its own memory does. */
static const char nullfs_zeros[NULLFS_MAX_WRITE];
static char *nullfs_mem;      /* NULL: reply from nullfs_zeros */
static uint64_t nullfs_mem_size; /* nullfs_mem holds this + NULLFS_MAX_WRITE bytes */

/* The mount point (realpath), for nullfs_read_ahead. */
static char *nullfs_mnt;
static pthread_once_t nullfs_ra_once = PTHREAD_ONCE_INIT;

/* The mount's read-ahead as a cbfs mount's by default (fuse_readahead), so a
 * read here and a cbfs restore see the same request sizes;
 * CBFS_NULLFS_READAHEAD=SIZE as fuse_readahead=SIZE would (ddbench's
 * nullfs-raSIZE: the ceiling for a cbfs mount given that option). Run once, by
 * the first request after INIT: INIT caps the read-ahead, so not before. */
static uint64_t nullfs_ra_bytes; /* set in main before mounting */

static void nullfs_read_ahead(void)
{
    if (!nullfs_ra_bytes || !nullfs_mnt) return;
    const cbfs_err e = cbfs_mount_set_read_ahead(nullfs_mnt, nullfs_ra_bytes);
    if (e)
        fprintf(stderr, "cbfs-nullfs: read-ahead of %s not set: %s\n", nullfs_mnt,
                cbfs_err_str(e));
}

static struct nullfs *nullfs_get(fuse_req_t req)
{
    pthread_once(&nullfs_ra_once, nullfs_read_ahead);
    return fuse_req_userdata(req);
}

/* Caller holds fs->lock. Returns NULL for the root, bad or unlinked-and-unknown numbers. */
static struct nullfs_file *nullfs_file_at(struct nullfs *fs, fuse_ino_t ino)
{
    if (ino < 2 || ino - 2 >= fs->nfiles) return NULL;
    return &fs->files[ino - 2];
}

/* Caller holds fs->lock. Linear scan: a benchmark directory holds a few files. */
static fuse_ino_t nullfs_find(const struct nullfs *fs, const char *name)
{
    for (size_t i = 0; i < fs->nfiles; i++)
        if (strcmp(fs->files[i].name, name) == 0) return (fuse_ino_t)i + 2;
    return 0;
}

static void nullfs_fill_stat(const struct nullfs *fs, fuse_ino_t ino, const struct nullfs_file *f,
                             struct stat *st)
{
    memset(st, 0, sizeof(*st));
    st->st_ino = ino;
    st->st_uid = fs->uid;
    st->st_gid = fs->gid;
    st->st_blksize = NULLFS_MAX_WRITE;
    if (f == NULL) {
        st->st_mode = S_IFDIR | 0777;
        st->st_nlink = 2;
        return;
    }
    st->st_mode = f->mode;
    st->st_nlink = f->name[0] ? 1 : 0;
    st->st_size = (off_t)f->size;
    st->st_blocks = 0; /* nothing is stored: du shows 0 */
    st->st_mtim = f->mtime;
    st->st_ctim = f->mtime;
    st->st_atim = f->mtime;
}

static void nullfs_init(void *userdata, struct fuse_conn_info *conn)
{
    (void)userdata;
    conn->max_write = NULLFS_MAX_WRITE;
    if (conn->capable & FUSE_CAP_ASYNC_READ) conn->want |= FUSE_CAP_ASYNC_READ;
    /* Every write reaches the daemon: the channel's own ceiling (cbfs turns
     * the writeback cache on; ddbench's points say which they compare).
     * CBFS_NULLFS_WRITEBACK=1 turns it on too: the ceiling of the kernel's
     * cached write path (ddbench's nullfs-wbc). */
    const char *wbc = getenv("CBFS_NULLFS_WRITEBACK");
    if (wbc && strcmp(wbc, "1") == 0 && (conn->capable & FUSE_CAP_WRITEBACK_CACHE))
        conn->want |= FUSE_CAP_WRITEBACK_CACHE;
    else
        conn->want &= ~FUSE_CAP_WRITEBACK_CACHE;
}

/* Replies with the entry of ino (0 = ENOENT). Caller holds no lock. */
static void nullfs_reply_entry(fuse_req_t req, fuse_ino_t ino)
{
    struct nullfs *fs = nullfs_get(req);
    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    pthread_mutex_lock(&fs->lock);
    const struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (f == NULL) {
        pthread_mutex_unlock(&fs->lock);
        fuse_reply_err(req, ENOENT);
        return;
    }
    nullfs_fill_stat(fs, ino, f, &e.attr);
    pthread_mutex_unlock(&fs->lock);
    e.ino = ino;
    e.generation = 1;
    e.attr_timeout = NULLFS_TIMEOUT;
    e.entry_timeout = NULLFS_TIMEOUT;
    fuse_reply_entry(req, &e);
}

static void nullfs_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct nullfs *fs = nullfs_get(req);
    if (parent != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    pthread_mutex_lock(&fs->lock);
    const fuse_ino_t ino = nullfs_find(fs, name);
    pthread_mutex_unlock(&fs->lock);
    if (ino == 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    nullfs_reply_entry(req, ino);
}

static void nullfs_forget(fuse_req_t req, fuse_ino_t ino, uint64_t nlookup)
{
    (void)ino;
    (void)nlookup;
    fuse_reply_none(req);
}

static void nullfs_forget_multi(fuse_req_t req, size_t count, struct fuse_forget_data *forgets)
{
    (void)count;
    (void)forgets;
    fuse_reply_none(req);
}

static void nullfs_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    struct stat st;
    (void)fi;
    pthread_mutex_lock(&fs->lock);
    const struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (ino != FUSE_ROOT_ID && f == NULL) {
        pthread_mutex_unlock(&fs->lock);
        fuse_reply_err(req, ENOENT);
        return;
    }
    nullfs_fill_stat(fs, ino, f, &st);
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_attr(req, &st, NULLFS_TIMEOUT);
}

/* Truncate/extend changes the size; mode and times are accepted (mode kept, times set to now)
 * so that tools which chmod/utime their output do not fail. */
static void nullfs_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                           struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    (void)fi;
    if (ino == FUSE_ROOT_ID) {
        nullfs_getattr(req, ino, NULL);
        return;
    }
    pthread_mutex_lock(&fs->lock);
    struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (f == NULL) {
        pthread_mutex_unlock(&fs->lock);
        fuse_reply_err(req, ENOENT);
        return;
    }
    if (to_set & FUSE_SET_ATTR_SIZE) f->size = (uint64_t)attr->st_size;
    if (to_set & FUSE_SET_ATTR_MODE) f->mode = S_IFREG | (attr->st_mode & 07777);
    clock_gettime(CLOCK_REALTIME, &f->mtime);
    pthread_mutex_unlock(&fs->lock);
    nullfs_getattr(req, ino, NULL);
}

static void nullfs_create(fuse_req_t req, fuse_ino_t parent, const char *name, mode_t mode,
                          struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    if (parent != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    if (strlen(name) > NULLFS_NAME_MAX) {
        fuse_reply_err(req, ENAMETOOLONG);
        return;
    }
    pthread_mutex_lock(&fs->lock);
    fuse_ino_t ino = nullfs_find(fs, name);
    if (ino == 0) {
        if (fs->nfiles == fs->cap) {
            const size_t ncap = fs->cap ? fs->cap * 2 : 64;
            struct nullfs_file *nf = realloc(fs->files, ncap * sizeof(*nf));
            if (nf == NULL) {
                pthread_mutex_unlock(&fs->lock);
                fuse_reply_err(req, ENOMEM);
                return;
            }
            fs->files = nf;
            fs->cap = ncap;
        }
        struct nullfs_file *f = &fs->files[fs->nfiles++];
        memset(f, 0, sizeof(*f));
        strcpy(f->name, name);
        f->mode = S_IFREG | (mode & 07777);
        clock_gettime(CLOCK_REALTIME, &f->mtime);
        ino = (fuse_ino_t)fs->nfiles + 1;
    } else if (fi->flags & O_EXCL) {
        pthread_mutex_unlock(&fs->lock);
        fuse_reply_err(req, EEXIST);
        return;
    }
    struct fuse_entry_param e;
    memset(&e, 0, sizeof(e));
    struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (fi->flags & O_TRUNC) f->size = 0;
    nullfs_fill_stat(fs, ino, f, &e.attr);
    pthread_mutex_unlock(&fs->lock);
    e.ino = ino;
    e.generation = 1;
    e.attr_timeout = NULLFS_TIMEOUT;
    e.entry_timeout = NULLFS_TIMEOUT;
    fi->direct_io = 0;
    fi->keep_cache = 0; /* reads must reach the daemon, as in cbfs */
    fuse_reply_create(req, &e, fi);
}

static void nullfs_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    pthread_mutex_lock(&fs->lock);
    struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (f == NULL) {
        pthread_mutex_unlock(&fs->lock);
        fuse_reply_err(req, ino == FUSE_ROOT_ID ? EISDIR : ENOENT);
        return;
    }
    if (fi->flags & O_TRUNC) f->size = 0;
    pthread_mutex_unlock(&fs->lock);
    fi->keep_cache = 0;
    fuse_reply_open(req, fi);
}

static void nullfs_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                        struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    (void)fi;
    pthread_mutex_lock(&fs->lock);
    const struct nullfs_file *f = nullfs_file_at(fs, ino);
    const uint64_t fsize = f ? f->size : 0;
    pthread_mutex_unlock(&fs->lock);
    /* Short read at EOF; the kernel never asks for more than max_read (<= the zero buffer). */
    uint64_t n = (uint64_t)off < fsize ? fsize - (uint64_t)off : 0;
    if (n > size) n = size;
    if (n > sizeof(nullfs_zeros)) n = sizeof(nullfs_zeros);
    const char *src = nullfs_mem ? nullfs_mem + (uint64_t)off % nullfs_mem_size : nullfs_zeros;
    fuse_reply_buf(req, src, (size_t)n);
}

static void nullfs_write(fuse_req_t req, fuse_ino_t ino, const char *buf, size_t size, off_t off,
                         struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    (void)buf;
    (void)fi;
    pthread_mutex_lock(&fs->lock);
    struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (f == NULL) {
        pthread_mutex_unlock(&fs->lock);
        fuse_reply_err(req, EBADF);
        return;
    }
    const uint64_t end = (uint64_t)off + size;
    if (end > f->size) f->size = end;
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_write(req, size);
}

/* Nothing is buffered, so flush/fsync/release have nothing to do. */
static void nullfs_ok(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

static void nullfs_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)datasync;
    nullfs_ok(req, ino, fi);
}

/* Accepted so that fio's default fallocate does not fail; only the size changes. */
static void nullfs_fallocate(fuse_req_t req, fuse_ino_t ino, int mode, off_t offset, off_t length,
                             struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    (void)fi;
    pthread_mutex_lock(&fs->lock);
    struct nullfs_file *f = nullfs_file_at(fs, ino);
    if (f != NULL && mode == 0 && (uint64_t)(offset + length) > f->size)
        f->size = (uint64_t)(offset + length);
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_err(req, f ? 0 : EBADF);
}

static void nullfs_unlink(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    struct nullfs *fs = nullfs_get(req);
    if (parent != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    pthread_mutex_lock(&fs->lock);
    const fuse_ino_t ino = nullfs_find(fs, name);
    if (ino != 0) {
        struct nullfs_file *f = nullfs_file_at(fs, ino);
        f->name[0] = '\0';
        f->size = 0;
    }
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_err(req, ino ? 0 : ENOENT);
}

static void nullfs_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                           struct fuse_file_info *fi)
{
    struct nullfs *fs = nullfs_get(req);
    (void)fi;
    if (ino != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    char *buf = malloc(size);
    if (buf == NULL) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t used = 0;
    struct stat st;
    memset(&st, 0, sizeof(st));
    /* Offsets: 1 = ".", 2 = "..", i + 3 = files[i]; off is the next entry to return. */
    pthread_mutex_lock(&fs->lock);
    for (off_t i = off; (size_t)i < fs->nfiles + 2; i++) {
        const char *name;
        if (i == 0) {
            name = ".";
            st.st_ino = FUSE_ROOT_ID;
            st.st_mode = S_IFDIR;
        } else if (i == 1) {
            name = "..";
            st.st_ino = FUSE_ROOT_ID;
            st.st_mode = S_IFDIR;
        } else {
            const struct nullfs_file *f = &fs->files[i - 2];
            if (f->name[0] == '\0') continue;
            name = f->name;
            st.st_ino = (ino_t)i;
            st.st_mode = S_IFREG;
        }
        const size_t n = fuse_add_direntry(req, buf + used, size - used, name, &st, i + 1);
        if (n > size - used) break;
        used += n;
    }
    pthread_mutex_unlock(&fs->lock);
    fuse_reply_buf(req, buf, used);
    free(buf);
}

/* Large, stable numbers so that fio's and dd's space checks never fail. */
static void nullfs_statfs(fuse_req_t req, fuse_ino_t ino)
{
    struct statvfs sv;
    (void)ino;
    memset(&sv, 0, sizeof(sv));
    sv.f_bsize = 4096;
    sv.f_frsize = 4096;
    sv.f_blocks = sv.f_bfree = sv.f_bavail = (fsblkcnt_t)1 << 32; /* 16 TiB */
    sv.f_files = sv.f_ffree = sv.f_favail = 1u << 20;
    sv.f_namemax = NULLFS_NAME_MAX;
    fuse_reply_statfs(req, &sv);
}

static const struct fuse_lowlevel_ops nullfs_ops = {
    .init = nullfs_init,
    .lookup = nullfs_lookup,
    .forget = nullfs_forget,
    .forget_multi = nullfs_forget_multi,
    .getattr = nullfs_getattr,
    .setattr = nullfs_setattr,
    .create = nullfs_create,
    .open = nullfs_open,
    .read = nullfs_read,
    .write = nullfs_write,
    .flush = nullfs_ok,
    .release = nullfs_ok,
    .fsync = nullfs_fsync,
    .fallocate = nullfs_fallocate,
    .unlink = nullfs_unlink,
    .readdir = nullfs_readdir,
    .statfs = nullfs_statfs,
};

int main(int argc, char *argv[])
{
    struct fuse_args args = FUSE_ARGS_INIT(argc, argv);
    struct fuse_cmdline_opts opts;
    struct fuse_loop_config *cfg = NULL;
    struct fuse_session *se = NULL;
    struct nullfs fs = {.uid = getuid(), .gid = getgid()};
    int ret = 1;

    memset(&opts, 0, sizeof(opts));
    pthread_mutex_init(&fs.lock, NULL);
    if (fuse_parse_cmdline(&args, &opts) != 0) goto out;
    if (opts.show_help || opts.mountpoint == NULL) {
        printf("usage: %s [-f] [-o fuse-options] MOUNTPOINT\n"
               "A do-nothing FUSE filesystem: the FUSE round-trip ceiling for perf/run.\n\n",
               argv[0]);
        fuse_cmdline_help();
        fuse_lowlevel_help();
        ret = opts.show_help ? 0 : 1;
        goto out;
    }
    struct cbfs_settings set;
    cbfs_settings_init(&set);
    const char *ra = getenv("CBFS_NULLFS_READAHEAD");
    char msg[256];
    if (ra && cbfs_settings_set(&set, CBFS_SCOPE_MOUNT, "fuse_readahead", ra, msg, sizeof msg)) {
        fprintf(stderr, "cbfs-nullfs: CBFS_NULLFS_READAHEAD: %s\n", msg);
        goto out;
    }
    nullfs_ra_bytes = set.fuse_readahead;
    const char *mem = getenv("CBFS_NULLFS_READ_BUFFER");
    if (mem) {
        if (cbfs_parse_size(mem, &nullfs_mem_size) || nullfs_mem_size < NULLFS_MAX_WRITE) {
            fprintf(stderr, "cbfs-nullfs: CBFS_NULLFS_READ_BUFFER: want a size of at least 1M, "
                            "not '%s'\n", mem);
            goto out;
        }
        nullfs_mem = malloc(nullfs_mem_size + NULLFS_MAX_WRITE);
        if (!nullfs_mem) {
            fprintf(stderr, "cbfs-nullfs: CBFS_NULLFS_READ_BUFFER: out of memory\n");
            goto out;
        }
        for (uint64_t i = 0; i < nullfs_mem_size + NULLFS_MAX_WRITE; i++)
            nullfs_mem[i] = (char)(i * 131 + (i >> 12)); /* every page written, none alike */
    }
    se = fuse_session_new(&args, &nullfs_ops, sizeof(nullfs_ops), &fs);
    if (se == NULL) goto out;
    if (fuse_set_signal_handlers(se) != 0) goto out_session;
    nullfs_mnt = realpath(opts.mountpoint, NULL); /* before mounting over it */
    if (fuse_session_mount(se, opts.mountpoint) != 0) goto out_signals;
    fuse_daemonize(opts.foreground);

    if (opts.singlethread) {
        ret = fuse_session_loop(se);
    } else {
        cfg = fuse_loop_cfg_create();
        if (cfg == NULL) {
            ret = 1;
            goto out_unmount;
        }
        fuse_loop_cfg_set_clone_fd(cfg, opts.clone_fd);
        /* libfuse leaves UINT_MAX in these when the option was not given: keep its defaults. */
        if (opts.max_threads != UINT_MAX) fuse_loop_cfg_set_max_threads(cfg, opts.max_threads);
        if (opts.max_idle_threads != UINT_MAX)
            fuse_loop_cfg_set_idle_threads(cfg, opts.max_idle_threads);
        ret = fuse_session_loop_mt(se, cfg);
        fuse_loop_cfg_destroy(cfg);
    }
    ret = ret ? 1 : 0;
out_unmount:
    fuse_session_unmount(se);
out_signals:
    fuse_remove_signal_handlers(se);
out_session:
    fuse_session_destroy(se);
out:
    free(opts.mountpoint);
    free(nullfs_mnt);
    free(nullfs_mem);
    fuse_opt_free_args(&args);
    free(fs.files);
    pthread_mutex_destroy(&fs.lock);
    return ret;
}

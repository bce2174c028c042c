/* mount.cbfs: the daemon's main. Validates the command line and the store
 * (lock, store.conf) before anything is mounted, then starts the engine,
 * mounts, serves requests and, on unmount or SIGTERM/SIGINT/SIGHUP (stop.h),
 * unmounts and flushes every open file before exiting 0. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cbfs/engine.h"
#include "cbfs/log.h"
#include "cbfs/options.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "cbfs/version.h"
#include "fuse/cbfs_fuse.h"
#include "fuse/channel.h"
#include "fuse/stop.h"

#define CBFS_PROG "mount.cbfs"
#define CBFS_MAX_IDLE_THREADS 10
#define CBFS_FUSE_LOG_QUIET_S 10 /* cbfs_main_fuse_log */

/* true while stderr still reaches the user (foreground, or a background
 * daemon before its mount answered INIT); afterwards errors go to the log.
 * Atomic: a serving thread detaches (cbfs_main_after_init) while others may
 * log through libfuse (cbfs_main_fuse_log). */
static atomic_bool cbfs_main_attached = true;

static void cbfs_main_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void cbfs_main_error(const char *fmt, ...)
{
    char line[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    if (cbfs_main_attached)
        fprintf(stderr, CBFS_PROG ": %s\n", line);
    else
        cbfs_log_err("%s", line);
}

/* Prints one of libfuse's lines: on stderr while the user can see it (as
 * libfuse would print it), through cbfs_log (syslog) once the daemon
 * detached, where libfuse's default would write it to /dev/null. */
static void cbfs_main_fuse_line(enum cbfs_log_level l, const char *line)
{
    if (cbfs_main_attached)
        fprintf(stderr, "%s\n", line);
    else
        cbfs_log(l, "%s%s", strncmp(line, "fuse:", 5) == 0 ? "" : "fuse: ", line);
}

/* libfuse's own messages (cbfs_main_fuse_line). The same line again within
 * CBFS_FUSE_LOG_QUIET_S of the last one printed is counted, not printed:
 * libfuse says "error creating thread" on every request while a thread
 * limit holds (333 lines in 8 s, helper-58), which buried everything else.
 * The count goes out with the next line printed, or when the loop ends
 * (cbfs_main_fuse_log_flush). */
static struct {
    pthread_mutex_t mu;
    char last[1024];              /* mu */
    struct timespec last_at;      /* mu */
    unsigned long quiet;          /* mu: lines equal to last not printed */
    enum cbfs_log_level quiet_at; /* mu: their level */
} cbfs_main_fuse_said = {.mu = PTHREAD_MUTEX_INITIALIZER};

/* Prints how many lines were not. cbfs_main_fuse_said.mu held. */
static void cbfs_main_fuse_quiet_end(void)
{
    if (!cbfs_main_fuse_said.quiet) return;
    char said[sizeof cbfs_main_fuse_said.last + 64];
    snprintf(said, sizeof said, "(\"%s\" %lu more time(s))", cbfs_main_fuse_said.last,
             cbfs_main_fuse_said.quiet);
    cbfs_main_fuse_line(cbfs_main_fuse_said.quiet_at, said);
    cbfs_main_fuse_said.quiet = 0;
}

static void cbfs_main_fuse_log(enum fuse_log_level level, const char *fmt, va_list ap)
{
    char line[sizeof cbfs_main_fuse_said.last];
    vsnprintf(line, sizeof line, fmt, ap);
    const size_t n = strlen(line);
    if (n && line[n - 1] == '\n') line[n - 1] = '\0';
    const enum cbfs_log_level l = level <= FUSE_LOG_ERR       ? CBFS_LOG_ERR
                                  : level == FUSE_LOG_WARNING ? CBFS_LOG_WARN
                                  : level == FUSE_LOG_DEBUG   ? CBFS_LOG_DEBUG
                                                              : CBFS_LOG_INFO;
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    pthread_mutex_lock(&cbfs_main_fuse_said.mu);
    if (strcmp(line, cbfs_main_fuse_said.last) == 0 &&
        now.tv_sec - cbfs_main_fuse_said.last_at.tv_sec < CBFS_FUSE_LOG_QUIET_S) {
        cbfs_main_fuse_said.quiet++;
        cbfs_main_fuse_said.quiet_at = l;
    } else {
        cbfs_main_fuse_quiet_end();
        memcpy(cbfs_main_fuse_said.last, line, sizeof line);
        cbfs_main_fuse_said.last_at = now;
        cbfs_main_fuse_line(l, line);
    }
    pthread_mutex_unlock(&cbfs_main_fuse_said.mu);
}

/* After the loop: the count of lines not printed, if any. */
static void cbfs_main_fuse_log_flush(void)
{
    pthread_mutex_lock(&cbfs_main_fuse_said.mu);
    cbfs_main_fuse_quiet_end();
    pthread_mutex_unlock(&cbfs_main_fuse_said.mu);
}

/* The soft fd limit goes up to the hard one: a systemd service starts at 1024
 * while the hard limit is far higher, and every file a backup tool keeps
 * open costs the daemon two fds. (The inode table's fd cache keeps the rest
 * bounded; see src/fuse/fdcache.h.) */
static void cbfs_main_raise_nofile(void)
{
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur < rl.rlim_max) {
        rl.rlim_cur = rl.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &rl); /* stays as it was on failure */
    }
}

/* One line for a failed realpath/stat of a directory argument. */
static void cbfs_main_dir_error(const char *what, const char *arg, int eno)
{
    if (eno == ENOENT)
        cbfs_main_error("%s %s does not exist; create it first (mkdir -p %s)", what, arg, arg);
    else if (eno == ENOTDIR)
        cbfs_main_error("%s %s is not a directory; give a directory", what, arg);
    else if (eno == ENOTCONN)
        cbfs_main_error("%s %s is a dead FUSE mount; unmount it first (fusermount3 -u %s)", what,
                        arg, arg);
    else
        cbfs_main_error("%s %s: %s", what, arg, strerror(eno));
}

/* Resolves a directory argument to an absolute path (the daemon chdirs to /
 * and libfuse unmounts by path). what: "store" or "mount point".
 * @return malloc'ed path, or NULL after printing why. */
static char *cbfs_main_dir(const char *arg, const char *what, struct stat *sb)
{
    char *real = realpath(arg, NULL);
    if (!real) {
        cbfs_main_dir_error(what, arg, errno);
        return NULL;
    }
    if (stat(real, sb) < 0) {
        cbfs_main_dir_error(what, arg, errno);
        goto fail;
    }
    if (!S_ISDIR(sb->st_mode)) {
        cbfs_main_dir_error(what, arg, ENOTDIR);
        goto fail;
    }
    return real;
fail:
    free(real);
    return NULL;
}

/* -o remount: mount(8) runs the helper with the mount's flags from the mount
 * table and the new ones. The daemon keeps running; only the kernel's flags
 * change, with MS_REMOUNT on the mount point (the kernel syncs the
 * filesystem and refuses ro while files are open for writing).
 * @return the exit status. */
static int cbfs_main_remount(const struct cbfs_options *o)
{
    struct statfs sf;
    struct statvfs sv;
    int status = 1;
    char *mnt = realpath(o->mountpoint, NULL);
    if (!mnt) {
        cbfs_main_dir_error("mount point", o->mountpoint, errno);
        return 1;
    }
    if (statfs(mnt, &sf) == -1 || statvfs(mnt, &sv) == -1) {
        cbfs_main_dir_error("mount point", o->mountpoint, errno);
        goto out;
    }
    if (sf.f_type != FUSE_SUPER_MAGIC) {
        cbfs_main_error("%s is not a cbfs mount; remount changes only those", mnt);
        goto out;
    }
    if (mount(NULL, mnt, NULL, cbfs_options_remount_flags(o, sv.f_flag), NULL) == -1) {
        const int eno = errno;
        if (eno == EBUSY && cbfs_options_readonly(o))
            cbfs_main_error("cannot remount %s read-only: files on it are open for writing; "
                            "close them first",
                            mnt);
        else if (eno == EINVAL)
            cbfs_main_error("cannot remount %s: not a mount point; give the directory cbfs "
                            "is mounted on",
                            mnt);
        else if (eno == EPERM)
            cbfs_main_error("cannot remount %s: only root may (CAP_SYS_ADMIN)", mnt);
        else
            cbfs_main_error("cannot remount %s: %s", mnt, strerror(eno));
        goto out;
    }
    status = 0;
out:
    free(mnt);
    return status;
}

/* Takes the store lock, reads (or on the first mount writes) store.conf and
 * merges its defaults into the options; *layout = the store's layout (a new
 * store's: the newest); *wrote: store.conf was written now (a first mount).
 * @return 0, or -1 after printing why. */
static int cbfs_main_store(struct cbfs_store *st, const char *path, struct cbfs_options *o,
                           unsigned *layout, bool *wrote)
{
    *wrote = false;
    char msg[512];
    pid_t holder;
    cbfs_err e = cbfs_store_lock(st, cbfs_options_readonly(o), &holder);
    if (e == CBFS_E_BUSY) {
        char who[128];
        const enum cbfs_store_holder k = cbfs_store_holder_describe(holder, who, sizeof who);
        cbfs_main_error("store %s is in use by %s; %s", path, who,
                        k == CBFS_HOLDER_TOOL     ? "mount it when that has finished"
                        : k == CBFS_HOLDER_DAEMON ? "unmount it first"
                                                  : "it holds the lock on the store's root "
                                                    "or on " CBFS_STORE_DIR "/" CBFS_STORE_LOCK);
        return -1;
    }
    if (e == CBFS_E_ROFS) {
        /* Both a store that never had its .cbfs/ (which needs one read-write
         * mount) and a read-write mount of a read-only store (an ext4 that
         * went read-only after an error, say) end here; telling the second
         * that it was never mounted sent its admin after the wrong fault. */
        if (faccessat(cbfs_store_fd(st), CBFS_STORE_DIR, F_OK, AT_SYMLINK_NOFOLLOW) == 0)
            cbfs_main_error("store %s is read-only; mount it with -o ro to read it, or make its "
                            "file system writable again",
                            path);
        else
            cbfs_main_error("store %s is read-only and was never mounted (no %s/); mount it "
                            "read-write once",
                            path, CBFS_STORE_DIR);
        return -1;
    }
    if (e == CBFS_E_INVAL) {
        cbfs_main_error("store %s: %s is not a directory; move it away", path, CBFS_STORE_DIR);
        return -1;
    }
    if (e) {
        cbfs_main_error("store %s: cannot lock %s/%s: %s", path, CBFS_STORE_DIR, CBFS_STORE_LOCK,
                        cbfs_err_str(e));
        return -1;
    }

    struct cbfs_store_conf conf;
    bool found;
    e = cbfs_store_read_conf(st, &conf, &found, msg, sizeof msg);
    if (e) {
        cbfs_main_error("store %s: %s/%s: %s", path, CBFS_STORE_DIR, CBFS_STORE_CONF,
                        msg[0] ? msg : cbfs_err_str(e));
        return -1;
    }
    e = cbfs_options_resolve(o, found ? &conf : NULL, msg, sizeof msg);
    if (e) {
        cbfs_main_error("%s", msg);
        return -1;
    }
    struct cbfs_store_layout lay;
    e = cbfs_store_layout_of(cbfs_store_fd(st), found ? &conf : NULL, &lay);
    if (e) {
        cbfs_main_error("store %s: cannot tell its layout (FORMAT.md 1): %s", path,
                        cbfs_err_str(e));
        return -1;
    }
    if (lay.state == CBFS_LAYOUT_CUT_SHORT || lay.state == CBFS_LAYOUT_LOST_CONF) {
        char why[2 * PATH_MAX + 512];
        cbfs_store_layout_refusal(&lay, path, why, sizeof why);
        cbfs_main_error("%s", why);
        return -1;
    }
    *layout = lay.layout;
    if (!found) {
        if (cbfs_options_readonly(o)) return 0; /* nothing is written by a read-only mount */
        cbfs_store_conf_init(&conf, o->set.codec, o->set.level, o->set.block_size);
        e = cbfs_store_write_conf(st, &conf);
        if (e) {
            cbfs_main_error("store %s: cannot write %s/%s: %s", path, CBFS_STORE_DIR,
                            CBFS_STORE_CONF, cbfs_err_str(e));
            return -1;
        }
        *wrote = true;
    }
    return 0;
}

/* Background form: forks; the parent waits until the child reports that the
 * mount is up (one status byte) and exits with that status, so mount(8) and
 * scripts see mount errors. fuse_daemonize() is not used because it forks
 * after the engine has started its worker threads, which a fork would lose.
 * @return in the child only: the write end of the status pipe, or -1. */
static int cbfs_main_fork(void)
{
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0) {
        cbfs_main_error("cannot create a pipe: %s", strerror(errno));
        return -1;
    }
    fflush(NULL);
    const pid_t pid = fork();
    if (pid < 0) {
        cbfs_main_error("cannot fork: %s", strerror(errno));
        close(pfd[0]);
        close(pfd[1]);
        return -1;
    }
    if (pid > 0) {
        /* Parent: no cleanup of shared state (the lock belongs to the child
         * now); the pipe reads EOF if the child dies before reporting. */
        close(pfd[1]);
        unsigned char status = 1;
        ssize_t n;
        do n = read(pfd[0], &status, 1);
        while (n < 0 && errno == EINTR);
        _exit(n == 1 ? status : 1);
    }
    close(pfd[0]);
    setsid(); /* leave the terminal's process group: ^C there is not for us */
    return pfd[1];
}

/* Child of cbfs_main_fork, mount is up: release the parent with status 0 and
 * drop the terminal. */
static void cbfs_main_detach(int notify_fd)
{
    const unsigned char ok = 0;
    ssize_t n;
    do n = write(notify_fd, &ok, 1);
    while (n < 0 && errno == EINTR);
    close(notify_fd);
    const int nullfd = open("/dev/null", O_RDWR | O_CLOEXEC);
    if (nullfd >= 0) {
        dup2(nullfd, STDIN_FILENO);
        dup2(nullfd, STDOUT_FILENO);
        dup2(nullfd, STDERR_FILENO);
        if (nullfd > STDERR_FILENO) close(nullfd);
    }
    atomic_store(&cbfs_main_attached, false);
}

/* What cbfs_main_after_init needs; in main's frame for as long as the loop runs. */
struct cbfs_main_init {
    const char *mnt;     /* realpath of the mount point */
    uint64_t read_ahead; /* fuse_readahead: bytes, 0 = the kernel's */
    int notify_fd;       /* background daemon: the parent's status pipe, -1 once
                          * released (by the serving thread that answered INIT;
                          * main reads it after the loop joined that thread) */
};

/* After INIT (cbfs_chan_attach's hook). A background daemon releases its
 * parent with status 0 only here, once a serving thread has answered the
 * kernel: released at the mount, before the loop, a daemon that could not
 * start its first serving thread (a thread limit: ulimit -u, TasksMax,
 * pids.max) exited 1 after its mount command had returned 0, and the backup
 * meant for the store went to the directory below the mount point. INIT
 * also caps the mount's read-ahead at what the kernel offered in it (its
 * default, 128K), so raising it must come after, and before the first
 * reader opens a file (an open file keeps the read-ahead it opened with). */
static void cbfs_main_after_init(void *arg)
{
    struct cbfs_main_init *in = arg;
    if (in->notify_fd >= 0) {
        cbfs_main_detach(in->notify_fd);
        in->notify_fd = -1;
    }
    if (!in->read_ahead) return;
    char sz[24];
    cbfs_format_size(in->read_ahead, sz, sizeof sz);
    const cbfs_err e = cbfs_mount_set_read_ahead(in->mnt, in->read_ahead);
    /* The mount is gone already: unmounted before this serving thread, the
     * one that answered INIT, came here (a short mount on a busy machine; a
     * test's daemon log had this as a warning, helper-64's run). */
    if (e == CBFS_E_NOENT)
        cbfs_log_debug("fuse_readahead=%s not applied: %s was unmounted first", sz, in->mnt);
    else if (e == CBFS_E_ACCES || e == CBFS_E_PERM)
        cbfs_log_info("fuse_readahead=%s not applied: only root may set a mount's read-ahead; "
                      "the kernel's stays",
                      sz);
    else if (e)
        cbfs_log_warn("fuse_readahead=%s not applied to %s: %s", sz, in->mnt, cbfs_err_str(e));
    else
        cbfs_log_debug("kernel read-ahead of %s: %s", in->mnt, sz);
}

int main(int argc, char *argv[])
{
    struct cbfs_options o;
    char msg[512];
    int status = 1;
    int notify_fd = -1;
    bool wrote_conf = false; /* a first mount's store.conf: undone if it never mounts */
    char *store_path = NULL, *mnt_path = NULL, *fuse_list = NULL;
    struct cbfs_store *st = NULL;
    struct cbfs_engine *eng = NULL;
    struct cbfs_fs *fs = NULL;
    struct fuse_session *se = NULL;
    struct fuse_args args = FUSE_ARGS_INIT(0, NULL);
    bool handlers = false, mounted = false;
    cbfs_err e;
    unsigned layout = CBFS_LAYOUT_NEWEST;

    e = cbfs_options_parse(argc, argv, &o, msg, sizeof msg);
    if (e) {
        fprintf(stderr, CBFS_PROG ": %s\n", msg);
        return 1;
    }
    if (o.help) {
        cbfs_options_usage(stdout, CBFS_PROG);
        return 0;
    }
    if (o.version) {
        printf(CBFS_PROG " (cbfs) %s, libfuse %s\n", CBFS_VERSION, fuse_pkgversion());
        return 0;
    }
    if (o.remount) {
        status = cbfs_main_remount(&o);
        cbfs_options_free(&o);
        return status;
    }

    cbfs_main_raise_nofile();
    /* A store write past RLIMIT_FSIZE (a shell's ulimit -f) raises SIGXFSZ,
     * whose default action kills the daemon with every open file unflushed
     * and the mount left dead; ignored, the write fails with EFBIG, which
     * reaches the writer like any failed store. */
    signal(SIGXFSZ, SIG_IGN);
    /* Both directories must exist and be directories before anything else. */
    struct stat store_sb, mnt_sb;
    store_path = cbfs_main_dir(o.store, "store", &store_sb);
    if (!store_path) goto out;
    mnt_path = cbfs_main_dir(o.mountpoint, "mount point", &mnt_sb);
    if (!mnt_path) goto out;
    const bool in_place = store_sb.st_dev == mnt_sb.st_dev && store_sb.st_ino == mnt_sb.st_ino;
    size_t outer;
    if (cbfs_store_root_of(store_path, false, &outer)) {
        cbfs_main_error("store %s is a directory of the store %.*s: mount that one (two "
                        "daemons would serve the same files)",
                        store_path, (int)outer, store_path);
        goto out;
    }
    const size_t slen = strlen(store_path);
    if (!in_place && strncmp(mnt_path, store_path, slen) == 0 &&
        (mnt_path[slen] == '/' || strcmp(store_path, "/") == 0)) {
        cbfs_main_error("mount point %s is inside the store %s: the daemon would serve its own "
                        "mount (give a mount point outside it, or the store itself for an "
                        "in-place mount)",
                        mnt_path, store_path);
        goto out;
    }

    /* Opened before mounting: for an in-place mount this descriptor is the
     * only way back to the files the mount is about to hide. */
    e = cbfs_store_open(store_path, &st);
    if (e) {
        cbfs_main_error("store %s: %s", store_path, cbfs_err_str(e));
        goto out;
    }
    if (cbfs_main_store(st, store_path, &o, &layout, &wrote_conf) < 0) goto out;

    if (!o.foreground) {
        notify_fd = cbfs_main_fork();
        if (notify_fd < 0) goto out;
        cbfs_store_set_pid(st, getpid());
    }
    /* Before any thread starts (cbfs_log_setup is not thread-safe). A
     * background daemon logs to syslog from the start; main's own fatal
     * messages still reach stderr until the mount is up. */
    cbfs_log_setup(CBFS_PROG, !o.foreground, o.debug ? CBFS_LOG_DEBUG
                                             : o.foreground ? CBFS_LOG_WARN
                                                            : CBFS_LOG_INFO);

    fuse_set_log_func(cbfs_main_fuse_log);

    char aside[PATH_MAX + 512]; /* after the log's setup: a background daemon's goes to syslog */
    if (cbfs_store_asides(st, store_path, aside, sizeof aside)) cbfs_log_warn("%s", aside);

    const struct cbfs_engine_config ecfg = {
        .block_size = o.set.block_size,
        .workers = o.set.workers,
        .cache_bytes = o.set.cache_bytes,
        .readahead = o.set.readahead,
        .inflight_bytes = o.set.inflight_bytes,
    };
    e = cbfs_engine_create(&ecfg, &eng);
    if (e) {
        cbfs_main_error("cannot start the engine: %s%s", cbfs_err_str(e),
                        o.foreground ? "" : " (details in syslog)");
        goto out;
    }

    const struct cbfs_fs_options fopt = {
        .store_fd = cbfs_store_fd(st),
        .store_path = store_path,
        .layout = layout,
        .codec = o.set.codec,
        .level = o.set.level,
        .eng = eng,
        .readonly = cbfs_options_readonly(&o),
        .noatime = cbfs_options_noatime(&o),
        .nodiratime = cbfs_options_nodiratime(&o),
        .attr_timeout = o.set.attr_timeout,
        .writeback_cache = o.set.writeback_cache,
        .max_background = o.set.max_background,
    };
    fs = cbfs_fs_new(&fopt);
    if (!fs) {
        cbfs_main_error("cannot set up the filesystem on %s%s", store_path,
                        o.foreground ? "" : " (details in syslog)");
        goto out;
    }

    if (cbfs_options_fuse_list(&o, store_path, &fuse_list) != CBFS_OK ||
        fuse_opt_add_arg(&args, argv[0]) < 0 || fuse_opt_add_arg(&args, "-o") < 0 ||
        fuse_opt_add_arg(&args, fuse_list) < 0 || (o.debug && fuse_opt_add_arg(&args, "-d") < 0)) {
        cbfs_main_error("out of memory building the FUSE options");
        goto out;
    }
    const struct fuse_lowlevel_ops *ops = cbfs_fs_ops(cbfs_options_readonly(&o));
    se = fuse_session_new(&args, ops, sizeof *ops, fs);
    if (!se) {
        /* libfuse printed the offending option on stderr already. */
        cbfs_main_error("cannot create the FUSE session (options: %s)", fuse_list);
        goto out;
    }
    /* libfuse only replaces default dispositions; a shell starting us with
     * '&' leaves SIGINT ignored. These three must always end the loop. */
    signal(SIGTERM, SIG_DFL);
    signal(SIGINT, SIG_DFL);
    signal(SIGHUP, SIG_DFL);
    if (fuse_set_signal_handlers(se) < 0) {
        cbfs_main_error("cannot install signal handlers");
        goto out;
    }
    handlers = true;
    if (fuse_session_mount(se, mnt_path) < 0) {
        cbfs_main_error("cannot mount %s on %s (see the FUSE message above; is /dev/fuse "
                        "usable and, for allow_other, user_allow_other in /etc/fuse.conf?)",
                        store_path, mnt_path);
        goto out;
    }
    mounted = true;
    struct cbfs_main_init init = {
        .mnt = mnt_path, .read_ahead = o.set.fuse_readahead, .notify_fd = notify_fd};
    notify_fd = -1; /* init's from here: released after INIT, or closed below */
    cbfs_chan_on_lost_write(cbfs_op_lost_write, fs);
    const int cerr = cbfs_chan_attach(se, cbfs_main_after_init, &init);
    if (cerr) {
        cbfs_main_error("cannot hook the FUSE channel: %s", strerror(cerr));
        notify_fd = init.notify_fd;
        goto out;
    }
    cbfs_log_info("mounted %s on %s%s (codec %s level %d, block size %u)", store_path, mnt_path,
                  in_place ? " in place" : "", o.set.codec->name, o.set.level, o.set.block_size);
    if (chdir("/") < 0) { /* keep no directory busy; paths are absolute */
    }

    struct fuse_loop_config *lcfg = fuse_loop_cfg_create();
    if (!lcfg) {
        cbfs_main_error("out of memory creating the FUSE loop");
        notify_fd = init.notify_fd;
        goto out;
    }
    const unsigned threads = cbfs_settings_fuse_threads(o.set.fuse_threads);
    fuse_loop_cfg_set_clone_fd(lcfg, o.set.clone_fd);
    fuse_loop_cfg_set_max_threads(lcfg, threads);
    fuse_loop_cfg_set_idle_threads(lcfg, CBFS_MAX_IDLE_THREADS < threads ? CBFS_MAX_IDLE_THREADS
                                                                         : threads);
    const int serr = cbfs_stop_start(se, mnt_path);
    if (serr)
        cbfs_log_warn("cannot set up the stop on a signal (%s): a signal stops the daemon at "
                      "once, losing what the kernel still holds for open files",
                      strerror(serr));
    const int ret = fuse_session_loop_mt(se, lcfg);
    cbfs_main_fuse_log_flush();
    notify_fd = init.notify_fd; /* -1 once released; else closed below: the parent exits 1 */
    const bool forced = cbfs_stop_finish();
    fuse_loop_cfg_destroy(lcfg);
    /* 0: unmounted (also after a signal: stop.h); > 0: the signal that ended
     * the loop at once (libfuse's handler, where stop.h's did not go in). */
    struct stat mst;
    if (ret == -1) {
        /* libfuse's own -1 (not -EPERM): its first serving thread could not
         * start, and its line before this one says why */
        cbfs_main_error("FUSE loop failed: cannot start a thread to serve %s", mnt_path);
    } else if (ret < 0) {
        cbfs_main_error("FUSE loop failed: %s", strerror(-ret));
    } else if (forced) {
        cbfs_log_err("stopped at once by a second signal: what the kernel still held for files "
                     "open on %s (written, not yet sent to the daemon) is lost",
                     mnt_path);
    } else if (ret == 0 && stat(mnt_path, &mst) == -1 && errno == ENOTCONN) {
        /* The channel is gone (ENODEV, or ECONNABORTED: cbfs_chan_read) but
         * the mount is still there with no daemon behind it: the connection
         * was aborted (fusectl), not unmounted. (After an unmount this stat
         * reaches the directory below; with the channel gone it cannot wait
         * on this daemon.) What was written is flushed below all the same. */
        cbfs_log_err("the FUSE connection of %s was aborted%s", mnt_path,
                     cbfs_chan_was_aborted() ? " (ECONNABORTED)" : "");
    } else {
        status = 0;
    }

out:
    if (handlers) fuse_remove_signal_handlers(se);
    if (mounted) fuse_session_unmount(se);
    /* Destroy the session (its destroy callback still sees the fs) before
     * freeing the fs, which flushes files the kernel never released. */
    if (se) fuse_session_destroy(se);
    if (fs && cbfs_fs_free(fs) < 0) status = 1;
    cbfs_engine_destroy(eng);
    /* a first mount that never mounted leaves no store.conf of its attempt:
     * its settings would be every later mount's defaults */
    const cbfs_err ue = wrote_conf && !mounted ? cbfs_store_unwrite_conf(st) : CBFS_OK;
    if (ue)
        cbfs_main_error("store %s: the %s/%s of this failed first mount stays (%s); delete it "
                        "if its settings are not the store's",
                        store_path, CBFS_STORE_DIR, CBFS_STORE_CONF, cbfs_err_str(ue));
    cbfs_store_close(st);
    if (mounted) cbfs_log_info("unmounted %s", mnt_path);
    fuse_opt_free_args(&args);
    free(fuse_list);
    free(mnt_path);
    free(store_path);
    cbfs_options_free(&o);
    if (notify_fd >= 0) close(notify_fd); /* parent reads EOF: exits 1 */
    return status;
}

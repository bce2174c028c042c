/* crashpoint: an LD_PRELOAD library that kills its process (SIGKILL, every thread) on
 * entry to the Nth call that changes files, for crash-point tests of the tools that
 * write to a store (cbfs fsck --repair, --upgrade, mkfs): the call is not made, every
 * earlier one is (in the page cache: a kill, not a power cut).
 * Counted, in one counter for all threads: write/pwrite64 to a descriptor above 2,
 * ftruncate64, fsync, fdatasync, renameat/renameat2, unlinkat, rmdir, mkdir/mkdirat,
 * open64/openat64 with O_CREAT or O_TRUNC, linkat, fchown/fchownat, fchmod/chmod,
 * setxattr/removexattr: what the cbfs tool calls of them (nm -D build/cbfs); and what
 * the daemon calls besides (nm -D build/mount.cbfs; it calls no syscall(2) of its own):
 * writev, fallocate64, truncate64, mknodat, symlinkat, fsetxattr, futimens, utimensat.
 * A write or writev to /dev/fuse (the daemon's replies, whose number and order its
 * threads and the kernel decide) changes no file and is not counted.
 * Environment: CBFS_CRASH_AT=N (0 or unset: never kill, count only),
 *              CBFS_CRASH_TRIGGER=FILE: calls are counted (and logged) only while FILE
 *              exists, so that a test arms the count for one operation of a daemon after
 *              its setup, whatever the setup made it call,
 *              CBFS_CRASH_LOG=FILE (one line per counted call: its number, name, path or fd,
 *              and for a write its length and offset),
 *              CBFS_CRASH_TEAR=BYTES: the Nth call, if a write, first writes its first BYTES
 *              bytes (a write torn by the crash, as a kill inside a large write leaves it).
 * Build: cc -shared -fPIC -o crashpoint.so crashpoint.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <signal.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <sys/uio.h>
#include <unistd.h>

#include "fdpath.h"

static atomic_ulong count;
static ssize_t (*real_pwrite)(int, const void *, size_t, off_t);

/* Is the count armed? (CBFS_CRASH_TRIGGER, if set, must exist) */
static int crash_armed(void)
{
    const char *const trig = getenv("CBFS_CRASH_TRIGGER");
    return !trig || !*trig || access(trig, F_OK) == 0;
}

/* Does a write to fd change a file? Not one to the FUSE device. */
static int crash_file_fd(int fd)
{
    char path[64];
    return fd > 2 && !(fdpath(fd, path, sizeof path) && strcmp(path, "/dev/fuse") == 0);
}

/* One counted call: logs it, and kills the process if it is the Nth. A write
 * (buf, n at off; off -1: write(2), which cannot be torn here) is torn first
 * where CBFS_CRASH_TEAR says. */
static void crash_call(const char *what, const char *path, int fd, const void *buf, size_t n,
                       off_t off)
{
    if (!crash_armed()) return;
    const unsigned long k = atomic_fetch_add(&count, 1) + 1;
    const char *const at = getenv("CBFS_CRASH_AT");
    const unsigned long kill_at = at ? strtoul(at, NULL, 10) : 0;
    const char *const log = getenv("CBFS_CRASH_LOG");
    if (log && *log) {
        char line[4200];
        const int len =
            snprintf(line, sizeof line, "%lu %s %s %d %zu %jd%s\n", k, what, path ? path : "-", fd,
                     n, (intmax_t)off, k == kill_at ? " KILL" : "");
        static int (*ropen)(const char *, int, ...);
        static ssize_t (*rwrite)(int, const void *, size_t);
        if (!ropen) ropen = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
        if (!rwrite) rwrite = (ssize_t(*)(int, const void *, size_t))dlsym(RTLD_NEXT, "write");
        const int lfd = ropen(log, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
        if (lfd >= 0) {
            if (len > 0)
                (void)rwrite(lfd, line, (size_t)len < sizeof line ? (size_t)len : sizeof line - 1);
            close(lfd);
        }
    }
    if (k != kill_at) return;
    const char *const tear = getenv("CBFS_CRASH_TEAR");
    const size_t part = tear ? strtoul(tear, NULL, 10) : 0;
    if (buf && part && off >= 0) {
        if (!real_pwrite)
            real_pwrite =
                (ssize_t(*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
        (void)real_pwrite(fd, buf, part < n ? part : n, off);
    }
    kill(getpid(), SIGKILL);
}

static void crash_point(const char *what, const char *path, int fd)
{
    crash_call(what, path, fd, NULL, 0, 0);
}

#define REAL(ret, name, ...)                                                                       \
    static ret (*real)(__VA_ARGS__);                                                               \
    if (!real) real = (ret(*)(__VA_ARGS__))dlsym(RTLD_NEXT, #name)

ssize_t write(int fd, const void *buf, size_t n)
{
    REAL(ssize_t, write, int, const void *, size_t);
    if (crash_file_fd(fd)) crash_call("write", NULL, fd, buf, n, -1);
    return real(fd, buf, n);
}

ssize_t writev(int fd, const struct iovec *iov, int cnt)
{
    REAL(ssize_t, writev, int, const struct iovec *, int);
    if (crash_file_fd(fd)) crash_call("writev", NULL, fd, NULL, 0, -1);
    return real(fd, iov, cnt);
}

ssize_t pwrite64(int fd, const void *buf, size_t n, off_t off)
{
    REAL(ssize_t, pwrite64, int, const void *, size_t, off_t);
    if (fd > 2) crash_call("pwrite", NULL, fd, buf, n, off);
    return real(fd, buf, n, off);
}

int ftruncate64(int fd, off_t len)
{
    REAL(int, ftruncate64, int, off_t);
    crash_point("ftruncate", NULL, fd);
    return real(fd, len);
}

int truncate64(const char *p, off_t len)
{
    REAL(int, truncate64, const char *, off_t);
    crash_point("truncate", p, -1);
    return real(p, len);
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
    REAL(int, fallocate64, int, int, off_t, off_t);
    crash_call("fallocate", NULL, fd, NULL, (size_t)len, off);
    return real(fd, mode, off, len);
}

int fsync(int fd)
{
    REAL(int, fsync, int);
    crash_point("fsync", NULL, fd);
    return real(fd);
}

int fdatasync(int fd)
{
    REAL(int, fdatasync, int);
    crash_point("fdatasync", NULL, fd);
    return real(fd);
}

int renameat(int ofd, const char *o, int nfd, const char *n)
{
    REAL(int, renameat, int, const char *, int, const char *);
    crash_point("renameat", o, ofd);
    return real(ofd, o, nfd, n);
}

int renameat2(int ofd, const char *o, int nfd, const char *n, unsigned flags)
{
    REAL(int, renameat2, int, const char *, int, const char *, unsigned);
    crash_point("renameat2", o, ofd);
    return real(ofd, o, nfd, n, flags);
}

int unlinkat(int fd, const char *p, int flags)
{
    REAL(int, unlinkat, int, const char *, int);
    crash_point("unlinkat", p, fd);
    return real(fd, p, flags);
}

int rmdir(const char *p)
{
    REAL(int, rmdir, const char *);
    crash_point("rmdir", p, -1);
    return real(p);
}

int mkdir(const char *p, mode_t m)
{
    REAL(int, mkdir, const char *, mode_t);
    crash_point("mkdir", p, -1);
    return real(p, m);
}

int mkdirat(int fd, const char *p, mode_t m)
{
    REAL(int, mkdirat, int, const char *, mode_t);
    crash_point("mkdirat", p, fd);
    return real(fd, p, m);
}

int open64(const char *p, int flags, ...)
{
    REAL(int, open64, const char *, int, ...);
    mode_t m = 0;
    MODE_ARG(flags, m);
    if (flags & (O_CREAT | O_TRUNC)) crash_point("open", p, -1);
    return real(p, flags, m);
}

int openat64(int fd, const char *p, int flags, ...)
{
    REAL(int, openat64, int, const char *, int, ...);
    mode_t m = 0;
    MODE_ARG(flags, m);
    if (flags & (O_CREAT | O_TRUNC)) crash_point("openat", p, fd);
    return real(fd, p, flags, m);
}

int linkat(int ofd, const char *o, int nfd, const char *n, int flags)
{
    REAL(int, linkat, int, const char *, int, const char *, int);
    crash_point("linkat", n, nfd);
    return real(ofd, o, nfd, n, flags);
}

int fchown(int fd, uid_t u, gid_t g)
{
    REAL(int, fchown, int, uid_t, gid_t);
    crash_point("fchown", NULL, fd);
    return real(fd, u, g);
}

int fchownat(int fd, const char *p, uid_t u, gid_t g, int flags)
{
    REAL(int, fchownat, int, const char *, uid_t, gid_t, int);
    crash_point("fchownat", p, fd);
    return real(fd, p, u, g, flags);
}

int fchmod(int fd, mode_t m)
{
    REAL(int, fchmod, int, mode_t);
    crash_point("fchmod", NULL, fd);
    return real(fd, m);
}

int chmod(const char *p, mode_t m)
{
    REAL(int, chmod, const char *, mode_t);
    crash_point("chmod", p, -1);
    return real(p, m);
}

int setxattr(const char *p, const char *name, const void *v, size_t n, int flags)
{
    REAL(int, setxattr, const char *, const char *, const void *, size_t, int);
    crash_point("setxattr", p, -1);
    return real(p, name, v, n, flags);
}

int removexattr(const char *p, const char *name)
{
    REAL(int, removexattr, const char *, const char *);
    crash_point("removexattr", p, -1);
    return real(p, name);
}

int fsetxattr(int fd, const char *name, const void *v, size_t n, int flags)
{
    REAL(int, fsetxattr, int, const char *, const void *, size_t, int);
    crash_point("fsetxattr", name, fd);
    return real(fd, name, v, n, flags);
}

int mknodat(int fd, const char *p, mode_t m, dev_t d)
{
    REAL(int, mknodat, int, const char *, mode_t, dev_t);
    crash_point("mknodat", p, fd);
    return real(fd, p, m, d);
}

int symlinkat(const char *target, int fd, const char *p)
{
    REAL(int, symlinkat, const char *, int, const char *);
    crash_point("symlinkat", p, fd);
    return real(target, fd, p);
}

int futimens(int fd, const struct timespec t[2])
{
    REAL(int, futimens, int, const struct timespec *);
    crash_point("futimens", NULL, fd);
    return real(fd, t);
}

int utimensat(int fd, const char *p, const struct timespec t[2], int flags)
{
    REAL(int, utimensat, int, const char *, const struct timespec *, int);
    crash_point("utimensat", p, fd);
    return real(fd, p, t, flags);
}

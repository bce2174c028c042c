/* openfail: an LD_PRELOAD library that makes the daemon run out of descriptors for one
 * store object: while the file CBFS_OPENFAIL_TRIGGER exists, an open of a path ending in
 * CBFS_OPENFAIL_NAME (open64 and openat64, the daemon's open and openat, or
 * open_by_handle_at, how its fd cache reopens what it evicted) fails with EMFILE, as on
 * a daemon whose every other descriptor is taken. The open is made, then its descriptor
 * closed again: a handle names no path before it is opened. A trigger holding a number
 * N lets the next N of them through first (let_through). Everything else goes through
 * untouched.
 * Build: cc -shared -fPIC -o openfail.so openfail.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdpath.h"

/* A trigger file that holds a number N > 0 lets the next N such opens through, counting
 * down in the file (one caller at a time: a test sweeping where in a call the failure
 * lands). @return true if this open is one of them. */
static int let_through(const char *trig)
{
    char buf[32];
    const int fd = open(trig, O_RDWR | O_CLOEXEC);
    if (fd < 0) return 0;
    const ssize_t n = pread(fd, buf, sizeof buf - 1, 0);
    buf[n > 0 ? n : 0] = '\0';
    long left = strtol(buf, NULL, 10);
    if (left > 0) {
        const int len = snprintf(buf, sizeof buf, "%ld\n", left - 1);
        if (ftruncate(fd, 0) != 0 || pwrite(fd, buf, (size_t)len, 0) != len)
            left = 0; /* the count is lost: fail from here */
    }
    close(fd);
    return left > 0;
}

static int refused(int fd)
{
    const char *const name = getenv("CBFS_OPENFAIL_NAME");
    const char *const trig = getenv("CBFS_OPENFAIL_TRIGGER");
    char path[4096];
    if (fd < 0 || !name || !*name || !trig || access(trig, F_OK) != 0) return 0;
    if (!fdpath(fd, path, sizeof path)) return 0;
    const size_t pl = strlen(path), nl = strlen(name);
    if (pl < nl || strcmp(path + pl - nl, name) != 0) return 0;
    if (let_through(trig)) return 0;
    close(fd);
    errno = EMFILE;
    return 1;
}

int open_by_handle_at(int mount_fd, struct file_handle *fh, int flags)
{
    static int (*real)(int, struct file_handle *, int);
    if (!real)
        real = (int (*)(int, struct file_handle *, int))dlsym(RTLD_NEXT, "open_by_handle_at");
    const int fd = real(mount_fd, fh, flags);
    return refused(fd) ? -1 : fd;
}

int openat64(int dirfd, const char *path, int flags, ...)
{
    static int (*real)(int, const char *, int, ...);
    if (!real) real = (int (*)(int, const char *, int, ...))dlsym(RTLD_NEXT, "openat64");
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    const int fd = real(dirfd, path, flags, mode);
    return refused(fd) ? -1 : fd;
}

int open64(const char *path, int flags, ...)
{
    mode_t mode = 0;
    MODE_ARG(flags, mode);
    return openat64(AT_FDCWD, path, flags, mode);
}

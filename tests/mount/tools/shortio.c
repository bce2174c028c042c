/* shortio: an LD_PRELOAD library that makes pread and pwrite on the files
 * below one directory move at most half of what they are asked for, as an
 * NFS, CIFS or FUSE store may at any offset (a local file system does so only
 * at the end of a file). Everything else goes through untouched. For a
 * daemon under test: its store I/O must loop until all is moved.
 * With CBFS_SHORTIO_BAD=N, a read of those files that reaches byte N fails
 * there as a bad sector does: a read that starts before N ends short at N,
 * one that starts at N gets EIO.
 * Build: cc -shared -fPIC -o shortio.so shortio.c -ldl
 * Use:   CBFS_SHORTIO_DIR=/abs/store LD_PRELOAD=/abs/shortio.so mount.cbfs ... */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "fdpath.h"

/* whether fd is a file below CBFS_SHORTIO_DIR */
static int shortio_below(int fd)
{
    const char *const dir = getenv("CBFS_SHORTIO_DIR");
    if (!dir || !*dir) return 0;
    char path[4096];
    if (!fdpath(fd, path, sizeof path)) return 0;
    const size_t len = strlen(dir);
    return strncmp(path, dir, len) == 0 && path[len] == '/';
}

static size_t shortio_len(int fd, size_t count)
{
    return count > 1 && shortio_below(fd) ? count / 2 : count;
}

ssize_t pread64(int fd, void *buf, size_t count, off_t off)
{
    static ssize_t (*real)(int, void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, void *, size_t, off_t))dlsym(RTLD_NEXT, "pread64");
    const char *const bad = getenv("CBFS_SHORTIO_BAD");
    if (bad && count && shortio_below(fd)) {
        const off_t at = (off_t)strtoll(bad, NULL, 10);
        if (off <= at && at - off < (off_t)count) {
            if (off == at) {
                errno = EIO;
                return -1;
            }
            count = (size_t)(at - off) * 2; /* halved below: ends at the bad byte */
        }
    }
    return real(fd, buf, shortio_len(fd, count), off);
}

ssize_t pread(int fd, void *buf, size_t count, off_t off)
{
    return pread64(fd, buf, count, off);
}

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off)
{
    static ssize_t (*real)(int, const void *, size_t, off_t);
    if (!real) real = (ssize_t (*)(int, const void *, size_t, off_t))dlsym(RTLD_NEXT, "pwrite64");
    return real(fd, buf, shortio_len(fd, count), off);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
    return pwrite64(fd, buf, count, off);
}

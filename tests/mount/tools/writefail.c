/* writefail: an LD_PRELOAD library that makes a store fail its writes while
 * it still reads, as a failing disk, an SSD gone read-only at the end of its
 * life or a thin pool out of room does. While the file CBFS_WRITEFAIL_TRIGGER
 * exists, pwrite, ftruncate, fallocate, fsync and fdatasync of files below the
 * directory CBFS_WRITEFAIL_DIR fail with errno CBFS_WRITEFAIL_ERRNO (default
 * EIO); reads and everything else go through untouched.
 * Build: cc -shared -fPIC -o writefail.so writefail.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <unistd.h>

#include "fdpath.h"

/* whether a write to fd must fail now; sets errno when it must */
static int writefail_now(int fd)
{
    const char *const trig = getenv("CBFS_WRITEFAIL_TRIGGER");
    const char *const dir = getenv("CBFS_WRITEFAIL_DIR");
    char path[4096];
    if (!trig || !dir || !*dir || access(trig, F_OK) != 0 || !fdpath(fd, path, sizeof path))
        return 0;
    const size_t len = strlen(dir);
    if (strncmp(path, dir, len) != 0 || path[len] != '/') return 0;
    const char *const e = getenv("CBFS_WRITEFAIL_ERRNO");
    errno = e ? atoi(e) : EIO;
    return 1;
}

#define WRITEFAIL_REAL(name) \
    static __typeof__(name) *real; \
    if (!real) real = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

ssize_t pwrite64(int fd, const void *buf, size_t count, off_t off)
{
    WRITEFAIL_REAL(pwrite64);
    return writefail_now(fd) ? -1 : real(fd, buf, count, off);
}

ssize_t pwrite(int fd, const void *buf, size_t count, off_t off)
{
    return pwrite64(fd, buf, count, off);
}

int ftruncate64(int fd, off_t len)
{
    WRITEFAIL_REAL(ftruncate64);
    return writefail_now(fd) ? -1 : real(fd, len);
}

int ftruncate(int fd, off_t len)
{
    return ftruncate64(fd, len);
}

int fallocate64(int fd, int mode, off_t off, off_t len)
{
    WRITEFAIL_REAL(fallocate64);
    return writefail_now(fd) ? -1 : real(fd, mode, off, len);
}

int fallocate(int fd, int mode, off_t off, off_t len)
{
    return fallocate64(fd, mode, off, len);
}

int fsync(int fd)
{
    WRITEFAIL_REAL(fsync);
    return writefail_now(fd) ? -1 : real(fd);
}

int fdatasync(int fd)
{
    WRITEFAIL_REAL(fdatasync);
    return writefail_now(fd) ? -1 : real(fd);
}

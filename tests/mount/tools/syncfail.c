/* syncfail: an LD_PRELOAD library that makes the store report a writeback error as
 * Linux does (errseq): once per open file. When the file CBFS_SYNCFAIL_TRIGGER exists,
 * the next fsync or fdatasync of a file named CBFS_SYNCFAIL_NAME (a path ending in
 * /NAME) removes it and marks every descriptor the process then has open on that file;
 * each marked descriptor's next fsync or fdatasync fails with EIO once (the daemon opens
 * one descriptor per FUSE handle, and dups none). Everything else goes through untouched.
 * Build: cc -shared -fPIC -o syncfail.so syncfail.c -ldl */
#define _GNU_SOURCE
#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "fdpath.h"

#define MAXFD 65536
static unsigned char marked[MAXFD];
static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;

static int named(int fd)
{
    const char *const name = getenv("CBFS_SYNCFAIL_NAME");
    char path[4096];
    if (!name || !*name || !fdpath(fd, path, sizeof path)) return 0;
    const size_t pl = strlen(path), nl = strlen(name);
    return pl > nl && path[pl - nl - 1] == '/' && strcmp(path + pl - nl, name) == 0;
}

static int should_fail(int fd)
{
    if (fd < 0 || fd >= MAXFD || !named(fd)) return 0;
    pthread_mutex_lock(&mu);
    const char *const trig = getenv("CBFS_SYNCFAIL_TRIGGER");
    if (trig && unlink(trig) == 0) {
        DIR *d = opendir("/proc/self/fd");
        struct dirent *de;
        while (d && (de = readdir(d))) {
            const int o = atoi(de->d_name);
            if (de->d_name[0] != '.' && o >= 0 && o < MAXFD && o != dirfd(d) && named(o))
                marked[o] = 1;
        }
        if (d) closedir(d);
    }
    const int f = marked[fd];
    marked[fd] = 0;
    pthread_mutex_unlock(&mu);
    return f;
}

int fsync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fsync");
    const int r = real(fd);
    if (r == 0 && should_fail(fd)) {
        errno = EIO;
        return -1;
    }
    return r;
}

int fdatasync(int fd)
{
    static int (*real)(int);
    if (!real) real = (int (*)(int))dlsym(RTLD_NEXT, "fdatasync");
    const int r = real(fd);
    if (r == 0 && should_fail(fd)) {
        errno = EIO;
        return -1;
    }
    return r;
}

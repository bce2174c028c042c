/* dirswap: an LD_PRELOAD library that stands in for a user who swaps a directory of the
 * store for a symlink to another as cbfs opens it again by its path: at the first open64
 * of exactly CBFS_DIRSWAP_PATH with O_DIRECTORY, that directory is first renamed to
 * PATH.aside and a symlink PATH -> CBFS_DIRSWAP_TO made; then the call is made.
 * Everything else goes through untouched.
 * Build: cc -shared -fPIC -o dirswap.so dirswap.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

int open64(const char *path, int flags, ...)
{
    static int (*real)(const char *, int, ...);
    static int done;
    if (!real) real = (int (*)(const char *, int, ...))dlsym(RTLD_NEXT, "open64");
    mode_t mode = 0;
    if (flags & (O_CREAT | O_TMPFILE)) {
        va_list ap;
        va_start(ap, flags);
        mode = (mode_t)va_arg(ap, int);
        va_end(ap);
    }
    const char *const at = getenv("CBFS_DIRSWAP_PATH");
    const char *const to = getenv("CBFS_DIRSWAP_TO");
    if (!done && at && to && (flags & O_DIRECTORY) && strcmp(path, at) == 0) {
        char aside[4096];
        done = 1;
        snprintf(aside, sizeof aside, "%s.aside", path);
        if (rename(path, aside) != 0 || symlink(to, path) != 0) perror("dirswap");
    }
    return real(path, flags, mode);
}

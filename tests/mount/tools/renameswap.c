/* renameswap: an LD_PRELOAD library that stands in for a user who swaps a name of the
 * store for a file of its own as cbfs moves it: at the first renameat2 whose old name
 * ends in CBFS_RENAMESWAP_NAME, that name is first renamed to NAME.aside in its own
 * directory, and the file CBFS_RENAMESWAP_WITH (an absolute path on the same file
 * system) to the name; then the call is made. Everything else goes through untouched.
 * Build: cc -shared -fPIC -o renameswap.so renameswap.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int renameat2(int olddirfd, const char *oldpath, int newdirfd, const char *newpath,
              unsigned int flags)
{
    static int (*real)(int, const char *, int, const char *, unsigned int);
    static int done;
    if (!real)
        real = (int (*)(int, const char *, int, const char *, unsigned int))dlsym(RTLD_NEXT,
                                                                                  "renameat2");
    const char *const name = getenv("CBFS_RENAMESWAP_NAME");
    const char *const with = getenv("CBFS_RENAMESWAP_WITH");
    const size_t pl = strlen(oldpath), nl = name ? strlen(name) : 0;
    if (!done && name && *name && with && pl >= nl && strcmp(oldpath + pl - nl, name) == 0) {
        char aside[4096];
        done = 1;
        snprintf(aside, sizeof aside, "%s.aside", oldpath);
        if (renameat(olddirfd, oldpath, olddirfd, aside) != 0 ||
            renameat(AT_FDCWD, with, olddirfd, oldpath) != 0)
            perror("renameswap");
    }
    return real(olddirfd, oldpath, newdirfd, newpath, flags);
}

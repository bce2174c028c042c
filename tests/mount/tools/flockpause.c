/* flockpause: an LD_PRELOAD library that stops a program at its first
 * flock(2) of one file, before or after the call, until the test lets it go:
 * the window between a tool's look at a store and its lock (or the time it
 * holds the lock) made as wide as a test needs, without a hook in the tool.
 * Every other flock goes through untouched.
 *   CBFS_FLOCKPAUSE_PATH  the file or directory (absolute, as /proc/self/fd
 *                         names it: resolved, no symlinks)
 *   CBFS_FLOCKPAUSE_WHEN  "before" (default) or "after" the real flock
 *   CBFS_FLOCKPAUSE_DIR   where it makes "paused" (holding its pid) when it
 *                         stops, and waits (60 s at most) for "go" to appear
 * Build: cc -shared -fPIC -o flockpause.so flockpause.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <time.h>
#include <unistd.h>

#include "fdpath.h"

/* whether fd is CBFS_FLOCKPAUSE_PATH itself */
static int flockpause_is_it(int fd)
{
    const char *const want = getenv("CBFS_FLOCKPAUSE_PATH");
    if (!want || !*want) return 0;
    char path[4096];
    return fdpath(fd, path, sizeof path) && strcmp(path, want) == 0;
}

/* Says it stopped, then waits for the test's "go". */
static void flockpause_wait(void)
{
    const char *const dir = getenv("CBFS_FLOCKPAUSE_DIR");
    if (!dir) return;
    char paused[4096], go[4096];
    snprintf(paused, sizeof paused, "%s/paused", dir);
    snprintf(go, sizeof go, "%s/go", dir);
    FILE *const f = fopen(paused, "we");
    if (f) {
        fprintf(f, "%ld\n", (long)getpid());
        fclose(f);
    }
    for (int i = 0; i < 6000 && access(go, F_OK) != 0; i++)
        nanosleep(&(struct timespec){0, 10 * 1000 * 1000}, NULL);
}

int flock(int fd, int op)
{
    static int (*real)(int, int);
    static int done;
    if (!real) real = (int (*)(int, int))dlsym(RTLD_NEXT, "flock");
    const char *const when = getenv("CBFS_FLOCKPAUSE_WHEN");
    const int after = when && strcmp(when, "after") == 0;
    const int pause = !done && flockpause_is_it(fd);
    if (pause) done = 1;
    if (pause && !after) flockpause_wait();
    const int rc = real(fd, op);
    if (pause && after && rc == 0) {
        const int saved = errno;
        flockpause_wait();
        errno = saved;
    }
    return rc;
}

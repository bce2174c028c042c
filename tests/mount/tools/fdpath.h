/* fdpath.h: for the LD_PRELOAD shims (shortio.c, flockpause.c), the path an
 * fd names, as /proc/self/fd shows it (resolved, no symlinks). @return 1 with
 * path filled, or 0 (not a path, or too long). */
#ifndef CBFS_TESTS_FDPATH_H
#define CBFS_TESTS_FDPATH_H
#include <stdio.h>
#include <unistd.h>

static int fdpath(int fd, char *path, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, path, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) return 0;
    path[n] = '\0';
    return 1;
}
#endif

/* fdpath.h: for the LD_PRELOAD shims of tests/mount/tools: the path an fd
 * names, and the mode argument of an open. */
#ifndef CBFS_TESTS_FDPATH_H
#define CBFS_TESTS_FDPATH_H
#include <fcntl.h>
#include <stdarg.h>
#include <stdio.h>
#include <unistd.h>

/* The path fd names, as /proc/self/fd shows it (resolved, no symlinks).
 * @return 1 with path filled, or 0 (not a path, or too long). */
static inline int fdpath(int fd, char *path, size_t cap)
{
    char link[64];
    snprintf(link, sizeof link, "/proc/self/fd/%d", fd);
    const ssize_t n = readlink(link, path, cap - 1);
    if (n <= 0 || (size_t)n >= cap - 1) return 0;
    path[n] = '\0';
    return 1;
}

/* The mode argument of an open that creates, in a function whose last named
 * parameter is flags. */
#define MODE_ARG(flags, mode)                                                                      \
    do {                                                                                           \
        if ((flags) & (O_CREAT | O_TMPFILE)) {                                                     \
            va_list ap;                                                                            \
            va_start(ap, flags);                                                                   \
            (mode) = va_arg(ap, mode_t);                                                           \
            va_end(ap);                                                                            \
        }                                                                                          \
    } while (0)
#endif

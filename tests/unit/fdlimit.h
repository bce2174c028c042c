/* Running a test out of file descriptors: lowers the soft RLIMIT_NOFILE of
 * the test process so that only the next `spare` fds can be opened.
 * Criterion runs each test in its own process, so the limit dies with it;
 * restore it anyway before checking what should work again. Header-only. */
#ifndef CBFS_TEST_FDLIMIT_H
#define CBFS_TEST_FDLIMIT_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

/* spare 0: no open() succeeds; spare 1: exactly one does (the lowest free
 * fd number is the only one left below the limit). @return the old soft
 * limit, for cbfs_td_nofile_restore. */
static inline rlim_t cbfs_td_nofile_squeeze(unsigned spare)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    const rlim_t old = rl.rlim_cur;
    const int lowest = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cr_assert(lowest >= 0);
    close(lowest);
    rl.rlim_cur = (rlim_t)lowest + spare;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    return old;
}

static inline void cbfs_td_nofile_restore(rlim_t old)
{
    struct rlimit rl;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &rl), 0);
    rl.rlim_cur = old;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
}

#endif

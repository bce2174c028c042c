/* Running a test out of memory: caps the test process's address space
 * (RLIMIT_AS) just above what it has mapped, so that what it maps beyond
 * `spare` bytes fails (malloc, a thread's stack, a codec's buffers).
 * Criterion runs each test in its own process, so the limit dies with it;
 * restore it anyway before checking what should work again. Header-only.
 *
 * Not under a sanitizer: its runtime maps memory for itself (shadow,
 * symbolizer) and dies, or hangs in its report, when it cannot; such a test
 * is not built there (#ifndef CBFS_TD_SANITIZED; Criterion's skip leaks a
 * little, which LeakSanitizer reports as a failure). */
#ifndef CBFS_TEST_ASLIMIT_H
#define CBFS_TEST_ASLIMIT_H

#include <criterion/criterion.h>
#include <stdio.h>
#include <sys/resource.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CBFS_TD_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define CBFS_TD_SANITIZED 1
#endif
#endif

/* @return the old limit, for cbfs_td_as_restore. */
static inline struct rlimit cbfs_td_as_squeeze(size_t spare)
{
    unsigned long pages = 0;
    FILE *const f = fopen("/proc/self/statm", "r");
    cr_assert_not_null(f);
    cr_assert_eq(fscanf(f, "%lu", &pages), 1);
    fclose(f);
    struct rlimit old, low;
    cr_assert_eq(getrlimit(RLIMIT_AS, &old), 0);
    low = old;
    low.rlim_cur = (rlim_t)pages * (rlim_t)sysconf(_SC_PAGESIZE) + spare;
    cr_assert_eq(setrlimit(RLIMIT_AS, &low), 0);
    return old;
}

static inline void cbfs_td_as_restore(struct rlimit old)
{
    cr_assert_eq(setrlimit(RLIMIT_AS, &old), 0);
}

#endif

/* A pthread mutex that records its owner, so that "caller holds the lock" is a
 * checked contract: cbfs_assert_held(&f->lock), as the kernel's
 * lockdep_assert_held(). The owner is kept in every build (one relaxed store
 * per lock and unlock); the checks are assert()s and follow NDEBUG. */
#ifndef CBFS_MUTEX_H
#define CBFS_MUTEX_H

#include <assert.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

struct cbfs_mutex {
    pthread_mutex_t m;
    _Atomic uintptr_t owner; /* holder's cbfs_mutex_self(), 0 when free: written by the holder */
};

/* Nonzero and unique among live threads (glibc's pthread_t is an address). */
static inline uintptr_t cbfs_mutex_self(void)
{
    return (uintptr_t)pthread_self();
}

/* Exact for the calling thread: only a holder stores its own id, and it
 * clears it before it lets go, so no other thread's store can match. */
static inline bool cbfs_mutex_held(const struct cbfs_mutex *mu)
{
    return atomic_load_explicit(&mu->owner, memory_order_relaxed) == cbfs_mutex_self();
}

#define cbfs_assert_held(mu) assert(cbfs_mutex_held(mu))
#define cbfs_assert_not_held(mu) assert(!cbfs_mutex_held(mu))

static inline void cbfs_mutex_init(struct cbfs_mutex *mu)
{
    pthread_mutex_init(&mu->m, NULL);
    atomic_init(&mu->owner, 0);
}

static inline void cbfs_mutex_destroy(struct cbfs_mutex *mu)
{
    assert(atomic_load_explicit(&mu->owner, memory_order_relaxed) == 0);
    pthread_mutex_destroy(&mu->m);
}

static inline void cbfs_mutex_lock(struct cbfs_mutex *mu)
{
    cbfs_assert_not_held(mu); /* not recursive: this would deadlock */
    pthread_mutex_lock(&mu->m);
    atomic_store_explicit(&mu->owner, cbfs_mutex_self(), memory_order_relaxed);
}

static inline void cbfs_mutex_unlock(struct cbfs_mutex *mu)
{
    cbfs_assert_held(mu);
    atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
    pthread_mutex_unlock(&mu->m);
}

/* pthread_cond_wait on mu, which the caller holds; mu has no owner while the
 * caller sleeps. */
static inline void cbfs_mutex_wait(struct cbfs_mutex *mu, pthread_cond_t *cond)
{
    cbfs_assert_held(mu);
    atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
    pthread_cond_wait(cond, &mu->m);
    atomic_store_explicit(&mu->owner, cbfs_mutex_self(), memory_order_relaxed);
}

/* Like cbfs_mutex_wait, for at most ns nanoseconds of CLOCK_REALTIME (the
 * condition variable's default clock). */
static inline void cbfs_mutex_timedwait(struct cbfs_mutex *mu, pthread_cond_t *cond, long ns)
{
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_nsec += ns;
    until.tv_sec += until.tv_nsec / 1000000000L;
    until.tv_nsec %= 1000000000L;
    cbfs_assert_held(mu);
    atomic_store_explicit(&mu->owner, 0, memory_order_relaxed);
    (void)pthread_cond_timedwait(cond, &mu->m, &until);
    atomic_store_explicit(&mu->owner, cbfs_mutex_self(), memory_order_relaxed);
}

#endif

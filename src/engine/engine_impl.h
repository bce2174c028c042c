/* Engine internals shared by engine.c (pool, budget, stats) and the file
 * module (file_impl.h: per-file state).
 *
 * Locks, in the only order they may nest:
 *   1. f->lock (struct cbfs_file, file_impl.h): fields marked "lock" there.
 *      A struct cbfs_mutex: "caller holds f->lock" is cbfs_assert_held().
 *      The committer role (f->committing) is taken under it, then kept
 *      while the lock is dropped for store I/O (committer-role fields); so
 *      is the sync role (f->syncing: the sidecar's tail). A sync that fails
 *      waits, holding the sync role, for the committer role to be free
 *      (cbfs_file_revert); the committer never waits for the sync role.
 *   2. The cache lock (cache.c; a struct cbfs_mutex too): buckets, the
 *      two lists (used, ahead), bytes, ra_bytes and filled; each entry's
 *      state, refs, ra_charge and links (cache.h). Under it only eng->lock,
 *      which the release hook takes to give an evicted block's buffer back
 *      (cbfs_engine_buf_put).
 *   3. Leaves, taken under the above or alone; no other lock is taken under
 *      them (they wait only on their own condition variables):
 *      eng->lock (below): inflight, budget_waiters, next_serial, bufs;
 *      the pool lock (pool.c): the job queue and the shutdown flag.
 * Waits: holding f->lock, never wait for in-flight budget
 * (cbfs_engine_budget_wait), for another cache loader (cbfs_cache_get) or
 * for a commit, except through cbfs_mutex_wait on f->cond (which releases
 * it): a pool thread that commits or loads may itself be waiting for f->lock.
 * Fields without a lock are immutable after create, or relaxed atomics (the
 * st_ counters). */
#ifndef CBFS_ENGINE_IMPL_H
#define CBFS_ENGINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cbfs/engine.h"
#include "cbfs/pool.h"
#include "engine/cache.h"

/* Recycled block and frame buffers of one size (see cbfs_engine_buf_get). */
struct cbfs_bufclass {
    size_t size;    /* eng->lock; 0 = unused class */
    void *head;     /* eng->lock: free buffers, linked through their first bytes */
    unsigned count; /* eng->lock */
};
#define CBFS_BUF_CLASSES 4

struct cbfs_engine {
    struct cbfs_engine_config cfg; /* immutable after create (defaults filled in) */
    struct cbfs_pool *pool;        /* immutable */
    struct cbfs_cache *cache;      /* immutable */

    pthread_mutex_t lock;
    pthread_cond_t budget;  /* broadcast when inflight drops to the bound with waiters */
    uint64_t inflight;      /* lock: uncompressed bytes sealed but not yet committed */
    unsigned budget_waiters; /* lock: threads in cbfs_engine_budget_wait's wait */
    uint64_t next_serial;   /* lock: file serials for cache keys */
    struct cbfs_bufclass bufs[CBFS_BUF_CLASSES]; /* lock */

    /* Statistics: relaxed atomics st_<name>, written from any thread. */
#define CBFS_ENGINE_COUNTER_FIELD_(name) _Atomic uint64_t st_##name;
    CBFS_ENGINE_COUNTERS(CBFS_ENGINE_COUNTER_FIELD_)
#undef CBFS_ENGINE_COUNTER_FIELD_
};

#define CBFS_STAT_ADD(eng, field, v) \
    atomic_fetch_add_explicit(&(eng)->field, (uint64_t)(v), memory_order_relaxed)

/* In-flight byte budget (engine.c). take never blocks; wait blocks until the
 * total is below the bound; drop releases and wakes writers. */
void cbfs_engine_budget_take(struct cbfs_engine *eng, uint64_t bytes);
void cbfs_engine_budget_wait(struct cbfs_engine *eng);
void cbfs_engine_budget_drop(struct cbfs_engine *eng, uint64_t bytes);
uint64_t cbfs_engine_new_serial(struct cbfs_engine *eng);

/* Block-sized and frame-sized buffers are taken and given back at disk speed
 * on every thread; recycling them (a bounded free list per size, at most the
 * in-flight budget's worth plus 8) avoids malloc churn, the page faults of
 * fresh mmap'd memory, and per-thread arenas that keep growing over a long
 * backup. get: NULL on allocation failure. put: buf from get with the same
 * size, or NULL. Both take eng->lock (a leaf: callable under file->lock). */
void *cbfs_engine_buf_get(struct cbfs_engine *eng, size_t size);
void cbfs_engine_buf_put(struct cbfs_engine *eng, void *buf, size_t size);

#endif

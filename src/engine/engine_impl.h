/* Engine internals shared by engine.c (pool, budget, stats) and file.c (per-
 * file state). Lock order: file->lock → eng->lock; the cache and pool locks
 * are leaves. Never wait for in-flight budget or a commit holding file->lock
 * except through pthread_cond_wait on file->cond (which releases it). */
#ifndef CBFS_ENGINE_IMPL_H
#define CBFS_ENGINE_IMPL_H

#include <pthread.h>
#include <stdatomic.h>

#include "cbfs/engine.h"
#include "cbfs/pool.h"
#include "engine/cache.h"

struct cbfs_engine {
    struct cbfs_engine_config cfg; /* immutable after create (defaults filled in) */
    struct cbfs_pool *pool;        /* immutable */
    struct cbfs_cache *cache;      /* immutable */

    pthread_mutex_t lock;
    pthread_cond_t budget;  /* signalled when inflight drops */
    uint64_t inflight;      /* lock: uncompressed bytes sealed but not yet committed */
    uint64_t next_serial;   /* lock: file serials for cache keys */

    /* Statistics: relaxed atomics, written from any thread. */
    _Atomic uint64_t st_logical_written, st_physical_written;
    _Atomic uint64_t st_logical_read, st_physical_read;
    _Atomic uint64_t st_blocks_compressed, st_blocks_raw, st_blocks_hole;
    _Atomic uint64_t st_ns_compress, st_ns_store_write, st_ns_wait_slots;
    _Atomic uint64_t st_ns_decompress, st_ns_store_read;
    _Atomic uint64_t st_cache_hits, st_cache_misses, st_readahead_hits;
};

#define CBFS_STAT_ADD(eng, field, v) \
    atomic_fetch_add_explicit(&(eng)->field, (uint64_t)(v), memory_order_relaxed)

/* In-flight byte budget (engine.c). take never blocks; wait blocks until the
 * total is below the bound; drop releases and wakes writers. */
void cbfs_engine_budget_take(struct cbfs_engine *eng, uint64_t bytes);
void cbfs_engine_budget_wait(struct cbfs_engine *eng);
void cbfs_engine_budget_drop(struct cbfs_engine *eng, uint64_t bytes);
uint64_t cbfs_engine_new_serial(struct cbfs_engine *eng);

#endif

/* Decompressed-block cache: a bounded LRU keyed by (file serial, block,
 * generation), so an overwritten block (new generation) can never be served
 * stale. Entries are reference-counted: whoever holds a reference may read
 * ent->data without the cache lock; eviction skips referenced entries.
 * A LOADING entry has exactly one loader, which must call cbfs_cache_fill;
 * other readers of the same key wait for it instead of decoding twice. The
 * bound counts the entries' buffers (cap), the memory they hold.
 *
 * Read-ahead has a budget of its own, half the bound: the blocks reserved
 * for read-ahead and not yet read count against it (their charge, given at
 * reserve) until a reader gets them (get or peek), their load fails, they
 * are evicted or they go stale. Eviction spares unread read-ahead while
 * anything else can go. Without these, every sequential reader's window filled the cache
 * alone, and with many readers (a restore with 8 or 16 streams) read-ahead
 * evicted other readers' read-ahead before it was read: each such block was
 * read from the store and decoded twice (docs/PERF.md, fifteenth session).
 * Unread read-ahead is stale once four bounds' worth of blocks have been
 * filled after it was reserved (CBFS_CACHE_STALE_BOUNDS): its reader has
 * stopped or gone elsewhere, and it must neither hold the budget nor outlive
 * other blocks for good. That is checked at each reservation and when an
 * eviction is due. */
#ifndef CBFS_ENGINE_CACHE_H
#define CBFS_ENGINE_CACHE_H

#include <stdbool.h>
#include <stdint.h>

#include "cbfs/err.h"

enum cbfs_cache_state { CBFS_CACHE_LOADING, CBFS_CACHE_READY, CBFS_CACHE_FAILED };

struct cbfs_cache_ent {
    uint64_t serial, block, gen; /* key: immutable */
    unsigned char *data;         /* len bytes; set once by fill, immutable while READY */
    uint32_t len;                /* as data */
    size_t cap;                  /* data's allocation size, for the release hook: set by fill */
    enum cbfs_cache_state state; /* cache lock */
    unsigned refs;               /* cache lock */
    size_t ra_charge;            /* of the read-ahead budget, until read, gone or found
                                    stale; not 0: reserved by read-ahead and unread (so
                                    READY and charged is a read-ahead hit): cache lock */
    uint64_t born;               /* the cache's fill clock when inserted: immutable */
    struct cbfs_cache_ent *hnext; /* hash chain: cache lock */
    struct cbfs_cache_ent *lprev, *lnext; /* its list (cache.c): cache lock */
};

struct cbfs_cache;

/* Takes back a READY entry's buffer when the entry goes (eviction, destroy),
 * with the cap given to fill. Called under the cache's lock (at destroy, with
 * no other user): it must not call into the cache. */
typedef void cbfs_cache_release_fn(void *arg, void *data, size_t cap);

/* release NULL: buffers are malloc'd and freed. */
cbfs_err cbfs_cache_create(uint64_t cap_bytes, cbfs_cache_release_fn *release, void *arg,
                           struct cbfs_cache **out);
void cbfs_cache_destroy(struct cbfs_cache *c); /* no references may be held; NULL ok */

/* @return a referenced entry for the key: READY (data valid), or a new
 * LOADING entry with *must_fill set, which the caller must fill. Waits while
 * another thread loads it. *ra_hit is set when the entry came from read-ahead.
 * NULL only on allocation failure. */
struct cbfs_cache_ent *cbfs_cache_get(struct cbfs_cache *c, uint64_t serial, uint64_t block,
                                      uint64_t gen, bool *must_fill, bool *ra_hit);

/* A referenced READY entry, or NULL (absent, loading, failed): never waits,
 * never inserts — for callers that hold a file lock. A use like get's (it is
 * no longer unread read-ahead), but reports no read-ahead hit. */
struct cbfs_cache_ent *cbfs_cache_peek(struct cbfs_cache *c, uint64_t serial, uint64_t block,
                                       uint64_t gen);

/* For read-ahead: a referenced LOADING entry if the key is absent and the
 * read-ahead budget has charge bytes left (charged to it), else NULL:
 * already cached or loading, no memory, or *full set (the budget is spent:
 * read ahead later, once readers have caught up). */
struct cbfs_cache_ent *cbfs_cache_reserve(struct cbfs_cache *c, uint64_t serial,
                                          uint64_t block, uint64_t gen, size_t charge,
                                          bool *full);

/* Completes a LOADING entry: takes ownership of data (len bytes of content in
 * a buffer of cap bytes, given back through the release hook) when ok; a
 * failed load (ok false, data NULL) wakes waiters, who then load themselves.
 * Does not drop the caller's reference. */
void cbfs_cache_fill(struct cbfs_cache *c, struct cbfs_cache_ent *ent, unsigned char *data,
                     uint32_t len, size_t cap, bool ok);

void cbfs_cache_put(struct cbfs_cache *c, struct cbfs_cache_ent *ent);

#endif

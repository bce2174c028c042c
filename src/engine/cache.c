/* Bounded LRU of decompressed blocks with single-loader entries (cache.h). */
#include <pthread.h>
#include <stdlib.h>

#include "engine/cache.h"

struct cbfs_cache {
    pthread_mutex_t lock;
    pthread_cond_t loaded;           /* broadcast when any LOADING entry completes */
    struct cbfs_cache_ent **buckets; /* lock */
    size_t nbuckets;                 /* immutable, power of two */
    struct cbfs_cache_ent *mru, *lru; /* lock */
    uint64_t bytes, cap;             /* lock (the buffers' sizes, not their content); cap immutable */
    uint64_t ra_bytes, ra_cap;       /* read-ahead not yet read (cache.h): lock; ra_cap immutable */
    cbfs_cache_release_fn *release;  /* immutable; NULL: free */
    void *release_arg;               /* immutable */
};

/* Gives back e's buffer and frees e (unlinked or never linked). Lock held, or
 * the cache is being destroyed (no other user). */
static void cbfs_cache_ent_free(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    if (e->data && c->release) c->release(c->release_arg, e->data, e->cap);
    else free(e->data);
    free(e);
}

static size_t cbfs_cache_slot(const struct cbfs_cache *c, uint64_t serial, uint64_t block,
                              uint64_t gen)
{
    uint64_t h = serial * 0x9E3779B97F4A7C15ull ^ block * 0xC2B2AE3D27D4EB4Full ^ gen;
    h ^= h >> 29;
    return (size_t)h & (c->nbuckets - 1);
}

cbfs_err cbfs_cache_create(uint64_t cap_bytes, cbfs_cache_release_fn *release, void *arg,
                           struct cbfs_cache **out)
{
    struct cbfs_cache *c = calloc(1, sizeof *c);
    if (!c) return CBFS_E_NOMEM;
    c->nbuckets = 1024;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) {
        free(c);
        return CBFS_E_NOMEM;
    }
    c->cap = cap_bytes;
    c->ra_cap = cap_bytes / 2;
    c->release = release;
    c->release_arg = arg;
    pthread_mutex_init(&c->lock, NULL);
    pthread_cond_init(&c->loaded, NULL);
    *out = c;
    return CBFS_OK;
}

/* Gives e's read-ahead charge back to the budget. Lock held. */
static void cbfs_cache_uncharge(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    c->ra_bytes -= e->ra_charge;
    e->ra_charge = 0;
}

static void cbfs_cache_unlink(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    cbfs_cache_uncharge(c, e);
    struct cbfs_cache_ent **pp = &c->buckets[cbfs_cache_slot(c, e->serial, e->block, e->gen)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    if (e->lprev) e->lprev->lnext = e->lnext;
    else c->mru = e->lnext;
    if (e->lnext) e->lnext->lprev = e->lprev;
    else c->lru = e->lprev;
    c->bytes -= e->cap;
}

static void cbfs_cache_touch(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    if (c->mru == e) return;
    e->lprev->lnext = e->lnext; /* e is not mru, so lprev exists */
    if (e->lnext) e->lnext->lprev = e->lprev;
    else c->lru = e->lprev;
    e->lprev = NULL;
    e->lnext = c->mru;
    c->mru->lprev = e;
    c->mru = e;
}

/* Drops unreferenced READY/FAILED entries from the LRU end while over cap:
 * first those no read-ahead is waiting to be read from, then, only if that is
 * not enough, unread read-ahead too. An unread block is a reader's next
 * request; evicted, it is read from the store and decoded again. */
static void cbfs_cache_evict(struct cbfs_cache *c)
{
    for (int pass = 0; pass < 2 && c->bytes > c->cap; pass++) {
        struct cbfs_cache_ent *e = c->lru;
        while (e && c->bytes > c->cap) {
            struct cbfs_cache_ent *prev = e->lprev;
            if (e->refs == 0 && e->state != CBFS_CACHE_LOADING && (pass || !e->readahead)) {
                cbfs_cache_unlink(c, e);
                cbfs_cache_ent_free(c, e);
            }
            e = prev;
        }
    }
}

void cbfs_cache_destroy(struct cbfs_cache *c)
{
    if (!c) return;
    struct cbfs_cache_ent *e = c->mru;
    while (e) {
        struct cbfs_cache_ent *n = e->lnext;
        cbfs_cache_ent_free(c, e);
        e = n;
    }
    pthread_cond_destroy(&c->loaded);
    pthread_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

static struct cbfs_cache_ent *cbfs_cache_find(struct cbfs_cache *c, uint64_t serial,
                                              uint64_t block, uint64_t gen)
{
    struct cbfs_cache_ent *e = c->buckets[cbfs_cache_slot(c, serial, block, gen)];
    while (e && !(e->serial == serial && e->block == block && e->gen == gen)) e = e->hnext;
    return e;
}

static struct cbfs_cache_ent *cbfs_cache_insert(struct cbfs_cache *c, uint64_t serial,
                                                uint64_t block, uint64_t gen)
{
    struct cbfs_cache_ent *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->serial = serial;
    e->block = block;
    e->gen = gen;
    e->state = CBFS_CACHE_LOADING;
    e->refs = 1;
    size_t slot = cbfs_cache_slot(c, serial, block, gen);
    e->hnext = c->buckets[slot];
    c->buckets[slot] = e;
    e->lnext = c->mru;
    if (c->mru) c->mru->lprev = e;
    c->mru = e;
    if (!c->lru) c->lru = e;
    return e;
}

struct cbfs_cache_ent *cbfs_cache_get(struct cbfs_cache *c, uint64_t serial, uint64_t block,
                                      uint64_t gen, bool *must_fill, bool *ra_hit)
{
    *must_fill = false;
    *ra_hit = false;
    pthread_mutex_lock(&c->lock);
    for (;;) {
        struct cbfs_cache_ent *e = cbfs_cache_find(c, serial, block, gen);
        if (!e) {
            e = cbfs_cache_insert(c, serial, block, gen);
            if (e) *must_fill = true;
            pthread_mutex_unlock(&c->lock);
            return e;
        }
        if (e->state == CBFS_CACHE_READY) {
            e->refs++;
            *ra_hit = e->readahead;
            e->readahead = false;
            cbfs_cache_uncharge(c, e);
            cbfs_cache_touch(c, e);
            pthread_mutex_unlock(&c->lock);
            return e;
        }
        if (e->state == CBFS_CACHE_FAILED && e->refs == 0) {
            /* A failed load nobody holds: forget it and load afresh. */
            cbfs_cache_unlink(c, e);
            free(e);
            continue;
        }
        /* LOADING, or FAILED and still held by its loader: wait for the fill
         * or for the loader's put (which unlinks it; then we load afresh). */
        pthread_cond_wait(&c->loaded, &c->lock);
    }
}

struct cbfs_cache_ent *cbfs_cache_peek(struct cbfs_cache *c, uint64_t serial, uint64_t block,
                                       uint64_t gen)
{
    pthread_mutex_lock(&c->lock);
    struct cbfs_cache_ent *e = cbfs_cache_find(c, serial, block, gen);
    if (e && e->state == CBFS_CACHE_READY) {
        e->refs++;
        cbfs_cache_touch(c, e);
    } else {
        e = NULL;
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

struct cbfs_cache_ent *cbfs_cache_reserve(struct cbfs_cache *c, uint64_t serial,
                                          uint64_t block, uint64_t gen, size_t charge,
                                          bool *full)
{
    pthread_mutex_lock(&c->lock);
    struct cbfs_cache_ent *e = NULL;
    *full = false;
    if (!cbfs_cache_find(c, serial, block, gen)) {
        if (c->ra_bytes + charge > c->ra_cap) {
            *full = true;
        } else if ((e = cbfs_cache_insert(c, serial, block, gen))) {
            e->ra_charge = charge;
            c->ra_bytes += charge;
        }
    }
    pthread_mutex_unlock(&c->lock);
    return e;
}

void cbfs_cache_fill(struct cbfs_cache *c, struct cbfs_cache_ent *ent, unsigned char *data,
                     uint32_t len, size_t cap, bool ok, bool readahead)
{
    pthread_mutex_lock(&c->lock);
    if (ok) {
        ent->data = data;
        ent->len = len;
        ent->cap = cap;
        ent->state = CBFS_CACHE_READY;
        ent->readahead = readahead;
        c->bytes += cap;
        cbfs_cache_evict(c);
    } else {
        ent->state = CBFS_CACHE_FAILED;
        cbfs_cache_uncharge(c, ent);
    }
    pthread_cond_broadcast(&c->loaded);
    pthread_mutex_unlock(&c->lock);
}

void cbfs_cache_put(struct cbfs_cache *c, struct cbfs_cache_ent *ent)
{
    pthread_mutex_lock(&c->lock);
    if (--ent->refs == 0) {
        if (ent->state == CBFS_CACHE_FAILED) {
            cbfs_cache_unlink(c, ent);
            free(ent);
            pthread_cond_broadcast(&c->loaded); /* waiters retry the load */
        } else {
            cbfs_cache_evict(c);
        }
    }
    pthread_mutex_unlock(&c->lock);
}

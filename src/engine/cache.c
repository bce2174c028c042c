/* Bounded LRU of decompressed blocks with single-loader entries (cache.h).
 * Two lists: `used` (every entry without a read-ahead charge, most recent at
 * the head) and `ahead` (unread read-ahead, charged, newest at the head, so
 * oldest reservation at the tail). An entry is on `ahead` exactly while its
 * ra_charge is not 0. Eviction walks `used` from the tail and touches `ahead`
 * only when that is not enough; aging moves stale entries from the tail of
 * `ahead` to the tail of `used`. Eviction walks past only entries in use or
 * still loading (read-ahead aged before its job ran among them: at most the
 * jobs in flight), never past unread read-ahead. */
#include <assert.h>
#include <pthread.h>
#include <stdlib.h>

#include "cbfs/mutex.h"
#include "engine/cache.h"

/* Unread read-ahead goes stale once this many bounds' worth of blocks have
 * been filled after its reservation. Many readers on few CPUs are served
 * unevenly, and a reader whose READs wait in the queue keeps its window
 * while the others go on: at one bound, 16 readers of a 2-core machine lost
 * blocks to aging and read 1.4x the store's bytes; at two, 8 readers of 1M
 * blocks 1.02-1.05x; at four, none (docs/PERF.md, fifteenth session). */
#define CBFS_CACHE_STALE_BOUNDS 4

struct cbfs_cache_list {
    struct cbfs_cache_ent *head, *tail;
};

struct cbfs_cache {
    struct cbfs_mutex lock;          /* "Lock held" below is cbfs_assert_held(&c->lock) */
    pthread_cond_t loaded;           /* broadcast when any LOADING entry completes */
    struct cbfs_cache_ent **buckets; /* lock */
    size_t nbuckets;                 /* immutable, power of two */
    struct cbfs_cache_list used;     /* lock: uncharged entries, most recent first */
    struct cbfs_cache_list ahead;    /* lock: charged entries, newest reservation first */
    uint64_t bytes, cap;             /* lock (the buffers' sizes, not their content); cap immutable */
    uint64_t ra_bytes, ra_cap;       /* read-ahead charges (cache.h): lock; ra_cap immutable */
    uint64_t filled;                 /* bytes (cap) filled so far, the clock that ages them: lock */
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
    cbfs_mutex_init(&c->lock);
    pthread_cond_init(&c->loaded, NULL);
    *out = c;
    return CBFS_OK;
}

/* ---- the two lists (lock held) ---- */

static struct cbfs_cache_list *cbfs_cache_list_of(struct cbfs_cache *c,
                                                  const struct cbfs_cache_ent *e)
{
    cbfs_assert_held(&c->lock);
    return e->ra_charge ? &c->ahead : &c->used;
}

static void cbfs_cache_list_remove(struct cbfs_cache_list *l, struct cbfs_cache_ent *e)
{
    if (e->lprev) e->lprev->lnext = e->lnext;
    else l->head = e->lnext;
    if (e->lnext) e->lnext->lprev = e->lprev;
    else l->tail = e->lprev;
    e->lprev = e->lnext = NULL;
}

static void cbfs_cache_list_push_head(struct cbfs_cache_list *l, struct cbfs_cache_ent *e)
{
    e->lprev = NULL;
    e->lnext = l->head;
    if (l->head) l->head->lprev = e;
    else l->tail = e;
    l->head = e;
}

static void cbfs_cache_list_push_tail(struct cbfs_cache_list *l, struct cbfs_cache_ent *e)
{
    e->lnext = NULL;
    e->lprev = l->tail;
    if (l->tail) l->tail->lnext = e;
    else l->head = e;
    l->tail = e;
}

/* Takes e off its list and gives its read-ahead charge (if any) back. */
static void cbfs_cache_detach(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    cbfs_assert_held(&c->lock);
    cbfs_cache_list_remove(cbfs_cache_list_of(c, e), e);
    c->ra_bytes -= e->ra_charge;
    e->ra_charge = 0;
}

/* Gives e's read-ahead charge back and moves it to `used`: to the head (it
 * was just used) or to the tail (stale, or failed: first to go). e must be
 * charged unless to_head (then it may be on `used` already: a touch). */
static void cbfs_cache_uncharge(struct cbfs_cache *c, struct cbfs_cache_ent *e, bool to_head)
{
    cbfs_assert_held(&c->lock);
    cbfs_cache_detach(c, e);
    if (to_head) cbfs_cache_list_push_head(&c->used, e);
    else cbfs_cache_list_push_tail(&c->used, e);
}

/* Whether unread read-ahead e was reserved CBFS_CACHE_STALE_BOUNDS bounds'
 * worth of fills ago (divided, not multiplied: cache_size has no upper bound
 * and 4 x 2^62 is 0). Lock held. */
static bool cbfs_cache_stale(const struct cbfs_cache *c, const struct cbfs_cache_ent *e)
{
    cbfs_assert_held(&c->lock);
    return (c->filled - e->born) / CBFS_CACHE_STALE_BOUNDS >= c->cap;
}

/* Stale read-ahead (cache.h), checked at each reservation and when an
 * eviction is due: its reader stopped or went elsewhere. It gives its charge back
 * and goes to the tail of `used`, no longer spared by eviction, the oldest
 * last (first to go). `ahead` is in reservation order, so the stale ones are
 * a run at its tail. */
static void cbfs_cache_age(struct cbfs_cache *c)
{
    cbfs_assert_held(&c->lock);
    struct cbfs_cache_ent *newest = NULL;
    for (struct cbfs_cache_ent *e = c->ahead.tail; e && cbfs_cache_stale(c, e); e = e->lprev)
        newest = e;
    while (newest) {
        struct cbfs_cache_ent *older = newest->lnext;
        cbfs_cache_uncharge(c, newest, false);
        newest = older;
    }
}

static void cbfs_cache_unlink(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    cbfs_assert_held(&c->lock);
    struct cbfs_cache_ent **pp = &c->buckets[cbfs_cache_slot(c, e->serial, e->block, e->gen)];
    while (*pp != e) pp = &(*pp)->hnext;
    *pp = e->hnext;
    cbfs_cache_detach(c, e);
    c->bytes -= e->cap;
}

/* Drops unreferenced READY/FAILED entries of l from its tail while over cap. */
static void cbfs_cache_evict_from(struct cbfs_cache *c, struct cbfs_cache_list *l)
{
    cbfs_assert_held(&c->lock);
    struct cbfs_cache_ent *e = l->tail;
    while (e && c->bytes > c->cap) {
        struct cbfs_cache_ent *prev = e->lprev;
        if (e->refs == 0 && e->state != CBFS_CACHE_LOADING) {
            cbfs_cache_unlink(c, e);
            cbfs_cache_ent_free(c, e);
        }
        e = prev;
    }
}

/* Evicts while over cap: every other entry before fresh unread read-ahead,
 * which is a reader's next request (evicted, it is read from the store and
 * decoded again), and that only when nothing else can go. */
static void cbfs_cache_evict(struct cbfs_cache *c)
{
    cbfs_assert_held(&c->lock);
    if (c->bytes <= c->cap) return;
    cbfs_cache_age(c);
    cbfs_cache_evict_from(c, &c->used);
    cbfs_cache_evict_from(c, &c->ahead);
}

void cbfs_cache_destroy(struct cbfs_cache *c)
{
    if (!c) return;
    struct cbfs_cache_list *lists[] = {&c->used, &c->ahead};
    for (unsigned i = 0; i < 2; i++) {
        struct cbfs_cache_ent *e = lists[i]->head;
        while (e) {
            struct cbfs_cache_ent *n = e->lnext;
            cbfs_cache_ent_free(c, e);
            e = n;
        }
    }
    pthread_cond_destroy(&c->loaded);
    cbfs_mutex_destroy(&c->lock);
    free(c->buckets);
    free(c);
}

static struct cbfs_cache_ent *cbfs_cache_find(struct cbfs_cache *c, uint64_t serial,
                                              uint64_t block, uint64_t gen)
{
    cbfs_assert_held(&c->lock);
    struct cbfs_cache_ent *e = c->buckets[cbfs_cache_slot(c, serial, block, gen)];
    while (e && !(e->serial == serial && e->block == block && e->gen == gen)) e = e->hnext;
    return e;
}

/* A new LOADING entry with one reference, charged (on `ahead`) when charge
 * is not 0. */
static struct cbfs_cache_ent *cbfs_cache_insert(struct cbfs_cache *c, uint64_t serial,
                                                uint64_t block, uint64_t gen, size_t charge)
{
    cbfs_assert_held(&c->lock);
    struct cbfs_cache_ent *e = calloc(1, sizeof *e);
    if (!e) return NULL;
    e->serial = serial;
    e->block = block;
    e->gen = gen;
    e->state = CBFS_CACHE_LOADING;
    e->refs = 1;
    e->born = c->filled;
    e->ra_charge = charge;
    c->ra_bytes += charge;
    size_t slot = cbfs_cache_slot(c, serial, block, gen);
    e->hnext = c->buckets[slot];
    c->buckets[slot] = e;
    cbfs_cache_list_push_head(cbfs_cache_list_of(c, e), e);
    return e;
}

/* A reader (get or peek) uses READY entry e: it is no longer unread
 * read-ahead, and it becomes the most recent. @return whether it was unread
 * read-ahead. Lock held. */
static bool cbfs_cache_use(struct cbfs_cache *c, struct cbfs_cache_ent *e)
{
    cbfs_assert_held(&c->lock);
    const bool ra = e->ra_charge != 0;
    cbfs_cache_uncharge(c, e, true);
    return ra;
}

struct cbfs_cache_ent *cbfs_cache_get(struct cbfs_cache *c, uint64_t serial, uint64_t block,
                                      uint64_t gen, bool *must_fill, bool *ra_hit)
{
    *must_fill = false;
    *ra_hit = false;
    cbfs_mutex_lock(&c->lock);
    for (;;) {
        struct cbfs_cache_ent *e = cbfs_cache_find(c, serial, block, gen);
        if (!e) {
            e = cbfs_cache_insert(c, serial, block, gen, 0);
            if (e) *must_fill = true;
            cbfs_mutex_unlock(&c->lock);
            return e;
        }
        if (e->state == CBFS_CACHE_READY) {
            e->refs++;
            *ra_hit = cbfs_cache_use(c, e);
            cbfs_mutex_unlock(&c->lock);
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
        cbfs_mutex_wait(&c->lock, &c->loaded);
    }
}

struct cbfs_cache_ent *cbfs_cache_peek(struct cbfs_cache *c, uint64_t serial, uint64_t block,
                                       uint64_t gen)
{
    cbfs_mutex_lock(&c->lock);
    struct cbfs_cache_ent *e = cbfs_cache_find(c, serial, block, gen);
    if (e && e->state == CBFS_CACHE_READY) {
        e->refs++;
        (void)cbfs_cache_use(c, e);
    } else {
        e = NULL;
    }
    cbfs_mutex_unlock(&c->lock);
    return e;
}

struct cbfs_cache_ent *cbfs_cache_reserve(struct cbfs_cache *c, uint64_t serial,
                                          uint64_t block, uint64_t gen, size_t charge,
                                          bool *full)
{
    assert(charge > 0); /* a charge of 0 would put the entry on `used` */
    cbfs_mutex_lock(&c->lock);
    struct cbfs_cache_ent *e = NULL;
    *full = false;
    if (!cbfs_cache_find(c, serial, block, gen)) {
        cbfs_cache_age(c);
        if (c->ra_bytes + charge > c->ra_cap) *full = true;
        else e = cbfs_cache_insert(c, serial, block, gen, charge);
    }
    cbfs_mutex_unlock(&c->lock);
    return e;
}

void cbfs_cache_fill(struct cbfs_cache *c, struct cbfs_cache_ent *ent, unsigned char *data,
                     uint32_t len, size_t cap, bool ok)
{
    cbfs_mutex_lock(&c->lock);
    if (ok) {
        ent->data = data;
        ent->len = len;
        ent->cap = cap;
        ent->state = CBFS_CACHE_READY;
        c->bytes += cap;
        c->filled += cap;
        cbfs_cache_evict(c);
    } else {
        ent->state = CBFS_CACHE_FAILED;
        if (ent->ra_charge) cbfs_cache_uncharge(c, ent, false);
    }
    pthread_cond_broadcast(&c->loaded);
    cbfs_mutex_unlock(&c->lock);
}

void cbfs_cache_put(struct cbfs_cache *c, struct cbfs_cache_ent *ent)
{
    cbfs_mutex_lock(&c->lock);
    if (--ent->refs == 0) {
        if (ent->state == CBFS_CACHE_FAILED) {
            cbfs_cache_unlink(c, ent);
            free(ent);
            pthread_cond_broadcast(&c->loaded); /* waiters retry the load */
        } else {
            cbfs_cache_evict(c);
        }
    }
    cbfs_mutex_unlock(&c->lock);
}

/* The decompressed-block cache (src/engine/cache.h) on its own: one loader
 * per key, the generation in the key, LRU eviction within the byte bound,
 * referenced entries never freed, failed loads never cached. */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "engine/cache.h"

#define CT_LEN 100u
#define CT_SERIAL 7u

static struct cbfs_cache *ct_cache;

static void ct_open(uint64_t cap)
{
    cr_assert_eq(cbfs_cache_create(cap, NULL, NULL, &ct_cache), CBFS_OK);
}

static void ct_close(void)
{
    cbfs_cache_destroy(ct_cache);
}

/* CT_LEN bytes of value v, malloc'd: the cache takes ownership on fill. */
static unsigned char *ct_data(int v)
{
    unsigned char *d = malloc(CT_LEN);
    cr_assert_not_null(d);
    memset(d, v, CT_LEN);
    return d;
}

/* Loads block b (must be absent) with content b; keeps the reference if hold. */
static struct cbfs_cache_ent *ct_load(uint64_t b, bool hold)
{
    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, b, 1, &fill, &ra);
    cr_assert_not_null(e);
    cr_assert(fill, "block %llu was not absent", (unsigned long long)b);
    cr_assert_eq(e->state, CBFS_CACHE_LOADING);
    cbfs_cache_fill(ct_cache, e, ct_data((int)b), CT_LEN, CT_LEN, true);
    if (hold) return e;
    cbfs_cache_put(ct_cache, e);
    return NULL;
}

/* Whether block b is cached and READY (peek: no insert; moves it to MRU). */
static bool ct_present(uint64_t b)
{
    struct cbfs_cache_ent *e = cbfs_cache_peek(ct_cache, CT_SERIAL, b, 1);
    if (!e) return false;
    cr_assert_eq(e->len, CT_LEN);
    for (unsigned i = 0; i < CT_LEN; i++) cr_assert_eq(e->data[i], (unsigned char)b);
    cbfs_cache_put(ct_cache, e);
    return true;
}

Test(cache, miss_fill_hit)
{
    ct_open(1 << 20);
    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 3, 1, &fill, &ra);
    cr_assert(fill && !ra);
    unsigned char *d = ct_data(3);
    cbfs_cache_fill(ct_cache, e, d, CT_LEN, CT_LEN, true);
    cr_assert_eq(e->state, CBFS_CACHE_READY);
    cbfs_cache_put(ct_cache, e);

    struct cbfs_cache_ent *again = cbfs_cache_get(ct_cache, CT_SERIAL, 3, 1, &fill, &ra);
    cr_assert(!fill && !ra);
    cr_assert_eq(again, e);
    cr_assert_eq(again->data, d, "the cache keeps the loader's buffer");
    cbfs_cache_put(ct_cache, again);
    ct_close();
}

Test(cache, key_is_serial_block_and_generation)
{
    ct_open(1 << 20);
    ct_load(5, false);
    bool fill, ra;
    const uint64_t keys[][3] = {{CT_SERIAL, 5, 2}, {CT_SERIAL + 1, 5, 1}, {CT_SERIAL, 6, 1}};
    for (int i = 0; i < 3; i++) {
        struct cbfs_cache_ent *e =
            cbfs_cache_get(ct_cache, keys[i][0], keys[i][1], keys[i][2], &fill, &ra);
        cr_assert(fill, "key %d served by another key's entry", i);
        cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
        cbfs_cache_put(ct_cache, e);
    }
    cr_assert(ct_present(5));
    ct_close();
}

Test(cache, peek_never_inserts_or_waits)
{
    ct_open(1 << 20);
    cr_assert_null(cbfs_cache_peek(ct_cache, CT_SERIAL, 1, 1));
    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 1, 1, &fill, &ra);
    cr_assert(fill, "peek inserted an entry");
    cr_assert_null(cbfs_cache_peek(ct_cache, CT_SERIAL, 1, 1), "peek returned a LOADING entry");
    cbfs_cache_fill(ct_cache, e, ct_data(1), CT_LEN, CT_LEN, true);
    struct cbfs_cache_ent *p = cbfs_cache_peek(ct_cache, CT_SERIAL, 1, 1);
    cr_assert_eq(p, e);
    cbfs_cache_put(ct_cache, p);
    cbfs_cache_put(ct_cache, e);
    ct_close();
}

Test(cache, readahead_hit_reported_once)
{
    ct_open(1 << 20);
    bool full;
    struct cbfs_cache_ent *e = cbfs_cache_reserve(ct_cache, CT_SERIAL, 9, 1, CT_LEN, &full);
    cr_assert_not_null(e);
    cr_assert_eq(e->state, CBFS_CACHE_LOADING);
    cr_assert_null(cbfs_cache_reserve(ct_cache, CT_SERIAL, 9, 1, CT_LEN, &full), "reserved twice");
    cbfs_cache_fill(ct_cache, e, ct_data(9), CT_LEN, CT_LEN, true);
    cbfs_cache_put(ct_cache, e);
    cr_assert_null(cbfs_cache_reserve(ct_cache, CT_SERIAL, 9, 1, CT_LEN, &full),
                   "reserved a cached key");

    bool fill, ra;
    e = cbfs_cache_get(ct_cache, CT_SERIAL, 9, 1, &fill, &ra);
    cr_assert(!fill && ra, "first read of a read-ahead block is a read-ahead hit");
    cbfs_cache_put(ct_cache, e);
    e = cbfs_cache_get(ct_cache, CT_SERIAL, 9, 1, &fill, &ra);
    cr_assert(!fill && !ra, "a read-ahead hit is counted once");
    cbfs_cache_put(ct_cache, e);
    ct_close();
}

Test(cache, evicts_least_recently_used)
{
    ct_open(3 * CT_LEN);
    for (uint64_t b = 0; b < 3; b++) ct_load(b, false);
    /* Use block 0 again: block 1 is now the least recently used. */
    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 0, 1, &fill, &ra);
    cr_assert(!fill);
    cbfs_cache_put(ct_cache, e);
    ct_load(3, false);
    cr_assert(!ct_present(1), "the LRU block survived");
    cr_assert(ct_present(0) && ct_present(2) && ct_present(3));
    ct_close();
}

Test(cache, stays_within_its_bound)
{
    ct_open(5 * CT_LEN + CT_LEN / 2);
    for (uint64_t b = 0; b < 40; b++) ct_load(b, false);
    unsigned cached = 0;
    for (uint64_t b = 40; b-- > 0;) cached += ct_present(b);
    cr_assert_eq(cached, 5, "%u blocks of %u bytes cached under a %u-byte bound", cached, CT_LEN,
                 5 * CT_LEN + CT_LEN / 2);
    for (uint64_t b = 35; b < 40; b++) cr_assert(ct_present(b), "newest block %llu evicted",
                                                 (unsigned long long)b);
    ct_close();
}

Test(cache, referenced_entries_are_never_freed)
{
    ct_open(CT_LEN);
    struct cbfs_cache_ent *held = ct_load(0, true);
    /* Over the bound while block 0 is held: the others go, block 0 stays. */
    for (uint64_t b = 1; b < 10; b++) ct_load(b, false);
    for (unsigned i = 0; i < CT_LEN; i++) cr_assert_eq(held->data[i], 0);
    cr_assert_eq(held->state, CBFS_CACHE_READY);
    for (uint64_t b = 1; b < 10; b++) cr_assert(!ct_present(b));
    cbfs_cache_put(ct_cache, held);
    cr_assert(ct_present(0), "within the bound once released: kept");
    ct_close();
}

Test(cache, zero_bound_keeps_nothing_unreferenced)
{
    ct_open(0);
    struct cbfs_cache_ent *held = ct_load(4, true);
    cr_assert_eq(held->data[0], 4); /* readable while referenced */
    cbfs_cache_put(ct_cache, held);
    cr_assert(!ct_present(4));
    ct_close();
}

Test(cache, failed_load_is_not_cached)
{
    ct_open(1 << 20);
    bool fill, ra, full;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 2, 1, &fill, &ra);
    cr_assert(fill);
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cr_assert_eq(e->state, CBFS_CACHE_FAILED);
    cr_assert_null(cbfs_cache_peek(ct_cache, CT_SERIAL, 2, 1), "peek served a failed load");
    cbfs_cache_put(ct_cache, e);
    e = cbfs_cache_get(ct_cache, CT_SERIAL, 2, 1, &fill, &ra);
    cr_assert(fill, "a failed load was cached: the next reader must load again");
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cbfs_cache_put(ct_cache, e);

    /* A read-ahead reservation that fails leaves the key free too. */
    e = cbfs_cache_reserve(ct_cache, CT_SERIAL, 3, 1, CT_LEN, &full);
    cr_assert_not_null(e);
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cbfs_cache_put(ct_cache, e);
    e = cbfs_cache_reserve(ct_cache, CT_SERIAL, 3, 1, CT_LEN, &full);
    cr_assert_not_null(e, "a failed read-ahead blocks the key");
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cbfs_cache_put(ct_cache, e);
    ct_close();
}

/* Reserves block b for read-ahead (charge CT_LEN) and fills it; no reference kept. */
static void ct_readahead(uint64_t b)
{
    bool full;
    struct cbfs_cache_ent *e = cbfs_cache_reserve(ct_cache, CT_SERIAL, b, 1, CT_LEN, &full);
    cr_assert(e && !full, "read-ahead of block %llu refused", (unsigned long long)b);
    cbfs_cache_fill(ct_cache, e, ct_data((int)b), CT_LEN, CT_LEN, true);
    cbfs_cache_put(ct_cache, e);
}

/* Whether the read-ahead budget has room for one more block (reserved and
 * failed again at once, so nothing stays). */
static bool ct_readahead_room(void)
{
    bool full;
    struct cbfs_cache_ent *e = cbfs_cache_reserve(ct_cache, CT_SERIAL, 999, 1, CT_LEN, &full);
    cr_assert(e || full);
    if (!e) return false;
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cbfs_cache_put(ct_cache, e);
    return true;
}

/* Unread read-ahead holds at most half the cache; a block's charge comes back
 * when it is read (get or peek) and when its load fails. */
Test(cache, readahead_budget_is_half_the_cache)
{
    ct_open(10 * CT_LEN);
    for (uint64_t b = 0; b < 5; b++) ct_readahead(b);
    cr_assert(!ct_readahead_room(), "read-ahead past half the cache");

    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 0, 1, &fill, &ra);
    cr_assert(!fill && ra);
    cbfs_cache_put(ct_cache, e);
    cr_assert(ct_readahead_room(), "a read block still holds its charge");
    cr_assert(ct_readahead_room(), "a failed read-ahead load still holds its charge");
    ct_readahead(5);
    cr_assert(!ct_readahead_room());
    /* the write path's peek (rewriting part of a block) is a read too */
    cr_assert(ct_present(1));
    cr_assert(ct_readahead_room(), "a block read by peek still holds its charge");
    /* a failed load gives its charge back at the fill, before its put */
    bool full;
    e = cbfs_cache_reserve(ct_cache, CT_SERIAL, 6, 1, CT_LEN, &full);
    cr_assert_not_null(e);
    cr_assert(!ct_readahead_room());
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cr_assert(ct_readahead_room(), "a failed load holds its charge until its put");
    cbfs_cache_put(ct_cache, e);
    ct_close();
}

/* Fresh unread read-ahead is evicted after every other block, even more
 * recent ones; once evicted it gives its charge back. */
Test(cache, unread_readahead_is_evicted_last)
{
    ct_open(10 * CT_LEN);
    ct_load(0, false);
    ct_load(1, false);
    for (uint64_t b = 10; b < 13; b++) ct_readahead(b);
    cr_assert(ct_present(0) && ct_present(1)); /* now the most recent */
    /* LRU first: 10 11 12 (unread), 0 1, then 20-25: the sixth load makes
     * 1100 bytes, and block 0 goes, not block 10. */
    for (uint64_t b = 20; b < 26; b++) ct_load(b, false);
    cr_assert(!ct_present(0), "a plain block outlived less recent unread read-ahead");
    cr_assert(ct_present(10) && ct_present(11) && ct_present(12));

    ct_close();

    /* With every other block held, fresh unread read-ahead goes too (the
     * bound is kept), least recent first. */
    ct_open(10 * CT_LEN);
    struct cbfs_cache_ent *held[8];
    for (uint64_t b = 0; b < 7; b++) held[b] = ct_load(b, true);
    for (uint64_t b = 10; b < 13; b++) ct_readahead(b);
    held[7] = ct_load(7, true);
    cr_assert(!ct_present(10), "the bound was not kept");
    cr_assert(ct_present(11) && ct_present(12));
    for (unsigned i = 0; i < 8; i++) cbfs_cache_put(ct_cache, held[i]);
    ct_close();
}

/* Read-ahead whose reader went away (never read) goes stale once four
 * bounds' worth of blocks have been filled after it: it gives its charge
 * back, so it cannot keep read-ahead off for the rest of the mount. */
Test(cache, abandoned_readahead_gives_back_its_charge)
{
    ct_open(10 * CT_LEN);
    for (uint64_t b = 0; b < 5; b++) ct_readahead(b); /* fills 0-500 */
    for (uint64_t b = 10; b < 44; b++) ct_load(b, false);
    cr_assert(!ct_readahead_room(), "fresh read-ahead lost its charge"); /* 3900 filled */
    cr_assert(!ct_present(10), "the bound was not kept");
    ct_load(44, false); /* 4000 filled since block 0 was reserved */
    cr_assert(ct_readahead_room(), "stale read-ahead still holds the budget");
    /* and it is no longer spared: the first to go (block 1 is still fresh) */
    cr_assert(!ct_present(0) && ct_present(1), "stale read-ahead still spared by eviction");
    ct_close();
}

/* A cache too large to ever fill (cache_size has no upper bound): read-ahead
 * never goes stale. (4 x 2^62 wraps to 0, and every reservation aged the
 * others at once: no budget, no read-ahead hits; review helper-33.) */
Test(cache, huge_bound_never_ages_readahead)
{
    ct_open(1ull << 62);
    ct_readahead(0);
    ct_readahead(1);
    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 0, 1, &fill, &ra);
    cr_assert(!fill && ra, "fresh read-ahead counted as stale");
    cbfs_cache_put(ct_cache, e);
    ct_close();
}

/* A second reader of a key being loaded: what it got. */
struct ct_reader {
    pthread_t t;
    struct cbfs_cache_ent *e;
    bool fill;
    _Atomic bool returned;
};

static void *ct_reader_main(void *arg)
{
    struct ct_reader *r = arg;
    bool ra;
    r->e = cbfs_cache_get(ct_cache, CT_SERIAL, 8, 1, &r->fill, &ra);
    r->returned = true;
    return NULL;
}

/* Opens a cache, takes the loader's LOADING entry of block 8 and starts a
 * second reader of it, which must wait. @return the loader's entry. */
static struct cbfs_cache_ent *ct_load_with_waiter(struct ct_reader *r)
{
    ct_open(1 << 20);
    bool fill, ra;
    struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, 8, 1, &fill, &ra);
    cr_assert(fill);
    r->returned = false;
    cr_assert_eq(pthread_create(&r->t, NULL, ct_reader_main, r), 0);
    usleep(50 * 1000); /* time enough to reach the wait; a broken cache returns early */
    cr_assert(!r->returned, "a second reader did not wait for the loader");
    return e;
}

Test(cache, second_reader_waits_for_the_loader, .timeout = 10)
{
    struct ct_reader r;
    struct cbfs_cache_ent *e = ct_load_with_waiter(&r);
    cbfs_cache_fill(ct_cache, e, ct_data(8), CT_LEN, CT_LEN, true);
    pthread_join(r.t, NULL);
    cr_assert(!r.fill, "the waiter decoded the block a second time");
    cr_assert_eq(r.e, e);
    cr_assert_eq(r.e->data[0], 8);
    cbfs_cache_put(ct_cache, r.e);
    cbfs_cache_put(ct_cache, e);
    ct_close();
}

Test(cache, waiter_loads_itself_after_a_failed_load, .timeout = 10)
{
    struct ct_reader r;
    struct cbfs_cache_ent *e = ct_load_with_waiter(&r);
    cbfs_cache_fill(ct_cache, e, NULL, 0, 0, false);
    cbfs_cache_put(ct_cache, e); /* the loader gives up: the waiter takes over */
    pthread_join(r.t, NULL);
    cr_assert_not_null(r.e);
    cr_assert(r.fill, "after a failed load the waiter must load the block itself");
    cr_assert_eq(r.e->state, CBFS_CACHE_LOADING);
    cbfs_cache_fill(ct_cache, r.e, ct_data(8), CT_LEN, CT_LEN, true);
    cbfs_cache_put(ct_cache, r.e);
    cr_assert(ct_present(8));
    ct_close();
}

Test(cache, destroy_frees_cached_blocks)
{
    cbfs_cache_destroy(NULL);
    ct_open(1 << 20);
    for (uint64_t b = 0; b < 8; b++) ct_load(b, false);
    ct_close(); /* ASan build: no leak */
}

/* The release hook gets every filled buffer back with the cap given to fill,
 * on eviction and on destroy; the bound counts caps, not contents. */
static size_t ct_released, ct_released_bytes;
static void ct_release(void *arg, void *data, size_t cap)
{
    cr_assert_eq(arg, &ct_released);
    ct_released++;
    ct_released_bytes += cap;
    free(data);
}

Test(cache, release_hook_gets_buffers_back_by_cap)
{
    ct_released = ct_released_bytes = 0;
    cr_assert_eq(cbfs_cache_create(4 * 1000, ct_release, &ct_released, &ct_cache), CBFS_OK);
    for (uint64_t b = 0; b < 6; b++) {
        bool fill, ra;
        struct cbfs_cache_ent *e = cbfs_cache_get(ct_cache, CT_SERIAL, b, 1, &fill, &ra);
        cr_assert(fill);
        /* 100 bytes of content in a 1000-byte buffer: room for 4, not 40 */
        cbfs_cache_fill(ct_cache, e, ct_data((int)b), CT_LEN, 1000, true);
        cbfs_cache_put(ct_cache, e);
    }
    cr_assert_eq(ct_released, 2, "evicted %zu buffers, expected the 2 oldest", ct_released);
    cr_assert_eq(ct_released_bytes, 2000);
    cr_assert(!ct_present(0) && !ct_present(1) && ct_present(2) && ct_present(5));
    cbfs_cache_destroy(ct_cache);
    cr_assert_eq(ct_released, 6, "destroy gave back %zu of 6", ct_released);
}

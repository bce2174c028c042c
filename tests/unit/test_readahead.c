/* The engine's read-ahead against the cache's read-ahead budget
 * (src/engine/cache.h): many sequential readers share the cache without
 * evicting each other's blocks before they are read, and readers that stop
 * part-way do not keep read-ahead off for the readers after them. */
#include "engine_fixture.h"
#include "engine/file_impl.h"

#define RA_BS (64u << 10)

/* An engine with 64K blocks, readahead=32 (the default) and a cache of
 * cache_blocks blocks. */
static void ra_setup(unsigned cache_blocks)
{
    const struct cbfs_engine_config cfg = {.block_size = RA_BS, .workers = 2, .readahead = 32,
                                           .cache_bytes = (uint64_t)cache_blocks * RA_BS,
                                           .inflight_bytes = 512 << 10};
    eng_setup_config(&cfg);
}

/* Writes nfiles files named f0, f1, ... of nblocks blocks each (backup-like
 * data, seed i); @return the bytes their frames take in the store. */
static uint64_t ra_make(unsigned nfiles, size_t nblocks)
{
    const size_t size = nblocks * RA_BS;
    unsigned char *data = malloc(size);
    cr_assert_not_null(data);
    struct cbfs_engine_stats before, after;
    cbfs_engine_get_stats(eng, &before);
    for (unsigned i = 0; i < nfiles; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%u", i);
        cbfs_td_backup(data, size, i + 1);
        struct cbfs_file *f = eng_open(name, true, "lz4");
        cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
        cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    }
    cbfs_engine_get_stats(eng, &after);
    free(data);
    return after.physical_written - before.physical_written;
}

/* How many blocks past `upto` read-ahead has been issued for in open file f,
 * once f's read-ahead jobs are done. (Not by looking into the cache: a peek
 * is a read, and would give the blocks' charges back.) */
static unsigned ra_ahead(struct cbfs_file *f, uint64_t upto)
{
    cbfs_mutex_lock(&f->lock);
    while (f->ra_jobs) cbfs_mutex_wait(&f->lock, &f->cond);
    const unsigned ahead = f->ra_issued > upto ? (unsigned)(f->ra_issued - upto) : 0;
    cbfs_mutex_unlock(&f->lock);
    return ahead;
}

/* Reads blocks [0, upto) of name in order; @return the blocks decoded ahead
 * past upto when it stops. Closes the file (its blocks left unread can never
 * be read: the next open is a new serial). */
static unsigned ra_read_to(const char *name, size_t upto)
{
    unsigned char *got = malloc(RA_BS);
    struct cbfs_file *f = eng_open(name, false, "lz4");
    for (size_t b = 0; b < upto; b++) {
        size_t n = 0;
        cr_assert_eq(cbfs_file_read(f, got, RA_BS, b * RA_BS, &n), CBFS_OK);
    }
    const unsigned ahead = ra_ahead(f, upto);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(got);
    return ahead;
}

/* Eight readers, one block each in turn, in a cache of 32 blocks: their
 * windows (32 blocks each) could fill it eight times over. Every frame is
 * read from the store once: read-ahead never evicted a block before its
 * reader came for it. Before the budget, about twice the store's bytes. */
Test(readahead, many_readers_read_every_frame_once, .fini = eng_teardown)
{
    ra_setup(32);
    const unsigned nfiles = 8;
    const size_t nblocks = 64;
    ra_make(nfiles, nblocks);
    /* what reading every frame once takes: each file alone, in turn */
    struct cbfs_engine_stats before, after;
    cbfs_engine_get_stats(eng, &before);
    for (unsigned i = 0; i < nfiles; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%u", i);
        ra_read_to(name, nblocks);
    }
    cbfs_engine_get_stats(eng, &after);
    const uint64_t alone = after.physical_read - before.physical_read;

    struct cbfs_file *f[8];
    for (unsigned i = 0; i < nfiles; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%u", i);
        f[i] = eng_open(name, false, "lz4");
    }
    unsigned char *got = malloc(RA_BS), *want = malloc(nblocks * RA_BS);
    cbfs_engine_get_stats(eng, &before);
    for (size_t b = 0; b < nblocks; b++)
        for (unsigned i = 0; i < nfiles; i++) {
            size_t n = 0;
            cr_assert_eq(cbfs_file_read(f[i], got, RA_BS, b * RA_BS, &n), CBFS_OK);
            cr_assert_eq(n, RA_BS);
        }
    cbfs_engine_get_stats(eng, &after);
    for (unsigned i = 0; i < nfiles; i++) {
        ra_ahead(f[i], nblocks); /* no read-ahead job may outlive its file */
        cr_assert_eq(cbfs_file_close(f[i]), CBFS_OK);
    }
    /* and the bytes are right, read again alone */
    cbfs_td_backup(want, nblocks * RA_BS, 3);
    struct cbfs_file *g = eng_open("f2", false, "lz4");
    for (size_t b = 0; b < nblocks; b++) {
        size_t n = 0;
        cr_assert_eq(cbfs_file_read(g, got, RA_BS, b * RA_BS, &n), CBFS_OK);
        cr_assert(n == RA_BS && memcmp(got, want + b * RA_BS, RA_BS) == 0, "block %zu", b);
    }
    ra_ahead(g, nblocks);
    cr_assert_eq(cbfs_file_close(g), CBFS_OK);
    const uint64_t read = after.physical_read - before.physical_read;
    cr_assert_eq(read, alone, "%llu bytes read from the store, %llu reading each file alone",
                 (unsigned long long)read, (unsigned long long)alone);
    cr_assert_gt(after.readahead_hits - before.readahead_hits, nfiles * nblocks / 2,
                 "read-ahead was mostly off");
    free(got);
    free(want);
}

/* Readers that stop after a few blocks (head(1), file(1), a restore killed
 * part-way) leave their read-ahead unread for good. Once a cache's worth of
 * other blocks has been decoded after it, it must no longer hold the budget:
 * a later reader reads ahead as far as a fresh one did. (review helper-31:
 * before the blocks went stale, the window stayed at 0 for the whole mount.) */
Test(readahead, abandoned_readers_leave_the_budget, .fini = eng_teardown)
{
    ra_setup(128); /* 8M */
    const size_t nblocks = 256;
    ra_make(5, nblocks);
    const unsigned fresh = ra_read_to("f3", 16);
    cr_assert_geq(fresh, 16, "a fresh reader read %u blocks ahead", fresh);
    const char *stop[] = {"f0", "f1", "f4", "f0"};
    for (unsigned i = 0; i < 4; i++) ra_read_to(stop[i], 8);
    for (unsigned r = 0; r < 4; r++) ra_read_to(r & 1 ? "f3" : "f2", nblocks);
    const unsigned later = ra_read_to("f2", 16);
    cr_assert_geq(later, 16, "read-ahead after four abandoned readers: %u blocks (fresh: %u)",
                  later, fresh);
}

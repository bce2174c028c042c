/* Engine tests, the core: writes and reads (every codec, overwrites, holes,
 * truncates, punches), flushes, several writers of one file or of many,
 * read-ahead, the engine's settings. The rest, by topic: test_engine_stream.c
 * (the write path's reorder window and stream order), test_engine_failures.c
 * (failed syncs and stores, reverts, the errors handles hear, power cuts),
 * test_engine_load.c (opening what a crash or damage left: torn writes, kept
 * tails, lost records, the rebuild); their fixture is engine_fixture.h. */
#include <pthread.h>

#include "engine_fixture.h"

TestSuite(engine, .init = eng_setup, .fini = eng_teardown, .timeout = 120);

Test(engine, sequential_roundtrip_every_codec)
{
    static const char *const codecs[] = {"lz4", "zstd", "xz", "bzip2"};
    size_t size = (3u << 20) + 12345;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 7);
    for (size_t c = 0; c < sizeof codecs / sizeof *codecs; c++) {
        char name[32];
        snprintf(name, sizeof name, "seq-%s", codecs[c]);
        struct cbfs_file *f = eng_open(name, true, codecs[c]);
        for (size_t off = 0; off < size;) {
            size_t n = 1000 + (off * 7) % 70000;
            if (n > size - off) n = size - off;
            cr_assert_eq(cbfs_file_write(f, data + off, n, off), CBFS_OK);
            off += n;
        }
        eng_check(f, data, size); /* partly from memory */
        cr_assert_eq(cbfs_file_close(f), CBFS_OK);
        f = eng_open(name, false, "lz4"); /* reopen with another codec: old blocks still read */
        eng_check(f, data, size);
        cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    }
    free(data);
}

/* A reader's READs reach the engine out of order (the kernel keeps two in
 * flight and serving threads take them in any order): reads of 4 blocks in
 * swapped pairs, 0-3 after 4-7 and so on, still get read-ahead. Before, every
 * swapped pair restarted the stream at a window of 0: no read-ahead at all. */
Test(engine, swapped_reads_keep_the_read_ahead)
{
    const size_t bs = 64 << 10, chunk = 4 * bs, nchunks = 32, size = nchunks * chunk;
    /* a cache that holds the window beside the reader's blocks (the suite's
     * 1 MiB evicts read-ahead blocks before their reads come) */
    cbfs_engine_destroy(eng);
    struct cbfs_engine_config cfg = {.block_size = bs, .workers = 2, .readahead = 4,
                                     .cache_bytes = 8 << 20, .inflight_bytes = 512 << 10};
    cr_assert_eq(cbfs_engine_create(&cfg, &eng), CBFS_OK);
    unsigned char *data = malloc(size), *got = malloc(chunk);
    cbfs_td_backup(data, size, 11);
    struct cbfs_file *f = eng_open("swapped", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    f = eng_open("swapped", false, "lz4");
    struct cbfs_engine_stats before, after;
    cbfs_engine_get_stats(eng, &before);
    for (size_t i = 0; i < nchunks; i++) {
        const size_t c = i ^ 1; /* 1, 0, 3, 2, ... */
        size_t n = 0;
        cr_assert_eq(cbfs_file_read(f, got, chunk, c * chunk, &n), CBFS_OK);
        cr_assert_eq(n, chunk);
        cr_assert(memcmp(got, data + c * chunk, chunk) == 0, "chunk %zu differs", c);
    }
    cbfs_engine_get_stats(eng, &after);
    const uint64_t hits = after.readahead_hits - before.readahead_hits;
    cr_assert(hits >= size / bs / 3, "%llu of %zu blocks were read ahead",
              (unsigned long long)hits, size / bs);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(got);
    free(data);
}

Test(engine, random_overwrites_holes_and_truncate)
{
    size_t cap = 2u << 20;
    unsigned char *shadow = calloc(1, cap);
    unsigned char *buf = malloc(cap);
    size_t size = 0;
    struct cbfs_file *f = eng_open("rand", true, "zstd");
    uint64_t s = 42;
    for (int i = 0; i < 400; i++) {
        uint64_t r = cbfs_td_next(&s);
        if (i % 50 == 49) {
            size_t ns = r % cap;
            if (ns < size) memset(shadow + ns, 0, size - ns);
            size = ns;
            cr_assert_eq(cbfs_file_truncate(f, ns), CBFS_OK);
        } else {
            size_t off = r % (cap - 70000), n = 1 + (r >> 32) % 70000;
            if (i % 7 == 0) memset(buf, 0, n);
            else cbfs_td_rows(buf, n, r);
            memcpy(shadow + off, buf, n);
            cr_assert_eq(cbfs_file_write(f, buf, n, off), CBFS_OK);
            if (off + n > size) size = off + n;
        }
        if (i % 40 == 0) cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
        if (i % 100 == 99) {
            eng_check(f, shadow, size);
            cr_assert_eq(cbfs_file_close(f), CBFS_OK);
            f = eng_open("rand", false, "zstd");
        }
    }
    eng_check(f, shadow, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("rand", "zstd", shadow, size);
    free(shadow);
    free(buf);
}

Test(engine, shrink_then_grow_reads_zeros)
{
    size_t size = 300000;
    unsigned char *data = malloc(size);
    cbfs_td_rows(data, size, 3);
    struct cbfs_file *f = eng_open("sg", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_truncate(f, 100000), CBFS_OK);
    cr_assert_eq(cbfs_file_truncate(f, size), CBFS_OK);
    memset(data + 100000, 0, size - 100000);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("sg", "lz4", data, size);
    free(data);
}

struct eng_writer {
    int id;
    size_t size;
};

static void *eng_writer_main(void *arg)
{
    struct eng_writer *w = arg;
    char name[32];
    snprintf(name, sizeof name, "par-%d", w->id);
    unsigned char *data = malloc(w->size);
    cbfs_td_backup(data, w->size, (uint64_t)w->id);
    struct cbfs_file *f = eng_open(name, true, w->id % 2 ? "lz4" : "zstd");
    for (size_t off = 0; off < w->size; off += 128 << 10) {
        size_t n = w->size - off < (128u << 10) ? w->size - off : 128u << 10;
        cr_assert_eq(cbfs_file_write(f, data + off, n, off), CBFS_OK);
    }
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    f = eng_open(name, false, "lz4");
    eng_check(f, data, w->size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(data);
    return NULL;
}

Test(engine, four_concurrent_writers)
{
    pthread_t t[4];
    struct eng_writer w[4];
    for (int i = 0; i < 4; i++) {
        w[i] = (struct eng_writer){.id = i, .size = (2u << 20) + (size_t)i * 4099};
        pthread_create(&t[i], NULL, eng_writer_main, &w[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
}

struct eng_shared {
    struct cbfs_file *f;
    int id;
    const unsigned char *data;
};

static void *eng_region_main(void *arg)
{
    struct eng_shared *s = arg;
    size_t region = 1u << 20, base = (size_t)s->id * region;
    for (size_t off = 0; off < region; off += 8192)
        cr_assert_eq(cbfs_file_write(s->f, s->data + base + off, 8192, base + off), CBFS_OK);
    return NULL;
}

Test(engine, threads_share_one_file)
{
    size_t size = 4u << 20;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 9);
    struct cbfs_file *f = eng_open("shared", true, "lz4");
    pthread_t t[4];
    struct eng_shared s[4];
    for (int i = 0; i < 4; i++) {
        s[i] = (struct eng_shared){.f = f, .id = i, .data = data};
        pthread_create(&t[i], NULL, eng_region_main, &s[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("shared", "lz4", data, size);
    free(data);
}

struct eng_trunc {
    struct cbfs_file *f;
    uint64_t size;
    cbfs_err err;
};

static void *eng_truncate_main(void *arg)
{
    struct eng_trunc *t = arg;
    t->err = cbfs_file_truncate(t->f, t->size);
    return NULL;
}

/* truncate(0) seals the open blocks and waits for those in flight, dropping
 * the file's lock. A 10-byte write into block 3 that came then loaded the old
 * block 3 (read-modify-write) into a block the truncate never looked at
 * again: after it the file said size 0, and the close stored the old block
 * back. A write is atomic against a truncate: either it came first and is cut
 * (the file extended again reads zeros), or it came after, alone in a file of
 * zeros. xz:9 keeps the drain long enough for the write to land in it. */
Test(engine, write_during_truncate_is_not_undone_by_it)
{
    const uint32_t bs = 64 << 10, nb = 24;
    unsigned char *old = malloc((size_t)nb * bs), *want = calloc(1, bs), mine[10];
    cr_assert(old && want);
    cbfs_td_random(old, (size_t)nb * bs, 1);
    memset(mine, 0xAB, sizeof mine);
    for (int round = 0; round < 3; round++) {
        char name[32];
        snprintf(name, sizeof name, "tr%d", round);
        struct cbfs_file *f = eng_open(name, true, "xz:9");
        cr_assert_eq(cbfs_file_write(f, old, 4ull * bs, 0), CBFS_OK);
        cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
        cr_assert_eq(cbfs_file_write(f, old + 4ull * bs, (nb - 4ull) * bs, 4ull * bs), CBFS_OK);
        struct eng_trunc t = {.f = f, .size = 0};
        pthread_t th;
        cr_assert_eq(pthread_create(&th, NULL, eng_truncate_main, &t), 0);
        usleep(20000); /* the truncate is in its drain */
        cr_assert_eq(cbfs_file_write(f, mine, sizeof mine, 3ull * bs + 5), CBFS_OK);
        pthread_join(th, NULL);
        cr_assert_eq(t.err, CBFS_OK);
        const uint64_t size = cbfs_file_size(f);
        memset(want, 0, bs);
        if (size == 0) { /* the write came first */
            cr_assert_eq(cbfs_file_truncate(f, 4ull * bs), CBFS_OK);
        } else {
            cr_assert_eq(size, 3ull * bs + 15, "round %d: size %llu", round,
                         (unsigned long long)size);
            memcpy(want + 5, mine, sizeof mine);
        }
        cr_assert_eq(cbfs_file_close(f), CBFS_OK);
        f = eng_open(name, false, "xz:9");
        for (uint64_t b = 0; b < 3; b++) eng_expect_block(f, b, 0, bs);
        const uint32_t last = (uint32_t)(cbfs_file_size(f) - 3ull * bs);
        unsigned char *got = malloc(bs);
        size_t n;
        cr_assert_eq(cbfs_file_read(f, got, bs, 3ull * bs, &n), CBFS_OK);
        cr_assert_eq(n, last);
        cr_assert(memcmp(got, want, last) == 0, "round %d: block 3 is not what the two calls "
                  "leave in either order (old bytes came back?)", round);
        free(got);
        cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    }
    free(old);
    free(want);
}

Test(engine, corrupt_frame_is_eio_not_wrong_bytes)
{
    size_t size = 512u << 10;
    unsigned char *data = malloc(size);
    cbfs_td_rows(data, size, 5);
    struct cbfs_file *f = eng_open("bad", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    char p[128];
    snprintf(p, sizeof p, "%s/bad", eng_dir);
    int fd = open(p, O_RDWR);
    unsigned char byte;
    off_t where = 64 + 2000; /* inside the first frame's payload */
    cr_assert_eq(pread(fd, &byte, 1, where), 1);
    byte ^= 0x5A;
    cr_assert_eq(pwrite(fd, &byte, 1, where), 1);
    close(fd);
    f = eng_open("bad", false, "lz4");
    unsigned char *buf = malloc(size);
    size_t got;
    cr_assert_neq(cbfs_file_read(f, buf, 4096, 0, &got), CBFS_OK);
    /* Another block still reads. */
    cr_assert_eq(cbfs_file_read(f, buf, 4096, 200000, &got), CBFS_OK);
    cr_assert_eq(memcmp(buf, data + 200000, 4096), 0);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(buf);
    free(data);
}

Test(engine, punch_and_seek_data_hole)
{
    size_t bs = 64 << 10, size = 10 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_rows(data, size, 11);
    struct cbfs_file *f = eng_open("punch", true, "zstd");
    cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
    /* Punch blocks 2..4 wholly and half of block 6. */
    cr_assert_eq(cbfs_file_punch(f, 2 * bs, 3 * bs), CBFS_OK);
    cr_assert_eq(cbfs_file_punch(f, 6 * bs + bs / 2, bs / 2), CBFS_OK);
    cr_assert_eq(cbfs_file_punch(f, size - 10, 1000), CBFS_OK); /* past EOF: clamped */
    memset(data + 2 * bs, 0, 3 * bs);
    memset(data + 6 * bs + bs / 2, 0, bs / 2);
    memset(data + size - 10, 0, 10);
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    eng_check(f, data, size);
    uint64_t pos;
    cr_assert_eq(cbfs_file_seek(f, 0, false, &pos), CBFS_OK);
    cr_assert_eq(pos, 2 * bs);
    cr_assert_eq(cbfs_file_seek(f, 2 * bs + 5, true, &pos), CBFS_OK);
    cr_assert_eq(pos, 5 * bs);
    cr_assert_eq(cbfs_file_seek(f, 7 * bs, false, &pos), CBFS_OK);
    cr_assert_eq(pos, size);
    cr_assert_eq(cbfs_file_seek(f, size, true, &pos), CBFS_E_NXIO);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    f = eng_open("punch", false, "zstd");
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_seek(f, bs, false, &pos), CBFS_OK);
    cr_assert_eq(pos, 2 * bs);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(data);
}

Test(engine, overwrites_reclaim_space_after_flush)
{
    size_t size = 2u << 20;
    unsigned char *data = malloc(size);
    struct cbfs_file *f = eng_open("gc", true, "lz4");
    for (int round = 0; round < 5; round++) {
        cbfs_td_random(data, size, (uint64_t)round); /* incompressible: big frames */
        cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
        cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    }
    char p[128];
    snprintf(p, sizeof p, "%s/gc", eng_dir);
    struct stat st;
    cr_assert_eq(stat(p, &st), 0);
    /* Five generations were appended; only about one may still take space. */
    cr_assert_lt((uint64_t)st.st_blocks * 512, (uint64_t)size * 3 / 2,
                 "physical %llu for logical %zu", (unsigned long long)st.st_blocks * 512, size);
    cr_assert_gt((uint64_t)st.st_size, (uint64_t)size * 4);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("gc", "lz4", data, size);
    free(data);
}

Test(engine, small_overwrites_share_one_frame)
{
    size_t bs = 64 << 10, size = 4 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_random(data, size, 21);
    struct cbfs_file *f = eng_open("ow", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    char p[128];
    snprintf(p, sizeof p, "%s/ow", eng_dir);
    struct stat before, after;
    cr_assert_eq(stat(p, &before), 0);
    for (int i = 1; i <= 3; i++) {
        memset(data + i * 4096, i, 4096);
        cr_assert_eq(cbfs_file_write(f, data + i * 4096, 4096, (uint64_t)i * 4096), CBFS_OK);
    }
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    cr_assert_eq(stat(p, &after), 0);
    /* One new frame for block 0 (about one block of random data), not three. */
    cr_assert_lt(after.st_size - before.st_size, (off_t)(bs + bs / 2),
                 "data file grew by %lld", (long long)(after.st_size - before.st_size));
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(data);
}

Test(engine, fsync_heavy_writer_reads_back)
{
    /* 8 KiB appends with a flush after each, like a WAL writer: every
     * flush seals a copy of the open block; the data must stay exact. */
    size_t size = 3 * (64u << 10) + 5000;
    unsigned char *data = malloc(size);
    cbfs_td_rows(data, size, 77);
    struct cbfs_file *f = eng_open("wal", true, "zstd");
    for (size_t off = 0; off < size; off += 8192) {
        size_t n = size - off < 8192 ? size - off : 8192;
        cr_assert_eq(cbfs_file_write(f, data + off, n, off), CBFS_OK);
        cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    }
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("wal", "zstd", data, size);
    free(data);
}

Test(engine, huge_sparse_offset_is_efbig_not_oom)
{
    struct cbfs_file *f = eng_open("big", true, "lz4");
    /* 64 KiB blocks: the table caps at 2^26 blocks = 4 TiB. */
    cr_assert_eq(cbfs_file_write(f, "x", 1, (1ull << 42) + 5), CBFS_E_FBIG);
    cr_assert_eq(cbfs_file_truncate(f, 1ull << 43), CBFS_E_FBIG);
    cr_assert_eq(cbfs_file_write(f, "x", 1, (1ull << 30)), CBFS_OK); /* 1 GiB: fine */
    cr_assert_eq(cbfs_file_size(f), (1ull << 30) + 1);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
}

Test(engine, peek_gives_the_files_own_block_size)
{
    unsigned char buf[100000];
    memset(buf, 'x', sizeof buf);
    struct cbfs_file *f = eng_open("peek", true, "lz4");
    cr_assert_eq(cbfs_file_block_size(f), 64u << 10);
    cr_assert_eq(cbfs_file_write(f, buf, sizeof buf, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);

    struct cbfs_engine *other;
    struct cbfs_engine_config cfg = {.block_size = 16 << 10, .workers = 1, .cache_bytes = 1 << 20};
    cr_assert_eq(cbfs_engine_create(&cfg, &other), CBFS_OK);
    char p[128], q[140];
    snprintf(p, sizeof p, "%s/peek", eng_dir);
    snprintf(q, sizeof q, "%s%s", p, CBFS_INDEX_SUFFIX);
    int dfd = open(p, O_RDONLY), ifd = open(q, O_RDONLY);
    cr_assert(dfd >= 0 && ifd >= 0);
    uint64_t size = 0;
    uint32_t bs = 0;
    cr_assert_eq(cbfs_file_peek(other, dfd, ifd, &size, &bs), CBFS_OK);
    cr_assert_eq(size, sizeof buf);
    cr_assert_eq(bs, 64u << 10, "block size %u", bs);
    close(dfd);
    close(ifd);

    /* an empty data file with no sidecar: what cbfs_file_open would give it */
    snprintf(p, sizeof p, "%s/peek-empty", eng_dir);
    dfd = open(p, O_RDWR | O_CREAT, 0644);
    cr_assert(dfd >= 0);
    cr_assert_eq(cbfs_file_peek(other, dfd, -1, &size, &bs), CBFS_OK);
    cr_assert_eq(size, 0);
    cr_assert_eq(bs, 16u << 10);
    close(dfd);
    cbfs_engine_destroy(other);
}

/* fallocate's extension only grows: a size the file already has (a write
 * extended it after the caller looked) is left as it is, never cut back. */
Test(engine, extend_never_shrinks)
{
    const size_t len = 200000;
    unsigned char *data = calloc(1, 300000);
    cbfs_td_random(data, len, 63);
    struct cbfs_file *f = eng_open("extend", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, len, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_extend(f, 4096), CBFS_OK);
    eng_check(f, data, len);
    cr_assert_eq(cbfs_file_extend(f, 300000), CBFS_OK);
    eng_check(f, data, 300000); /* zeros past the data */
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("extend", "lz4", data, 300000);
    free(data);
}

/* No engine without a cache: 0 is refused, not taken as some default of the
 * engine's own (the settings table's cache_size is the one default). */
Test(engine_config, no_cache_is_refused)
{
    struct cbfs_engine_config cfg = {.block_size = 64 << 10, .workers = 1};
    struct cbfs_engine *e = NULL;
    cr_assert_eq(cbfs_engine_create(&cfg, &e), CBFS_E_INVAL);
    cr_assert_null(e);
}

/* The default in-flight budget (inflight_bytes 0): 16 MiB per worker, at most
 * 1 GiB, never less than four blocks per worker. */
Test(engine_config, default_inflight_budget)
{
    static const struct {
        unsigned workers;
        uint32_t block;
        uint64_t want;
    } cases[] = {
        {2, 256 << 10, 32ull << 20},  {16, 256 << 10, 256ull << 20},
        {128, 256 << 10, 1ull << 30}, {2, 16 << 20, 128ull << 20},
        {64, 16 << 20, 4ull << 30},   {1, 4 << 10, 16ull << 20},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cbfs_engine_config cfg = {
            .block_size = cases[i].block, .workers = cases[i].workers, .cache_bytes = 1 << 20};
        struct cbfs_engine *e;
        cr_assert_eq(cbfs_engine_create(&cfg, &e), CBFS_OK);
        cbfs_engine_get_config(e, &cfg);
        cbfs_engine_destroy(e);
        cr_expect_eq(cfg.inflight_bytes, cases[i].want, "workers %u, block %u: %llu, want %llu",
                     cases[i].workers, cases[i].block, (unsigned long long)cfg.inflight_bytes,
                     (unsigned long long)cases[i].want);
    }
}

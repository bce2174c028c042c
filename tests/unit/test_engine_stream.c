/* Engine tests of the write path's order: the writeback cache's requests
 * reach the engine out of order and in pieces; the reorder window holds them
 * (open blocks, spare slots, halves stored early) and the stream stores the
 * blocks in block order. Some look at a file's state under its lock
 * (engine/file_impl.h). Fixture: engine_fixture.h. */
#include <pthread.h>

#include "engine_fixture.h"
#include "engine/file_impl.h"

TestSuite(engine_stream, .init = eng_setup, .fini = eng_teardown, .timeout = 120);

/* Block numbers of the block frames of data file `name`, in file order (a
 * truncate's size frames name a size, not a block: left out). */
static size_t eng_frame_order(const char *name, uint64_t *blocks, size_t cap)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", eng_dir, name);
    int fd = open(p, O_RDONLY);
    cr_assert(fd >= 0);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    size_t n = 0;
    uint64_t off = 0;
    struct cbfs_frame_hdr h;
    while (off < (uint64_t)st.st_size) {
        cr_assert_eq(cbfs_frame_read_hdr(fd, off, (uint64_t)st.st_size, &h), CBFS_OK,
                     "frame at %llu", (unsigned long long)off);
        if (!(h.flags & CBFS_FRAME_SIZE)) {
            cr_assert_lt(n, cap);
            blocks[n++] = h.block;
        }
        off += CBFS_FRAME_HDR_SIZE + h.plen;
    }
    close(fd);
    return n;
}

/* Data file `name` holds nblocks block frames, one per block, in block
 * order (stock zstd -d / lz4 -d decode it). */
static void eng_assert_blocks_in_order(const char *name, size_t nblocks)
{
    uint64_t blocks[256];
    const size_t n = eng_frame_order(name, blocks, 256);
    cr_assert_eq(n, nblocks, "%s: %zu block frames for %zu blocks", name, n, nblocks);
    for (size_t i = 1; i < n; i++)
        cr_assert_gt(blocks[i], blocks[i - 1], "%s: frame %zu holds block %llu after %llu", name,
                     i, (unsigned long long)blocks[i], (unsigned long long)blocks[i - 1]);
}

/* The engine's stream gaps so far. */
static uint64_t eng_stream_gaps(void)
{
    struct cbfs_engine_stats st;
    cbfs_engine_get_stats(eng, &st);
    return st.stream_gaps;
}

/* The writeback cache hands a sequential stream to several daemon threads:
 * 1 MiB requests arrive out of order. Frames must still land in block order,
 * one per block (stock zstd -d / lz4 -d decode the file), and the content is
 * right. Block size 64K, requests of 4 blocks, pairs of requests swapped. */
Test(engine_stream, out_of_order_stream_is_stored_in_block_order)
{
    const size_t req = 4 * (64 << 10), nreq = 16, size = req * nreq + 1000;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 11);
    struct cbfs_file *f = eng_open("ooo", true, "zstd");
    for (size_t r = 0; r < nreq; r += 2) {
        cr_assert_eq(cbfs_file_write(f, data + (r + 1) * req, req, (r + 1) * req), CBFS_OK);
        cr_assert_eq(cbfs_file_write(f, data + r * req, req, r * req), CBFS_OK);
    }
    /* and a partial tail written in two pieces, the later one first */
    cr_assert_eq(cbfs_file_write(f, data + nreq * req + 500, 500, nreq * req + 500), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + nreq * req, 500, nreq * req), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);

    eng_assert_blocks_in_order("ooo", nreq * 4 + 1);
    eng_reopen_check("ooo", "zstd", data, size);
    free(data);
}

/* A stream that skips a region (a sparse writer's seek) does not wait for
 * the gap: everything is stored and reads back, holes as zeros. */
Test(engine_stream, stream_with_a_gap_is_complete)
{
    const size_t bs = 64 << 10, size = 40 * bs;
    unsigned char *data = calloc(1, size);
    struct cbfs_file *f = eng_open("gap", true, "lz4");
    cbfs_td_backup(data, 3 * bs, 12);                 /* blocks 0-2 */
    cbfs_td_backup(data + 30 * bs, 10 * bs, 13);      /* blocks 30-39 after a seek */
    cr_assert_eq(cbfs_file_write(f, data, 3 * bs, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + 5 * bs, bs, 5 * bs), CBFS_OK); /* zeros, held */
    cr_assert_eq(cbfs_file_write(f, data + 30 * bs, 10 * bs, 30 * bs), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("gap", "lz4", data, size);
    free(data);
}

/* The writeback cache splits blocks across requests: a block's end can come
 * before its start, and a later request can reach the file first. A block
 * is sealed once every byte of it was written, not when its end is. */
Test(engine_stream, block_pieces_in_any_order)
{
    const size_t bs = 64 << 10, size = 3 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 14);
    struct cbfs_file *f = eng_open("pieces", true, "zstd");
    cr_assert_eq(cbfs_file_write(f, data + bs + 40000, 2 * bs - 40000, bs + 40000), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data, bs, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + bs, 40000, bs), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_assert_blocks_in_order("pieces", 3);
    free(data);
}

/* Writes data[0, nreq bs + x) as the writeback cache may send it with blocks
 * as large as its requests: [0, x) first, then requests of a block's length
 * that start x into a block (request i: [i bs + x, (i + 1) bs + x)), the odd
 * ones of the first `late` before the even ones, then the rest in order. */
static void eng_write_straddling(struct cbfs_file *f, const unsigned char *data, size_t bs,
                                 size_t x, size_t late, size_t nreq)
{
    cr_assert_eq(cbfs_file_write(f, data, x, 0), CBFS_OK);
    for (size_t pass = 1; pass <= 2; pass++)
        for (size_t i = pass == 1 ? 1 : 0; i < late; i += 2)
            cr_assert_eq(cbfs_file_write(f, data + i * bs + x, bs, i * bs + x), CBFS_OK);
    for (size_t i = late; i < nreq; i++)
        cr_assert_eq(cbfs_file_write(f, data + i * bs + x, bs, i * bs + x), CBFS_OK);
}

/* Requests of a block's length that straddle two blocks (the writeback
 * cache's need not start on one), every other one late: the slots fill with
 * halves of blocks, and the oldest are stored half written, to be loaded and
 * completed when their other half comes. The stream's next block completed
 * so moves the stream on: nobody waits for a gap that already came (each
 * was a 200 ms wait of every writer of the file, and a stream gap). */
Test(engine_stream, halves_stored_early_do_not_stall_the_stream)
{
    const size_t bs = 64 << 10, x = bs / 2, nreq = 80, size = nreq * bs + x;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 15);
    struct cbfs_file *f = eng_open("halves", true, "lz4");
    const uint64_t g0 = eng_stream_gaps();
    eng_write_straddling(f, data, bs, x, 40, nreq);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    cr_assert_eq(eng_stream_gaps(), g0, "%llu stream gaps",
                 (unsigned long long)(eng_stream_gaps() - g0));
    eng_reopen_check("halves", "lz4", data, size);
    free(data);
}

/* A flush while blocks wait in the reorder window seals copies and leaves
 * them open and clean; when the gap arrives the stream moves past them. (It
 * stopped at the first clean one: every later block was held until the slots
 * ran out, then a 200 ms wait and a stream gap that never was.) */
Test(engine_stream, flush_inside_the_reorder_window_keeps_the_stream)
{
    const size_t bs = 64 << 10, nb = 80, size = nb * bs;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 31);
    struct cbfs_file *f = eng_open("stall", true, "lz4");
    const uint64_t g0 = eng_stream_gaps();
    cr_assert_eq(cbfs_file_write(f, data, bs, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + 2 * bs, 2 * bs, 2 * bs), CBFS_OK); /* 2, 3 held */
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + bs, bs, bs), CBFS_OK); /* the gap comes */
    for (size_t b = 4; b < nb; b++)
        cr_assert_eq(cbfs_file_write(f, data + b * bs, bs, b * bs), CBFS_OK);
    const uint64_t g1 = eng_stream_gaps();
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    cr_assert_eq(g1, g0, "a gap was counted where none was");
    free(data);
}

/* The same halves with other writers in sight (as the kernel's writeback
 * threads are): while every slot holds a half, a new one takes a spare slot
 * (two per other writer) rather than store half a block early, so every
 * block is stored once, in block order (helper-36: 68 frames for 61 blocks
 * without the spare slots). */
Test(engine_stream, halves_with_writers_in_sight_are_not_stored_early)
{
    const size_t bs = 64 << 10, x = bs / 2, nreq = 60, size = nreq * bs + x;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 15);
    struct cbfs_file *f = eng_open("halves4", true, "lz4");
    atomic_fetch_add(&f->writers, 4); /* four other writers in sight: 8 spare slots */
    eng_write_straddling(f, data, bs, x, 38, nreq); /* 39 halves: more than open_max = 32 */
    atomic_fetch_sub(&f->writers, 4);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_assert_blocks_in_order("halves4", nreq + 1);
    eng_reopen_check("halves4", "lz4", data, size);
    free(data);
}

/* The late start of the stream's next block, whose end was stored early
 * (evicted) and is reloaded whole, moves the stream on at once: before, the
 * block stayed open with the stream waiting for it. */
Test(engine_stream, late_start_of_the_streams_next_block_moves_the_stream)
{
    const size_t bs = 64 << 10, x = bs / 2, size = 40 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 18);
    struct cbfs_file *f = eng_open("latestart", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, bs, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + bs + x, bs - x, bs + x), CBFS_OK);
    for (size_t b = 2; b < 40; b++) /* all but their last byte: block 1's end is evicted */
        cr_assert_eq(cbfs_file_write(f, data + b * bs, bs - 1, b * bs), CBFS_OK);
    cbfs_mutex_lock(&f->lock);
    bool open1 = false;
    for (unsigned i = 0; i < f->nopen; i++) open1 |= f->open[i].block == 1;
    const uint64_t w0 = f->wnext;
    cbfs_mutex_unlock(&f->lock);
    cr_assert(!open1, "block 1 was not evicted");
    cr_assert_eq(w0, 1);
    cr_assert_eq(cbfs_file_write(f, data + bs, x, bs), CBFS_OK);
    cbfs_mutex_lock(&f->lock);
    const uint64_t w1 = f->wnext;
    cbfs_mutex_unlock(&f->lock);
    cr_assert_eq(w1, 2, "wnext %llu", (unsigned long long)w1);
    for (size_t b = 2; b < 40; b++)
        cr_assert_eq(cbfs_file_write(f, data + b * bs + bs - 1, 1, b * bs + bs - 1), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("latestart", "lz4", data, size);
    free(data);
}

/* After a flush the open blocks are clean (their frames stored): new halves
 * make room by dropping those, not by taking spare slots, and never by
 * storing a dirty half early. */
Test(engine_stream, clean_blocks_make_room_before_spare_slots)
{
    const size_t bs = 64 << 10, x = bs / 2, size = 80 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 19);
    struct cbfs_file *f = eng_open("cleanfirst", true, "lz4");
    atomic_fetch_add(&f->writers, 2);
    cr_assert_eq(cbfs_file_write(f, data, x, 0), CBFS_OK);
    for (size_t i = 1; i < 31; i += 2) /* 16 halves, then a flush stores them */
        cr_assert_eq(cbfs_file_write(f, data + i * bs + x, bs, i * bs + x), CBFS_OK);
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    for (size_t i = 41; i < 61; i += 2) /* 20 halves far on */
        cr_assert_eq(cbfs_file_write(f, data + i * bs + x, bs, i * bs + x), CBFS_OK);
    cbfs_mutex_lock(&f->lock);
    unsigned dirty = 0;
    const unsigned nopen = f->nopen, open_max = f->open_max;
    for (unsigned i = 0; i < f->nopen; i++) dirty += f->open[i].dirty;
    cbfs_mutex_unlock(&f->lock);
    cr_assert_leq(nopen, open_max, "%u open, open_max %u", nopen, open_max);
    cr_assert_eq(dirty, 20, "%u of the 20 new halves open", dirty);
    atomic_fetch_sub(&f->writers, 2);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(data);
}

/* Truncates new file `name` to x (inside a block) and writes nb blocks'
 * worth of data from x on: no stream gap, the nb + 1 blocks stored once each
 * in block order, content right live and after a reopen. */
static void eng_stream_after_hole(const char *name, unsigned char *data, size_t x, size_t nb)
{
    const size_t bs = 64 << 10, size = x + nb * bs;
    struct cbfs_file *f = eng_open(name, true, "lz4");
    const uint64_t g0 = eng_stream_gaps();
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    for (size_t i = 0; i < nb; i++)
        cr_assert_eq(cbfs_file_write(f, data + x + i * bs, bs, x + i * bs), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    cr_assert_eq(eng_stream_gaps(), g0, "%s: %llu stream gaps", name,
                 (unsigned long long)(eng_stream_gaps() - g0));
    eng_assert_blocks_in_order(name, nb + 1);
    eng_reopen_check(name, "lz4", data, size);
}

/* A stream that starts where a truncate left the size, inside a block (a
 * sparse tail, then an append): the block's start is a hole no write comes
 * to, so the block completes with the stream's first write and every block
 * is stored once, in block order. (It waited for those bytes as a gap: 200
 * ms, a stream gap, and the block stored after its successors; helper-39's
 * crash campaign, one gap per file.) A write that then comes into the hole
 * rewrites the block, and the content is right. */
Test(engine_stream, stream_after_a_hole_starts_in_order)
{
    const size_t bs = 64 << 10, x = bs / 2 + 4096, nb = 40, size = nb * bs + x;
    unsigned char *data = calloc(1, size);
    cbfs_td_backup(data + x, size - x, 33);
    eng_stream_after_hole("afterhole", data, x, nb);

    /* the hole written after all: the block is loaded and stored again */
    struct cbfs_file *f = eng_open("afterhole", false, "lz4");
    cbfs_td_backup(data, 4096, 34);
    cr_assert_eq(cbfs_file_write(f, data, 4096, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("afterhole", "lz4", data, size);
    free(data);
}

/* The same append as the writeback cache sends it: whole pages, so its first
 * write starts at the page that holds the truncate's odd size, below it, and
 * carries that page's zeros. It is the append all the same: no stream gap,
 * blocks in order. (It set set_below and waited out the gap: 4 files
 * truncated to an odd size, 4 gaps and 1.2 s against 0.4 s; helper-43.) */
Test(engine_stream, page_append_after_an_odd_truncate_starts_in_order)
{
    const size_t bs = 64 << 10, x = bs / 2 + 4096 + 123, page = x & ~(size_t)4095, nb = 40,
                 size = x + nb * bs;
    unsigned char *data = calloc(1, size);
    cbfs_td_backup(data + x, size - x, 35);
    struct cbfs_file *f = eng_open("pagehole", true, "lz4");
    const uint64_t g0 = eng_stream_gaps();
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    for (size_t off = page; off < size; off += bs) {
        const size_t n = size - off < bs ? size - off : bs;
        cr_assert_eq(cbfs_file_write(f, data + off, n, off), CBFS_OK);
    }
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    cr_assert_eq(eng_stream_gaps(), g0, "%llu stream gaps",
                 (unsigned long long)(eng_stream_gaps() - g0));
    eng_assert_blocks_in_order("pagehole", nb + 1);
    eng_reopen_check("pagehole", "lz4", data, size);
    free(data);
}

/* A write from that page that ends at or below the size is no append: a
 * preallocated file (truncated to a size off a page) whose last page comes
 * first, then the rest (the writeback cache's pages in any order: block 1
 * before block 0), is a stream from 0 that the reorder window keeps in
 * order. Taken for the append, it moved the stream to block 20, and block 1
 * was stored before block 0. */
Test(engine_stream, prealloc_page_request_below_the_size_first)
{
    const size_t bs = 64 << 10, size = 20 * bs + 16384 + 123, page = size & ~(size_t)4095;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 36);
    struct cbfs_file *f = eng_open("pagebelow", true, "lz4");
    cr_assert_eq(cbfs_file_truncate(f, size), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + page, size - page, page), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + bs, bs, bs), CBFS_OK); /* block 1 before 0 */
    for (size_t off = 0; off < page; off += off == 0 ? 2 * bs : bs) {
        const size_t n = page - off < bs ? page - off : bs;
        cr_assert_eq(cbfs_file_write(f, data + off, n, off), CBFS_OK);
    }
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_assert_blocks_in_order("pagebelow", 21);
    eng_reopen_check("pagebelow", "lz4", data, size);
    free(data);
}

/* ---- a stream after a hole (size_set, set_below): helper-40's review ---- */

/* The hole written after the marking, while the marked block is still open
 * (not complete yet) and after it was sealed: content right, reopen right. */
Test(engine_stream, late_hole_write_open_and_sealed)
{
    const size_t bs = 64 << 10, x = bs / 2 + 4096, size = 6 * bs + 123;
    unsigned char *data = malloc(size);
    cbfs_td_random(data, size, 41);
    struct cbfs_file *f = eng_open("holelate", true, "lz4");
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    /* block 0 marked [0, x), then [x, x + 100) written: not complete */
    cr_assert_eq(cbfs_file_write(f, data + x, 100, x), CBFS_OK);
    /* the hole's bytes come while it is open */
    cr_assert_eq(cbfs_file_write(f, data + 4096, x - 4096, 4096), CBFS_OK);
    /* the rest of the stream */
    cr_assert_eq(cbfs_file_write(f, data + x + 100, 3 * bs, x + 100), CBFS_OK);
    /* and the first page of the hole after block 0 was sealed */
    cr_assert_eq(cbfs_file_write(f, data, 4096, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + x + 100 + 3 * bs, size - (x + 100 + 3 * bs),
                                 x + 100 + 3 * bs), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("holelate", "lz4", data, size);
    free(data);
}

/* A stream after a hole with its hole's bytes sent late by another writer
 * (as a dirty page of the writeback cache may be, after the truncate), all
 * requests handed to threads in random order, many rounds. */
struct hole_req {
    size_t off, len;
};
struct hole_ctx {
    struct cbfs_file *f;
    const unsigned char *data;
    struct hole_req *reqs;
    size_t nreq;
    _Atomic size_t next;
    _Atomic int failed; /* a write's error (asserted by the test's own thread) */
};
static void *hole_worker(void *arg)
{
    struct hole_ctx *c = arg;
    for (;;) {
        const size_t i = atomic_fetch_add(&c->next, 1);
        if (i >= c->nreq) return NULL;
        const struct hole_req *r = &c->reqs[i];
        const cbfs_err e = cbfs_file_write(c->f, c->data + r->off, r->len, r->off);
        if (e) atomic_store(&c->failed, (int)e);
    }
}
Test(engine_stream, threads_with_late_hole_pages, .timeout = 300)
{
    const size_t bs = 64 << 10, nb = 24;
    uint64_t seed = 77;
    for (int round = 0; round < 40; round++) {
        const size_t x = (1 + cbfs_td_next(&seed) % 15) * 4096;
        const size_t size = x + nb * bs;
        unsigned char *data = malloc(size);
        cbfs_td_random(data, size, 100 + round);
        const bool hole_written = round % 2 == 0;
        if (!hole_written) memset(data, 0, x);
        char name[32];
        snprintf(name, sizeof name, "holethr%d", round);
        struct cbfs_file *f = eng_open(name, true, "lz4");
        cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
        struct hole_req reqs[128];
        size_t n = 0;
        /* requests of 1..3 blocks' length from x on, shuffled within windows */
        for (size_t off = x; off < size;) {
            size_t len = (1 + cbfs_td_next(&seed) % 3) * bs - (cbfs_td_next(&seed) % 2) * 4096;
            if (off + len > size) len = size - off;
            reqs[n++] = (struct hole_req){off, len};
            off += len;
        }
        if (hole_written) { /* the hole's pages, late, somewhere in the list */
            reqs[n++] = (struct hole_req){0, x};
        }
        for (size_t i = n - 1; i > 0; i--) { /* local shuffle: windows of 6 */
            size_t j = i - cbfs_td_next(&seed) % (i < 6 ? i + 1 : 6);
            struct hole_req t = reqs[i];
            reqs[i] = reqs[j];
            reqs[j] = t;
        }
        struct hole_ctx c = {.f = f, .data = data, .reqs = reqs, .nreq = n};
        pthread_t th[4];
        for (int t = 0; t < 4; t++) pthread_create(&th[t], NULL, hole_worker, &c);
        for (int t = 0; t < 4; t++) pthread_join(th[t], NULL);
        cr_assert_eq(atomic_load(&c.failed), 0, "round %d: a write failed", round);
        eng_check(f, data, size);
        cr_assert_eq(cbfs_file_close(f), CBFS_OK);
        eng_reopen_check(name, "lz4", data, size);
        free(data);
    }
}

/* Reopen of a file with a sparse tail (its last block never stored), then
 * an append: no gap, frames in block order after the old ones. */
Test(engine_stream, reopen_sparse_tail_then_append)
{
    const size_t bs = 64 << 10, s0 = 3 * bs, x = 5 * bs + 12288, nb = 40, size = x + nb * bs;
    unsigned char *data = calloc(1, size);
    cbfs_td_backup(data, s0, 51);
    cbfs_td_backup(data + x, size - x, 52);
    struct cbfs_file *f = eng_open("holetail", true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, s0, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    f = eng_open("holetail", false, "lz4");
    const uint64_t g0 = eng_stream_gaps();
    for (size_t i = 0; i < nb; i++)
        cr_assert_eq(cbfs_file_write(f, data + x + i * bs, bs, x + i * bs), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    cr_assert_eq(eng_stream_gaps(), g0, "%llu stream gaps",
                 (unsigned long long)(eng_stream_gaps() - g0));
    eng_assert_blocks_in_order("holetail", 3 + nb + 1); /* blocks 0-2, then 5-45 */
    eng_reopen_check("holetail", "lz4", data, size);
    free(data);
}

/* An extend past the stream's block (wnext stays where the old size put
 * it), in the same open: with the first marking the stream after the hole
 * still waited 200 ms for blocks that never come (1 stream gap); now the
 * stream starts at the hole's block. */
Test(engine_stream, extend_past_the_streams_block)
{
    const size_t bs = 64 << 10, x = 10 * bs + 12288, nb = 40;
    unsigned char *data = calloc(1, x + nb * bs);
    cbfs_td_backup(data + x, nb * bs, 53);
    eng_stream_after_hole("holefar", data, x, nb);
    free(data);
}

/* Shrink into a stored block (a tail frame), or into a hole frame, extend
 * inside it, then append at the extended size: the bytes between read
 * zeros, the rest as written. */
static void shrink_extend_append(const char *name, bool zero_block)
{
    const size_t bs = 64 << 10, s = 2 * bs + 1000, x = 2 * bs + 20480, size = x + 3 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_random(data, size, 61);
    if (zero_block) memset(data + 2 * bs, 0, bs);
    struct cbfs_file *f = eng_open(name, true, "lz4");
    cr_assert_eq(cbfs_file_write(f, data, 3 * bs, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_truncate(f, s), CBFS_OK);
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    memset(data + s, 0, x - s);
    cr_assert_eq(cbfs_file_write(f, data + x, size - x, x), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check(name, "lz4", data, size);
    free(data);
}
Test(engine_stream, shrink_extend_append_stored) { shrink_extend_append("holese", false); }
Test(engine_stream, shrink_extend_append_hole) { shrink_extend_append("holeseh", true); }

/* A punch that starts at size_set (the file grown past it by a write). */
Test(engine_stream, punch_at_size_set)
{
    const size_t bs = 64 << 10, x = bs / 2 + 4096, size = 4 * bs;
    unsigned char *data = calloc(1, size);
    cbfs_td_random(data + 2 * bs, 2 * bs, 62);
    struct cbfs_file *f = eng_open("holepunch", true, "lz4");
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + 2 * bs, 2 * bs, 2 * bs), CBFS_OK);
    cr_assert_eq(cbfs_file_punch(f, x, 100), CBFS_OK);
    cbfs_td_random(data + 100, 200, 63); /* then a write into the hole */
    cr_assert_eq(cbfs_file_write(f, data + 100, 200, 100), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("holepunch", "lz4", data, size);
    free(data);
}

/* A failed store (ENOSPC) of the block the marking completed: the reset
 * takes the file back to its store's size (size_set with it); a write at
 * that size marks again; content right. */
Test(engine_stream, reset_after_marking)
{
    const size_t bs = 64 << 10, x = bs / 2 + 4096, size = x + 3 * bs;
    unsigned char *data = calloc(1, size);
    cbfs_td_random(data + x, size - x, 64);
    struct cbfs_file *f = eng_open("holereset", true, "lz4");
    cr_assert_eq(cbfs_file_truncate(f, x), CBFS_OK);
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    full_fd = f->data_fd;
    (void)cbfs_file_write(f, data + x, bs, x); /* block 0 completes: its store fails */
    cbfs_mutex_lock(&f->lock);
    while (f->pend_head) cbfs_mutex_wait(&f->lock, &f->cond);
    cbfs_mutex_unlock(&f->lock);
    full_fd = -1;
    cr_assert_neq(cbfs_file_flush(f, NULL), CBFS_OK, "the failure is reported");
    cr_assert_eq(cbfs_file_size(f), x);
    cbfs_mutex_lock(&f->lock);
    cr_assert_eq(f->size_set, x);
    cbfs_mutex_unlock(&f->lock);
    cr_assert_eq(cbfs_file_write(f, data + x, size - x, x), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("holereset", "lz4", data, size);
    free(data);
}

/* The cost of a marking the hole's own bytes contradict: [0, L) written in
 * order over a preallocated file, the request at L (the truncate's size,
 * inside a block) before the one that ends at L. Before the marking and
 * with set_below: one frame per block, in order; the marking alone stored block
 * 20 twice, the second after block 22. */
Test(engine_stream, prealloc_request_at_size_first)
{
    const size_t bs = 64 << 10, L = 20 * bs + 16384, size = L + 3 * bs;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 65);
    struct cbfs_file *f = eng_open("holepre", true, "lz4");
    cr_assert_eq(cbfs_file_truncate(f, L), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data, 20 * bs, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + L, size - L, L), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, data + 20 * bs, L - 20 * bs, 20 * bs), CBFS_OK);
    eng_check(f, data, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_assert_blocks_in_order("holepre", 24);
    eng_reopen_check("holepre", "lz4", data, size);
    free(data);
}

/* The read path when the store's read fails or the block changes under it:
 * a failure is an error (never bytes, zeros or a retry for ever), it does
 * not outlive its cause, and a reader that races a rewrite, a truncate or a
 * failed sync's revert gets one version of the block.
 *
 * pread64 is interposed here (the engine is linked into the test binary, so
 * its preads come here): while rp_fd is armed, each pread of that fd fails
 * with rp_errno (rp_left more times; -1: for ever); rp_hold_fd/rp_hold_off
 * hold one pread until released. Otherwise the real one. (The interposers
 * of writes, syncs and allocations are in test_engine_failures.c.) */
#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/syscall.h>
#include <time.h>

#include "engine_fixture.h"
#include "engine/file_impl.h"

static _Atomic int rp_fd = -1;
static _Atomic int rp_errno = EIO;
static _Atomic long rp_left = -1;
static _Atomic long rp_failed;
/* pread hook: the first pread of rp_hold_fd at rp_hold_off waits until
 * rp_hold_release (rp_hold_in set while it waits) */
static _Atomic int rp_hold_fd = -1;
static _Atomic long long rp_hold_off = -1;
static atomic_bool rp_hold_in, rp_hold_release;

ssize_t pread64(int fd, void *buf, size_t n, __off64_t off)
{
    if (fd >= 0 && fd == atomic_load(&rp_hold_fd) && off == atomic_load(&rp_hold_off)) {
        atomic_store(&rp_hold_fd, -1); /* once */
        atomic_store(&rp_hold_in, true);
        while (!atomic_load(&rp_hold_release)) usleep(1000);
    }
    if (fd >= 0 && fd == atomic_load(&rp_fd)) {
        long left = atomic_load(&rp_left);
        if (left != 0) {
            if (left > 0) atomic_fetch_sub(&rp_left, 1);
            atomic_fetch_add(&rp_failed, 1);
            errno = atomic_load(&rp_errno);
            return -1;
        }
    }
    return (ssize_t)syscall(SYS_pread64, fd, buf, n, off);
}

#define RP_BS (64u << 10)

static void rp_fill(unsigned char *d, size_t n, unsigned seed)
{
    srand(seed);
    for (size_t i = 0; i < n; i++) d[i] = (unsigned char)rand(); /* incompressible: RAW */
}

/* name: nblocks blocks of seed's bytes, stored and closed. */
static void rp_make(const char *name, unsigned char *data, size_t nblocks, unsigned seed)
{
    rp_fill(data, nblocks * RP_BS, seed);
    struct cbfs_file *f = eng_open(name, true, "zstd:1");
    cr_assert_eq(cbfs_file_write(f, data, nblocks * RP_BS, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
}

struct rp_reader {
    struct cbfs_file *f;
    uint64_t off;
    size_t len;
    unsigned char *buf;
    cbfs_err err;
    size_t got;
    _Atomic bool done;
};

static void *rp_read(void *arg)
{
    struct rp_reader *r = arg;
    r->err = cbfs_file_read(r->f, r->buf, r->len, r->off, &r->got);
    atomic_store(&r->done, true);
    return NULL;
}

/* Waits up to ms for r to finish. */
static bool rp_wait(struct rp_reader *r, unsigned ms)
{
    for (unsigned i = 0; i < ms && !atomic_load(&r->done); i++) usleep(1000);
    return atomic_load(&r->done);
}

/* An NFS (or other network) store answers a read of a file whose handle went
 * stale with ESTALE, for good: CBFS_E_STALE. The read path's own "the block
 * changed while the lock was dropped, look again" was that same code once, so
 * cbfs_file_read_vec retried the block for as long as the store said ESTALE
 * (one FUSE thread at 100 % CPU, the reader hung: helper-42). It fails. */
Test(engine_readpath, estale_from_the_store_is_an_error_not_a_spin, .init = eng_setup,
     .fini = eng_teardown, .timeout = 30)
{
    static unsigned char data[2 * RP_BS], buf[RP_BS];
    rp_make("f", data, 2, 11);
    struct cbfs_file *f = eng_open("f", false, "zstd:1");
    atomic_store(&rp_errno, ESTALE);
    atomic_store(&rp_left, -1);
    atomic_store(&rp_fd, f->data_fd);
    struct rp_reader r = {.f = f, .off = RP_BS, .len = RP_BS, .buf = buf};
    pthread_t t;
    pthread_create(&t, NULL, rp_read, &r);
    const bool finished = rp_wait(&r, 2000);
    const long failed = atomic_load(&rp_failed);
    atomic_store(&rp_fd, -1); /* the store is back: a spinning read now ends */
    pthread_join(t, NULL);
    cr_assert(finished,
              "a read whose store read fails with ESTALE was still running after 2 s: it "
              "retried the block %ld times (it ended with %s, %zu bytes, once the store came back)",
              failed, cbfs_err_str(r.err), r.got);
    cr_assert_neq(r.err, CBFS_OK, "a failed store read gave %zu bytes and no error", r.got);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
}

/* The same in the write path's read (a read-modify-write under the lock):
 * the store's ESTALE is the write's error. */
Test(engine_readpath, estale_in_read_modify_write_fails_the_write, .init = eng_setup,
     .fini = eng_teardown, .timeout = 30)
{
    static unsigned char data[2 * RP_BS];
    rp_make("f", data, 2, 12);
    struct cbfs_file *f = eng_open("f", false, "zstd:1");
    atomic_store(&rp_errno, ESTALE);
    atomic_store(&rp_left, -1);
    atomic_store(&rp_fd, f->data_fd);
    const cbfs_err e = cbfs_file_write(f, "x", 1, 100);
    atomic_store(&rp_fd, -1);
    cr_assert_neq(e, CBFS_OK);
    (void)cbfs_file_close(f);
}

/* A store read that fails once (EIO) fails that read, and is not kept: the
 * next read of the block gives its bytes. (A FAILED entry is dropped
 * at its last put.) */
Test(engine_readpath, store_read_error_is_not_cached, .init = eng_setup, .fini = eng_teardown,
     .timeout = 30)
{
    static unsigned char data[4 * RP_BS], buf[RP_BS];
    rp_make("f", data, 4, 13);
    struct cbfs_file *f = eng_open("f", false, "zstd:1");
    atomic_store(&rp_errno, EIO);
    atomic_store(&rp_left, 1);
    atomic_store(&rp_fd, f->data_fd);
    size_t got = 0;
    cr_assert_eq(cbfs_file_read(f, buf, RP_BS, 2 * RP_BS, &got), CBFS_E_IO);
    atomic_store(&rp_fd, -1);
    cr_assert_eq(cbfs_file_read(f, buf, RP_BS, 2 * RP_BS, &got), CBFS_OK);
    cr_assert(got == RP_BS && !memcmp(buf, data + 2 * RP_BS, RP_BS));
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
}

/* A damaged frame that read-ahead decoded first: the reader of that block
 * gets EIO (never the bytes or zeros), and the damage is counted and logged
 * once per read. Read-ahead's failed decode is logged and counted as a read
 * error too, and the reader's own decode again: read_errors says 2 for one
 * failed read (style: a counter documented as "stored blocks that failed"). */
Test(engine_readpath, damaged_block_read_ahead_is_eio_counted_once, .init = eng_setup,
     .fini = eng_teardown, .timeout = 30)
{
    static unsigned char data[4 * RP_BS], buf[RP_BS];
    rp_make("f", data, 4, 14);
    struct cbfs_file *f = eng_open("f", false, "zstd:1");
    const struct cbfs_index_entry *e = cbfs_index_get(&f->idx, 1);
    cr_assert_not_null(e);
    const uint64_t at = e->offset + CBFS_FRAME_HDR_SIZE + 100;
    unsigned char c;
    cr_assert_eq(pread(f->data_fd, &c, 1, (off_t)at), 1);
    c ^= 0x5a;
    cr_assert_eq(pwrite(f->data_fd, &c, 1, (off_t)at), 1);
    struct cbfs_engine_stats before, after;
    cbfs_engine_get_stats(eng, &before);
    size_t got = 0;
    cr_assert_eq(cbfs_file_read(f, buf, RP_BS, 0, &got), CBFS_OK); /* read-ahead: 1, 2 */
    cbfs_mutex_lock(&f->lock);
    while (f->ra_jobs) cbfs_mutex_wait(&f->lock, &f->cond);
    cbfs_mutex_unlock(&f->lock);
    cr_assert_eq(cbfs_file_read(f, buf, RP_BS, RP_BS, &got), CBFS_E_CORRUPT);
    cbfs_engine_get_stats(eng, &after);
    cr_expect_eq(after.read_errors - before.read_errors, 1,
                 "one failed read of one damaged block counted %llu read errors",
                 (unsigned long long)(after.read_errors - before.read_errors));
    (void)cbfs_file_close(f);
}

/* A block rewritten twice, a truncate into it and an extension after, each
 * read between (so the cache holds each version): every read gives the
 * newest bytes, zeros past the cut. (The cache keys on generations.) */
Test(engine_readpath, rewrites_and_truncate_extend_never_hit_an_old_entry, .init = eng_setup,
     .fini = eng_teardown, .timeout = 30)
{
    static unsigned char data[4 * RP_BS], want[4 * RP_BS], buf[4 * RP_BS];
    rp_make("f", data, 4, 15);
    memcpy(want, data, sizeof want);
    struct cbfs_file *f = eng_open("f", false, "zstd:1");
    size_t got;
    for (int round = 0; round < 3; round++) {
        cr_assert_eq(cbfs_file_read(f, buf, sizeof buf, 0, &got), CBFS_OK);
        cr_assert(got == sizeof buf && !memcmp(buf, want, sizeof buf), "round %d", round);
        memset(want + RP_BS + 10, 'a' + round, 1000);
        cr_assert_eq(cbfs_file_write(f, want + RP_BS + 10, 1000, RP_BS + 10), CBFS_OK);
        cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    }
    cr_assert_eq(cbfs_file_truncate(f, RP_BS + 500), CBFS_OK);
    cr_assert_eq(cbfs_file_truncate(f, 4 * RP_BS), CBFS_OK);
    memset(want + RP_BS + 500, 0, sizeof want - RP_BS - 500);
    cr_assert_eq(cbfs_file_read(f, buf, sizeof buf, 0, &got), CBFS_OK);
    cr_assert(got == sizeof buf && !memcmp(buf, want, sizeof buf));
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    cr_assert_eq(cbfs_file_read(f, buf, sizeof buf, 0, &got), CBFS_OK);
    cr_assert(got == sizeof buf && !memcmp(buf, want, sizeof buf));
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    eng_reopen_check("f", "zstd:1", want, sizeof want);
}

/* A reader that took block 1's entry (a frame stored since the last good
 * sync) and reads its frame only after a failed sync took the file back (the
 * data file cut at durable_end, the table reloaded: block 1 is its durable
 * version again) and a new frame of block 1 was stored at the same offset.
 * The header's generation tells the new frame from the one the entry named:
 * the read looks again and gives block 1 as it is now (or as it was when the
 * read began), never EIO, zeros or a mix. */
Test(engine_readpath, reader_across_a_revert_and_a_new_frame_at_its_offset, .init = eng_setup,
     .fini = eng_teardown, .timeout = 30)
{
    static unsigned char d[4 * RP_BS], x[RP_BS], y[RP_BS], buf[RP_BS];
    rp_fill(d, sizeof d, 21);
    rp_fill(x, sizeof x, 22);
    rp_fill(y, sizeof y, 23);
    struct cbfs_file *f = eng_open("f", true, "zstd:1");
    cr_assert_eq(cbfs_file_write(f, d, sizeof d, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_flush(f, NULL), CBFS_OK);
    cr_assert_eq(cbfs_file_write(f, x, RP_BS, RP_BS), CBFS_OK); /* behind the stream: sealed */
    cbfs_mutex_lock(&f->lock);
    cbfs_file_drain(f);
    const struct cbfs_index_entry e1 = *cbfs_index_get(&f->idx, 1);
    const uint64_t durable = f->durable_end;
    cbfs_mutex_unlock(&f->lock);
    cr_assert_eq(e1.offset, durable, "block 1's new frame is the first past the durable end");

    atomic_store(&rp_hold_off, (long long)e1.offset);
    atomic_store(&rp_hold_fd, f->data_fd);
    struct rp_reader r = {.f = f, .off = RP_BS, .len = RP_BS, .buf = buf};
    pthread_t t;
    pthread_create(&t, NULL, rp_read, &r);
    for (int i = 0; i < 5000 && !atomic_load(&rp_hold_in); i++) usleep(1000);
    cr_assert(atomic_load(&rp_hold_in), "the reader never read block 1's frame");

    struct stat st;
    cr_assert_eq(fstat(f->data_fd, &st), 0);
    fail_ino = st.st_ino;
    fail_from = st.st_size; /* the sync fails; nothing to zero */
    cr_assert_neq(cbfs_file_flush(f, NULL), CBFS_OK);
    cbfs_mutex_lock(&f->lock);
    const uint64_t gen_back = cbfs_index_get(&f->idx, 1)->generation;
    cbfs_mutex_unlock(&f->lock);
    cr_assert_lt(gen_back, e1.generation, "the revert took block 1 back");
    cr_assert_eq(cbfs_file_write(f, y, RP_BS, RP_BS), CBFS_OK);
    cbfs_mutex_lock(&f->lock);
    cbfs_file_drain(f);
    const struct cbfs_index_entry e3 = *cbfs_index_get(&f->idx, 1);
    cbfs_mutex_unlock(&f->lock);
    cr_assert_eq(e3.offset, e1.offset, "the new frame lands where the taken-back one was");

    atomic_store(&rp_hold_release, true);
    pthread_join(t, NULL);
    const bool is_d = !memcmp(buf, d + RP_BS, RP_BS), is_x = !memcmp(buf, x, RP_BS),
               is_y = !memcmp(buf, y, RP_BS);
    cr_assert(r.err == CBFS_OK && r.got == RP_BS && (is_d || is_x || is_y),
              "read across the revert: %s, %zu bytes, %s", cbfs_err_str(r.err), r.got,
              is_d ? "durable" : is_x ? "taken back" : is_y ? "new" : "NO VERSION");
    cr_assert_eq(cbfs_file_read(f, buf, RP_BS, RP_BS, &r.got), CBFS_OK);
    cr_assert(!memcmp(buf, y, RP_BS));
    (void)cbfs_file_close(f);
}

/* Engine concurrency stress without Criterion (Criterion's forked runner
 * cannot start under ThreadSanitizer, upstream issue Snaipe/Criterion#274).
 * Built in every build; the test script runs it from the TSan build. Each
 * case checks every byte against a shadow copy; prints "N passed, N failed".
 * For longer runs by hand: ST_ONLY=NAME runs one case, ST_CACHE=BYTES and
 * ST_RA=BLOCKS set the cache and the read-ahead, ST_WORKERS=N the pool's
 * size (default 2), VC_SECONDS the versioned_readers case's length
 * (default 5). */
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/engine.h"
#include "cbfs/format.h"
#include "../unit/testdata.h"
#include "../unit/testengine.h"

static char st_dir[64];
static struct cbfs_engine *st_eng;
static atomic_int st_failures;

#define ST_CHECK(cond, ...)                                 \
    do {                                                    \
        if (!(cond)) {                                      \
            fprintf(stderr, "FAIL %s:%d: ", __FILE__, __LINE__); \
            fprintf(stderr, __VA_ARGS__);                   \
            fputc('\n', stderr);                            \
            atomic_fetch_add(&st_failures, 1);              \
            return NULL;                                    \
        }                                                   \
    } while (0)

static struct cbfs_file *st_open(const char *name, bool create)
{
    char p[128], q[140];
    snprintf(p, sizeof p, "%s/%s", st_dir, name);
    snprintf(q, sizeof q, "%s%s", p, CBFS_INDEX_SUFFIX);
    struct cbfs_file *f = NULL;
    if (cbfs_te_open(st_eng, p, q, create, "lz4:1", NULL, &f)) return NULL;
    cbfs_file_set_name(f, name);
    return f;
}

static int st_compare(struct cbfs_file *f, const unsigned char *want, size_t size)
{
    unsigned char *got = malloc(size);
    size_t pos = 0, n;
    while (pos < size) {
        if (cbfs_file_read(f, got + pos, 131072, pos, &n) || n == 0) break;
        pos += n;
    }
    int ok = pos == size && memcmp(got, want, size) == 0;
    free(got);
    return ok;
}

struct st_arg {
    struct cbfs_file *f;
    const unsigned char *data;
    size_t size;
    int id;
    atomic_int *written; /* bytes published so far by the writer */
};

/* Writer + concurrent reader on one file: the reader checks only the
 * prefix the writer has already published. */
static void *st_writer(void *p)
{
    struct st_arg *a = p;
    for (size_t off = 0; off < a->size; off += 65536) {
        size_t n = a->size - off < 65536 ? a->size - off : 65536;
        ST_CHECK(cbfs_file_write(a->f, a->data + off, n, off) == CBFS_OK, "write");
        atomic_store(a->written, (int)(off + n));
        if (off % (1u << 20) == 0) ST_CHECK(cbfs_file_flush(a->f, NULL) == CBFS_OK, "flush");
    }
    return NULL;
}

static void *st_reader(void *p)
{
    struct st_arg *a = p;
    unsigned char *buf = malloc(200000);
    uint64_t s = 99;
    for (int i = 0; i < 2000; i++) {
        size_t w = (size_t)atomic_load(a->written);
        if (!w) continue;
        size_t off = cbfs_td_next(&s) % w, n = 1 + cbfs_td_next(&s) % 200000, got;
        if (n > w - off) n = w - off;
        if (cbfs_file_read(a->f, buf, n, off, &got) != CBFS_OK || got != n ||
            memcmp(buf, a->data + off, n) != 0) {
            free(buf);
            ST_CHECK(0, "read-while-write mismatch at %zu+%zu", off, n);
        }
    }
    free(buf);
    return NULL;
}

static void *st_region(void *p)
{
    struct st_arg *a = p;
    size_t region = a->size / 4, base = (size_t)a->id * region;
    for (size_t off = 0; off < region; off += 8192)
        ST_CHECK(cbfs_file_write(a->f, a->data + base + off, 8192, base + off) == CBFS_OK, "w");
    return NULL;
}

/* st_region twice (the second pass supersedes the first: garbage to punch),
 * flushing through its own handle's count every 256 KiB: flushes of one file
 * overlap each other's fdatasync, commits and punching. */
static void *st_region_flush(void *p)
{
    struct st_arg *a = p;
    uint64_t seen = cbfs_file_err_seq(a->f);
    size_t region = a->size / 4, base = (size_t)a->id * region;
    for (int pass = 0; pass < 2; pass++) {
        for (size_t off = 0; off < region; off += 8192) {
            ST_CHECK(cbfs_file_write(a->f, a->data + base + off, 8192, base + off) == CBFS_OK,
                     "w");
            if ((off + 8192) % (256u << 10) == 0)
                ST_CHECK(cbfs_file_flush(a->f, &seen) == CBFS_OK, "flush");
        }
    }
    return NULL;
}

static int st_case_read_while_write(void)
{
    size_t size = 6u << 20;
    unsigned char *data = malloc(size);
    cbfs_td_backup(data, size, 1);
    atomic_int written = 0;
    struct st_arg a = {.f = st_open("rw", true), .data = data, .size = size, .written = &written};
    if (!a.f) return 0;
    pthread_t w, r1, r2;
    pthread_create(&w, NULL, st_writer, &a);
    pthread_create(&r1, NULL, st_reader, &a);
    pthread_create(&r2, NULL, st_reader, &a);
    pthread_join(w, NULL);
    pthread_join(r1, NULL);
    pthread_join(r2, NULL);
    int ok = cbfs_file_close(a.f) == CBFS_OK;
    struct cbfs_file *f = st_open("rw", false);
    ok = ok && f && st_compare(f, data, size);
    if (f) cbfs_file_close(f);
    free(data);
    return ok;
}

#define ST_FOUR_SIZE (8u << 20)

/* Creates file name and has four threads run fn on it at once, each on its
 * quarter (st_arg.id) of ST_FOUR_SIZE bytes of backup-like data made with
 * seed (*data; the caller frees it). @return the file, NULL if it did not
 * open (no thread ran). */
static struct cbfs_file *st_four(const char *name, uint64_t seed, void *(*fn)(void *),
                                 unsigned char **data)
{
    *data = malloc(ST_FOUR_SIZE);
    cbfs_td_backup(*data, ST_FOUR_SIZE, seed);
    struct cbfs_file *f = st_open(name, true);
    if (!f) return NULL;
    pthread_t t[4];
    struct st_arg a[4];
    for (int i = 0; i < 4; i++) {
        a[i] = (struct st_arg){.f = f, .data = *data, .size = ST_FOUR_SIZE, .id = i};
        pthread_create(&t[i], NULL, fn, &a[i]);
    }
    for (int i = 0; i < 4; i++) pthread_join(t[i], NULL);
    return f;
}

static int st_case_shared_file(void)
{
    unsigned char *data;
    struct cbfs_file *f = st_four("shared", 2, st_region, &data);
    int ok = f && st_compare(f, data, ST_FOUR_SIZE) &&
             cbfs_file_truncate(f, ST_FOUR_SIZE / 2) == CBFS_OK &&
             st_compare(f, data, ST_FOUR_SIZE / 2);
    if (f) ok = cbfs_file_close(f) == CBFS_OK && ok;
    free(data);
    return ok;
}

static int st_case_flushes(void)
{
    unsigned char *data;
    struct cbfs_file *f = st_four("flushes", 3, st_region_flush, &data);
    int ok = f && cbfs_file_close(f) == CBFS_OK;
    f = ok ? st_open("flushes", false) : NULL;
    ok = ok && f && st_compare(f, data, ST_FOUR_SIZE);
    if (f) cbfs_file_close(f);
    free(data);
    return ok;
}

/* Three threads write their regions (st_region) while the fourth truncates
 * the file up and down: writes and truncates exclude each other (the
 * truncate's gate), and a write that waited at it goes on after. What the
 * file holds then depends on the order, so the check is what follows: cut
 * to nothing, written whole once more, it reads back exactly. */
static void *st_region_or_truncate(void *p)
{
    struct st_arg *a = p;
    if (a->id != 3) return st_region(p);
    uint64_t s = 5;
    for (int i = 0; i < 40; i++)
        ST_CHECK(cbfs_file_truncate(a->f, cbfs_td_next(&s) % a->size) == CBFS_OK, "truncate");
    return NULL;
}

static int st_case_truncates(void)
{
    unsigned char *data;
    struct cbfs_file *f = st_four("truncates", 4, st_region_or_truncate, &data);
    int ok = f && cbfs_file_truncate(f, 0) == CBFS_OK &&
             cbfs_file_write(f, data, ST_FOUR_SIZE, 0) == CBFS_OK &&
             st_compare(f, data, ST_FOUR_SIZE);
    if (f) ok = cbfs_file_close(f) == CBFS_OK && ok;
    free(data);
    return ok;
}

/* One thread cuts the file to nothing and writes it whole again, 30 times;
 * three punch all of it meanwhile. A punch's zeros stay below the size the
 * file has when each is written (cbfs_file_punch): right after the cut,
 * the file is empty, whatever punches were under way (their zeros grew it
 * back before). */
static void *st_punch_or_truncate(void *p)
{
    struct st_arg *a = p;
    for (int i = 0; i < 30; i++) {
        if (a->id == 0) {
            ST_CHECK(cbfs_file_truncate(a->f, 0) == CBFS_OK, "truncate");
            ST_CHECK(cbfs_file_size(a->f) == 0, "a punch's zeros grew the file after a truncate");
            ST_CHECK(cbfs_file_write(a->f, a->data, a->size / 8, 0) == CBFS_OK, "w");
        } else {
            ST_CHECK(cbfs_file_punch(a->f, 0, a->size / 8) == CBFS_OK, "punch");
        }
    }
    return NULL;
}

static int st_case_punches(void)
{
    unsigned char *data;
    struct cbfs_file *f = st_four("punches", 6, st_punch_or_truncate, &data);
    /* the check is the truncating thread's, after each cut */
    const int ok = f && cbfs_file_close(f) == CBFS_OK;
    free(data);
    return ok;
}

/* A stream in requests of a block's length that do not start on a block
 * (the writeback cache's, with blocks as large as a request), taken by three
 * threads out of order (in each window of 40, the odd ones first), while the
 * fourth flushes (st_straddle_flush_thread) or truncates: every block is made
 * of two requests' pieces, and halves stored early by a flush or cut by a
 * truncate are reloaded when their rest comes (the reorder window's spare
 * slots and its move past a block reloaded whole). */
#define ST_STRADDLE_AT 50000u
static atomic_size_t st_straddle_next;
static atomic_int st_straddle_done;
static bool st_straddle_truncates;

static void *st_straddle(void *p)
{
    struct st_arg *a = p;
    const size_t bs = 128 << 10, nreq = (a->size - ST_STRADDLE_AT) / bs;
    if (a->id == 3) {
        uint64_t s = 9;
        while (atomic_load(&st_straddle_done) < 3) {
            if (st_straddle_truncates)
                ST_CHECK(cbfs_file_truncate(a->f, cbfs_td_next(&s) % a->size) == CBFS_OK, "cut");
            else
                ST_CHECK(cbfs_file_flush(a->f, NULL) == CBFS_OK, "flush");
            usleep(2000);
        }
        return NULL;
    }
    if (a->id == 0) ST_CHECK(cbfs_file_write(a->f, a->data, ST_STRADDLE_AT, 0) == CBFS_OK, "w0");
    for (;;) {
        const size_t k = atomic_fetch_add(&st_straddle_next, 1);
        if (k >= nreq) break;
        const size_t w = k / 40 * 40, n = nreq - w < 40 ? nreq - w : 40, j = k - w;
        const size_t i = j < n / 2 ? w + 2 * j + 1 : w + 2 * (j - n / 2);
        const size_t off = i * bs + ST_STRADDLE_AT;
        if (cbfs_file_write(a->f, a->data + off, bs, off) != CBFS_OK) {
            atomic_fetch_add(&st_straddle_done, 1);
            ST_CHECK(false, "write at %zu", off);
        }
    }
    atomic_fetch_add(&st_straddle_done, 1);
    return NULL;
}

static int st_straddle_case(const char *name, bool truncates)
{
    unsigned char *data;
    atomic_store(&st_straddle_next, 0);
    atomic_store(&st_straddle_done, 0);
    st_straddle_truncates = truncates;
    const size_t size = ST_FOUR_SIZE - (128 << 10) + ST_STRADDLE_AT; /* the requests' end */
    struct cbfs_file *f = st_four(name, 7, st_straddle, &data);
    int ok = f != NULL;
    if (ok && truncates) /* what the file holds depends on the order: write it whole */
        ok = cbfs_file_truncate(f, 0) == CBFS_OK && cbfs_file_write(f, data, size, 0) == CBFS_OK;
    ok = ok && cbfs_file_size(f) == size && st_compare(f, data, size);
    if (f) ok = cbfs_file_close(f) == CBFS_OK && ok;
    f = ok ? st_open(name, false) : NULL;
    ok = ok && f && st_compare(f, data, size);
    if (f) cbfs_file_close(f);
    free(data);
    return ok;
}

static int st_case_straddle_flushes(void)
{
    return st_straddle_case("straddle", false);
}

static int st_case_straddle_truncates(void)
{
    return st_straddle_case("straddlecut", true);
}

/* ---- readers (read-ahead, a small cache) against rewrites, truncates and
 * flushes, every chunk checked for its version (helper-42) ----
 * The file is VC_CHUNKS chunks of 8 KiB; each chunk's content is a version:
 * zeros, or vc_fill(chunk, v) (a header naming chunk and v, the rest
 * incompressible, so frames are RAW and their payloads are punched when
 * dead). One mutator rewrites chunk ranges (read-modify-write of blocks),
 * cuts the file to a chunk boundary (often inside a block: the straddling
 * block's rewrite) and extends it back, each op with a new global version;
 * another thread flushes (punching garbage). done[c] is the version of the
 * last op on c that returned; zstart[c] the last zeroing op on c that
 * began. A reader snapshots done[] before its read; every chunk it gets
 * must be a version at least that new: vc_fill(c, v) exactly with
 * v >= done[c], or zeros with a zeroing op on c that began before the read
 * ended and is at least that new. Older bytes, torn chunks, wrong chunks
 * and zeros from nowhere all fail. */
#define VC_CHUNK 8192u
#define VC_CHUNKS 512u /* 4 MiB: 32 blocks of 128 KiB, the cache holds 16 */
static _Atomic uint64_t vc_done[VC_CHUNKS], vc_zstart[VC_CHUNKS];
static atomic_bool vc_stop;
static _Atomic unsigned long vc_reads, vc_ops;

static void vc_fill(unsigned char *p, uint32_t c, uint64_t v)
{
    cbfs_td_random(p, VC_CHUNK, (uint64_t)c * 1000003u + v * 7919u + 1);
    memcpy(p, "VCHK", 4);
    memcpy(p + 4, &c, 4);
    memcpy(p + 8, &v, 8);
}

static void *vc_mutator(void *p)
{
    struct cbfs_file *f = p;
    uint64_t s = 4242, ver = 1;
    unsigned char *buf = malloc(64 * VC_CHUNK);
    while (!atomic_load(&vc_stop)) {
        const uint64_t r = cbfs_td_next(&s) % 100;
        const uint64_t v = ++ver;
        if (r < 85) { /* rewrite chunks [c, c + n) */
            const uint32_t c = (uint32_t)(cbfs_td_next(&s) % VC_CHUNKS);
            uint32_t n = 1 + (uint32_t)(cbfs_td_next(&s) % 40);
            if (n > VC_CHUNKS - c) n = VC_CHUNKS - c;
            for (uint32_t i = 0; i < n; i++) vc_fill(buf + (size_t)i * VC_CHUNK, c + i, v);
            cbfs_err e = cbfs_file_write(f, buf, (size_t)n * VC_CHUNK, (uint64_t)c * VC_CHUNK);
            if (e) {
                free(buf);
                ST_CHECK(0, "vc write: %s", cbfs_err_str(e));
            }
            for (uint32_t i = 0; i < n; i++) atomic_store(&vc_done[c + i], v);
        } else { /* cut to chunk k, extend back: chunks >= k are zeros */
            const uint32_t k = (uint32_t)(VC_CHUNKS / 2 + cbfs_td_next(&s) % (VC_CHUNKS / 2));
            for (uint32_t i = k; i < VC_CHUNKS; i++) atomic_store(&vc_zstart[i], v);
            cbfs_err e = cbfs_file_truncate(f, (uint64_t)k * VC_CHUNK);
            if (!e) e = cbfs_file_truncate(f, (uint64_t)VC_CHUNKS * VC_CHUNK);
            if (e) {
                free(buf);
                ST_CHECK(0, "vc truncate: %s", cbfs_err_str(e));
            }
            for (uint32_t i = k; i < VC_CHUNKS; i++) atomic_store(&vc_done[i], v);
        }
        atomic_fetch_add(&vc_ops, 1);
    }
    free(buf);
    return NULL;
}

static void *vc_flusher(void *p)
{
    struct cbfs_file *f = p;
    while (!atomic_load(&vc_stop)) {
        ST_CHECK(cbfs_file_flush(f, NULL) == CBFS_OK, "vc flush");
        usleep(2000);
    }
    return NULL;
}

struct vc_reader_arg {
    struct cbfs_file *f;
    uint64_t seed;
};

static void *vc_reader(void *p)
{
    struct vc_reader_arg *a = p;
    uint64_t s = a->seed;
    unsigned char *buf = malloc((size_t)VC_CHUNKS * VC_CHUNK), *want = malloc(VC_CHUNK);
    static const unsigned char zeros[VC_CHUNK];
    uint64_t *lo = malloc(VC_CHUNKS * sizeof *lo);
    uint32_t seq = 0;
    while (!atomic_load(&vc_stop)) {
        uint32_t c, n;
        if (cbfs_td_next(&s) % 4) { /* a sequential scan: read-ahead */
            c = seq;
            n = 16;
            if (n > VC_CHUNKS - c) n = VC_CHUNKS - c;
            seq = (seq + n) % VC_CHUNKS;
        } else {
            c = (uint32_t)(cbfs_td_next(&s) % VC_CHUNKS);
            n = 1 + (uint32_t)(cbfs_td_next(&s) % 64);
            if (n > VC_CHUNKS - c) n = VC_CHUNKS - c;
        }
        for (uint32_t i = 0; i < n; i++) lo[c + i] = atomic_load(&vc_done[c + i]);
        size_t got = 0;
        cbfs_err e = cbfs_file_read(a->f, buf, (size_t)n * VC_CHUNK, (uint64_t)c * VC_CHUNK, &got);
        if (e) {
            fprintf(stderr, "FAIL vc read %u+%u: %s\n", c, n, cbfs_err_str(e));
            atomic_fetch_add(&st_failures, 1);
            break;
        }
        for (uint32_t i = 0; i < n; i++) {
            const uint32_t cc = c + i;
            const unsigned char *q = buf + (size_t)i * VC_CHUNK;
            const size_t at = (size_t)i * VC_CHUNK;
            const bool short_ = got < at + VC_CHUNK;
            if (short_ || !memcmp(q, zeros, VC_CHUNK)) {
                const uint64_t z = atomic_load(&vc_zstart[cc]);
                if (short_ && got > at) {
                    fprintf(stderr, "FAIL vc chunk %u: read ended inside it (%zu)\n", cc, got);
                    atomic_fetch_add(&st_failures, 1);
                } else if (lo[cc] != 0 && z < lo[cc]) {
                    fprintf(stderr, "FAIL vc chunk %u: %s, but version %llu (not a cut) was "
                            "done before the read began (last cut begun: %llu)\n", cc,
                            short_ ? "past the end" : "zeros", (unsigned long long)lo[cc],
                            (unsigned long long)z);
                    atomic_fetch_add(&st_failures, 1);
                }
                continue;
            }
            uint32_t hc;
            uint64_t hv;
            memcpy(&hc, q + 4, 4);
            memcpy(&hv, q + 8, 8);
            bool ok = !memcmp(q, "VCHK", 4) && hc == cc;
            if (ok) {
                vc_fill(want, cc, hv);
                ok = !memcmp(q, want, VC_CHUNK);
            }
            if (!ok) {
                fprintf(stderr, "FAIL vc chunk %u: bytes of no version (header chunk %u v %llu)\n",
                        cc, hc, (unsigned long long)hv);
                atomic_fetch_add(&st_failures, 1);
            } else if (hv < lo[cc]) {
                fprintf(stderr, "FAIL vc chunk %u: version %llu read, %llu was done before the "
                        "read began (stale)\n", cc, (unsigned long long)hv,
                        (unsigned long long)lo[cc]);
                atomic_fetch_add(&st_failures, 1);
            }
        }
        atomic_fetch_add(&vc_reads, 1);
    }
    free(buf);
    free(want);
    free(lo);
    return NULL;
}

static int st_case_versioned_readers(void)
{
    struct cbfs_file *f = st_open("vc", true);
    if (!f) return 0;
    unsigned char *buf = malloc(VC_CHUNK);
    bool written = buf != NULL;
    for (uint32_t c = 0; written && c < VC_CHUNKS; c++) {
        vc_fill(buf, c, 1);
        written = cbfs_file_write(f, buf, VC_CHUNK, (uint64_t)c * VC_CHUNK) == CBFS_OK;
        atomic_store(&vc_done[c], 1);
    }
    free(buf);
    if (!written || cbfs_file_flush(f, NULL)) {
        (void)cbfs_file_close(f);
        return 0;
    }
    const char *secs = getenv("VC_SECONDS");
    const unsigned ms = (secs ? (unsigned)atoi(secs) : 5) * 1000;
    pthread_t m, fl, r[3];
    struct vc_reader_arg ra[3];
    pthread_create(&m, NULL, vc_mutator, f);
    pthread_create(&fl, NULL, vc_flusher, f);
    for (int i = 0; i < 3; i++) {
        ra[i] = (struct vc_reader_arg){f, 77 + (uint64_t)i};
        pthread_create(&r[i], NULL, vc_reader, &ra[i]);
    }
    for (unsigned t = 0; t < ms / 100 && !atomic_load(&st_failures); t++) usleep(100 * 1000);
    atomic_store(&vc_stop, true);
    pthread_join(m, NULL);
    pthread_join(fl, NULL);
    for (int i = 0; i < 3; i++) pthread_join(r[i], NULL);
    fprintf(stderr, "vc: %lu reads, %lu ops\n", atomic_load(&vc_reads), atomic_load(&vc_ops));
    return cbfs_file_close(f) == CBFS_OK;
}

int main(void)
{
    snprintf(st_dir, sizeof st_dir, "/tmp/cbfs-stress-XXXXXX");
    if (!mkdtemp(st_dir)) return 2;
    /* sync_lag_bytes: writers catch their records up every few frames, so
     * that those syncs race with flushes, truncates and reads too */
    struct cbfs_engine_config cfg = {.block_size = 128 << 10, .workers = 2, .readahead = 8,
                                     .cache_bytes = 2 << 20, .inflight_bytes = 1 << 20,
                                     .sync_lag_bytes = 512 << 10};
    /* by hand: other caches, read-ahead windows and pool sizes (the header) */
    if (getenv("ST_CACHE")) cfg.cache_bytes = strtoull(getenv("ST_CACHE"), NULL, 0);
    if (getenv("ST_RA")) cfg.readahead = (unsigned)atoi(getenv("ST_RA"));
    /* more workers than 2 where there are more cores (the 16-core machine) */
    if (getenv("ST_WORKERS")) cfg.workers = (unsigned)atoi(getenv("ST_WORKERS"));
    if (cbfs_engine_create(&cfg, &st_eng)) return 2;
    int passed = 0, failed = 0;
    struct {
        const char *name;
        int (*fn)(void);
    } cases[] = {{"read_while_write", st_case_read_while_write},
                 {"shared_file_and_truncate", st_case_shared_file},
                 {"concurrent_flushes", st_case_flushes},
                 {"writes_against_truncates", st_case_truncates},
                 {"punches_against_truncates", st_case_punches},
                 {"straddling_stream_and_flushes", st_case_straddle_flushes},
                 {"straddling_stream_and_truncates", st_case_straddle_truncates},
                 {"versioned_readers", st_case_versioned_readers}};
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        if (getenv("ST_ONLY") && strcmp(getenv("ST_ONLY"), cases[i].name)) continue;
        int before = atomic_load(&st_failures);
        int ok = cases[i].fn() && atomic_load(&st_failures) == before;
        printf("%s: %s\n", ok ? "PASS" : "FAIL", cases[i].name);
        ok ? passed++ : failed++;
    }
    cbfs_engine_destroy(st_eng);
    char cmd[96];
    snprintf(cmd, sizeof cmd, "rm -rf %s", st_dir);
    if (system(cmd) != 0) failed++;
    printf("%d passed, %d failed\n", passed, failed);
    return failed ? 1 : 0;
}

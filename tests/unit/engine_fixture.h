/* The engine tests' fixture, shared by tests/unit/test_engine*.c and
 * test_readahead.c (which sets up engines of its own, eng_setup_config): real files
 * in a temporary directory, every byte checked against a shadow copy kept in
 * memory, across close and reopen. Each test file includes it once and names
 * its own suite with eng_setup and eng_teardown (Criterion takes a suite from
 * one file only): engine (test_engine.c, the core), engine_stream,
 * engine_failures and engine_load. Static inline throughout: each test file
 * has its own eng_dir and eng.
 *
 * The syscall interposers that make failures happen (fdatasync, pwrite,
 * fallocate, ftruncate: the engine is linked into the test binary, so its
 * calls come there) are defined once, in test_engine_failures.c; their state,
 * which the loader's tests arm too, is declared at the end. */
#ifndef CBFS_ENGINE_FIXTURE_H
#define CBFS_ENGINE_FIXTURE_H

#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/engine.h"
#include "cbfs/format.h"
#include "testdata.h"
#include "testengine.h"

static char eng_dir[64];
static struct cbfs_engine *eng;

/* A fresh directory and an engine of cfg (for a test that needs its own). */
static inline void eng_setup_config(const struct cbfs_engine_config *cfg)
{
    snprintf(eng_dir, sizeof eng_dir, "/tmp/cbfs-engine-XXXXXX");
    cr_assert_not_null(mkdtemp(eng_dir));
    cr_assert_eq(cbfs_engine_create(cfg, &eng), CBFS_OK);
}

static inline void eng_setup(void)
{
    const struct cbfs_engine_config cfg = {.block_size = 64 << 10, .workers = 2,
                                           .readahead = 4, .cache_bytes = 1 << 20,
                                           .inflight_bytes = 512 << 10};
    eng_setup_config(&cfg);
}

static inline void eng_teardown(void)
{
    cbfs_engine_destroy(eng);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "%s/tiny", eng_dir);
    (void)umount2(cmd, MNT_DETACH); /* a test's own tmpfs, left by a failed assertion */
    snprintf(cmd, sizeof cmd, "rm -rf %s", eng_dir);
    cr_assert_eq(system(cmd), 0);
}

/* Opens (creating them if need be) the data file at p and the sidecar at q
 * as one engine file; *ifd (if not NULL) gets the sidecar's fd, which the
 * file owns. */
static inline struct cbfs_file *eng_open_paths(const char *p, const char *q, bool create,
                                               const char *codec_name, int *ifd)
{
    struct cbfs_file *f;
    const cbfs_err e = cbfs_te_open(eng, p, q, create, codec_name, ifd, &f);
    cr_assert_eq(e, CBFS_OK, "open %s: %s", p, cbfs_err_str(e));
    return f;
}

/* name in the test's directory, its sidecar beside it. */
static inline struct cbfs_file *eng_open_fd(const char *name, bool create, const char *codec_name,
                                            int *ifd)
{
    char p[128], q[140];
    snprintf(p, sizeof p, "%s/%s", eng_dir, name);
    snprintf(q, sizeof q, "%s%s", p, CBFS_INDEX_SUFFIX);
    struct cbfs_file *f = eng_open_paths(p, q, create, codec_name, ifd);
    cbfs_file_set_name(f, name);
    return f;
}

static inline struct cbfs_file *eng_open(const char *name, bool create, const char *codec_name)
{
    return eng_open_fd(name, create, codec_name, NULL);
}

static inline void eng_check(struct cbfs_file *f, const unsigned char *want, size_t size)
{
    cr_assert_eq(cbfs_file_size(f), size);
    unsigned char *got = malloc(size + 100);
    size_t n = 0, pos = 0;
    /* Read in odd-sized pieces to cross block boundaries. */
    while (pos < size + 1) {
        size_t chunk = 77777;
        cr_assert_eq(cbfs_file_read(f, got + pos, chunk, pos, &n), CBFS_OK);
        if (n == 0) break;
        pos += n;
    }
    cr_assert_eq(pos, size, "read %zu of %zu bytes", pos, size);
    for (size_t i = 0; i < size; i++)
        if (got[i] != want[i]) cr_assert_fail("byte %zu differs: %u != %u", i, got[i], want[i]);
    free(got);
}

/* Opens name again (read-only) and checks that it holds want[0..size). */
static inline void eng_reopen_check(const char *name, const char *codec_name,
                                    const unsigned char *want, size_t size)
{
    struct cbfs_file *f = eng_open(name, false, codec_name);
    eng_check(f, want, size);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
}

/* Writes zeros over [from, end) of fd. */
static inline void eng_zero_range(int fd, off_t from, off_t end)
{
    static const unsigned char zeros[4096];
    for (off_t at = from; at < end; at += (off_t)sizeof zeros) {
        const size_t n = end - at < (off_t)sizeof zeros ? (size_t)(end - at) : sizeof zeros;
        cr_assert_eq(pwrite(fd, zeros, n, at), (ssize_t)n);
    }
}

/* Opens name's data file (O_RDWR) behind the engine's back; *st: its stat. */
static inline int eng_data_open(const char *name, struct stat *st)
{
    char p[128];
    snprintf(p, sizeof p, "%s/%s", eng_dir, name);
    const int fd = open(p, O_RDWR);
    cr_assert(fd >= 0, "cannot open %s", p);
    cr_assert_eq(fstat(fd, st), 0);
    return fd;
}

/* Block b of f reads as bs bytes of c. */
static inline void eng_expect_block(struct cbfs_file *f, uint64_t b, int c, uint32_t bs)
{
    unsigned char *got = malloc(bs);
    cr_assert_not_null(got);
    size_t n;
    const cbfs_err e = cbfs_file_read(f, got, bs, b * bs, &n);
    cr_assert_eq(e, CBFS_OK, "block %llu: %s", (unsigned long long)b, cbfs_err_str(e));
    cr_assert_eq(n, bs, "block %llu: %zu bytes", (unsigned long long)b, n);
    for (uint32_t i = 0; i < bs; i++)
        cr_assert_eq(got[i], (unsigned char)c, "block %llu byte %u: %#x, want '%c'",
                     (unsigned long long)b, i, got[i], c);
    free(got);
}

/* The interposers' state (test_engine_failures.c, where each is described):
 * the next fdatasync of inode fail_ino fails, zeroing its bytes from
 * fail_from on; sync_hook runs inside it first; writes and allocations of
 * full_fd fail with ENOSPC; while trunc_ino is set, trunc_low is the lowest
 * length a file of that inode was cut to. */
extern ino_t fail_ino;
extern off_t fail_from;
extern void (*sync_hook)(void);
extern int full_fd;
extern ino_t trunc_ino;
extern off_t trunc_low;

#endif

/* Unit tests for the codec layer (src/codec): round trips of every built codec
 * over levels, sizes and kinds of data, determinism, rejection of truncated /
 * padded / mis-sized payloads, spec parsing messages and per-thread contexts. */
#include <criterion/criterion.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cbfs/codec.h"
#include "aslimit.h"
#include "testdata.h"

#define MIB ((size_t)1 << 20)
#define CANARY_LEN 64
#define CANARY_BYTE 0xA5

enum td_kind { TD_ROWS, TD_RANDOM, TD_ZEROS, TD_BACKUP, TD_COMPRESSED, TD_KIND_COUNT };
static const char *const td_kind_names[TD_KIND_COUNT] = {"rows", "random", "zeros", "backup",
                                                         "compressed"};
static const size_t td_sizes[] = {0, 1, 4095, MIB - 1, MIB};

/* "Already compressed" data: the zstd (else lz4, else none: random) output of
 * rows data, chunk after chunk, like an RMAN compressed backupset. */
static void td_compressed(unsigned char *buf, size_t len, uint64_t seed)
{
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(CBFS_CODEC_ZSTD);
    if (!c) c = cbfs_codec_by_id(CBFS_CODEC_LZ4);
    if (!c) {
        cbfs_td_random(buf, len, seed);
        return;
    }
    const size_t chunk = 256u << 10;
    unsigned char *rows = malloc(chunk);
    unsigned char *z = malloc(c->bound(chunk));
    cr_assert(rows && z);
    size_t done = 0;
    for (uint64_t i = 0; done < len; i++) {
        size_t zlen = 0;
        cbfs_td_rows(rows, chunk, seed + i);
        cr_assert_eq(cbfs_codec_compress(c, c->min_level, rows, chunk, z, c->bound(chunk), &zlen),
                     CBFS_OK);
        const size_t take = zlen < len - done ? zlen : len - done;
        memcpy(buf + done, z, take);
        done += take;
    }
    free(rows);
    free(z);
}

static void td_fill(enum td_kind k, unsigned char *buf, size_t len, uint64_t seed)
{
    switch (k) {
    case TD_ROWS: cbfs_td_rows(buf, len, seed); break;
    case TD_RANDOM: cbfs_td_random(buf, len, seed); break;
    case TD_ZEROS: memset(buf, 0, len); break;
    case TD_BACKUP: cbfs_td_backup(buf, len, seed); break;
    default: td_compressed(buf, len, seed); break;
    }
}

/* Buffer of n bytes followed by a canary, so an overflow is visible even
 * without ASan. */
static unsigned char *guarded_alloc(size_t n)
{
    unsigned char *p = malloc(n + CANARY_LEN);
    cr_assert(p != NULL);
    memset(p + n, CANARY_BYTE, CANARY_LEN);
    return p;
}

static void guarded_check(const unsigned char *p, size_t n, const char *what)
{
    for (size_t i = 0; i < CANARY_LEN; i++)
        cr_assert_eq(p[n + i], CANARY_BYTE, "%s: write past the end of the buffer", what);
}

/* Compresses src with codec at level; the caller frees the payload. */
static unsigned char *payload_make(const struct cbfs_codec_ops *c, int level,
                                   const unsigned char *src, size_t len, size_t *plen)
{
    const size_t cap = c->bound(len);
    unsigned char *dst = guarded_alloc(cap);
    cr_assert_eq(cbfs_codec_compress(c, level, src, len, dst, cap, plen), CBFS_OK,
                 "%s:%d compress of %zu bytes failed", c->name, level, len);
    cr_assert(*plen <= cap, "%s:%d payload %zu > bound %zu", c->name, level, *plen, cap);
    guarded_check(dst, cap, c->name);
    return dst;
}

/* Decompresses (src, src_len) into a fresh dst_len buffer. @return the cbfs_err. */
static cbfs_err try_decode(const struct cbfs_codec_ops *c, const unsigned char *src,
                           size_t src_len, size_t dst_len)
{
    unsigned char *out = guarded_alloc(dst_len);
    const cbfs_err err = cbfs_codec_decompress(c, src, src_len, out, dst_len);
    guarded_check(out, dst_len, c->name);
    free(out);
    return err;
}

/* Payloads that are not exactly one block's encoding must be refused. */
static void check_rejects(const struct cbfs_codec_ops *c, const unsigned char *p, size_t plen,
                          size_t len, const char *what)
{
    if (plen > 0) {
        cr_assert_eq(try_decode(c, p, plen - 1, len), CBFS_E_CORRUPT,
                     "%s: payload missing its last byte accepted", what);
        cr_assert_eq(try_decode(c, p, plen / 2, len), CBFS_E_CORRUPT,
                     "%s: half payload accepted", what);
    }
    /* Trailing garbage: a zero byte, a random byte, and a whole second copy
     * (a valid concatenated stream for zstd/lz4, still not one block). */
    unsigned char *q = malloc(2 * plen + 1);
    cr_assert(q != NULL);
    memcpy(q, p, plen);
    q[plen] = 0;
    cr_assert_eq(try_decode(c, q, plen + 1, len), CBFS_E_CORRUPT,
                 "%s: trailing zero byte accepted", what);
    q[plen] = 0x5B;
    cr_assert_eq(try_decode(c, q, plen + 1, len), CBFS_E_CORRUPT,
                 "%s: trailing garbage byte accepted", what);
    if (plen > 0) {
        memcpy(q + plen, p, plen);
        cr_assert_eq(try_decode(c, q, 2 * plen, len), CBFS_E_CORRUPT,
                     "%s: two concatenated payloads accepted", what);
    }
    free(q);
    cr_assert_eq(try_decode(c, p, plen, len + 1), CBFS_E_CORRUPT,
                 "%s: dst_len one too large accepted", what);
    if (len > 0)
        cr_assert_eq(try_decode(c, p, plen, len - 1), CBFS_E_CORRUPT,
                     "%s: dst_len one too small accepted", what);
}

/* Every level {min, default, max} x size x kind: round trip, determinism,
 * bound; at the default level also the rejection cases. */
static void roundtrip_codec(unsigned id)
{
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
    if (!c) cr_skip_test("codec %u not built", id);
    const int levels[3] = {c->min_level, c->default_level, c->max_level};
    /* xz/bzip2 at their maximum are slow: only on small inputs. */
    const bool slow_max = id == CBFS_CODEC_XZ || id == CBFS_CODEC_BZIP2;
    unsigned char *src = malloc(MIB);
    cr_assert(src != NULL);

    for (int k = 0; k < TD_KIND_COUNT; k++) {
        for (size_t s = 0; s < sizeof td_sizes / sizeof td_sizes[0]; s++) {
            const size_t len = td_sizes[s];
            td_fill((enum td_kind)k, src, len, 1000 + s);
            for (int l = 0; l < 3; l++) {
                const int level = levels[l];
                if (l > 0 && level == levels[l - 1]) continue; /* e.g. lz4 min == default */
                if (l == 1 && level == levels[0]) continue;
                if (slow_max && level == c->max_level && level != c->default_level &&
                    len > (256u << 10))
                    continue;
                char what[96];
                snprintf(what, sizeof what, "%s:%d %s %zu bytes", c->name, level,
                         td_kind_names[k], len);

                size_t plen1 = 0, plen2 = 0;
                unsigned char *p1 = payload_make(c, level, src, len, &plen1);
                unsigned char *p2 = payload_make(c, level, src, len, &plen2);
                cr_assert(plen1 == plen2 && memcmp(p1, p2, plen1) == 0,
                          "%s: compression is not deterministic", what);

                unsigned char *out = guarded_alloc(len);
                memset(out, 0xEE, len);
                cr_assert_eq(cbfs_codec_decompress(c, p1, plen1, out, len), CBFS_OK,
                             "%s: decompress failed", what);
                guarded_check(out, len, what);
                cr_assert(memcmp(out, src, len) == 0, "%s: round trip differs", what);
                free(out);

                if (level == c->default_level) check_rejects(c, p1, plen1, len, what);
                free(p1);
                free(p2);
            }
        }
    }
    free(src);
}

Test(codec, roundtrip_none, .timeout = 600)
{
    roundtrip_codec(CBFS_CODEC_NONE);
}
Test(codec, roundtrip_lz4, .timeout = 600)
{
    roundtrip_codec(CBFS_CODEC_LZ4);
}
Test(codec, roundtrip_zstd, .timeout = 600)
{
    roundtrip_codec(CBFS_CODEC_ZSTD);
}
Test(codec, roundtrip_xz, .timeout = 600)
{
    roundtrip_codec(CBFS_CODEC_XZ);
}
Test(codec, roundtrip_bzip2, .timeout = 600)
{
    roundtrip_codec(CBFS_CODEC_BZIP2);
}

/* Each payload starts as its native stream does (what stock tools look for). */
Test(codec, native_magic)
{
    static const struct {
        unsigned id;
        const char *magic;
        size_t n;
    } m[] = {
        {CBFS_CODEC_LZ4, "\x04\x22\x4d\x18", 4},
        {CBFS_CODEC_ZSTD, "\x28\xb5\x2f\xfd", 4},
        {CBFS_CODEC_XZ, "\xfd" "7zXZ\0", 6},
        {CBFS_CODEC_BZIP2, "BZh9", 4},
    };
    unsigned char src[4096];
    cbfs_td_rows(src, sizeof src, 7);
    for (size_t i = 0; i < sizeof m / sizeof m[0]; i++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(m[i].id);
        if (!c) continue;
        size_t plen = 0;
        unsigned char *p = payload_make(c, c->default_level, src, sizeof src, &plen);
        cr_assert(plen >= m[i].n && memcmp(p, m[i].magic, m[i].n) == 0, "%s: wrong magic",
                  c->name);
        free(p);
    }
}

/* A flipped byte anywhere must never crash or write out of bounds. xz and
 * bzip2 carry CRCs, so they must also never return wrong bytes; zstd and lz4
 * payloads carry no checksum here (the frame header's XXH3 catches those). */
static void flip_codec(unsigned id, bool must_detect)
{
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
    if (!c) cr_skip_test("codec %u not built", id);
    const size_t len = 64u << 10;
    unsigned char *src = malloc(len);
    unsigned char *out = guarded_alloc(len);
    cr_assert(src != NULL);
    cbfs_td_backup(src, len, 42);
    size_t plen = 0;
    unsigned char *p = payload_make(c, c->default_level, src, len, &plen);
    unsigned char *q = malloc(plen);
    cr_assert(q != NULL);

    size_t tried = 0, rejected = 0;
    const size_t step = plen > 2048 ? plen / 1024 : 1;
    for (size_t pos = 0; pos < plen; pos++) {
        /* Every header and trailer byte, a sample of the body. */
        if (pos >= 64 && pos + 64 < plen && pos % step != 0) continue;
        for (int x = 0; x < 2; x++) {
            memcpy(q, p, plen);
            q[pos] ^= x ? 0xFF : 0x01;
            const cbfs_err err = cbfs_codec_decompress(c, q, plen, out, len);
            guarded_check(out, len, c->name);
            cr_assert(err == CBFS_OK || err == CBFS_E_CORRUPT,
                      "%s: flip at %zu gave %s", c->name, pos, cbfs_err_str(err));
            tried++;
            if (err == CBFS_E_CORRUPT) {
                rejected++;
            } else if (must_detect) {
                cr_assert(memcmp(out, src, len) == 0,
                          "%s: flip at %zu of %zu decoded to wrong bytes", c->name, pos, plen);
            }
        }
    }
    cr_log_info("%s: %zu of %zu flipped payloads rejected", c->name, rejected, tried);
    free(q);
    free(p);
    free(out);
    free(src);
}

Test(codec, flip_lz4, .timeout = 300)
{
    flip_codec(CBFS_CODEC_LZ4, false);
}
Test(codec, flip_zstd, .timeout = 300)
{
    flip_codec(CBFS_CODEC_ZSTD, false);
}
Test(codec, flip_xz, .timeout = 300)
{
    flip_codec(CBFS_CODEC_XZ, true);
}
Test(codec, flip_bzip2, .timeout = 300)
{
    flip_codec(CBFS_CODEC_BZIP2, true);
}

/* A too-small output buffer is CBFS_E_DST_SMALL, never an overflow. */
Test(codec, dst_too_small)
{
    const size_t len = 64u << 10, cap = 1000;
    unsigned char *src = malloc(len);
    unsigned char *dst = guarded_alloc(cap);
    cr_assert(src != NULL);
    cbfs_td_random(src, len, 3);
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (!c) continue;
        size_t plen = 12345;
        cr_assert_eq(cbfs_codec_compress(c, c->default_level, src, len, dst, cap, &plen),
                     CBFS_E_DST_SMALL, "%s: too small a buffer not reported", c->name);
        guarded_check(dst, cap, c->name);
    }
    free(dst);
    free(src);
}

/* The address space this process has mapped, in bytes (0 if unknown). */
#ifndef CBFS_TD_SANITIZED /* aslimit.h */
/* A decode that cannot get the codec's own memory is CBFS_E_NOMEM, never
 * CBFS_E_CORRUPT: "corrupt" is logged as damage, reported by cbfs verify,
 * and taken by a load's rescan for a torn frame. Each codec's first decode
 * in this process (a test is a process of its own) is made with the address
 * space capped just above what is mapped: whatever the library allocates
 * for a 4 MiB block (LZ4F: its block buffers) fails. (helper-57: LZ4F's
 * allocation failure was CBFS_E_CORRUPT.) */
Test(codec, decode_without_memory_is_not_damage, .timeout = 120)
{
    const size_t len = 4 * MIB;
    unsigned char *src = malloc(len), *out = malloc(len);
    cr_assert(src && out);
    cbfs_td_rows(src, len, 11);
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (!c) continue;
        size_t plen;
        unsigned char *p = payload_make(c, c->default_level, src, len, &plen);
        memset(out, 0, len);
        const struct rlimit old = cbfs_td_as_squeeze(MIB);
        const cbfs_err e = cbfs_codec_decompress(c, p, plen, out, len);
        cbfs_td_as_restore(old);
        cr_assert(e == CBFS_OK || e == CBFS_E_NOMEM,
                  "%s: a decode without memory returned %s", c->name, cbfs_err_str(e));
        if (e == CBFS_OK) cr_assert(memcmp(out, src, len) == 0, "%s: wrong bytes", c->name);
        /* the context stays usable once memory is back */
        cr_assert_eq(cbfs_codec_decompress(c, p, plen, out, len), CBFS_OK, "%s", c->name);
        cr_assert(memcmp(out, src, len) == 0, "%s: wrong bytes after", c->name);
        free(p);
    }
    free(out);
    free(src);
}
#endif

Test(codec, bound_covers_input)
{
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (!c) continue;
        for (size_t n = 0; n <= (16u << 20); n = n ? n * 4 : 1)
            cr_assert(c->bound(n) >= n, "%s: bound(%zu) < input", c->name, n);
    }
}

/* ---- registry ---- */

Test(codec, table_by_id)
{
    static const char *const names[] = {"none", "lz4", "zstd", "xz", "bzip2"};
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (!c) continue;
        cr_assert_eq(c->id, id);
        cr_assert_str_eq(c->name, names[id]);
        cr_assert(c->min_level <= c->default_level && c->default_level <= c->max_level);
        cr_assert_eq(c->stock_stream, id == CBFS_CODEC_LZ4 || id == CBFS_CODEC_ZSTD);
        const struct cbfs_codec_ops *by_name = NULL;
        cr_assert_eq(cbfs_codec_by_name(names[id], &by_name), CBFS_OK);
        cr_assert_eq(by_name, c);
    }
    cr_assert_not_null(cbfs_codec_by_id(CBFS_CODEC_NONE));
    cr_assert_null(cbfs_codec_by_id(CBFS_CODEC_MAX_ID + 1));
    cr_assert_null(cbfs_codec_by_id(255));
    cr_assert_null(cbfs_codec_by_id(UINT_MAX));
}

Test(codec, levels_as_agreed)
{
    static const struct {
        unsigned id;
        int min, def, max;
    } want[] = {{0, 0, 0, 0}, {1, 1, 1, 12}, {2, 1, 3, 19}, {3, 0, 6, 9}, {4, 1, 9, 9}};
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(want[i].id);
        if (!c) continue;
        cr_assert(c->min_level == want[i].min && c->default_level == want[i].def &&
                      c->max_level == want[i].max,
                  "%s: levels %d/%d/%d", c->name, c->min_level, c->default_level,
                  c->max_level);
    }
}

Test(codec, by_name_errors)
{
    const struct cbfs_codec_ops *c = NULL;
    cr_assert_eq(cbfs_codec_by_name("zip", &c), CBFS_E_CODEC_UNKNOWN);
    cr_assert_eq(cbfs_codec_by_name("", &c), CBFS_E_CODEC_UNKNOWN);
    cr_assert_eq(cbfs_codec_by_name("zstd:3", &c), CBFS_E_CODEC_UNKNOWN);
    cr_assert_eq(cbfs_codec_by_name(NULL, &c), CBFS_E_INVAL);
    cr_assert_eq(cbfs_codec_by_name("NONE", &c), CBFS_OK); /* mount options: any case */
    cr_assert_eq(c, cbfs_codec_by_id(CBFS_CODEC_NONE));
}

Test(codec, list)
{
    char buf[64];
    cbfs_codec_list(buf, sizeof buf);
#if defined(CBFS_HAVE_LZ4) && defined(CBFS_HAVE_ZSTD) && defined(CBFS_HAVE_XZ) &&              \
    defined(CBFS_HAVE_BZIP2)
    cr_assert_str_eq(buf, "none, lz4, zstd, xz, bzip2");
#else
    cr_assert(strncmp(buf, "none", 4) == 0);
#endif
    char small[6];
    memset(small, 'x', sizeof small);
    cbfs_codec_list(small, sizeof small);
    cr_assert(memchr(small, '\0', sizeof small) != NULL, "truncated list not terminated");
    cbfs_codec_list(NULL, 0); /* no-op */
}

Test(codec, parse_ok)
{
    const struct cbfs_codec_ops *c = NULL;
    int level = -99;
    char msg[160] = "";
    cr_assert_eq(cbfs_codec_parse("none", &c, &level, msg, sizeof msg), CBFS_OK);
    cr_assert(c == cbfs_codec_by_id(CBFS_CODEC_NONE) && level == 0);
    cr_assert_eq(cbfs_codec_parse("none:0", &c, &level, msg, sizeof msg), CBFS_OK);
#ifdef CBFS_HAVE_ZSTD
    cr_assert_eq(cbfs_codec_parse("zstd", &c, &level, msg, sizeof msg), CBFS_OK);
    cr_assert(c == cbfs_codec_by_id(CBFS_CODEC_ZSTD) && level == 3);
    cr_assert_eq(cbfs_codec_parse("zstd:19", &c, &level, msg, sizeof msg), CBFS_OK);
    cr_assert_eq(level, 19);
    cr_assert_eq(cbfs_codec_parse("zstd:1", &c, &level, NULL, 0), CBFS_OK);
    cr_assert_eq(level, 1);
#endif
#ifdef CBFS_HAVE_LZ4
    cr_assert_eq(cbfs_codec_parse("lz4", &c, &level, msg, sizeof msg), CBFS_OK);
    cr_assert(c->id == CBFS_CODEC_LZ4 && level == 1);
#endif
#ifdef CBFS_HAVE_XZ
    cr_assert_eq(cbfs_codec_parse("xz:0", &c, &level, msg, sizeof msg), CBFS_OK);
    cr_assert(c->id == CBFS_CODEC_XZ && level == 0);
#endif
#ifdef CBFS_HAVE_BZIP2
    cr_assert_eq(cbfs_codec_parse("bzip2", &c, &level, msg, sizeof msg), CBFS_OK);
    cr_assert(c->id == CBFS_CODEC_BZIP2 && level == 9);
#endif
}

Test(codec, parse_errors)
{
    const struct cbfs_codec_ops *c = NULL;
    int level = -99;
    char msg[200];
    char list[64], want[200];
    cbfs_codec_list(list, sizeof list);

    cr_assert_eq(cbfs_codec_parse("zip", &c, &level, msg, sizeof msg), CBFS_E_CODEC_UNKNOWN);
    snprintf(want, sizeof want, "unknown codec 'zip'; known codecs: %s", list);
    cr_assert_str_eq(msg, want);
    cr_assert_eq(cbfs_codec_parse("zip:3", &c, &level, msg, sizeof msg), CBFS_E_CODEC_UNKNOWN);
    cr_assert_str_eq(msg, want);
    cr_assert_eq(cbfs_codec_parse("", &c, &level, msg, sizeof msg), CBFS_E_CODEC_UNKNOWN);
    cr_assert(strstr(msg, list) != NULL);
#if defined(CBFS_HAVE_LZ4) && defined(CBFS_HAVE_ZSTD) && defined(CBFS_HAVE_XZ) &&              \
    defined(CBFS_HAVE_BZIP2)
    cr_assert_eq(cbfs_codec_parse("zip", &c, &level, msg, sizeof msg), CBFS_E_CODEC_UNKNOWN);
    cr_assert_str_eq(msg, "unknown codec 'zip'; known codecs: none, lz4, zstd, xz, bzip2");
#endif
    cr_assert_eq(cbfs_codec_parse("none:1", &c, &level, msg, sizeof msg), CBFS_E_CODEC_LEVEL);
    cr_assert_str_eq(msg, "none level 1 is out of range (0..0)");

#ifdef CBFS_HAVE_ZSTD
    cr_assert_eq(cbfs_codec_parse("zstd:40", &c, &level, msg, sizeof msg), CBFS_E_CODEC_LEVEL);
    cr_assert_str_eq(msg, "zstd level 40 is out of range (1..19)");
    cr_assert_eq(cbfs_codec_parse("zstd:0", &c, &level, msg, sizeof msg), CBFS_E_CODEC_LEVEL);
    cr_assert_str_eq(msg, "zstd level 0 is out of range (1..19)");
    cr_assert_eq(cbfs_codec_parse("zstd:-3", &c, &level, msg, sizeof msg), CBFS_E_CODEC_LEVEL);
    cr_assert_eq(cbfs_codec_parse("zstd:99999999999999999999", &c, &level, msg, sizeof msg),
                 CBFS_E_CODEC_LEVEL);
    cr_assert(strstr(msg, "(1..19)") != NULL, "%s", msg);
    static const char *const malformed[] = {"zstd:", "zstd:x", "zstd:3x", "zstd: 3", "zstd:3:4",
                                            "zstd:3 ", "zstd:+3", "zstd:-", "zstd:- 3"};
    for (size_t i = 0; i < sizeof malformed / sizeof malformed[0]; i++) {
        msg[0] = '\0';
        cr_assert_eq(cbfs_codec_parse(malformed[i], &c, &level, msg, sizeof msg), CBFS_E_INVAL,
                     "'%s' accepted", malformed[i]);
        cr_assert(strstr(msg, "malformed codec spec") && strstr(msg, "1..19"), "%s", msg);
    }
    /* Failures leave the outputs alone; tiny or absent message buffers are safe. */
    c = NULL;
    level = -99;
    cr_assert_eq(cbfs_codec_parse("zstd:40", &c, &level, NULL, 0), CBFS_E_CODEC_LEVEL);
    cr_assert(c == NULL && level == -99);
    char tiny[4];
    cr_assert_eq(cbfs_codec_parse("zstd:40", &c, &level, tiny, sizeof tiny), CBFS_E_CODEC_LEVEL);
    cr_assert_str_eq(tiny, "zst");
#endif
    cr_assert_eq(cbfs_codec_parse(NULL, &c, &level, msg, sizeof msg), CBFS_E_INVAL);
}

/* Names cbfs knows but this build left out say so, rather than "unknown". */
Test(codec, parse_missing)
{
    static const struct {
        const char *name;
        bool built;
    } all[] = {
#ifdef CBFS_HAVE_LZ4
        {"lz4", true},
#else
        {"lz4", false},
#endif
#ifdef CBFS_HAVE_ZSTD
        {"zstd", true},
#else
        {"zstd", false},
#endif
#ifdef CBFS_HAVE_XZ
        {"xz", true},
#else
        {"xz", false},
#endif
#ifdef CBFS_HAVE_BZIP2
        {"bzip2", true},
#else
        {"bzip2", false},
#endif
    };
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++) {
        const struct cbfs_codec_ops *c = NULL;
        int level;
        char msg[200] = "";
        const cbfs_err err = cbfs_codec_parse(all[i].name, &c, &level, msg, sizeof msg);
        if (all[i].built) {
            cr_assert_eq(err, CBFS_OK);
        } else {
            cr_assert_eq(err, CBFS_E_CODEC_MISSING, "%s", all[i].name);
            cr_assert(strstr(msg, "not built") != NULL, "%s", msg);
            cr_assert_eq(cbfs_codec_by_name(all[i].name, &c), CBFS_E_CODEC_MISSING);
        }
    }
}

Test(codec, check_level)
{
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (!c) continue;
        char msg[128], range[32];
        snprintf(range, sizeof range, "(%d..%d)", c->min_level, c->max_level);
        const int bad[] = {c->min_level - 1, c->max_level + 1, INT_MIN, INT_MAX};
        for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
            msg[0] = '\0';
            cr_assert_eq(cbfs_codec_check_level(c, bad[i], msg, sizeof msg), CBFS_E_CODEC_LEVEL);
            cr_assert(strstr(msg, range) && strstr(msg, c->name), "%s", msg);
        }
        for (int l = c->min_level; l <= c->max_level; l++)
            cr_assert_eq(cbfs_codec_check_level(c, l, NULL, 0), CBFS_OK);
    }
    cr_assert_eq(cbfs_codec_check_level(NULL, 1, NULL, 0), CBFS_E_INVAL);
}

/* The per-thread entry points refuse what the ops would not expect. */
Test(codec, compress_guards)
{
    const struct cbfs_codec_ops *none = cbfs_codec_by_id(CBFS_CODEC_NONE);
    unsigned char src[16] = {1, 2, 3}, dst[16];
    size_t n = 0;
    cr_assert_eq(cbfs_codec_compress(none, 1, src, sizeof src, dst, sizeof dst, &n),
                 CBFS_E_CODEC_LEVEL);
    const struct cbfs_codec_ops fake = *none; /* not the registry's table */
    cr_assert_eq(cbfs_codec_compress(&fake, 0, src, sizeof src, dst, sizeof dst, &n),
                 CBFS_E_INVAL);
    cr_assert_eq(cbfs_codec_decompress(&fake, src, sizeof src, dst, sizeof dst), CBFS_E_INVAL);
    cr_assert_eq(cbfs_codec_compress(NULL, 0, src, sizeof src, dst, sizeof dst, &n),
                 CBFS_E_INVAL);
}

/* ---- per-thread contexts ---- */

#define THREADS 4
#define THREAD_ROUNDS 3

struct thread_job {
    const unsigned char *src;
    size_t len;
    const unsigned char *want[CBFS_CODEC_MAX_ID + 1]; /* payloads made by the main thread */
    size_t want_len[CBFS_CODEC_MAX_ID + 1];
    int failures; /* written by its own thread only */
};

static void *thread_main(void *arg)
{
    struct thread_job *job = arg;
    unsigned char *out = malloc(job->len);
    if (!out) {
        job->failures++;
        return NULL;
    }
    for (int round = 0; round < THREAD_ROUNDS; round++) {
        for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
            const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
            if (!c) continue;
            const size_t cap = c->bound(job->len);
            unsigned char *p = malloc(cap);
            size_t plen = 0;
            if (!p || cbfs_codec_compress(c, c->default_level, job->src, job->len, p, cap,
                                          &plen) != CBFS_OK ||
                plen != job->want_len[id] || memcmp(p, job->want[id], plen) != 0 ||
                cbfs_codec_decompress(c, p, plen, out, job->len) != CBFS_OK ||
                memcmp(out, job->src, job->len) != 0)
                job->failures++;
            free(p);
        }
    }
    free(out);
    return NULL; /* thread exit frees this thread's contexts (LSan checks) */
}

Test(codec, threads_share_nothing, .timeout = 300)
{
    const size_t len = 256u << 10;
    unsigned char *src = malloc(len);
    cr_assert(src != NULL);
    cbfs_td_backup(src, len, 99);
    struct thread_job jobs[THREADS];
    memset(jobs, 0, sizeof jobs);
    unsigned char *want[CBFS_CODEC_MAX_ID + 1] = {0};
    size_t want_len[CBFS_CODEC_MAX_ID + 1] = {0};
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (c) want[id] = payload_make(c, c->default_level, src, len, &want_len[id]);
    }
    pthread_t tid[THREADS];
    for (int t = 0; t < THREADS; t++) {
        jobs[t].src = src;
        jobs[t].len = len;
        for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
            jobs[t].want[id] = want[id];
            jobs[t].want_len[id] = want_len[id];
        }
        cr_assert_eq(pthread_create(&tid[t], NULL, thread_main, &jobs[t]), 0);
    }
    for (int t = 0; t < THREADS; t++) {
        cr_assert_eq(pthread_join(tid[t], NULL), 0);
        cr_assert_eq(jobs[t].failures, 0, "thread %d: %d mismatches", t, jobs[t].failures);
    }
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) free(want[id]);
    free(src);
}

/* Deterministic test data for unit tests and benches: database-backup-like
 * pages (rows of text and numbers with repeated column values), all-zero
 * regions, and incompressible (pseudo-random) bytes. Header-only. */
#ifndef CBFS_TESTDATA_H
#define CBFS_TESTDATA_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

/* splitmix64: tiny, deterministic, good enough for test bytes. */
static inline uint64_t cbfs_td_next(uint64_t *s)
{
    uint64_t z = (*s += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
}

/* Incompressible bytes. */
static inline void cbfs_td_random(void *buf, size_t len, uint64_t seed)
{
    unsigned char *p = buf;
    uint64_t s = seed;
    while (len >= 8) {
        uint64_t v = cbfs_td_next(&s);
        memcpy(p, &v, 8);
        p += 8;
        len -= 8;
    }
    uint64_t v = cbfs_td_next(&s);
    memcpy(p, &v, len);
}

/* Table rows like a TPC-H lineitem dump in 8 KiB pages with small headers:
 * compresses about 3-5x with lz4, like real database backups. */
static inline void cbfs_td_rows(void *buf, size_t len, uint64_t seed)
{
    static const char *const words[] = {"furiously", "carefully", "pending", "regular",
                                        "express",   "deposits",  "accounts", "packages",
                                        "ironic",    "final",     "blithely", "requests"};
    static const char *const modes[] = {"AIR", "MAIL", "SHIP", "TRUCK", "RAIL", "FOB"};
    char *p = buf;
    size_t left = len;
    uint64_t s = seed;
    uint64_t row = seed % 1000;
    while (left) {
        char line[192];
        uint64_t r = cbfs_td_next(&s);
        int n = snprintf(line, sizeof line, "%llu|%llu|%u|%u|%u.%02u|0.0%u|%s|1996-%02u-%02u|%s %s %s|\n",
                         (unsigned long long)row, (unsigned long long)(r % 200000),
                         (unsigned)(r >> 20) % 7 + 1, (unsigned)(r >> 24) % 50 + 1,
                         (unsigned)(r >> 30) % 90000 + 900, (unsigned)(r >> 40) % 100,
                         (unsigned)(r >> 48) % 10, modes[(r >> 52) % 6],
                         (unsigned)(r >> 56) % 12 + 1, (unsigned)(r >> 58) % 28 + 1,
                         words[(r >> 3) % 12], words[(r >> 7) % 12], words[(r >> 11) % 12]);
        size_t take = (size_t)n < left ? (size_t)n : left;
        memcpy(p, line, take);
        p += take;
        left -= take;
        row++;
    }
}

/* A mix: mostly rows, one zero 64 KiB run and one random 64 KiB run per MiB. */
static inline void cbfs_td_backup(void *buf, size_t len, uint64_t seed)
{
    cbfs_td_rows(buf, len, seed);
    unsigned char *p = buf;
    for (size_t mb = 0; mb + (1u << 20) <= len; mb += 1u << 20) {
        memset(p + mb + (256u << 10), 0, 64u << 10);
        cbfs_td_random(p + mb + (640u << 10), 64u << 10, seed + mb);
    }
}

#endif

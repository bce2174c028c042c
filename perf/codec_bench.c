/* cbfs-codec-bench: single-thread throughput and ratio of each built codec at
 * a few levels, on 1 MiB blocks as the daemon compresses them. Prints a
 * Markdown table. A benchmark, not a test: it checks round trips but has no
 * pass/fail thresholds.
 *   cbfs-codec-bench [MiB] [FILE] [CODEC:LEVEL,...]
 * (default: 64 MiB of generated backup data, every built codec at the levels below; the
 * third argument keeps only the listed runs, e.g. lz4:1,zstd:1) */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"
#include "../tests/unit/testdata.h"

#define BENCH_BLOCK ((size_t)1 << 20)

static const struct {
    unsigned id;
    int level;
} bench_runs[] = {
    {CBFS_CODEC_LZ4, 1}, {CBFS_CODEC_LZ4, 9}, {CBFS_CODEC_ZSTD, 1},
    {CBFS_CODEC_ZSTD, 3}, {CBFS_CODEC_ZSTD, 9}, {CBFS_CODEC_XZ, 1},
    {CBFS_CODEC_XZ, 6}, {CBFS_CODEC_BZIP2, 1}, {CBFS_CODEC_BZIP2, 9},
};

struct bench_clock {
    struct timespec cpu, wall;
};

static void bench_clock_start(struct bench_clock *c)
{
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &c->cpu);
    clock_gettime(CLOCK_MONOTONIC, &c->wall);
}

static double ts_diff(const struct timespec *a, const struct timespec *b)
{
    return (double)(b->tv_sec - a->tv_sec) + (double)(b->tv_nsec - a->tv_nsec) / 1e9;
}

/* Seconds of thread CPU time and wall time since start. */
static void bench_clock_stop(const struct bench_clock *start, double *cpu_s, double *wall_s)
{
    struct bench_clock now;
    bench_clock_start(&now);
    *cpu_s = ts_diff(&start->cpu, &now.cpu);
    *wall_s = ts_diff(&start->wall, &now.wall);
}

/* Reads up to len bytes of path into buf. @return bytes read, or -1. */
static ssize_t bench_read_file(const char *path, unsigned char *buf, size_t len)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
        fprintf(stderr, "cbfs-codec-bench: %s: %s\n", path, strerror(errno));
        return -1;
    }
    size_t got = 0;
    while (got < len) {
        const ssize_t n = read(fd, buf + got, len - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) {
            fprintf(stderr, "cbfs-codec-bench: %s: %s\n", path, strerror(errno));
            close(fd);
            return -1;
        }
        if (n == 0) break;
        got += (size_t)n;
    }
    close(fd);
    return (ssize_t)got;
}

static double mbps(size_t bytes, double s)
{
    return s > 0 ? (double)bytes / 1e6 / s : 0.0;
}

/* One codec/level over the whole input. @return 0, or 1 on any failure. */
static int bench_one(const struct cbfs_codec_ops *c, int level, const unsigned char *data,
                     size_t len)
{
    const size_t nblocks = (len + BENCH_BLOCK - 1) / BENCH_BLOCK;
    const size_t cap = c->bound(BENCH_BLOCK);
    unsigned char *payloads = malloc(nblocks * cap);
    size_t *plens = calloc(nblocks, sizeof *plens);
    unsigned char *out = malloc(BENCH_BLOCK);
    int rc = 1;
    if (!payloads || !plens || !out) {
        fprintf(stderr, "cbfs-codec-bench: out of memory\n");
        goto out;
    }

    struct bench_clock t;
    double ccpu, cwall, dcpu, dwall;
    size_t total = 0;
    bench_clock_start(&t);
    for (size_t b = 0; b < nblocks; b++) {
        const size_t off = b * BENCH_BLOCK;
        const size_t n = len - off < BENCH_BLOCK ? len - off : BENCH_BLOCK;
        const cbfs_err err =
            cbfs_codec_compress(c, level, data + off, n, payloads + b * cap, cap, &plens[b]);
        if (err) {
            fprintf(stderr, "cbfs-codec-bench: %s:%d compress: %s\n", c->name, level,
                    cbfs_err_str(err));
            goto out;
        }
        total += plens[b];
    }
    bench_clock_stop(&t, &ccpu, &cwall);

    bench_clock_start(&t);
    for (size_t b = 0; b < nblocks; b++) {
        const size_t off = b * BENCH_BLOCK;
        const size_t n = len - off < BENCH_BLOCK ? len - off : BENCH_BLOCK;
        const cbfs_err err = cbfs_codec_decompress(c, payloads + b * cap, plens[b], out, n);
        if (err) {
            fprintf(stderr, "cbfs-codec-bench: %s:%d decompress: %s\n", c->name, level,
                    cbfs_err_str(err));
            goto out;
        }
        /* One memcmp per MiB is noise next to any decoder. */
        if (memcmp(out, data + off, n) != 0) {
            fprintf(stderr, "cbfs-codec-bench: %s:%d block %zu differs\n", c->name, level, b);
            goto out;
        }
    }
    bench_clock_stop(&t, &dcpu, &dwall);

    printf("| %-5s | %5d | %6.2f | %9.1f | %9.1f | %9.1f | %9.1f |\n", c->name, level,
           total ? (double)len / (double)total : 0.0, mbps(len, ccpu), mbps(len, cwall),
           mbps(len, dcpu), mbps(len, dwall));
    fflush(stdout);
    rc = 0;
out:
    free(out);
    free(plens);
    free(payloads);
    return rc;
}

/* 1 when no filter was given, or "name:level" is one of its comma-separated entries. */
static int bench_selected(const char *filter, const char *name, int level)
{
    if (filter == NULL) return 1;
    char want[64];
    snprintf(want, sizeof want, "%s:%d", name, level);
    const size_t wlen = strlen(want);
    for (const char *p = filter; *p;) {
        const char *end = strchr(p, ',');
        const size_t n = end ? (size_t)(end - p) : strlen(p);
        if (n == wlen && strncmp(p, want, n) == 0) return 1;
        if (!end) break;
        p = end + 1;
    }
    return 0;
}

int main(int argc, char **argv)
{
    size_t mib = 64;
    const char *path = NULL;
    const char *filter = NULL;
    if (argc > 4 || (argc > 1 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0))) {
        fprintf(stderr, "usage: %s [MiB] [FILE] [CODEC:LEVEL,...]\n", argv[0]);
        return 2;
    }
    if (argc > 1) {
        char *end = NULL;
        const unsigned long v = strtoul(argv[1], &end, 10);
        if (!*argv[1] || *end || v == 0 || v > 4096) {
            fprintf(stderr, "cbfs-codec-bench: MiB must be 1..4096, not '%s'\n", argv[1]);
            return 2;
        }
        mib = v;
    }
    if (argc > 2) path = argv[2];
    if (argc > 3) filter = argv[3];

    size_t len = mib << 20;
    unsigned char *data = malloc(len);
    if (!data) {
        fprintf(stderr, "cbfs-codec-bench: cannot allocate %zu MiB\n", mib);
        return 1;
    }
    if (path) {
        const ssize_t got = bench_read_file(path, data, len);
        if (got <= 0) {
            if (got == 0) fprintf(stderr, "cbfs-codec-bench: %s is empty\n", path);
            free(data);
            return 1;
        }
        len = (size_t)got;
    } else {
        cbfs_td_backup(data, len, 1);
    }

    printf("Input: %s, %.1f MiB, %zu KiB blocks, one thread; speeds in MB/s of "
           "uncompressed data (MB = 1e6 bytes) per thread-CPU second and per wall second\n\n",
           path ? path : "generated backup-like data (cbfs_td_backup)", (double)len / 1048576.0,
           BENCH_BLOCK >> 10);
    printf("| codec | level |  ratio | comp CPU  | comp wall | dec CPU   | dec wall  |\n");
    printf("|-------|------:|-------:|----------:|----------:|----------:|----------:|\n");
    int rc = 0;
    for (size_t i = 0; i < sizeof bench_runs / sizeof bench_runs[0]; i++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(bench_runs[i].id);
        if (!c) continue; /* not built */
        if (!bench_selected(filter, c->name, bench_runs[i].level)) continue;
        rc |= bench_one(c, bench_runs[i].level, data, len);
    }
    free(data);
    return rc;
}

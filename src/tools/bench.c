/* `cbfs bench`: on the user's own sample, for every codec x level x block
 * size, compresses into real frames on the pool (all workers), decodes them
 * again, and prints ratio, MB/s each way and CPU seconds per GB, marks the
 * Pareto-optimal rows and recommends mount options: the smallest output
 * that keeps up with the disk, and the smallest overall. */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/pool.h"
#include "cbfs/settings.h"
#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_bench_help[] =
    "usage: cbfs bench [--codecs C[:L],...] [--levels L,...] [--block-sizes S,...]\n"
    "                  [--sample SIZE] [--disk-mbps N] [--workers N] [--json]\n"
    "                  [--plot FILE.png] FILE\n"
    "Compresses and decompresses a sample of FILE (first 256M by default) with every\n"
    "codec x level x block size on all workers; prints ratio, MB/s, CPU s/GB, marks\n"
    "Pareto-optimal rows (*) and recommends mount options.\n"
    "  --codecs       default: every built codec except none; zstd:19 pins a level\n"
    "  --levels       default: each codec's default level\n"
    "  --block-sizes  default: the mount's default block_size\n"
    "  --disk-mbps N  disk speed to keep up with (default 500)\n"
    "  --workers N    threads, 1 to " TOOL_STR(TOOL_WORKERS_MAX) " (default: online CPUs)\n"
    "  --plot FILE    PNG scatter of ratio vs compress MB/s (needs gnuplot)\n"
    "exit status: 0 ok, 2 usage or I/O error\n";

#define TOOL_BENCH_MAX 256 /* rows */

struct tool_bench_row {
    const struct cbfs_codec_ops *codec;
    int level;
    uint32_t block_size;
    double ratio, cmbps, dmbps, cpu_s_per_gb;
    bool pareto;
};

/* One codec x level x block size run; the pool tasks are blocks. */
struct tool_bench_run {
    const struct cbfs_codec_ops *codec;
    int level;
    uint32_t bs;
    const uint8_t *data;
    uint64_t len;
    uint8_t *frames;    /* block i's frame at frames + i * cap */
    size_t cap;
    size_t *flen;
    uint8_t **out;      /* per slot: one decoded block */
    _Atomic cbfs_err err; /* a failure (any one will do; set from the pool threads) */
};

static void tool_bench_compress(void *arg, unsigned slot, size_t i)
{
    (void)slot;
    struct tool_bench_run *const r = arg;
    const uint64_t off = (uint64_t)i * r->bs;
    const size_t len = r->len - off < r->bs ? (size_t)(r->len - off) : r->bs;
    struct cbfs_frame_hdr h;
    const cbfs_err e = cbfs_frame_encode(r->codec, r->level, 1, i, i + 1, r->data + off, len,
                                         r->frames + i * r->cap, r->cap, &r->flen[i], &h);
    if (e) r->err = e;
}

static void tool_bench_decompress(void *arg, unsigned slot, size_t i)
{
    struct tool_bench_run *const r = arg;
    const uint8_t *const f = r->frames + i * r->cap;
    struct cbfs_frame_hdr h;
    cbfs_err e = cbfs_frame_hdr_decode(f, &h);
    if (!e) e = cbfs_frame_decode(&h, f + CBFS_FRAME_HDR_SIZE, r->out[slot]);
    if (e) r->err = e;
}

static double tool_cpu_seconds(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return (double)ru.ru_utime.tv_sec + (double)ru.ru_utime.tv_usec / 1e6 +
           (double)ru.ru_stime.tv_sec + (double)ru.ru_stime.tv_usec / 1e6;
}

static cbfs_err tool_bench_one(struct cbfs_pool *pool, const uint8_t *data, uint64_t len,
                               struct tool_bench_row *row)
{
    const unsigned threads = cbfs_pool_threads(pool);
    struct tool_bench_run r = {
        .codec = row->codec, .level = row->level, .bs = row->block_size, .data = data, .len = len};
    const size_t n = (size_t)((len + r.bs - 1) / r.bs);
    r.cap = cbfs_frame_bound(r.codec, r.bs);
    r.frames = malloc(n * r.cap);
    r.flen = calloc(n, sizeof *r.flen);
    r.out = calloc(threads, sizeof *r.out);
    cbfs_err e = CBFS_E_NOMEM;
    if (!r.frames || !r.flen || !r.out) goto out;
    for (unsigned t = 0; t < threads; t++)
        if (!(r.out[t] = malloc(r.bs))) goto out;
    const double c0 = tool_cpu_seconds();
    uint64_t t0 = cbfs_now_ns();
    e = tool_par_run(pool, n, tool_bench_compress, &r, NULL);
    const double csecs = (double)(cbfs_now_ns() - t0) / 1e9, cpu = tool_cpu_seconds() - c0;
    if (!e) e = r.err;
    if (e) goto out;
    t0 = cbfs_now_ns();
    e = tool_par_run(pool, n, tool_bench_decompress, &r, NULL);
    const double dsecs = (double)(cbfs_now_ns() - t0) / 1e9;
    if (!e) e = r.err;
    if (e) goto out;
    uint64_t total = 0;
    for (size_t i = 0; i < n; i++) total += r.flen[i];
    row->ratio = (double)len / (double)total;
    row->cmbps = (double)len / 1e6 / (csecs > 1e-9 ? csecs : 1e-9);
    row->dmbps = (double)len / 1e6 / (dsecs > 1e-9 ? dsecs : 1e-9);
    row->cpu_s_per_gb = cpu / ((double)len / 1e9);
out:
    for (unsigned t = 0; r.out && t < threads; t++) free(r.out[t]);
    free(r.out);
    free(r.flen);
    free(r.frames);
    return e;
}

/* "A beats B if A is faster and not larger, or smaller and not slower." */
static void tool_bench_pareto(struct tool_bench_row *rows, size_t n)
{
    for (size_t b = 0; b < n; b++) {
        rows[b].pareto = true;
        for (size_t a = 0; a < n && rows[b].pareto; a++)
            if ((rows[a].cmbps > rows[b].cmbps && rows[a].ratio >= rows[b].ratio) ||
                (rows[a].ratio > rows[b].ratio && rows[a].cmbps >= rows[b].cmbps))
                rows[b].pareto = false;
    }
}

/* The smallest output among rows compressing at >= mbps (NULL if none). */
static const struct tool_bench_row *tool_bench_pick(const struct tool_bench_row *rows, size_t n,
                                                    double mbps)
{
    const struct tool_bench_row *best = NULL;
    for (size_t i = 0; i < n; i++)
        if (rows[i].cmbps >= mbps &&
            (!best || rows[i].ratio > best->ratio ||
             (rows[i].ratio == best->ratio && rows[i].cmbps > best->cmbps)))
            best = &rows[i];
    return best;
}

static void tool_bench_opts(const struct tool_bench_row *r, char *buf, size_t cap)
{
    char bs[16];
    snprintf(buf, cap, "-o codec=%s,level=%d,block_size=%s", r->codec->name, r->level,
             cbfs_format_size(r->block_size, bs, sizeof bs));
}

static void tool_bench_print(const struct tool_bench_row *rows, size_t n, double disk,
                             uint64_t sample, unsigned workers, bool json)
{
    const struct tool_bench_row *const keeps = tool_bench_pick(rows, n, disk);
    const struct tool_bench_row *const small = tool_bench_pick(rows, n, 0);
    char o1[128] = "", o2[128] = "", bs[16];
    if (keeps) tool_bench_opts(keeps, o1, sizeof o1);
    if (small) tool_bench_opts(small, o2, sizeof o2);
    if (json) {
        printf("{\"sample_bytes\":%" PRIu64 ",\"workers\":%u,\"disk_mbps\":%.0f,\"rows\":[", sample,
               workers, disk);
        for (size_t i = 0; i < n; i++)
            printf("%s\n  {\"codec\":\"%s\",\"level\":%d,\"block_size\":%u,\"ratio\":%.4f,"
                   "\"compress_mbps\":%.1f,\"decompress_mbps\":%.1f,\"cpu_s_per_gb\":%.3f,"
                   "\"pareto\":%s}",
                   i ? "," : "", rows[i].codec->name, rows[i].level, rows[i].block_size,
                   rows[i].ratio, rows[i].cmbps, rows[i].dmbps, rows[i].cpu_s_per_gb,
                   rows[i].pareto ? "true" : "false");
        printf("],\n\"keeps_up\":");
        if (keeps)
            tool_json_str(stdout, o1);
        else
            printf("null");
        printf(",\"smallest\":");
        if (small)
            tool_json_str(stdout, o2);
        else
            printf("null");
        printf("}\n");
        return;
    }
    char sz[32];
    printf("sample %s, %u worker(s)\n", tool_fmt_bytes(sample, sz, sizeof sz), workers);
    printf("%-6s %5s %6s %7s %10s %12s %9s  %s\n", "CODEC", "LEVEL", "BLOCK", "RATIO",
           "COMP MB/s", "DECOMP MB/s", "CPU s/GB", "PARETO");
    for (size_t i = 0; i < n; i++)
        printf("%-6s %5d %6s %7.2f %10.1f %12.1f %9.2f  %s\n", rows[i].codec->name, rows[i].level,
               cbfs_format_size(rows[i].block_size, bs, sizeof bs), rows[i].ratio, rows[i].cmbps,
               rows[i].dmbps, rows[i].cpu_s_per_gb, rows[i].pareto ? "*" : "");
    if (keeps)
        printf("smallest that keeps up with %.0f MB/s of disk: %s (ratio %.2f, %.0f MB/s)\n", disk,
               o1, keeps->ratio, keeps->cmbps);
    else
        printf("smallest that keeps up with %.0f MB/s of disk: none on this machine "
               "(compression will be the bottleneck; add CPUs or pick the fastest row)\n",
               disk);
    if (small)
        printf("smallest: %s (ratio %.2f, %.0f MB/s)\n", o2, small->ratio, small->cmbps);
}

/* @return false (after a message) if the plot could not be written. */
static bool tool_bench_plot(const struct tool_bench_row *rows, size_t n, const char *png)
{
    FILE *const g = tool_gnuplot_open("bench", png, 900, 600);
    if (!g) return false;
    fprintf(g, "set xlabel 'compress MB/s'\nset ylabel 'ratio'\nset logscale x\nset grid\n"
               "set key off\n$d << EOD\n");
    char bs[16];
    for (size_t i = 0; i < n; i++)
        fprintf(g, "%.2f %.4f \"%s:%d/%s%s\"\n", rows[i].cmbps, rows[i].ratio, rows[i].codec->name,
                rows[i].level, cbfs_format_size(rows[i].block_size, bs, sizeof bs),
                rows[i].pareto ? "*" : "");
    fprintf(g, "EOD\nplot $d using 1:2 with points pt 7, $d using 1:2:3 with labels offset 0,1\n");
    return tool_gnuplot_close("bench", g, png);
}

struct tool_bench_args {
    const struct cbfs_codec_ops *codec[16];
    int pinned[16];   /* level from "codec:L", or INT32_MIN */
    size_t ncodecs;
    int levels[32];
    size_t nlevels;
    uint32_t bsizes[16];
    size_t nbsizes;
};

/* Splits a comma list (modifies s), calling one(item) for each. */
static bool tool_bench_list(char *s, bool (*one)(struct tool_bench_args *a, const char *item),
                            struct tool_bench_args *a)
{
    char *save = NULL;
    for (char *it = strtok_r(s, ",", &save); it; it = strtok_r(NULL, ",", &save))
        if (!one(a, it)) return false;
    return true;
}

static bool tool_bench_codec(struct tool_bench_args *a, const char *item)
{
    char msg[256];
    int level;
    if (a->ncodecs == sizeof a->codec / sizeof a->codec[0]) {
        tool_err("bench", "--codecs: at most %zu codecs", a->ncodecs);
        return false;
    }
    if (cbfs_codec_parse(item, &a->codec[a->ncodecs], &level, msg, sizeof msg) != CBFS_OK) {
        tool_err("bench", "%s", msg);
        return false;
    }
    a->pinned[a->ncodecs++] = strchr(item, ':') ? level : INT32_MIN;
    return true;
}

static bool tool_bench_level(struct tool_bench_args *a, const char *item)
{
    long l;
    if (a->nlevels == sizeof a->levels / sizeof a->levels[0]) {
        tool_err("bench", "--levels: at most %zu levels", a->nlevels);
        return false;
    }
    if (!cbfs_parse_long(item, INT_MIN, INT_MAX, &l)) {
        tool_err("bench", "--levels: '%s' is not a level", item);
        return false;
    }
    a->levels[a->nlevels++] = (int)l;
    return true;
}

static bool tool_bench_bsize(struct tool_bench_args *a, const char *item)
{
    struct cbfs_settings set;
    char msg[160];
    cbfs_settings_init(&set);
    if (a->nbsizes == sizeof a->bsizes / sizeof a->bsizes[0]) {
        tool_err("bench", "--block-sizes: at most %zu sizes", a->nbsizes);
        return false;
    }
    if (cbfs_settings_set(&set, CBFS_SCOPE_STORE, "block_size", item, msg, sizeof msg)) {
        tool_err("bench", "--block-sizes: %s", msg);
        return false;
    }
    a->bsizes[a->nbsizes++] = set.block_size;
    return true;
}

/* Levels codec c runs at: one when pinned (zstd:7) or when --levels is not
 * given (its default), else every --levels one. */
static size_t tool_bench_nlevels(const struct tool_bench_args *a, size_t c)
{
    return a->pinned[c] != INT32_MIN || a->nlevels == 0 ? 1 : a->nlevels;
}

/* Reads up to *len bytes from the start of path into a new buffer. */
static cbfs_err tool_bench_sample(const char *path, uint64_t *len, uint8_t **out)
{
    const int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return cbfs_err_from_errno(errno);
    struct stat st; /* a sample larger than a regular file needs only the file's size */
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && (uint64_t)st.st_size < *len)
        *len = (uint64_t)st.st_size;
    uint8_t *const buf = malloc(*len ? *len : 1);
    cbfs_err e = buf ? CBFS_OK : CBFS_E_NOMEM;
    uint64_t got = 0;
    while (!e && got < *len) {
        const ssize_t n = read(fd, buf + got, *len - got > (1u << 24) ? (1u << 24) : *len - got);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0) e = cbfs_err_from_errno(errno);
        if (n <= 0) break;
        got += (uint64_t)n;
    }
    close(fd);
    if (e) {
        free(buf);
        return e;
    }
    *len = got;
    *out = buf;
    return CBFS_OK;
}

static bool tool_bench_defaults(struct tool_bench_args *a)
{
    if (a->ncodecs == 0)
        for (unsigned id = 1; id <= CBFS_CODEC_MAX_ID; id++)
            if ((a->codec[a->ncodecs] = cbfs_codec_by_id(id)) != NULL)
                a->pinned[a->ncodecs++] = INT32_MIN;
    if (a->nbsizes == 0) a->bsizes[a->nbsizes++] = CBFS_BLOCK_DEFAULT;
    /* Check every level before spending minutes on the runs. */
    for (size_t c = 0; c < a->ncodecs; c++) {
        for (size_t l = 0; a->pinned[c] == INT32_MIN && l < a->nlevels; l++) {
            char msg[256];
            if (cbfs_codec_check_level(a->codec[c], a->levels[l], msg, sizeof msg) != CBFS_OK) {
                tool_err("bench", "%s", msg);
                return false;
            }
        }
    }
    return a->ncodecs > 0;
}

int tool_bench_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"codecs", required_argument, NULL, 'c'},  {"levels", required_argument, NULL, 'l'},
        {"block-sizes", required_argument, NULL, 'b'}, {"sample", required_argument, NULL, 's'},
        {"disk-mbps", required_argument, NULL, 'd'}, {"workers", required_argument, NULL, 'w'},
        {"json", no_argument, NULL, 'j'},          {"plot", required_argument, NULL, 'p'},
        {"help", no_argument, NULL, 'h'},          {NULL, 0, NULL, 0}};
    struct tool_bench_args a;
    memset(&a, 0, sizeof a);
    uint64_t sample = 256u << 20;
    double disk = 500;
    unsigned workers = tool_ncpus();
    bool json = false;
    const char *plot = NULL;
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        char *end = NULL;
        bool ok = true;
        switch (ch) {
        case 'c': ok = tool_bench_list(optarg, tool_bench_codec, &a); break;
        case 'l': ok = tool_bench_list(optarg, tool_bench_level, &a); break;
        case 'b': ok = tool_bench_list(optarg, tool_bench_bsize, &a); break;
        case 's': ok = cbfs_parse_size(optarg, &sample) == CBFS_OK && sample > 0; break;
        case 'd': /* finite: the JSON and the advice print it */
            disk = strtod(optarg, &end);
            ok = !*end && end != optarg && isfinite(disk) && disk > 0;
            break;
        case 'w': {
            long w;
            ok = cbfs_parse_long(optarg, 1, TOOL_WORKERS_MAX, &w);
            workers = ok ? (unsigned)w : 0;
            break;
        }
        case 'j': json = true; break;
        case 'p': plot = optarg; break;
        default: return tool_usage(tool_bench_help, ch == 'h');
        }
        if (!ok) {
            if (ch == 's' || ch == 'd' || ch == 'w')
                tool_err("bench", "invalid value '%s' for --%s", optarg,
                         ch == 's' ? "sample" : ch == 'd' ? "disk-mbps" : "workers");
            return TOOL_EXIT_USAGE;
        }
    }
    if (optind + 1 != argc) return tool_usage(tool_bench_help, false);
    if (!tool_bench_defaults(&a)) return TOOL_EXIT_USAGE;
    size_t runs = 0; /* every combination runs, or none: a cut table would advise wrongly */
    for (size_t c = 0; c < a.ncodecs; c++) runs += tool_bench_nlevels(&a, c) * a.nbsizes;
    if (runs > TOOL_BENCH_MAX) {
        tool_err("bench", "%zu combinations of codec, level and block size; at most %d",
                 runs, TOOL_BENCH_MAX);
        return TOOL_EXIT_USAGE;
    }
    uint8_t *data = NULL;
    cbfs_err e = tool_bench_sample(argv[optind], &sample, &data);
    if (e || sample == 0) {
        tool_err("bench", "%s: %s", argv[optind],
                 e ? cbfs_err_str(e) : "empty file, nothing to sample");
        free(data);
        return TOOL_EXIT_USAGE;
    }
    struct cbfs_pool *pool = NULL;
    if ((e = cbfs_pool_create(workers, &pool)) != CBFS_OK) {
        tool_err("bench", "cannot start %u workers: %s", workers, cbfs_err_str(e));
        free(data);
        return TOOL_EXIT_USAGE;
    }
    static struct tool_bench_row rows[TOOL_BENCH_MAX];
    const bool tty = isatty(STDERR_FILENO);
    size_t n = 0;
    for (size_t c = 0; c < a.ncodecs && !e; c++) {
        const size_t nl = tool_bench_nlevels(&a, c);
        for (size_t l = 0; l < nl && !e; l++) {
            for (size_t b = 0; b < a.nbsizes && !e; b++) {
                struct tool_bench_row *const r = &rows[n];
                r->codec = a.codec[c];
                r->level = a.pinned[c] != INT32_MIN ? a.pinned[c]
                           : a.nlevels           ? a.levels[l]
                                                 : a.codec[c]->default_level;
                r->block_size = a.bsizes[b];
                if (tty) fprintf(stderr, "\rbench: %s level %d ...   ", r->codec->name, r->level);
                e = tool_bench_one(pool, data, sample, r);
                if (e)
                    tool_err("bench", "%s level %d: %s", r->codec->name, r->level, cbfs_err_str(e));
                else
                    n++;
            }
        }
    }
    if (tty) fputs("\r\033[K", stderr);
    cbfs_pool_destroy(pool);
    free(data);
    if (e) return TOOL_EXIT_USAGE;
    tool_bench_pareto(rows, n);
    tool_bench_print(rows, n, disk, sample, workers, json);
    if (plot && !tool_bench_plot(rows, n, plot)) return TOOL_EXIT_USAGE;
    return TOOL_EXIT_OK;
}

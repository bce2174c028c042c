/* `cbfs stat`: per stored file and in total, logical vs physical size (data
 * file + sidecar), ratio, codecs and levels seen, block size, block kinds
 * (compressed / raw / hole) and garbage (superseded frames). Reads indexes
 * and at most one frame header per codec; never decodes payloads. */
#include <getopt.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>

#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_stat_help[] =
    "usage: cbfs stat [--json] PATH...\n"
    "Sizes, compression ratio, codecs, block kinds and garbage of stored files.\n"
    "PATH: a file or directory in a store (recursive), or a path inside a mounted cbfs.\n"
    "  --json   one JSON document on stdout\n"
    "exit status: 0 ok, 1 a file's index could not be loaded, 2 usage or I/O error\n";

struct tool_stat_row {
    uint64_t logical, data_bytes, index_bytes;
    uint64_t blocks, compressed, raw, hole;
    uint64_t dead_frames, dead_bytes;
    uint32_t block_size;           /* 0: plain file, or mixed in totals */
    unsigned codec_mask;           /* bit per codec id of compressed frames */
    int level[CBFS_CODEC_MAX_ID + 1]; /* first level seen per codec */
};

struct tool_stat_ctx {
    bool json;
    unsigned nfiles, errors, bad;
    uint64_t cbfs_files;
    struct tool_stat_row total;
};

/* Counts block kinds and codecs; reads one frame header per codec for its
 * level (the index does not record levels). */
static void tool_stat_scan(const struct tool_file *tf, struct tool_stat_row *r)
{
    const struct cbfs_index *const idx = &tf->idx;
    r->block_size = idx->block_size;
    r->blocks = (idx->size + idx->block_size - 1) / idx->block_size;
    r->logical = idx->size;
    r->dead_frames = idx->dead_frames;
    r->dead_bytes = idx->dead_bytes;
    for (uint64_t b = 0; b < r->blocks; b++) {
        const struct cbfs_index_entry *const e = cbfs_index_get(idx, b);
        if (!e || (e->flags & CBFS_FRAME_HOLE)) {
            r->hole++;
        } else if (e->flags & CBFS_FRAME_RAW) {
            r->raw++;
        } else {
            r->compressed++;
            if (e->codec <= CBFS_CODEC_MAX_ID && !(r->codec_mask & (1u << e->codec))) {
                struct cbfs_frame_hdr h;
                r->codec_mask |= 1u << e->codec;
                r->level[e->codec] = cbfs_frame_read_hdr(tf->data_fd, e->offset,
                                                         (uint64_t)tf->data_st.st_size,
                                                         &h) == CBFS_OK
                                         ? h.level
                                         : 0;
            }
        }
    }
}

/* "zstd:3,lz4:1", "plain" or "-" (nothing compressed). */
static void tool_stat_codecs(const struct tool_stat_row *r, bool plain, char *buf, size_t cap)
{
    size_t n = 0;
    buf[0] = '\0';
    for (unsigned c = 0; c <= CBFS_CODEC_MAX_ID; c++) {
        if (!(r->codec_mask & (1u << c))) continue;
        const struct cbfs_codec_ops *const ops = cbfs_codec_by_id(c);
        char name[16];
        if (ops)
            snprintf(name, sizeof name, "%s", ops->name);
        else
            snprintf(name, sizeof name, "codec%u", c);
        const int w = snprintf(buf + n, cap - n, "%s%s:%d", n ? "," : "", name, r->level[c]);
        if (w < 0 || (size_t)w >= cap - n) break;
        n += (size_t)w;
    }
    if (n == 0) snprintf(buf, cap, "%s", plain ? "plain" : "-");
}

static double tool_stat_ratio(const struct tool_stat_row *r)
{
    const uint64_t phys = r->data_bytes + r->index_bytes;
    return phys ? (double)r->logical / (double)phys : 0.0;
}

static void tool_stat_print(const struct tool_stat_ctx *c, const char *path, const char *kind,
                            const struct tool_stat_row *r)
{
    char codecs[128], lg[32], ph[32], gb[32];
    tool_stat_codecs(r, strcmp(kind, "plain") == 0, codecs, sizeof codecs);
    const uint64_t phys = r->data_bytes + r->index_bytes;
    if (c->json) {
        printf("%s{\"path\":", c->nfiles > 1 && path ? ",\n  " : "");
        tool_json_str(stdout, path ? path : "");
        printf(",\"kind\":\"%s\",\"logical\":%" PRIu64 ",\"physical\":%" PRIu64
               ",\"data_bytes\":%" PRIu64 ",\"index_bytes\":%" PRIu64 ",\"ratio\":%.4f,"
               "\"codecs\":\"%s\",\"block_size\":%" PRIu32 ",\"blocks\":{\"total\":%" PRIu64
               ",\"compressed\":%" PRIu64 ",\"raw\":%" PRIu64 ",\"hole\":%" PRIu64
               "},\"garbage\":{\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64 "}}",
               kind, r->logical, phys, r->data_bytes, r->index_bytes, tool_stat_ratio(r), codecs,
               r->block_size, r->blocks, r->compressed, r->raw, r->hole, r->dead_frames,
               r->dead_bytes);
        return;
    }
    char bs[32] = "-";
    if (r->block_size) cbfs_format_size(r->block_size, bs, sizeof bs);
    printf("%10s %10s %6.2f  %-14s %6s %8" PRIu64 " %8" PRIu64 " %6" PRIu64 " %6" PRIu64
           " %10s  %s\n",
           tool_fmt_bytes(r->logical, lg, sizeof lg), tool_fmt_bytes(phys, ph, sizeof ph),
           tool_stat_ratio(r), codecs, bs, r->blocks, r->compressed, r->raw, r->hole,
           tool_fmt_bytes(r->dead_bytes, gb, sizeof gb), path ? path : "TOTAL");
}

static void tool_stat_add(struct tool_stat_row *t, const struct tool_stat_row *r, bool first)
{
    t->logical += r->logical;
    t->data_bytes += r->data_bytes;
    t->index_bytes += r->index_bytes;
    t->blocks += r->blocks;
    t->compressed += r->compressed;
    t->raw += r->raw;
    t->hole += r->hole;
    t->dead_frames += r->dead_frames;
    t->dead_bytes += r->dead_bytes;
    for (unsigned c = 0; c <= CBFS_CODEC_MAX_ID; c++)
        if ((r->codec_mask & (1u << c)) && !(t->codec_mask & (1u << c))) t->level[c] = r->level[c];
    t->codec_mask |= r->codec_mask;
    if (first)
        t->block_size = r->block_size;
    else if (t->block_size != r->block_size)
        t->block_size = 0;
}

static int tool_stat_one(void *arg, int dirfd, const char *name, const char *display,
                         enum tool_ent_kind kind)
{
    struct tool_stat_ctx *const c = arg;
    if (kind != TOOL_ENT_FILE) return 0;
    struct tool_file tf;
    if (!tool_file_open_walked(dirfd, name, display, "stat", &c->errors, &tf)) return 0;
    struct tool_stat_row r;
    memset(&r, 0, sizeof r);
    r.data_bytes = (uint64_t)tf.data_st.st_size;
    r.index_bytes = tool_file_physical(&tf) - r.data_bytes;
    const char *what = "plain";
    if (!tf.is_cbfs) {
        r.logical = r.data_bytes;
    } else if (tf.load_err) {
        tool_err("stat", "%s: cannot load the index: %s (try cbfs verify)", display,
                 cbfs_err_str(tf.load_err));
        c->bad++;
        what = "damaged";
    } else {
        tool_stat_scan(&tf, &r);
        what = "cbfs";
    }
    c->cbfs_files += tf.is_cbfs;
    tool_stat_add(&c->total, &r, c->nfiles == 0);
    c->nfiles++;
    tool_stat_print(c, display, what, &r);
    tool_file_close(&tf);
    return 0;
}

int tool_stat_main(int argc, char **argv)
{
    static const struct option opts[] = {
        {"json", no_argument, NULL, 'j'}, {"help", no_argument, NULL, 'h'}, {NULL, 0, NULL, 0}};
    struct tool_stat_ctx c;
    memset(&c, 0, sizeof c);
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'j')
            c.json = true;
        else
            return tool_usage(tool_stat_help, ch == 'h');
    }
    if (optind >= argc) return tool_usage(tool_stat_help, false);
    if (c.json)
        printf("{\"files\":[\n  ");
    else
        printf("%10s %10s %6s  %-14s %6s %8s %8s %6s %6s %10s  %s\n", "LOGICAL", "PHYSICAL",
               "RATIO", "CODECS", "BLOCK", "BLOCKS", "COMPR", "RAW", "HOLE", "GARBAGE", "PATH");
    const struct tool_walk_req req = {
        .sub = "stat", .fn = tool_stat_one, .arg = &c, .cbfs_files = &c.cbfs_files};
    c.errors += tool_walk_paths(argv + optind, argc - optind, &req);
    if (c.json) {
        printf("\n],\n\"total\":");
        const unsigned n = c.nfiles;
        c.nfiles = 0; /* no leading comma */
        tool_stat_print(&c, "", "total", &c.total);
        printf(",\n\"files_count\":%u}\n", n);
    } else if (c.nfiles > 1) {
        tool_stat_print(&c, NULL, "total", &c.total);
    }
    if (c.errors) return TOOL_EXIT_USAGE;
    return c.bad ? TOOL_EXIT_PROBLEMS : TOOL_EXIT_OK;
}

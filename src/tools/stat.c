/* `cbfs stat`: per stored file and in total, logical vs physical size (data
 * file + sidecar), ratio, codecs and levels seen, block size, block kinds
 * (compressed / raw / hole) and garbage (superseded frames), and per cbfs
 * file whether stock `zstd -d` / `lz4 -d` of its data file reproduces it
 * (cbfs_stock_check: from the index, reading only the headers of frames it
 * no longer references). The index is loaded as the daemon does
 * (TOOL_LOAD_FAST), so stat reads sidecars, not data files; it never decodes
 * payloads, and damage inside a data file is verify's to find.
 * --plot draws logical vs physical size and the codec mix per file or
 * directory. */
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_stat_help[] =
    "usage: cbfs stat [--json] [--plot FILE.png] PATH...\n"
    "Sizes, compression ratio, codecs, block kinds and garbage of stored files, and\n"
    "whether stock zstd -d / lz4 -d of a data file gives the file (from the index; reads\n"
    "only the headers of frames it no longer refers to).\n"
    "PATH: a file or directory in a store (recursive), or a path inside a mounted cbfs.\n"
    "  --json          one JSON document on stdout\n"
    "  --plot FILE     PNG chart: logical vs physical size and codec mix per file, or per\n"
    "                  directory when there are more than 24 files (needs gnuplot)\n"
    "exit status: 0 ok, 1 a file's index could not be loaded, 2 usage or I/O error\n";

/* How a logical byte is stored (the codec mix): compressed with codec id i
 * (i <= CBFS_CODEC_MAX_ID), then these. */
enum {
    TOOL_MIX_RAW = CBFS_CODEC_MAX_ID + 1, /* a block that did not compress, stored verbatim */
    TOOL_MIX_HOLE,                        /* all zeros, no payload */
    TOOL_MIX_PLAIN,                       /* a plain file (codec=none, or never cbfs) */
    TOOL_MIX_N
};

struct tool_stat_row {
    uint64_t logical, data_bytes, index_bytes;
    uint64_t mix[TOOL_MIX_N]; /* logical bytes by how they are stored */
    uint64_t blocks, compressed, raw, hole;
    uint64_t dead_frames, dead_bytes;
    uint32_t block_size;           /* 0: plain file, or mixed in totals */
    unsigned codec_mask;           /* bit per codec id of compressed frames */
    int level[CBFS_CODEC_MAX_ID + 1]; /* first level read per codec; TOOL_LEVEL_UNREAD
                                         while no frame header of it could be read */
};

/* A file kept for --plot. */
struct tool_stat_item {
    char *path;
    struct tool_stat_row r;
};

struct tool_stat_ctx {
    bool json;
    unsigned nfiles, errors, bad;
    uint64_t cbfs_files;
    struct tool_stat_row total;
    const char *plot;              /* --plot PNG, or NULL */
    struct tool_stat_item *items;  /* the files, for the plot */
    size_t nitems, cap;
};

#define TOOL_LEVEL_UNREAD INT_MIN

/* Counts block kinds and codecs; reads one frame header per codec for its
 * level (the index does not record levels), the next frame's where one
 * cannot be read: a damaged header tells no level, and none is made up. */
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
        const uint64_t off = b * idx->block_size;
        const uint64_t len = idx->size - off < idx->block_size ? idx->size - off : idx->block_size;
        if (!e || (e->flags & CBFS_FRAME_HOLE)) {
            r->hole++;
            r->mix[TOOL_MIX_HOLE] += len;
        } else if (e->flags & CBFS_FRAME_RAW) {
            r->raw++;
            r->mix[TOOL_MIX_RAW] += len;
        } else {
            r->compressed++;
            r->mix[e->codec <= CBFS_CODEC_MAX_ID ? e->codec : TOOL_MIX_RAW] += len;
            if (e->codec <= CBFS_CODEC_MAX_ID &&
                (!(r->codec_mask & (1u << e->codec)) || r->level[e->codec] == TOOL_LEVEL_UNREAD)) {
                struct cbfs_frame_hdr h;
                r->codec_mask |= 1u << e->codec;
                r->level[e->codec] = cbfs_frame_read_hdr(tf->data_fd, e->offset,
                                                         (uint64_t)tf->data_st.st_size,
                                                         &h) == CBFS_OK
                                         ? h.level
                                         : TOOL_LEVEL_UNREAD;
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
        char lv[16] = "?"; /* no header of the codec's frames could be read */
        if (r->level[c] != TOOL_LEVEL_UNREAD) snprintf(lv, sizeof lv, "%d", r->level[c]);
        const int w = snprintf(buf + n, cap - n, "%s%s:%s", n ? "," : "", name, lv);
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

/* The stock-decode verdict of a cbfs file: "yes (zstd -d)", "no: why", or
 * "unknown: why" when it could not be decided (known false). */
struct tool_stat_stock {
    bool known;
    struct cbfs_stock v;
    char unknown[128]; /* !known: the error */
};

static void tool_stat_print_stock(const struct tool_stat_ctx *c, const struct tool_stat_stock *s)
{
    if (c->json) {
        printf(",\"stock_decode\":%s,\"stock_decode_why\":",
               !s->known ? "null" : s->v.yes ? "true" : "false");
        tool_json_str(stdout, !s->known ? s->unknown : s->v.yes ? s->v.tool : s->v.why);
    } else if (!s->known) {
        printf("  stock decode: unknown: %s\n", s->unknown);
    } else if (s->v.yes) {
        printf("  stock decode: yes (%s)\n", s->v.tool);
    } else {
        printf("  stock decode: no: %s\n", s->v.why);
    }
}

/* stock: the file's verdict, or NULL (not a cbfs file with an index; totals). */
static void tool_stat_print(const struct tool_stat_ctx *c, const char *path, const char *kind,
                            const struct tool_stat_row *r, const struct tool_stat_stock *stock)
{
    char codecs[128], lg[32], ph[32], gb[32];
    tool_stat_codecs(r, strcmp(kind, "plain") == 0, codecs, sizeof codecs);
    const uint64_t phys = r->data_bytes + r->index_bytes;
    if (c->json) {
        printf("%s{\"path\":", c->nfiles > 1 && path ? ",\n  " : "");
        tool_json_path(stdout, path ? path : "");
        printf(",\"kind\":\"%s\",\"logical\":%" PRIu64 ",\"physical\":%" PRIu64
               ",\"data_bytes\":%" PRIu64 ",\"index_bytes\":%" PRIu64 ",\"ratio\":%.4f,"
               "\"codecs\":\"%s\",\"block_size\":%" PRIu32 ",\"blocks\":{\"total\":%" PRIu64
               ",\"compressed\":%" PRIu64 ",\"raw\":%" PRIu64 ",\"hole\":%" PRIu64
               "},\"garbage\":{\"frames\":%" PRIu64 ",\"bytes\":%" PRIu64 "}",
               kind, r->logical, phys, r->data_bytes, r->index_bytes, tool_stat_ratio(r), codecs,
               r->block_size, r->blocks, r->compressed, r->raw, r->hole, r->dead_frames,
               r->dead_bytes);
        if (stock) tool_stat_print_stock(c, stock);
        putchar('}');
        return;
    }
    char bs[32] = "-";
    if (r->block_size) cbfs_format_size(r->block_size, bs, sizeof bs);
    printf("%10s %10s %6.2f  %-14s %6s %8" PRIu64 " %8" PRIu64 " %6" PRIu64 " %6" PRIu64
           " %10s  %s\n",
           tool_fmt_bytes(r->logical, lg, sizeof lg), tool_fmt_bytes(phys, ph, sizeof ph),
           tool_stat_ratio(r), codecs, bs, r->blocks, r->compressed, r->raw, r->hole,
           tool_fmt_bytes(r->dead_bytes, gb, sizeof gb), path ? path : "TOTAL");
    if (stock) tool_stat_print_stock(c, stock);
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
    for (unsigned k = 0; k < TOOL_MIX_N; k++) t->mix[k] += r->mix[k];
    for (unsigned c = 0; c <= CBFS_CODEC_MAX_ID; c++)
        if ((r->codec_mask & (1u << c)) &&
            (!(t->codec_mask & (1u << c)) || t->level[c] == TOOL_LEVEL_UNREAD))
            t->level[c] = r->level[c];
    t->codec_mask |= r->codec_mask;
    if (first)
        t->block_size = r->block_size;
    else if (t->block_size != r->block_size)
        t->block_size = 0;
}

/* Keeps a copy of a file's row for --plot (a damaged file has nothing to show). */
static void tool_stat_keep(struct tool_stat_ctx *c, const char *display,
                           const struct tool_stat_row *r)
{
    if (r->logical == 0 && r->data_bytes == 0) return;
    if (c->nitems == c->cap) {
        const size_t cap = c->cap ? 2 * c->cap : 64;
        struct tool_stat_item *const v = realloc(c->items, cap * sizeof *v);
        if (!v) goto nomem;
        c->items = v, c->cap = cap;
    }
    char *const path = strdup(display);
    if (!path) goto nomem;
    c->items[c->nitems++] = (struct tool_stat_item){.path = path, .r = *r};
    return;
nomem:
    tool_err("stat", "%s: %s; left out of the plot", display, cbfs_err_str(CBFS_E_NOMEM));
    c->errors++;
}

static int tool_stat_one(void *arg, const struct tool_store *store, int dirfd, const char *name,
                         const char *display, enum tool_ent_kind kind)
{
    struct tool_stat_ctx *const c = arg;
    if (kind != TOOL_ENT_FILE) return 0;
    struct tool_file tf;
    if (!tool_file_open_walked(store, dirfd, name, TOOL_LOAD_FAST, display, "stat", &c->errors, &tf)) return 0;
    struct tool_stat_row r;
    memset(&r, 0, sizeof r);
    r.data_bytes = (uint64_t)tf.data_st.st_size;
    r.index_bytes = tool_file_physical(&tf) - r.data_bytes;
    const char *what = "plain";
    struct tool_stat_stock stock = {.known = false};
    bool has_stock = false;
    if (!tf.is_cbfs && tf.envelope_damaged) { /* its bytes are most likely raw frames */
        tool_err("stat", "%s: %s", display, tool_envelope_damaged_msg);
        c->bad++;
        what = "damaged";
    } else if (!tf.is_cbfs) {
        r.logical = r.data_bytes;
        r.mix[TOOL_MIX_PLAIN] = r.logical;
    } else if (tf.load_err) {
        tool_err("stat", "%s: cannot load the index: %s (try cbfs verify)", display,
                 cbfs_err_str(tf.load_err));
        c->bad++;
        what = "damaged";
    } else {
        tool_stat_scan(&tf, &r);
        what = "cbfs";
        has_stock = true;
        const cbfs_err e = cbfs_stock_check(tf.data_fd, &tf.idx, &stock.v);
        stock.known = e == CBFS_OK;
        if (e) {
            snprintf(stock.unknown, sizeof stock.unknown, "%s", cbfs_err_str(e));
            /* A codec missing from this build is a limit of the tool, not a failure. */
            if (e != CBFS_E_CODEC_MISSING) {
                tool_err("stat", "%s: cannot tell whether stock tools decode it: %s", display,
                         cbfs_err_str(e));
                c->errors++;
            }
        }
    }
    c->cbfs_files += tf.is_cbfs;
    tool_stat_add(&c->total, &r, c->nfiles == 0);
    c->nfiles++;
    tool_stat_print(c, display, what, &r, has_stock ? &stock : NULL);
    tool_file_close(&tf);
    if (c->plot) tool_stat_keep(c, display, &r);
    return 0;
}

/* ---- --plot ---- */

#define TOOL_PLOT_ROWS 24  /* bars per chart; more files are shown per directory */
#define TOOL_PLOT_LABEL 32 /* characters of a path shown under its bar */

/* Length of the directory part ("a/b/") of p. */
static size_t tool_plot_dirlen(const char *p)
{
    const char *const slash = strrchr(p, '/');
    return slash ? (size_t)(slash - p) + 1 : 0;
}

static int tool_plot_by_dir(const void *a, const void *b)
{
    const char *const x = ((const struct tool_stat_item *)a)->path;
    const char *const y = ((const struct tool_stat_item *)b)->path;
    const size_t nx = tool_plot_dirlen(x), ny = tool_plot_dirlen(y);
    const int d = strncmp(x, y, nx < ny ? nx : ny);
    return d ? d : (nx > ny) - (nx < ny);
}

static int tool_plot_by_size(const void *a, const void *b)
{
    const uint64_t x = ((const struct tool_stat_item *)a)->r.logical;
    const uint64_t y = ((const struct tool_stat_item *)b)->r.logical;
    return (x < y) - (x > y);
}

/* Turns c->items into at most TOOL_PLOT_ROWS bars: the files themselves, or
 * one bar per directory holding files, the smallest directories merged into
 * one "(N more directories)" bar. Paths lose the directory all of them share,
 * which goes to where. */
static void tool_plot_group(struct tool_stat_ctx *c, char *where, size_t where_cap)
{
    const char *const first = c->items[0].path;
    size_t pre = strlen(first);
    for (size_t i = 1; i < c->nitems; i++) {
        size_t k = 0;
        while (k < pre && c->items[i].path[k] == first[k]) k++;
        pre = k;
    }
    while (pre && first[pre - 1] != '/') pre--; /* a whole directory */
    snprintf(where, where_cap, "%.*s", (int)(pre ? pre : 1), pre ? first : ".");
    for (size_t i = 0; i < c->nitems; i++)
        memmove(c->items[i].path, c->items[i].path + pre, strlen(c->items[i].path + pre) + 1);
    if (c->nitems <= TOOL_PLOT_ROWS) return;
    qsort(c->items, c->nitems, sizeof *c->items, tool_plot_by_dir);
    size_t n = 0;
    for (size_t i = 0; i < c->nitems; i++) {
        struct tool_stat_item *const it = &c->items[i];
        it->path[tool_plot_dirlen(it->path)] = '\0'; /* "a/b/", or "" at the top */
        if (!it->path[0]) strcpy(it->path, "./");     /* room: a file name was there */
        if (n && strcmp(c->items[n - 1].path, it->path) == 0) {
            tool_stat_add(&c->items[n - 1].r, &it->r, false);
            free(it->path);
        } else {
            c->items[n++] = *it;
        }
    }
    c->nitems = n;
    if (n <= TOOL_PLOT_ROWS) return;
    qsort(c->items, n, sizeof *c->items, tool_plot_by_size);
    struct tool_stat_item *const rest = &c->items[TOOL_PLOT_ROWS - 1];
    for (size_t i = TOOL_PLOT_ROWS; i < n; i++) {
        tool_stat_add(&rest->r, &c->items[i].r, false);
        free(c->items[i].path);
    }
    c->nitems = TOOL_PLOT_ROWS;
    char label[48];
    snprintf(label, sizeof label, "(%zu more directories)", n - TOOL_PLOT_ROWS + 1);
    char *const dup = strdup(label);
    if (dup) free(rest->path), rest->path = dup; /* else the bar keeps its first name */
}

static const char *tool_plot_mix_name(unsigned k, char *buf, size_t cap)
{
    if (k == TOOL_MIX_RAW) return "raw (did not compress)";
    if (k == TOOL_MIX_HOLE) return "holes (zeros)";
    if (k == TOOL_MIX_PLAIN) return "plain files";
    const struct cbfs_codec_ops *const ops = cbfs_codec_by_id(k);
    if (ops)
        snprintf(buf, cap, "%s", ops->name);
    else
        snprintf(buf, cap, "codec %u", k);
    return buf;
}

/* A bar's label as gnuplot data: quoted strings there take no escapes, so a
 * double quote becomes a single one; a long path keeps its end. */
static void tool_plot_label(FILE *g, const struct tool_stat_item *it)
{
    const size_t n = strlen(it->path);
    const char *p = it->path;
    fputc('"', g);
    if (n > TOOL_PLOT_LABEL) {
        fputs("...", g);
        p += n - (TOOL_PLOT_LABEL - 3);
    }
    for (; *p; p++) fputc(*p == '"' ? '\'' : (unsigned char)*p < 0x20 ? '?' : *p, g);
    fprintf(g, " (%.1fx)\"", tool_stat_ratio(&it->r));
}

/* Top: logical and physical size per bar; bottom: the codec mix, as shares of
 * each bar's logical bytes. @return false after a message. */
static bool tool_stat_plot(struct tool_stat_ctx *c)
{
    static const char *const units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    static const char *const colors[TOOL_MIX_N] = {"#999933", "#66ccee", "#4477aa", "#228833",
                                                   "#ccbb44", "#ee6677", "#bbbbbb", "#aa3377"};
    if (c->nitems == 0) {
        tool_err("stat", "--plot: no file to show; nothing written to %s", c->plot);
        return false;
    }
    char where[512], title[768], lg[32], ph[32], name[24];
    tool_plot_group(c, where, sizeof where);
    uint64_t max = 0;
    unsigned used = 0; /* mix kinds present */
    for (size_t i = 0; i < c->nitems; i++) {
        const struct tool_stat_row *const r = &c->items[i].r;
        const uint64_t phys = r->data_bytes + r->index_bytes;
        if (r->logical > max) max = r->logical;
        if (phys > max) max = phys;
        for (unsigned k = 0; k < TOOL_MIX_N; k++) used |= r->mix[k] ? 1u << k : 0;
    }
    size_t longest = 0; /* label characters, for the room below the bars */
    for (size_t i = 0; i < c->nitems; i++) {
        const size_t n = strlen(c->items[i].path);
        if (n > longest) longest = n;
    }
    longest = (longest > TOOL_PLOT_LABEL ? TOOL_PLOT_LABEL : longest) + 7;
    double div = 1;
    unsigned u = 0;
    while ((double)max / div >= 1024 && u + 1 < sizeof units / sizeof units[0]) div *= 1024, u++;
    const int width = c->nitems > 12 ? 900 + 50 * (int)(c->nitems - 12) : 900;
    FILE *const g = tool_gnuplot_open("stat", c->plot, width, 1000);
    if (!g) return false;
    fputs("$d << EOD\n", g);
    for (size_t i = 0; i < c->nitems; i++) {
        const struct tool_stat_row *const r = &c->items[i].r;
        tool_plot_label(g, &c->items[i]);
        fprintf(g, " %.3f %.3f", (double)r->logical / div,
                (double)(r->data_bytes + r->index_bytes) / div);
        for (unsigned k = 0; k < TOOL_MIX_N; k++)
            if (used & (1u << k))
                fprintf(g, " %.2f",
                        r->logical ? 100.0 * (double)r->mix[k] / (double)r->logical : 0);
        fputc('\n', g);
    }
    snprintf(title, sizeof title, "cbfs stat %s: %u files, %s stored in %s (ratio %.2f)", where,
             c->nfiles, tool_fmt_bytes(c->total.logical, lg, sizeof lg),
             tool_fmt_bytes(c->total.data_bytes + c->total.index_bytes, ph, sizeof ph),
             tool_stat_ratio(&c->total));
    fputs("EOD\nset multiplot title ", g);
    tool_gnuplot_str(g, title);
    /* the same margins in both panels keep each bar under its pair */
    fprintf(g, "\nset style data histograms\nset style fill solid 0.9 border -1\n"
               "set boxwidth 0.85 relative\nset grid ytics\nset key outside top center horizontal\n"
               "set lmargin 12\nset rmargin 4\nset origin 0,0.5\nset size 1,0.45\n"
               "set title 'logical vs physical size'\nset style histogram clustered gap 1\n"
               "set ylabel '%s'\nset yrange [0:*]\nset offsets 0,0,graph 0.08,0\nunset xtics\n"
               "plot $d using 2 title 'logical' lc rgb '#332288', "
               "'' using 3 title 'physical (data file + index)' lc rgb '#ee7733'\n"
               "set origin 0,0\nset size 1,0.5\nset offsets 0,0,0,0\n"
               "set title 'codec mix: how the logical bytes are stored'\n"
               "set style histogram rowstacked\nset yrange [0:100]\n"
               "set ylabel '%% of logical bytes'\n"
               "set xtics rotate by 40 right nomirror\nset bmargin %d\nplot ",
            units[u], 2 + (int)(longest * 2 / 5));
    int col = 4;
    for (unsigned k = 0; k < TOOL_MIX_N; k++) {
        if (!(used & (1u << k))) continue;
        fprintf(g, "%s$d using %d%s title ", col > 4 ? ", " : "", col, col == 4 ? ":xtic(1)" : "");
        tool_gnuplot_str(g, tool_plot_mix_name(k, name, sizeof name));
        fprintf(g, " lc rgb '%s'", colors[k]);
        col++;
    }
    fputs("\nunset multiplot\n", g);
    return tool_gnuplot_close("stat", g, c->plot);
}

int tool_stat_main(int argc, char **argv)
{
    static const struct option opts[] = {{"json", no_argument, NULL, 'j'},
                                         {"plot", required_argument, NULL, 'p'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    struct tool_stat_ctx c;
    memset(&c, 0, sizeof c);
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'j')
            c.json = true;
        else if (ch == 'p')
            c.plot = optarg;
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
        tool_stat_print(&c, "", "total", &c.total, NULL);
        printf(",\n\"files_count\":%u}\n", n);
    } else if (c.nfiles > 1) {
        tool_stat_print(&c, NULL, "total", &c.total, NULL);
    }
    if (c.plot && !tool_stat_plot(&c)) c.errors++;
    for (size_t i = 0; i < c.nitems; i++) free(c.items[i].path);
    free(c.items);
    if (c.errors) return TOOL_EXIT_USAGE;
    return c.bad ? TOOL_EXIT_PROBLEMS : TOOL_EXIT_OK;
}

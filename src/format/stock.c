/* The stock-decode rule (docs/FORMAT.md, section 4): whether `zstd -d` or
 * `lz4 -d` of a data file reproduces the file's logical content exactly. It
 * models what those tools do, stepping over every skippable frame (each
 * header, SIZE frames) and concatenating every payload in file order, and
 * compares that with what cbfs reads, frame by frame. */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "cbfs/format.h"

struct cbfs_stock_walk {
    const struct cbfs_index *idx;
    struct cbfs_stock *v;
    const struct cbfs_codec_ops *codec; /* of the first block frame; NULL before it */
    uint64_t next;                      /* the block the stock output needs next */
    uint32_t last_ulen;                 /* bytes of block next - 1 */
};

/* Records the first reason for "no" and ends the walk. */
static void cbfs_stock_no(struct cbfs_stock_walk *w, bool *stop, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static void cbfs_stock_no(struct cbfs_stock_walk *w, bool *stop, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(w->v->why, sizeof w->v->why, fmt, ap);
    va_end(ap);
    w->v->yes = false;
    *stop = true;
}

/* Checks the block frame h at off against the stock output so far. */
static cbfs_err cbfs_stock_frame(void *arg, uint64_t off, const struct cbfs_frame_hdr *h,
                                 bool *stop)
{
    struct cbfs_stock_walk *const w = arg;
    const struct cbfs_index *const idx = w->idx;
    if (h->flags & CBFS_FRAME_SIZE) return CBFS_OK; /* a skippable frame, nothing more */
    if (h->file_id != idx->file_id) {
        cbfs_stock_no(w, stop, "a frame of another file at offset %" PRIu64, off);
        return CBFS_OK;
    }
    const struct cbfs_codec_ops *const codec = cbfs_codec_by_id(h->codec);
    if (!codec) return CBFS_E_CODEC_MISSING;
    /* Not a stock stream: xz and bzip2 tools do not skip the header, and
     * codec none is the bytes themselves. */
    if (!codec->stock_stream) {
        cbfs_stock_no(w, stop, "codec %s", codec->name);
        return CBFS_OK;
    }
    if (w->codec && codec != w->codec) {
        cbfs_stock_no(w, stop, "several codecs (%s, then %s from block %" PRIu64 ")",
                      w->codec->name, codec->name, h->block);
        return CBFS_OK;
    }
    w->codec = codec;
    if (h->flags & CBFS_FRAME_RAW) {
        cbfs_stock_no(w, stop, "block %" PRIu64 " stored verbatim (a RAW frame)", h->block);
        return CBFS_OK;
    }
    /* A hole cbfs reads as ulen zeros, a stock tool as its payload: nothing. */
    if ((h->flags & CBFS_FRAME_HOLE) && h->plen == 0 && h->ulen > 0) {
        cbfs_stock_no(w, stop, "block %" PRIu64 " is a hole frame without payload", h->block);
        return CBFS_OK;
    }
    /* Every frame is output, so each must be its block's live one. The last
     * frame of a block in file order wins, so a dead frame whose block is
     * still live was rewritten later; one whose block is gone was cut off. */
    const struct cbfs_index_entry *const e = cbfs_index_get(idx, h->block);
    if (!e || e->offset != off) {
        if (e)
            cbfs_stock_no(w, stop, "block %" PRIu64 " stored twice (a rewrite)", h->block);
        else
            cbfs_stock_no(w, stop, "block %" PRIu64 " cut off by a truncate (a SIZE frame)",
                          h->block);
        return CBFS_OK;
    }
    if (w->next > 0 && w->last_ulen != idx->block_size) {
        cbfs_stock_no(w, stop, "block %" PRIu64 " holds %" PRIu32 " of %" PRIu32
                      " bytes (cbfs reads the rest as zeros)",
                      w->next - 1, w->last_ulen, idx->block_size);
        return CBFS_OK;
    }
    /* A live block comes once, so one past next is out of order or a gap. */
    if (h->block != w->next) {
        if (cbfs_index_get(idx, w->next))
            cbfs_stock_no(w, stop, "block %" PRIu64 " stored after block %" PRIu64, w->next,
                          h->block);
        else
            cbfs_stock_no(w, stop, "block %" PRIu64 " never written", w->next);
        return CBFS_OK;
    }
    w->next = h->block + 1;
    w->last_ulen = h->ulen;
    return CBFS_OK;
}

/* After a walk that met no reason: the stock output ends where the logical
 * size does? */
static void cbfs_stock_size(struct cbfs_stock_walk *w)
{
    const struct cbfs_index *const idx = w->idx;
    const uint64_t bs = idx->block_size;
    const uint64_t out = w->next ? (w->next - 1) * bs + w->last_ulen : 0;
    bool stop;
    if (out > idx->size)
        cbfs_stock_no(w, &stop,
                      "the size (%" PRIu64 ") ends inside block %" PRIu64 " (a SIZE frame cut it)",
                      idx->size, w->next - 1);
    else if (out < idx->size && idx->size > w->next * bs)
        cbfs_stock_no(w, &stop, "block %" PRIu64 " never written", w->next);
    else if (out < idx->size)
        cbfs_stock_no(w, &stop,
                      "the size (%" PRIu64 ") is past the data of block %" PRIu64
                      " (a SIZE frame extended it)",
                      idx->size, w->next - 1);
}

/* A live frame: where the index says it is. */
struct cbfs_stock_live {
    uint64_t offset, block;
};

static int cbfs_stock_live_cmp(const void *a, const void *b)
{
    const struct cbfs_stock_live *x = a, *y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

/* Walks the frames in [at, to) from their headers (the frames the index does
 * not reference: superseded, cut off, SIZE) and checks they end exactly at
 * to. @return an I/O error or CBFS_E_VERSION; the verdict goes to w->v. */
static cbfs_err cbfs_stock_between(int data_fd, struct cbfs_stock_walk *w, uint64_t at,
                                   uint64_t to)
{
    uint64_t end = at;
    const cbfs_err e = cbfs_frame_walk(data_fd, to, at, cbfs_stock_frame, w, &end);
    if (e || !w->v->yes || end == to) return e;
    /* zstd -d fails there; lz4 -d stops there and exits 0. */
    bool stop;
    cbfs_stock_no(w, &stop, "%" PRIu64 " bytes at offset %" PRIu64 " are not a frame", to - end,
                  end);
    return CBFS_OK;
}

cbfs_err cbfs_stock_check(int data_fd, const struct cbfs_index *idx, struct cbfs_stock *v)
{
    struct stat st;
    memset(v, 0, sizeof *v);
    if (fstat(data_fd, &st) != 0) return cbfs_err_from_errno(errno);
    const uint64_t dsize = (uint64_t)st.st_size;
    v->yes = true;
    if (dsize == 0) {
        /* whatever the file's codec (no frame tells it): lz4 -d outputs
         * nothing, but zstd -d calls an empty input an error */
        v->yes = false;
        snprintf(v->why, sizeof v->why,
                 "the data file is empty: nothing to decode (zstd -d calls an empty input an "
                 "error, lz4 -d prints nothing)");
        return CBFS_OK;
    }
    /* The frames in file order: the live ones come from the index, in the
     * order of their offsets; only the stretches between them (frames the
     * index no longer references) are read from the data file. A file
     * written in one pass has none, so it is checked without reading it:
     * reading every header would read a whole data file of 100 KB frames
     * through the kernel's read-ahead. */
    /* one per live frame, not per block: a sparse file's table reaches far
     * past its frames (cbfs_index_reserve) */
    const uint64_t nlive = idx->live_frames;
    if (nlive > SIZE_MAX / sizeof(struct cbfs_stock_live)) return CBFS_E_NOMEM;
    struct cbfs_stock_live *live = malloc((nlive ? (size_t)nlive : 1) * sizeof *live);
    if (!live) return CBFS_E_NOMEM;
    size_t n = 0;
    for (uint64_t b = 0; b < idx->nblocks; b++)
        if (cbfs_index_get(idx, b)) {
            if (n == nlive) { /* the counters disagree with the table: a bug */
                free(live);
                return CBFS_E_INVAL;
            }
            live[n++] = (struct cbfs_stock_live){idx->v[b].offset, b};
        }
    qsort(live, n, sizeof *live, cbfs_stock_live_cmp);
    struct cbfs_stock_walk w = {.idx = idx, .v = v};
    cbfs_err err = CBFS_OK;
    uint64_t at = 0;
    for (size_t i = 0; i < n && v->yes; i++) {
        const struct cbfs_index_entry *const e = &idx->v[live[i].block];
        if (e->offset < at || e->offset + CBFS_FRAME_HDR_SIZE + e->plen > dsize) {
            err = CBFS_E_CORRUPT; /* the index does not describe this data file */
            break;
        }
        if (e->offset > at && ((err = cbfs_stock_between(data_fd, &w, at, e->offset)) || !v->yes))
            break;
        const struct cbfs_frame_hdr h = {.version = 1, .codec = e->codec, .flags = e->flags,
                                         .block = live[i].block, .generation = e->generation,
                                         .ulen = e->ulen, .plen = e->plen, .hash = e->hash,
                                         .file_id = idx->file_id};
        bool stop = false;
        if ((err = cbfs_stock_frame(&w, e->offset, &h, &stop))) break;
        at = e->offset + CBFS_FRAME_HDR_SIZE + e->plen;
    }
    free(live);
    if (err || !v->yes) return err;
    if (at < dsize && ((err = cbfs_stock_between(data_fd, &w, at, dsize)) || !v->yes)) return err;
    cbfs_stock_size(&w);
    if (!v->yes) return CBFS_OK;
    if (w.codec)
        snprintf(v->tool, sizeof v->tool, "%s -d", w.codec->name);
    else
        snprintf(v->tool, sizeof v->tool, "zstd -d or lz4 -d"); /* both output nothing */
    return CBFS_OK;
}

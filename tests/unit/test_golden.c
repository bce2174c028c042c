/* Golden files of format version 1 (tests/golden/): a small data file, its
 * sidecar and the logical bytes they must decode to, forever. Fixed inputs
 * make the header, records and RAW/HOLE/none/SIZE frames byte-exact; the
 * compressed payloads are only required to decode. CBFS_REGEN_GOLDEN=1 makes
 * golden/generate_or_compare rewrite the files (see docs/FORMAT.md). */
#include <criterion/criterion.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/codec.h"
#include "cbfs/format.h"
#include "cbfs/util.h"
#include "testdata.h"

#define G_DIR CBFS_SOURCE_DIR "/tests/golden/"
#define G_DATA G_DIR "v1.data"
#define G_IDX G_DIR "v1.data" CBFS_INDEX_SUFFIX
#define G_EXPECTED G_DIR "v1.expected"
#define G_FILE_ID 0x0123456789ABCDEFull
#define G_CREATED 1700000000000000000ull /* 2023-11-14T22:13:20Z */
#define G_BS 4096u
#define G_SIZE 40000u

enum g_kind { G_ROWS, G_ZEROS, G_RANDOM, G_SIZEREC };

/* One frame of the golden file; generation = position + 1. `exact`: the whole
 * frame (header and payload) is independent of codec library versions. */
static const struct g_frame {
    enum g_kind kind;
    uint8_t codec;
    int level;
    uint64_t block; /* new size for G_SIZEREC */
    uint64_t seed;
    uint32_t len;
    bool exact;
} g_frames[] = {
    {G_ROWS, CBFS_CODEC_LZ4, 1, 0, 11, G_BS, false},
    {G_ZEROS, CBFS_CODEC_ZSTD, 3, 1, 0, G_BS, false},  /* HOLE + native zstd of zeros */
    {G_RANDOM, CBFS_CODEC_XZ, 6, 2, 12, G_BS, true},   /* RAW */
    {G_ROWS, CBFS_CODEC_ZSTD, 3, 3, 13, G_BS, false},
    {G_ROWS, CBFS_CODEC_XZ, 6, 4, 14, G_BS, false},
    {G_ROWS, CBFS_CODEC_BZIP2, 9, 5, 15, G_BS, false},
    {G_ZEROS, CBFS_CODEC_BZIP2, 9, 6, 0, G_BS, true},  /* HOLE without payload */
    {G_RANDOM, CBFS_CODEC_NONE, 0, 7, 16, G_BS, true}, /* codec none: verbatim */
    {G_ROWS, CBFS_CODEC_ZSTD, 3, 0, 17, G_BS, false},  /* overwrites block 0 */
    {G_ROWS, CBFS_CODEC_LZ4, 1, 8, 18, 1000, false},   /* short last block */
    {G_SIZEREC, 0, 0, G_SIZE, 0, 0, true},             /* extends to 40000 */
};
#define G_NFRAMES (sizeof g_frames / sizeof g_frames[0])

static const struct cbfs_index_rec g_header = {
    .type = CBFS_REC_HEADER,
    .version = 1,
    .block_size = G_BS,
    .file_id = G_FILE_ID,
    .created_ns = G_CREATED,
};

static uint8_t *read_file(const char *path, size_t *len)
{
    const int fd = open(path, O_RDONLY);
    cr_assert(fd >= 0, "cannot open %s (regenerate with CBFS_REGEN_GOLDEN=1?)", path);
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    *len = (size_t)st.st_size;
    uint8_t *p = malloc(*len + 1);
    cr_assert_not_null(p);
    cr_assert_eq(cbfs_pread_full(fd, p, *len, 0), CBFS_OK);
    close(fd);
    return p;
}

static void write_file(const char *path, const void *p, size_t len)
{
    const int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "cannot create %s", path);
    cr_assert_eq(cbfs_pwrite_full(fd, p, len, 0), CBFS_OK);
    cr_assert_eq(close(fd), 0);
}

/* The input bytes of golden frame i (regeneration only: uses testdata.h). */
static void g_input(const struct g_frame *g, uint8_t *buf)
{
    if (g->kind == G_ROWS) cbfs_td_rows(buf, g->len, g->seed);
    else if (g->kind == G_RANDOM) cbfs_td_random(buf, g->len, g->seed);
    else memset(buf, 0, g->len);
}

/* Encodes golden frame i from its input bytes into out. */
static size_t g_encode(size_t i, const uint8_t *input, uint8_t *out, size_t cap,
                       struct cbfs_frame_hdr *h)
{
    const struct g_frame *g = &g_frames[i];
    if (g->kind == G_SIZEREC) {
        cbfs_frame_size_encode(G_FILE_ID, i + 1, g->block, out, h);
        return CBFS_FRAME_HDR_SIZE;
    }
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(g->codec);
    cr_assert_not_null(c, "codec %u not built", g->codec);
    size_t n;
    const cbfs_err e = cbfs_frame_encode(c, g->level, G_FILE_ID, g->block, i + 1, input, g->len,
                                         out, cap, &n, h);
    cr_assert_eq(e, CBFS_OK, "frame %zu: %s", i, cbfs_err_str(e));
    return n;
}

static void regenerate(void)
{
    size_t dlen = 0, icap = (G_NFRAMES + 1) * CBFS_INDEX_REC_SIZE;
    uint8_t *data = malloc(G_NFRAMES * (CBFS_FRAME_HDR_SIZE + 2 * G_BS)), *idx = malloc(icap);
    uint8_t *expected = calloc(1, 16 * G_BS);
    cr_assert(data && idx && expected);
    cbfs_index_rec_encode(&g_header, idx);
    uint64_t size = 0;
    for (size_t i = 0; i < G_NFRAMES; i++) {
        const struct g_frame *g = &g_frames[i];
        uint8_t input[G_BS];
        struct cbfs_frame_hdr h;
        g_input(g, input);
        const size_t n = g_encode(i, input, data + dlen, CBFS_FRAME_HDR_SIZE + 2 * G_BS, &h);
        struct cbfs_index_rec r;
        cbfs_index_rec_from_frame(&h, dlen, &r);
        cbfs_index_rec_encode(&r, idx + (i + 1) * CBFS_INDEX_REC_SIZE);
        dlen += n;
        if (g->kind == G_SIZEREC) {
            size = g->block;
        } else {
            memcpy(expected + g->block * G_BS, input, g->len);
            if (g->block * G_BS + g->len > size) size = g->block * G_BS + g->len;
        }
    }
    cr_assert_eq(size, G_SIZE);
    write_file(G_DATA, data, dlen);
    write_file(G_IDX, idx, icap);
    write_file(G_EXPECTED, expected, G_SIZE);
    free(data);
    free(idx);
    free(expected);
}

/* Checks the golden files against the fixed inputs: exact bytes where the
 * encoding cannot depend on a library version, decoding everywhere else.
 * Inputs of live blocks come from v1.expected, so this does not depend on
 * testdata.h staying the same. */
Test(golden, generate_or_compare)
{
    const char *regen = getenv("CBFS_REGEN_GOLDEN");
    if (regen && strcmp(regen, "1") == 0) regenerate();

    size_t dlen, ilen, elen;
    uint8_t *data = read_file(G_DATA, &dlen), *idx = read_file(G_IDX, &ilen);
    uint8_t *expected = read_file(G_EXPECTED, &elen);
    cr_assert_eq(elen, G_SIZE);
    cr_assert_eq(ilen, (G_NFRAMES + 1) * CBFS_INDEX_REC_SIZE);

    uint8_t hdr[CBFS_INDEX_REC_SIZE];
    cbfs_index_rec_encode(&g_header, hdr);
    cr_assert_eq(memcmp(hdr, idx, sizeof hdr), 0, "sidecar header record encoding changed");

    uint64_t off = 0;
    for (size_t i = 0; i < G_NFRAMES; i++) {
        const struct g_frame *g = &g_frames[i];
        struct cbfs_index_rec r;
        cr_assert_eq(cbfs_index_rec_decode(idx + (i + 1) * CBFS_INDEX_REC_SIZE, &r), CBFS_OK);
        cr_assert_eq(r.offset, off, "frame %zu", i);
        cr_assert_leq(off + CBFS_FRAME_HDR_SIZE, dlen);
        struct cbfs_frame_hdr h;
        cr_assert_eq(cbfs_frame_hdr_decode(data + off, &h), CBFS_OK, "frame %zu", i);
        cr_assert_eq(h.generation, i + 1);
        cr_assert_eq(h.block, g->block);
        cr_assert_eq(h.file_id, G_FILE_ID);
        cr_assert_eq(h.ulen, g->len);
        const uint8_t want_flags = g->kind == G_SIZEREC ? CBFS_FRAME_SIZE
                                   : g->kind == G_ZEROS ? CBFS_FRAME_HOLE
                                   : g->kind == G_RANDOM && g->codec == CBFS_CODEC_XZ
                                       ? CBFS_FRAME_RAW
                                       : 0;
        cr_assert_eq(h.flags, want_flags, "frame %zu flags", i);
        cr_assert_eq(h.codec, g->codec);
        cr_assert_leq(off + CBFS_FRAME_HDR_SIZE + h.plen, dlen);

        /* Is this frame's block still live (not overwritten later)? */
        bool live = g->kind != G_SIZEREC;
        for (size_t j = i + 1; j < G_NFRAMES; j++)
            if (g_frames[j].kind != G_SIZEREC && g_frames[j].block == g->block) live = false;

        if (g->exact && (g->kind == G_SIZEREC || cbfs_codec_by_id(g->codec))) {
            uint8_t out[CBFS_FRAME_HDR_SIZE + 2 * G_BS];
            struct cbfs_frame_hdr eh;
            cr_assert(live || g->kind == G_SIZEREC);
            const size_t n = g_encode(i, expected + g->block * G_BS, out, sizeof out, &eh);
            cr_assert_eq(n, CBFS_FRAME_HDR_SIZE + h.plen, "frame %zu length", i);
            cr_assert_eq(memcmp(out, data + off, n), 0, "frame %zu encoding changed", i);
        }
        if (g->kind != G_SIZEREC) {
            uint8_t out[G_BS];
            const cbfs_err e = cbfs_frame_decode(&h, data + off + CBFS_FRAME_HDR_SIZE, out);
            if (e == CBFS_E_CODEC_MISSING) {
                cr_log_warn("golden frame %zu: codec %u not built, decode not checked", i,
                            g->codec);
            } else {
                cr_assert_eq(e, CBFS_OK, "frame %zu: %s", i, cbfs_err_str(e));
                if (live)
                    cr_assert_eq(memcmp(out, expected + g->block * G_BS, g->len), 0,
                                 "frame %zu decodes to other bytes", i);
            }
        }
        off += CBFS_FRAME_HDR_SIZE + h.plen;
    }
    cr_assert_eq(off, dlen);
    free(data);
    free(idx);
    free(expected);
}

/* Every record equals the encoding of the frame it indexes, and every frame
 * header re-encodes to its own bytes: the field layout cannot drift. */
Test(golden, records_and_headers_exact)
{
    size_t dlen, ilen;
    uint8_t *data = read_file(G_DATA, &dlen), *idx = read_file(G_IDX, &ilen);
    for (size_t off = CBFS_INDEX_REC_SIZE; off + CBFS_INDEX_REC_SIZE <= ilen;
         off += CBFS_INDEX_REC_SIZE) {
        struct cbfs_index_rec r, fr;
        cr_assert_eq(cbfs_index_rec_decode(idx + off, &r), CBFS_OK);
        struct cbfs_frame_hdr h;
        cr_assert_eq(cbfs_frame_hdr_decode(data + r.offset, &h), CBFS_OK);
        uint8_t buf[64];
        cbfs_frame_hdr_encode(&h, buf);
        cr_assert_eq(memcmp(buf, data + r.offset, 64), 0, "frame header at %llu",
                     (unsigned long long)r.offset);
        cbfs_index_rec_from_frame(&h, r.offset, &fr);
        cbfs_index_rec_encode(&fr, buf);
        cr_assert_eq(memcmp(buf, idx + off, 64), 0, "record at %zu", off);
    }
    free(data);
    free(idx);
}

static void g_check_table_and_reads(int dfd, const struct cbfs_index *x, const uint8_t *expected)
{
    cr_assert_eq(x->block_size, G_BS);
    cr_assert_eq(x->file_id, G_FILE_ID);
    cr_assert_eq(x->size, G_SIZE);
    cr_assert_eq(x->nblocks, 9);
    cr_assert_eq(x->next_gen, G_NFRAMES + 1);
    cr_assert_eq(x->live_frames, 9);
    cr_assert_eq(x->dead_frames, 2); /* old block 0 and the SIZE frame */
    uint8_t scratch[CBFS_FRAME_HDR_SIZE + 2 * G_BS], out[G_BS];
    for (uint64_t b = 0; b * G_BS < G_SIZE; b++) {
        const struct cbfs_index_entry *e = cbfs_index_get(x, b);
        memset(out, 0, sizeof out);
        if (e) {
            const cbfs_err err = cbfs_block_read(dfd, e, b, scratch, out);
            if (err == CBFS_E_CODEC_MISSING) continue;
            cr_assert_eq(err, CBFS_OK, "block %llu: %s", (unsigned long long)b,
                         cbfs_err_str(err));
        }
        const size_t n = G_SIZE - b * G_BS < G_BS ? G_SIZE - b * G_BS : G_BS;
        cr_assert_eq(memcmp(out, expected + b * G_BS, n), 0, "block %llu",
                     (unsigned long long)b);
    }
}

Test(golden, load_and_read)
{
    size_t elen;
    uint8_t *expected = read_file(G_EXPECTED, &elen);
    const int dfd = open(G_DATA, O_RDONLY), ifd = open(G_IDX, O_RDONLY);
    cr_assert(dfd >= 0 && ifd >= 0);
    struct cbfs_index x;
    struct cbfs_index_report rep;
    cr_assert_eq(cbfs_index_load(dfd, ifd, false, NULL, &x, &rep), CBFS_OK);
    cr_assert_eq(rep.records_replayed, G_NFRAMES);
    cr_assert(!rep.sidecar_missing && !rep.repaired);
    cr_assert_eq(rep.records_dropped + rep.frames_rescanned + rep.data_tail_bytes, 0);
    g_check_table_and_reads(dfd, &x, expected);
    cbfs_index_free(&x);

    /* Rebuilt from the frames alone: the same table, with the store's block
     * size as the candidate (full blocks of it back it up). Without one the
     * frames do not prove 4 KiB: refused, never guessed. */
    cr_assert_eq(cbfs_index_load(dfd, -1, false, NULL, &x, &rep), CBFS_E_BLOCK_SIZE);
    const struct cbfs_bs_hint hint = {.size = G_BS};
    cr_assert_eq(cbfs_index_load(dfd, -1, false, &hint, &x, &rep), CBFS_OK);
    cr_assert(rep.sidecar_missing);
    cr_assert_eq(rep.frames_rescanned, G_NFRAMES);
    g_check_table_and_reads(dfd, &x, expected);
    cbfs_index_free(&x);
    close(dfd);
    close(ifd);
    free(expected);
}

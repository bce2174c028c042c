/* Unit tests of the on-disk format layer: frame headers and index records
 * (round trip, every bit flip, versions), frame encode/decode per codec, a
 * data file + sidecar written through the API and reloaded after each kind of
 * damage (suite `format`), and stock `zstd -d` / `lz4 -d` decoding and the
 * rule that predicts it, cbfs_stock_check (`stock`). */
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

#define BS 4096u

static struct cbfs_frame_hdr sample_hdr(void)
{
    return (struct cbfs_frame_hdr){
        .version = 1,
        .codec = CBFS_CODEC_ZSTD,
        .flags = 0,
        .level = -5,
        .block = 0x1122334455667788ull,
        .generation = 42,
        .ulen = 65536,
        .plen = 1234,
        .hash = 0xdeadbeefcafef00dull,
        .file_id = 0x0123456789abcdefull,
    };
}

static bool hdr_eq(const struct cbfs_frame_hdr *a, const struct cbfs_frame_hdr *b)
{
    return a->version == b->version && a->codec == b->codec && a->flags == b->flags &&
           a->level == b->level && a->block == b->block && a->generation == b->generation &&
           a->ulen == b->ulen && a->plen == b->plen && a->hash == b->hash &&
           a->file_id == b->file_id;
}

static bool rec_eq(const struct cbfs_index_rec *a, const struct cbfs_index_rec *b)
{
    return a->type == b->type && a->version == b->version && a->block_size == b->block_size &&
           a->file_id == b->file_id && a->created_ns == b->created_ns && a->codec == b->codec &&
           a->flags == b->flags && a->block == b->block && a->offset == b->offset &&
           a->plen == b->plen && a->ulen == b->ulen && a->generation == b->generation &&
           a->hash == b->hash;
}

/* Re-seals a record after a test edited its bytes, so only the edit is judged. */
static void reseal(uint8_t *p)
{
    cbfs_put_le64(p + 56, cbfs_hash64(p, 56));
}

Test(format, frame_hdr_roundtrip)
{
    const struct cbfs_frame_hdr h = sample_hdr();
    uint8_t buf[CBFS_FRAME_HDR_SIZE];
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_get_le32(buf), CBFS_SKIPPABLE_MAGIC);
    cr_assert_eq(cbfs_get_le32(buf + 4), 56);
    cr_assert_eq(memcmp(buf + 8, "CBFR", 4), 0);
    struct cbfs_frame_hdr d;
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_OK);
    cr_assert(hdr_eq(&h, &d));
}

Test(format, frame_hdr_every_bit_flip_detected)
{
    const struct cbfs_frame_hdr h = sample_hdr();
    uint8_t buf[CBFS_FRAME_HDR_SIZE];
    cbfs_frame_hdr_encode(&h, buf);
    for (unsigned bit = 0; bit < CBFS_FRAME_HDR_SIZE * 8; bit++) {
        uint8_t t[CBFS_FRAME_HDR_SIZE];
        memcpy(t, buf, sizeof t);
        t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
        struct cbfs_frame_hdr d;
        const cbfs_err e = cbfs_frame_hdr_decode(t, &d);
        cr_assert_neq(e, CBFS_OK, "bit %u flip not detected", bit);
        if (bit < 96) cr_assert_eq(e, CBFS_E_BAD_MAGIC, "bit %u", bit);
        else cr_assert_eq(e, CBFS_E_CORRUPT, "bit %u", bit);
    }
}

Test(format, frame_hdr_versions_and_sanity)
{
    struct cbfs_frame_hdr h = sample_hdr(), d;
    uint8_t buf[CBFS_FRAME_HDR_SIZE];
    h.version = 2;
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_VERSION);
    h = sample_hdr();
    h.flags = 1u << 3;
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_VERSION);
    h.flags = 0x80;
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_VERSION);
    h = sample_hdr();
    h.codec = CBFS_CODEC_MAX_ID + 1;
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_VERSION);
    /* Sanity checks on checksum-valid headers. */
    h = sample_hdr();
    h.flags = CBFS_FRAME_HOLE | CBFS_FRAME_RAW;
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_CORRUPT);
    h = sample_hdr();
    h.ulen = CBFS_BLOCK_MAX + 1;
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_CORRUPT);
    h = sample_hdr();
    h.flags = CBFS_FRAME_SIZE; /* with plen != 0 */
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_CORRUPT);
    h = sample_hdr();
    h.flags = CBFS_FRAME_RAW; /* RAW with plen != ulen */
    cbfs_frame_hdr_encode(&h, buf);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_E_CORRUPT);
    /* The SIZE frame helper produces a valid header. */
    cbfs_frame_size_encode(7, 9, 123456, buf, &h);
    cr_assert_eq(cbfs_frame_hdr_decode(buf, &d), CBFS_OK);
    cr_assert(hdr_eq(&h, &d));
    cr_assert_eq(d.flags, CBFS_FRAME_SIZE);
    cr_assert_eq(d.block, 123456);
}

static struct cbfs_index_rec sample_rec(uint8_t type)
{
    struct cbfs_index_rec r;
    memset(&r, 0, sizeof r);
    r.type = type;
    if (type == CBFS_REC_HEADER) {
        r.version = 1;
        r.block_size = 1u << 20;
        r.file_id = 0x0123456789abcdefull;
        r.created_ns = 1700000000123456789ull;
    } else if (type == CBFS_REC_BLOCK) {
        r.codec = CBFS_CODEC_LZ4;
        r.flags = 0;
        r.block = 77;
        r.offset = 0x123456789ull;
        r.plen = 999;
        r.ulen = 4096;
        r.generation = 1000;
        r.hash = 0x5555aaaa5555aaaaull;
    } else {
        r.flags = CBFS_FRAME_SIZE;
        r.block = 1ull << 40;
        r.offset = 0x42424242ull;
        r.generation = 1001;
    }
    return r;
}

Test(format, rec_roundtrip_and_bit_flips)
{
    for (uint8_t type = CBFS_REC_HEADER; type <= CBFS_REC_SIZE; type++) {
        const struct cbfs_index_rec r = sample_rec(type);
        uint8_t buf[CBFS_INDEX_REC_SIZE];
        cbfs_index_rec_encode(&r, buf);
        cr_assert_eq(memcmp(buf, "CBIX", 4), 0);
        struct cbfs_index_rec d;
        cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_OK, "type %u", type);
        cr_assert(rec_eq(&r, &d), "type %u", type);
        for (unsigned bit = 0; bit < CBFS_INDEX_REC_SIZE * 8; bit++) {
            uint8_t t[CBFS_INDEX_REC_SIZE];
            memcpy(t, buf, sizeof t);
            t[bit / 8] ^= (uint8_t)(1u << (bit % 8));
            const cbfs_err e = cbfs_index_rec_decode(t, &d);
            cr_assert_neq(e, CBFS_OK, "type %u bit %u flip not detected", type, bit);
            cr_assert_eq(e, bit < 32 ? CBFS_E_BAD_MAGIC : CBFS_E_CORRUPT, "type %u bit %u", type,
                         bit);
        }
    }
}

/* A sidecar's header record, read where it is: its first record, and only a
 * header (fsck's orphans and the daemon's file handles ask this of a file). */
Test(format, read_header)
{
    FILE *const f = tmpfile();
    cr_assert_not_null(f);
    const int fd = fileno(f);
    struct cbfs_index_rec got, h = sample_rec(CBFS_REC_HEADER), b = sample_rec(CBFS_REC_BLOCK);
    uint8_t buf[CBFS_INDEX_REC_SIZE];
    cr_assert_eq(cbfs_index_read_header(fd, &got), CBFS_E_TRUNCATED, "empty");
    cbfs_index_rec_encode(&b, buf);
    cr_assert_eq(cbfs_pwrite_full(fd, buf, sizeof buf, 0), CBFS_OK);
    cr_assert_eq(cbfs_index_read_header(fd, &got), CBFS_E_BAD_MAGIC, "a block record first");
    cbfs_index_rec_encode(&h, buf);
    cr_assert_eq(cbfs_pwrite_full(fd, buf, sizeof buf, 0), CBFS_OK);
    cr_assert_eq(cbfs_index_read_header(fd, &got), CBFS_OK);
    cr_assert_eq(got.file_id, h.file_id);
    cr_assert_eq(got.block_size, h.block_size);
    buf[20] ^= 1;
    cr_assert_eq(cbfs_pwrite_full(fd, buf, sizeof buf, 0), CBFS_OK);
    cr_assert_eq(cbfs_index_read_header(fd, &got), CBFS_E_CORRUPT, "a flipped bit");
    fclose(f);
}

Test(format, rec_versions_and_reserved)
{
    struct cbfs_index_rec r = sample_rec(CBFS_REC_HEADER), d;
    uint8_t buf[CBFS_INDEX_REC_SIZE];
    r.version = 2;
    cbfs_index_rec_encode(&r, buf);
    cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_E_VERSION);
    r = sample_rec(CBFS_REC_BLOCK);
    r.type = 9;
    cbfs_index_rec_encode(&r, buf);
    cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_E_VERSION);
    r = sample_rec(CBFS_REC_BLOCK);
    r.flags = 0x10;
    cbfs_index_rec_encode(&r, buf);
    cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_E_VERSION);

    /* Every reserved byte of every record type must be zero. */
    static const struct {
        uint8_t type;
        uint8_t bytes[40];
        unsigned n;
    } reserved[] = {
        {CBFS_REC_HEADER, {5, 6, 7, 10, 11, 32, 40, 48, 55}, 9},
        {CBFS_REC_BLOCK, {7, 48, 50, 55}, 4},
        {CBFS_REC_SIZE, {5, 7, 24, 27, 28, 31, 40, 47, 48, 55}, 10},
    };
    for (unsigned i = 0; i < sizeof reserved / sizeof reserved[0]; i++) {
        r = sample_rec(reserved[i].type);
        cbfs_index_rec_encode(&r, buf);
        for (unsigned j = 0; j < reserved[i].n; j++) {
            uint8_t t[CBFS_INDEX_REC_SIZE];
            memcpy(t, buf, sizeof t);
            t[reserved[i].bytes[j]] = 0x01;
            reseal(t);
            cr_assert_eq(cbfs_index_rec_decode(t, &d), CBFS_E_CORRUPT, "type %u byte %u",
                         reserved[i].type, reserved[i].bytes[j]);
        }
    }
    /* SIZE records: flags byte 6 may be 0 or 4, nothing else. */
    r = sample_rec(CBFS_REC_SIZE);
    cbfs_index_rec_encode(&r, buf);
    cr_assert_eq(buf[6], CBFS_FRAME_SIZE);
    buf[6] = 0;
    reseal(buf);
    cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_OK);
    cr_assert_eq(d.flags, CBFS_FRAME_SIZE);
    buf[6] = 1;
    reseal(buf);
    cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_E_CORRUPT);
    /* Header record with an impossible block size. */
    r = sample_rec(CBFS_REC_HEADER);
    r.block_size = 100;
    cbfs_index_rec_encode(&r, buf);
    cr_assert_eq(cbfs_index_rec_decode(buf, &d), CBFS_E_CORRUPT);
}

/* ---- frames per codec ---- */

struct enc {
    uint8_t *frame;
    size_t len;
    struct cbfs_frame_hdr h;
};

static void encode_or_die(const struct cbfs_codec_ops *c, int level, const void *data, size_t len,
                          struct enc *out)
{
    const size_t cap = cbfs_frame_bound(c, len);
    out->frame = malloc(cap);
    cr_assert_not_null(out->frame);
    const cbfs_err e =
        cbfs_frame_encode(c, level, 0xabcdef, 5, 3, data, len, out->frame, cap, &out->len, &out->h);
    cr_assert_eq(e, CBFS_OK, "%s: %s", c->name, cbfs_err_str(e));
    struct cbfs_frame_hdr d;
    cr_assert_eq(cbfs_frame_hdr_decode(out->frame, &d), CBFS_OK);
    cr_assert(hdr_eq(&d, &out->h));
    cr_assert_eq(out->len, CBFS_FRAME_HDR_SIZE + out->h.plen);
    cr_assert_eq(out->h.ulen, len);
    cr_assert_eq(out->h.block, 5);
    cr_assert_eq(out->h.generation, 3);
    cr_assert_eq(out->h.file_id, 0xabcdef);
}

static void check_decodes(const struct enc *f, const void *want, size_t len)
{
    uint8_t *got = malloc(len + 1);
    cr_assert_not_null(got);
    const cbfs_err e = cbfs_frame_decode(&f->h, f->frame + CBFS_FRAME_HDR_SIZE, got);
    cr_assert_eq(e, CBFS_OK, "%s", cbfs_err_str(e));
    cr_assert_eq(memcmp(got, want, len), 0);
    free(got);
}

/* Flips one payload byte: decoding must fail, never return wrong bytes. */
static void check_corruption_detected(struct enc *f, size_t at)
{
    uint8_t *got = malloc(f->h.ulen + 1);
    cr_assert_not_null(got);
    f->frame[CBFS_FRAME_HDR_SIZE + at] ^= 0x5a;
    const cbfs_err e = cbfs_frame_decode(&f->h, f->frame + CBFS_FRAME_HDR_SIZE, got);
    cr_assert_eq(e, CBFS_E_CORRUPT, "codec %u: %s", f->h.codec, cbfs_err_str(e));
    f->frame[CBFS_FRAME_HDR_SIZE + at] ^= 0x5a;
    free(got);
}

Test(format, frame_codecs)
{
    const size_t len = 64 * 1024;
    uint8_t *rows = malloc(len), *zeros = calloc(1, len), *rnd = malloc(len);
    cr_assert(rows && zeros && rnd);
    cbfs_td_rows(rows, len, 1);
    cbfs_td_random(rnd, len, 2);
    unsigned tested = 0;
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(id);
        if (!c) continue;
        tested++;
        const bool none = id == CBFS_CODEC_NONE;
        struct enc f;

        encode_or_die(c, c->default_level, rows, len, &f);
        cr_assert_eq(f.h.codec, id);
        cr_assert_eq(f.h.flags, 0, "%s rows flags %u", c->name, f.h.flags);
        if (!none) cr_assert_lt(f.h.plen, len / 2, "%s does not compress rows", c->name);
        else cr_assert_eq(f.h.plen, len);
        check_decodes(&f, rows, len);
        check_corruption_detected(&f, f.h.plen / 2);
        free(f.frame);

        encode_or_die(c, c->default_level, zeros, len, &f);
        cr_assert_eq(f.h.flags, CBFS_FRAME_HOLE, "%s zeros", c->name);
        if (c->stock_stream) cr_assert_gt(f.h.plen, 0);
        else cr_assert_eq(f.h.plen, 0);
        check_decodes(&f, zeros, len);
        free(f.frame);

        encode_or_die(c, c->default_level, rnd, len, &f);
        if (c->stock_stream || none) cr_assert_eq(f.h.flags, 0, "%s random", c->name);
        else cr_assert_eq(f.h.flags, CBFS_FRAME_RAW, "%s random not RAW", c->name);
        check_decodes(&f, rnd, len);
        check_corruption_detected(&f, f.h.plen / 3);
        check_corruption_detected(&f, f.h.plen - 1);
        free(f.frame);

        /* An empty block is legal (a HOLE of length 0). */
        encode_or_die(c, c->default_level, rows, 0, &f);
        cr_assert_eq(f.h.flags, CBFS_FRAME_HOLE);
        check_decodes(&f, rows, 0);
        free(f.frame);

        /* A block that is not a multiple of anything. */
        encode_or_die(c, c->default_level, rows, 1001, &f);
        check_decodes(&f, rows, 1001);
        free(f.frame);
    }
    cr_assert_geq(tested, 1);
    free(rows);
    free(zeros);
    free(rnd);
}

Test(format, frame_encode_args)
{
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(CBFS_CODEC_NONE);
    cr_assert_not_null(c);
    uint8_t data[100] = {1}, out[200];
    size_t n;
    struct cbfs_frame_hdr h;
    cr_assert_eq(cbfs_frame_encode(c, 0, 1, 0, 0, data, sizeof data, out, sizeof out, &n, &h),
                 CBFS_E_INVAL); /* generation 0 */
    cr_assert_eq(cbfs_frame_encode(c, 0, 1, 0, 1, data, sizeof data, out, 100, &n, &h),
                 CBFS_E_DST_SMALL);
    cr_assert_eq(cbfs_frame_encode(c, 0, 1, 0, 1, data, sizeof data, out, sizeof out, &n, &h),
                 CBFS_OK);
    cr_assert_eq(n, 164);
}

/* ---- a data file + sidecar written through the API ---- */

#define NB_MAX 48

struct fileset {
    char dir[64], data[96], idx[96];
    int dfd, ifd;
    struct cbfs_index ref;  /* table built while writing */
    uint8_t *content;       /* expected logical bytes, NB_MAX blocks */
    unsigned nrec;          /* records after the header */
    uint64_t file_id;
};

static const struct cbfs_codec_ops *pick_codec(unsigned i)
{
    static const unsigned order[] = {CBFS_CODEC_LZ4, CBFS_CODEC_ZSTD, CBFS_CODEC_XZ,
                                     CBFS_CODEC_BZIP2, CBFS_CODEC_NONE};
    for (unsigned k = 0; k < 5; k++) {
        const struct cbfs_codec_ops *c = cbfs_codec_by_id(order[(i + k) % 5]);
        if (c) return c;
    }
    return NULL;
}

static void fs_append_frame(struct fileset *fs, const void *frame, size_t len,
                            const struct cbfs_frame_hdr *h)
{
    const uint64_t off = fs->ref.data_end;
    cr_assert_eq(cbfs_pwrite_full(fs->dfd, frame, len, off), CBFS_OK);
    struct cbfs_index_rec r;
    cbfs_index_rec_from_frame(h, off, &r);
    cr_assert_eq(cbfs_index_append(&fs->ref, fs->ifd, &r, 1), CBFS_OK);
    cr_assert_eq(cbfs_index_apply(&fs->ref, &r), CBFS_OK);
    cr_assert_eq(fs->ref.data_end, off + len);
    fs->nrec++;
}

static void fs_write_block(struct fileset *fs, uint64_t b, unsigned kind, uint64_t seed)
{
    uint8_t buf[BS];
    if (kind == 0) cbfs_td_rows(buf, BS, seed);
    else if (kind == 1) memset(buf, 0, BS);
    else cbfs_td_random(buf, BS, seed);
    const struct cbfs_codec_ops *c = pick_codec((unsigned)(b + seed));
    uint8_t frame[CBFS_FRAME_HDR_SIZE + 2 * BS];
    cr_assert_leq(cbfs_frame_bound(c, BS), sizeof frame);
    size_t n;
    struct cbfs_frame_hdr h;
    cr_assert_eq(cbfs_frame_encode(c, c->default_level, fs->file_id, b, fs->ref.next_gen, buf, BS,
                                   frame, sizeof frame, &n, &h),
                 CBFS_OK);
    fs_append_frame(fs, frame, n, &h);
    memcpy(fs->content + b * BS, buf, BS);
}

static void fs_write_size(struct fileset *fs, uint64_t size)
{
    uint8_t frame[CBFS_FRAME_HDR_SIZE];
    struct cbfs_frame_hdr h;
    cbfs_frame_size_encode(fs->file_id, fs->ref.next_gen, size, frame, &h);
    fs_append_frame(fs, frame, sizeof frame, &h);
    if (size < (uint64_t)NB_MAX * BS)
        memset(fs->content + size, 0, (size_t)((uint64_t)NB_MAX * BS - size));
}

/* ~40 blocks of rows, holes and random data with mixed codecs, three
 * overwrites, a truncating SIZE frame, rewritten tail blocks and an
 * extending SIZE frame. */
/* A data file and a sidecar with only its header. */
static void fs_create_empty(struct fileset *fs, uint64_t file_id)
{
    memset(fs, 0, sizeof *fs);
    strcpy(fs->dir, "/tmp/cbfs-format-XXXXXX");
    cr_assert_not_null(mkdtemp(fs->dir));
    snprintf(fs->data, sizeof fs->data, "%s/file", fs->dir);
    snprintf(fs->idx, sizeof fs->idx, "%s/file%s", fs->dir, CBFS_INDEX_SUFFIX);
    fs->dfd = open(fs->data, O_RDWR | O_CREAT | O_TRUNC, 0600);
    fs->ifd = open(fs->idx, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert(fs->dfd >= 0 && fs->ifd >= 0);
    fs->content = calloc(NB_MAX, BS);
    cr_assert_not_null(fs->content);
    fs->file_id = file_id;
    cbfs_index_init(&fs->ref, BS, file_id);
    cr_assert_eq(cbfs_index_write_header(&fs->ref, fs->ifd), CBFS_OK);
}

static void fs_create(struct fileset *fs, uint64_t file_id)
{
    fs_create_empty(fs, file_id);
    for (uint64_t b = 0; b < 36; b++) fs_write_block(fs, b, b % 7 == 3 ? 1 : b % 5 == 4 ? 2 : 0, b);
    fs_write_block(fs, 3, 0, 100);  /* hole overwritten with data */
    fs_write_block(fs, 10, 2, 101); /* hole overwritten with random */
    fs_write_block(fs, 20, 1, 102); /* rows overwritten with a hole */
    fs_write_size(fs, 30 * BS);     /* drops blocks 30..35 */
    for (uint64_t b = 30; b < 34; b++) fs_write_block(fs, b, 0, 200 + b);
    fs_write_size(fs, 40 * BS + 100); /* extends: 34..40 read as zeros */

    cr_assert_eq(fs->ref.size, 40 * BS + 100);
    cr_assert_eq(fs->ref.nblocks, 34);
    cr_assert_eq(fs->ref.live_frames, 34);
    cr_assert_eq(fs->ref.dead_frames, 3 + 6 + 2);
    cr_assert_eq(fs->nrec, 36 + 3 + 1 + 4 + 1);
}

static void fs_destroy(struct fileset *fs)
{
    cbfs_index_free(&fs->ref);
    free(fs->content);
    if (fs->dfd >= 0) close(fs->dfd);
    if (fs->ifd >= 0) close(fs->ifd);
    unlink(fs->data);
    unlink(fs->idx);
    rmdir(fs->dir);
}

static uint64_t fsize(int fd)
{
    struct stat st;
    cr_assert_eq(fstat(fd, &st), 0);
    return (uint64_t)st.st_size;
}

static uint8_t *slurp(int fd, uint64_t *len)
{
    *len = fsize(fd);
    uint8_t *p = malloc(*len + 1);
    cr_assert_not_null(p);
    cr_assert_eq(cbfs_pread_full(fd, p, *len, 0), CBFS_OK);
    return p;
}

/* The loaded table must equal the one built while writing (index_end aside). */
static void assert_same_table(const struct cbfs_index *a, const struct cbfs_index *b)
{
    cr_assert_eq(a->block_size, b->block_size);
    cr_assert_eq(a->file_id, b->file_id);
    cr_assert_eq(a->size, b->size);
    cr_assert_eq(a->next_gen, b->next_gen);
    cr_assert_eq(a->data_end, b->data_end);
    cr_assert_eq(a->nblocks, b->nblocks);
    cr_assert_eq(a->live_frames, b->live_frames);
    cr_assert_eq(a->live_bytes, b->live_bytes);
    cr_assert_eq(a->dead_frames, b->dead_frames);
    cr_assert_eq(a->dead_bytes, b->dead_bytes);
    for (uint64_t i = 0; i < a->nblocks; i++) {
        const struct cbfs_index_entry *x = cbfs_index_get(a, i), *y = cbfs_index_get(b, i);
        cr_assert_eq(x == NULL, y == NULL, "block %llu", (unsigned long long)i);
        if (!x) continue;
        cr_assert(x->offset == y->offset && x->generation == y->generation &&
                      x->hash == y->hash && x->plen == y->plen && x->ulen == y->ulen &&
                      x->codec == y->codec && x->flags == y->flags,
                  "block %llu differs", (unsigned long long)i);
    }
}

/* Every block reads back as written; bytes past the size are zeros. */
static void assert_reads(const struct fileset *fs, const struct cbfs_index *idx)
{
    uint8_t scratch[CBFS_FRAME_HDR_SIZE + 2 * BS], out[BS];
    for (uint64_t b = 0; b * BS < idx->size; b++) {
        const struct cbfs_index_entry *e = cbfs_index_get(idx, b);
        if (!e) {
            memset(out, 0, BS);
        } else {
            cr_assert_eq(cbfs_block_read(fs->dfd, e, b, scratch, out), CBFS_OK, "block %llu",
                         (unsigned long long)b);
            memset(out + e->ulen, 0, BS - e->ulen);
        }
        cr_assert_eq(memcmp(out, fs->content + b * BS, BS), 0, "block %llu",
                     (unsigned long long)b);
    }
}

static void load_ok(const struct fileset *fs, int ifd, bool repair, struct cbfs_index *idx,
                    struct cbfs_index_report *rep)
{
    /* the fileset's store block size: its full blocks back it up on a rebuild */
    static const struct cbfs_bs_hint hint = {.size = BS};
    const cbfs_err e = cbfs_index_load(fs->dfd, ifd, repair, &hint, idx, rep);
    cr_assert_eq(e, CBFS_OK, "load: %s", cbfs_err_str(e));
    assert_same_table(idx, &fs->ref);
}

/* After a repair, a reload must be clean and the sidecar as originally written. */
static void assert_clean_reload(const struct fileset *fs, const uint8_t *orig_idx,
                                uint64_t orig_len)
{
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(fs, fs->ifd, true, &idx, &rep);
    cr_assert_eq(rep.records_replayed, fs->nrec);
    cr_assert_eq(rep.records_dropped, 0);
    cr_assert_eq(rep.frames_rescanned, 0);
    cr_assert_eq(rep.data_tail_bytes, 0);
    cr_assert(!rep.repaired && !rep.sidecar_missing);
    cr_assert_eq(idx.index_end, orig_len);
    uint64_t n;
    uint8_t *now = slurp(fs->ifd, &n);
    cr_assert_eq(n, orig_len);
    cr_assert_eq(memcmp(now, orig_idx, n), 0, "repaired sidecar differs from the original");
    free(now);
    cbfs_index_free(&idx);
}

Test(format, replay_equals_written)
{
    struct fileset fs;
    fs_create(&fs, 0x1111222233334444ull);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert_eq(rep.records_replayed, fs.nrec);
    cr_assert_eq(rep.records_dropped + rep.frames_rescanned + rep.data_tail_bytes, 0);
    cr_assert(!rep.sidecar_missing && !rep.repaired);
    cr_assert_eq(idx.index_end, fs.ref.index_end);
    cr_assert_eq(idx.index_end, fsize(fs.ifd));
    assert_reads(&fs, &idx);
    cbfs_index_free(&idx);
    fs_destroy(&fs);
}

static void torn_or_garbled(bool garble)
{
    struct fileset fs;
    fs_create(&fs, 0x2222);
    uint64_t ilen;
    uint8_t *orig = slurp(fs.ifd, &ilen);
    if (garble) {
        uint8_t b = orig[ilen - 30] ^ 0x10;
        cr_assert_eq(cbfs_pwrite_full(fs.ifd, &b, 1, ilen - 30), CBFS_OK);
    } else {
        cr_assert_eq(ftruncate(fs.ifd, (off_t)(ilen - 10)), 0);
    }
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert_eq(rep.records_replayed, fs.nrec - 1);
    cr_assert_eq(rep.records_dropped, 1);
    cr_assert_eq(rep.frames_rescanned, 1);
    cr_assert(!rep.repaired);
    cr_assert_eq(idx.index_end, ilen - 64);
    cr_assert_eq(fsize(fs.ifd), garble ? ilen : ilen - 10, "load without repair wrote");
    assert_reads(&fs, &idx);
    cbfs_index_free(&idx);

    load_ok(&fs, fs.ifd, true, &idx, &rep);
    cr_assert(rep.repaired);
    cr_assert_eq(idx.index_end, ilen);
    cbfs_index_free(&idx);
    assert_clean_reload(&fs, orig, ilen);
    free(orig);
    fs_destroy(&fs);
}

Test(format, torn_last_record)
{
    torn_or_garbled(false);
}

Test(format, garbled_last_record)
{
    torn_or_garbled(true);
}

Test(format, sidecar_missing_rebuild)
{
    struct fileset fs;
    fs_create(&fs, 0x3333);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(&fs, -1, true, &idx, &rep); /* the candidate 4096, backed by full blocks */
    cr_assert(rep.sidecar_missing);
    cr_assert_eq(rep.frames_rescanned, fs.nrec);
    cr_assert_eq(rep.records_replayed, 0);
    cr_assert(!rep.repaired);
    assert_reads(&fs, &idx);
    cbfs_index_free(&idx);

    /* An unusable sidecar (garbage header) is rebuilt in place on repair. */
    uint64_t ilen;
    uint8_t *orig = slurp(fs.ifd, &ilen);
    const uint8_t junk[64] = "this is not a cbfs sidecar header";
    cr_assert_eq(cbfs_pwrite_full(fs.ifd, junk, sizeof junk, 0), CBFS_OK);
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert(rep.sidecar_missing && !rep.repaired);
    cbfs_index_free(&idx);
    load_ok(&fs, fs.ifd, true, &idx, &rep);
    cr_assert(rep.repaired);
    cr_assert_eq(idx.index_end, ilen);
    cbfs_index_free(&idx);
    /* Same records; only the header's created time differs. */
    uint64_t n;
    uint8_t *now = slurp(fs.ifd, &n);
    cr_assert_eq(n, ilen);
    cr_assert_eq(memcmp(now + 64, orig + 64, n - 64), 0);
    struct cbfs_index_rec h;
    cr_assert_eq(cbfs_index_rec_decode(now, &h), CBFS_OK);
    cr_assert_eq(h.block_size, BS);
    cr_assert_eq(h.file_id, 0x3333);
    free(now);
    free(orig);

    /* Neither a sidecar nor a cbfs data file. */
    cr_assert_eq(ftruncate(fs.dfd, 0), 0);
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, junk, sizeof junk, 0), CBFS_OK);
    cr_assert_eq(cbfs_index_load(fs.dfd, -1, false, NULL, &idx, &rep), CBFS_E_BAD_MAGIC);
    fs_destroy(&fs);
}

/* ---- the block size of a rebuilt index (docs/FORMAT.md 3.3) ---- */

static struct cbfs_index_rec rb_block(uint64_t b, uint32_t ulen)
{
    return (struct cbfs_index_rec){.type = CBFS_REC_BLOCK, .block = b, .ulen = ulen};
}

static struct cbfs_index_rec rb_size(uint64_t size)
{
    return (struct cbfs_index_rec){.type = CBFS_REC_SIZE, .flags = CBFS_FRAME_SIZE, .block = size};
}

/* @return the rule's size, or 0 when it refuses (CBFS_E_BLOCK_SIZE). */
static uint32_t rb_rule(const struct cbfs_index_rec *r, size_t n, uint32_t size, bool asserted)
{
    const struct cbfs_bs_hint hint = {.size = size, .asserted = asserted};
    uint32_t bs = 0;
    const cbfs_err e = cbfs_index_rebuild_block_size(r, n, size ? &hint : NULL, &bs);
    cr_assert(e == CBFS_OK || e == CBFS_E_BLOCK_SIZE, "%s", cbfs_err_str(e));
    return e ? 0 : bs;
}

/* Only block 0: every fitting size gives the same bytes. */
Test(format, rebuild_block_size_block0_any_fitting_size)
{
    const struct cbfs_index_rec r[] = {rb_block(0, 5000), rb_size(100000)};
    cr_assert_eq(rb_rule(r, 2, 0, false), 8192);            /* smallest fitting */
    cr_assert_eq(rb_rule(r, 2, 65536, false), 65536);       /* the candidate fits */
    cr_assert_eq(rb_rule(r, 2, 4096, false), 8192);         /* it does not: smallest */
    cr_assert_eq(rb_rule(r, 1, 0, false), 8192);
    const struct cbfs_index_rec only_size[] = {rb_size(327680)};
    cr_assert_eq(rb_rule(only_size, 1, 0, false), CBFS_BLOCK_MIN);
    cr_assert_eq(rb_rule(only_size, 1, 65536, false), 65536);
}

/* The review's file: a SIZE frame to 320 KiB, then 11 bytes in block 5 of
 * 64 KiB. No frame holds a whole block: 4 KiB (the old inference) would put
 * the bytes at 20 KiB. Only the user's word rebuilds it. */
Test(format, rebuild_block_size_refuses_without_a_full_block)
{
    const struct cbfs_index_rec r[] = {rb_size(327680), rb_block(5, 11)};
    cr_assert_eq(rb_rule(r, 2, 0, false), 0);
    cr_assert_eq(rb_rule(r, 2, 65536, false), 0); /* a candidate is no proof */
    cr_assert_eq(rb_rule(r, 2, 65536, true), 65536);
    cr_assert_eq(rb_rule(r, 2, 3000, true), 0);   /* not a block size */
    cr_assert_eq(rb_rule(r, 2, 32u << 20, true), 0);
}

/* Full blocks of the candidate back it up; a candidate they contradict, or
 * none, is refused. */
Test(format, rebuild_block_size_candidate_backed_by_a_full_block)
{
    const struct cbfs_index_rec r[] = {rb_block(0, 65536), rb_block(1, 65536), rb_block(2, 100)};
    cr_assert_eq(rb_rule(r, 3, 65536, false), 65536);
    cr_assert_eq(rb_rule(r, 3, 262144, false), 0); /* written with another block size */
    cr_assert_eq(rb_rule(r, 3, 32768, false), 0);  /* a 64 KiB block cannot be in 32 KiB */
    cr_assert_eq(rb_rule(r, 3, 0, false), 0);
    cr_assert_eq(rb_rule(r, 3, 32768, true), 0);   /* the user's word, contradicted */
    cr_assert_eq(rb_rule(r, 3, 131072, true), 131072);
}

/* Why a largest ulen that is a block size proves nothing by itself: written
 * with 128 KiB blocks, 64 KiB at 0, truncate to 384 KiB, 10 bytes appended
 * (block 3). 64 KiB would move those bytes to 192 KiB. */
Test(format, rebuild_block_size_largest_ulen_is_no_proof)
{
    const struct cbfs_index_rec r[] = {rb_block(0, 65536), rb_size(393216), rb_block(3, 10)};
    cr_assert_eq(rb_rule(r, 3, 0, false), 0);
    cr_assert_eq(rb_rule(r, 3, 131072, false), 0);
    cr_assert_eq(rb_rule(r, 3, 131072, true), 131072);
}

/* @return what the rule takes with store.conf's size cand as the candidate and
 * stated as fsck's --block-size for the store, or 0 when it refuses. */
static uint32_t rb_store_rule(const struct cbfs_index_rec *r, size_t n, uint32_t cand,
                              uint32_t stated)
{
    const struct cbfs_bs_hint hint = {.size = cand, .otherwise = stated};
    uint32_t bs = 0;
    const cbfs_err e = cbfs_index_rebuild_block_size(r, n, &hint, &bs);
    cr_assert(e == CBFS_OK || e == CBFS_E_BLOCK_SIZE, "%s", cbfs_err_str(e));
    return e ? 0 : bs;
}

/* fsck --block-size 64K for a store of 32 KiB blocks, where one file was
 * written with 64 KiB blocks and lost its sidecar: it replaced the candidate,
 * so a file of 32 KiB blocks whose frames back the candidate was rebuilt
 * with 64 KiB too, its blocks moved (fsck then called the store clean, cat
 * printed the wrong bytes). It is a last resort: a size the frames tell
 * wins, and frames that contradict it (a larger block; every block but the
 * last of exactly one smaller size) refuse it. */
Test(format, rebuild_block_size_stated_for_a_store_is_a_last_resort)
{
    const struct cbfs_index_rec at32[] = {rb_block(0, 32768), rb_block(1, 32768),
                                          rb_block(2, 500)};
    cr_assert_eq(rb_store_rule(at32, 3, 32768, 65536), 32768); /* backs the candidate */
    cr_assert_eq(rb_store_rule(at32, 3, 0, 65536), 0);         /* looks like 32 KiB blocks */
    cr_assert_eq(rb_store_rule(at32, 3, 0, 32768), 32768);
    cr_assert_eq(rb_store_rule(at32, 3, 0, 16384), 0);         /* a block is larger */
    const struct cbfs_index_rec sparse[] = {rb_size(327680), rb_block(5, 11)};
    cr_assert_eq(rb_store_rule(sparse, 2, 32768, 65536), 65536); /* nothing to tell */
    const struct cbfs_index_rec two[] = {rb_block(0, 32768), rb_block(3, 700)};
    cr_assert_eq(rb_store_rule(two, 2, 0, 65536), 65536); /* one block below: no pattern */
    const struct cbfs_index_rec uneven[] = {rb_block(0, 32768), rb_block(1, 20000),
                                            rb_block(2, 9)};
    cr_assert_eq(rb_store_rule(uneven, 3, 0, 65536), 65536);
    /* a block flushed part-way first (an fsync after 16 KiB): its older, shorter
     * frame is not what the block holds; the newest ones look like 32 KiB blocks */
    struct cbfs_index_rec fsynced[] = {rb_block(0, 16384), rb_block(0, 32768),
                                       rb_block(1, 32768), rb_block(2, 32768), rb_block(3, 500)};
    for (size_t i = 0; i < 5; i++) fsynced[i].generation = i + 1;
    cr_assert_eq(rb_store_rule(fsynced, 5, 0, 65536), 0);
}

/* A block over 8 MiB leaves 16 MiB as the only size. */
Test(format, rebuild_block_size_only_one_size_left)
{
    const struct cbfs_index_rec r[] = {rb_block(0, 100), rb_block(1, (8u << 20) + 1)};
    cr_assert_eq(rb_rule(r, 2, 0, false), CBFS_BLOCK_MAX);
    cr_assert_eq(rb_rule(r, 2, 65536, false), CBFS_BLOCK_MAX);
}

/* Through the loader: a refused rebuild is an error, and repair writes
 * nothing (the unusable sidecar stays as it was). */
Test(format, rebuild_block_size_refused_load_writes_nothing)
{
    struct fileset fs;
    fs_create(&fs, 0x3434);
    const uint8_t junk[64] = "this is not a cbfs sidecar header";
    cr_assert_eq(cbfs_pwrite_full(fs.ifd, junk, sizeof junk, 0), CBFS_OK);
    uint64_t ilen, dlen;
    uint8_t *side = slurp(fs.ifd, &ilen), *data = slurp(fs.dfd, &dlen);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    const struct cbfs_bs_hint other = {.size = 2 * BS}; /* no block of it */
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, &other, &idx, &rep), CBFS_E_BLOCK_SIZE);
    cr_assert_eq(cbfs_index_open(fs.dfd, fs.ifd, true, NULL, &idx, &rep), CBFS_E_BLOCK_SIZE);
    cr_assert(!rep.repaired);
    uint64_t n;
    uint8_t *now = slurp(fs.ifd, &n);
    cr_assert(n == ilen && memcmp(now, side, n) == 0);
    free(now);
    now = slurp(fs.dfd, &n);
    cr_assert(n == dlen && memcmp(now, data, n) == 0);
    free(now);
    const struct cbfs_bs_hint user = {.size = BS, .asserted = true};
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, &user, &idx, &rep), CBFS_OK);
    cr_assert(rep.repaired);
    assert_same_table(&idx, &fs.ref);
    cbfs_index_free(&idx);
    free(side);
    free(data);
    fs_destroy(&fs);
}

Test(format, index_lagging)
{
    struct fileset fs;
    fs_create(&fs, 0x4444);
    uint64_t ilen;
    uint8_t *orig = slurp(fs.ifd, &ilen);
    cr_assert_eq(ftruncate(fs.ifd, (off_t)(ilen - 5 * 64)), 0);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert_eq(rep.records_replayed, fs.nrec - 5);
    cr_assert_eq(rep.records_dropped, 0);
    cr_assert_eq(rep.frames_rescanned, 5);
    assert_reads(&fs, &idx);
    cbfs_index_free(&idx);
    load_ok(&fs, fs.ifd, true, &idx, &rep);
    cr_assert(rep.repaired);
    cbfs_index_free(&idx);
    assert_clean_reload(&fs, orig, ilen);
    free(orig);
    fs_destroy(&fs);
}

Test(format, torn_data_tail)
{
    struct fileset fs;
    fs_create(&fs, 0x5555);
    uint64_t ilen;
    uint8_t *orig = slurp(fs.ifd, &ilen);
    const uint64_t dlen = fsize(fs.dfd);
    /* Half of a frame the crash did not let finish (and no record for it). */
    uint8_t buf[BS], frame[CBFS_FRAME_HDR_SIZE + 2 * BS];
    cbfs_td_random(buf, BS, 9);
    const struct cbfs_codec_ops *c = pick_codec(0);
    size_t n;
    struct cbfs_frame_hdr h;
    cr_assert_eq(cbfs_frame_encode(c, c->default_level, fs.file_id, 40, fs.ref.next_gen, buf, BS,
                                   frame, sizeof frame, &n, &h),
                 CBFS_OK);
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, frame, n / 2, dlen), CBFS_OK);

    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert_eq(rep.data_tail_bytes, n / 2);
    cr_assert_eq(rep.frames_rescanned, 0);
    cr_assert_eq(idx.data_end, dlen);
    cr_assert_eq(fsize(fs.dfd), dlen + n / 2);
    cbfs_index_free(&idx);

    load_ok(&fs, fs.ifd, true, &idx, &rep);
    cr_assert(rep.repaired);
    cr_assert_eq(fsize(fs.dfd), dlen);
    cbfs_index_free(&idx);
    assert_clean_reload(&fs, orig, ilen);

    /* A tail too short for a header is garbage too. */
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, frame, 20, dlen), CBFS_OK);
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert_eq(rep.data_tail_bytes, 20);
    cbfs_index_free(&idx);
    free(orig);
    fs_destroy(&fs);
}

/* A checksum-valid record whose frame is another one (a stale or misplaced
 * record): replay stops there and the rescan recovers everything after. */
Test(format, record_not_matching_its_frame)
{
    struct fileset fs;
    fs_create(&fs, 0x8888);
    uint64_t ilen;
    uint8_t *orig = slurp(fs.ifd, &ilen);
    const unsigned k = 10; /* record number, 1-based after the header */
    uint8_t rec[64];
    memcpy(rec, orig + k * 64, 64);
    memcpy(rec + 16, orig + (k + 1) * 64 + 16, 8); /* offset of the next frame */
    reseal(rec);
    cr_assert_eq(cbfs_pwrite_full(fs.ifd, rec, 64, k * 64), CBFS_OK);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    load_ok(&fs, fs.ifd, false, &idx, &rep);
    cr_assert_eq(rep.records_replayed, k - 1);
    cr_assert_eq(rep.records_dropped, fs.nrec - (k - 1));
    cr_assert_eq(rep.frames_rescanned, fs.nrec - (k - 1));
    assert_reads(&fs, &idx);
    cbfs_index_free(&idx);
    load_ok(&fs, fs.ifd, true, &idx, &rep);
    cr_assert(rep.repaired);
    cbfs_index_free(&idx);
    assert_clean_reload(&fs, orig, ilen);
    free(orig);
    fs_destroy(&fs);
}

Test(format, sidecar_of_another_file)
{
    struct fileset a, b;
    fs_create(&a, 0xaaaa);
    fs_create(&b, 0xbbbb);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    const uint64_t alen = fsize(a.ifd), blen = fsize(b.dfd);
    cr_assert_eq(cbfs_index_load(b.dfd, a.ifd, true, NULL, &idx, &rep), CBFS_E_WRONG_FILE);
    cr_assert(!rep.repaired);
    cr_assert_eq(fsize(a.ifd), alen);
    cr_assert_eq(fsize(b.dfd), blen);
    /* A sidecar with only its header: caught by the rescan. */
    cr_assert_eq(ftruncate(a.ifd, 64), 0);
    cr_assert_eq(cbfs_index_load(b.dfd, a.ifd, true, NULL, &idx, &rep), CBFS_E_WRONG_FILE);
    cr_assert_eq(fsize(a.ifd), 64);
    fs_destroy(&a);
    fs_destroy(&b);
}

/* ---- leftover sidecars (docs/FORMAT.md 3.1, step 5) ---- */

/* Replaces fs's data file by n bytes that hold no frame, no file id and no
 * 64 zero bytes: the plain file that took a lost compressed file's name. */
static void fs_plain_data(struct fileset *fs, uint64_t n)
{
    cr_assert_eq(ftruncate(fs->dfd, 0), 0);
    uint8_t *p = malloc(n);
    cr_assert_not_null(p);
    for (uint64_t i = 0; i < n; i++) p[i] = (uint8_t)('a' + i % 26);
    cr_assert_eq(cbfs_pwrite_full(fs->dfd, p, n, 0), CBFS_OK);
    free(p);
}

/* Both loads, in repair mode, say "leftover" and write nothing. */
static void assert_leftover(struct fileset *fs)
{
    uint64_t dlen, ilen;
    uint8_t *d = slurp(fs->dfd, &dlen), *i = slurp(fs->ifd, &ilen);
    for (int fast = 0; fast < 2; fast++) {
        struct cbfs_index idx;
        struct cbfs_index_report rep;
        const cbfs_err e = fast ? cbfs_index_open(fs->dfd, fs->ifd, true, NULL, &idx, &rep)
                                : cbfs_index_load(fs->dfd, fs->ifd, true, NULL, &idx, &rep);
        cr_assert_eq(e, CBFS_E_WRONG_FILE, "fast %d: %s", fast, cbfs_err_str(e));
        cr_assert(rep.leftover && !rep.repaired, "fast %d", fast);
    }
    uint64_t n;
    uint8_t *now = slurp(fs->dfd, &n);
    cr_assert(n == dlen && memcmp(now, d, n) == 0, "the data file was changed");
    free(now);
    now = slurp(fs->ifd, &n);
    cr_assert(n == ilen && memcmp(now, i, n) == 0, "the sidecar was changed");
    free(now);
    free(d);
    free(i);
}

/* Loads fs (full and fast, read-only) and expects success, no leftover. */
static void assert_not_leftover(struct fileset *fs, struct cbfs_index_report *out)
{
    for (int fast = 0; fast < 2; fast++) {
        struct cbfs_index idx;
        struct cbfs_index_report rep;
        const cbfs_err e = fast ? cbfs_index_open(fs->dfd, fs->ifd, false, NULL, &idx, &rep)
                                : cbfs_index_load(fs->dfd, fs->ifd, false, NULL, &idx, &rep);
        cr_assert_eq(e, CBFS_OK, "fast %d: %s", fast, cbfs_err_str(e));
        cr_assert(!rep.leftover);
        cbfs_index_free(&idx);
        if (!fast) *out = rep;
    }
}

/* A plain file longer than every frame the sidecar records: each record
 * "fits", none matches, none leaves a trace. */
Test(format, leftover_sidecar_beside_long_plain_data)
{
    struct fileset fs;
    fs_create(&fs, 0x1e1e);
    fs_plain_data(&fs, fs.ref.data_end + 5000);
    assert_leftover(&fs);
    fs_destroy(&fs);
}

/* A plain file shorter than the first recorded frame: no record replays. */
Test(format, leftover_sidecar_beside_short_plain_data)
{
    struct fileset fs;
    fs_create(&fs, 0x1e1f);
    fs_plain_data(&fs, 24);
    assert_leftover(&fs);
    fs_destroy(&fs);
}

/* A header-only sidecar: data that does not begin with the envelope (zeros
 * included) is not ours; data that does is a torn first frame, cut on
 * repair as before; an empty data file is an empty file. */
Test(format, header_only_sidecar)
{
    struct fileset fs;
    fs_create_empty(&fs, 0x2e2e);
    fs_plain_data(&fs, 100);
    assert_leftover(&fs);
    uint8_t zeros[200] = {0};
    cr_assert_eq(ftruncate(fs.dfd, 0), 0);
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, zeros, sizeof zeros, 0), CBFS_OK);
    assert_leftover(&fs);

    fs_write_block(&fs, 0, 0, 7); /* a frame, then its record dropped */
    const uint64_t flen = fs.ref.data_end;
    cr_assert_eq(ftruncate(fs.ifd, 64), 0);
    cr_assert_eq(ftruncate(fs.dfd, 0), 0);
    uint8_t *frame = malloc(flen);
    cr_assert_not_null(frame);
    struct fileset whole;
    fs_create_empty(&whole, 0x2e2e);
    fs_write_block(&whole, 0, 0, 7);
    cr_assert_eq(cbfs_pread_full(whole.dfd, frame, flen, 0), CBFS_OK);
    fs_destroy(&whole);
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, frame, flen / 2, 0), CBFS_OK); /* torn */
    free(frame);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    assert_not_leftover(&fs, &rep);
    cr_assert_eq(rep.data_tail_bytes, flen / 2);
    cr_assert(!rep.tail_kept);
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, NULL, &idx, &rep), CBFS_OK);
    cbfs_index_free(&idx);
    cr_assert_eq(fsize(fs.dfd), 0);

    cr_assert_eq(ftruncate(fs.dfd, 0), 0);
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, false, NULL, &idx, &rep), CBFS_OK);
    cr_assert(!rep.leftover);
    cbfs_index_free(&idx);
    fs_destroy(&fs);
}

/* A file whose first flush never completed (cbfs_index_unborn): an empty
 * data file with an empty or torn header-less sidecar loads as an empty file
 * of the hint's block size, even with repair, and nothing is written; with no
 * sidecar, or a whole header that is damaged, it is no cbfs file. */
Test(format, unborn_file_is_empty)
{
    struct fileset fs;
    fs_create_empty(&fs, 0x5e5e);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    const struct cbfs_bs_hint hint = {.size = 64u << 10};
    static const uint8_t torn[10] = {'C', 'B', 'I', 'X', 1};
    for (int pass = 0; pass < 2; pass++) {
        cr_assert_eq(ftruncate(fs.ifd, 0), 0);
        if (pass) cr_assert_eq(cbfs_pwrite_full(fs.ifd, torn, sizeof torn, 0), CBFS_OK);
        cr_assert(cbfs_index_unborn(fs.dfd, fs.ifd));
        cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, &hint, &idx, &rep), CBFS_OK);
        cr_assert(rep.unborn && !rep.sidecar_missing && !rep.repaired);
        cr_assert_eq(idx.size, 0);
        cr_assert_eq(idx.block_size, hint.size);
        cbfs_index_free(&idx);
        cr_assert_eq(cbfs_index_open(fs.dfd, fs.ifd, false, NULL, &idx, &rep), CBFS_OK);
        cr_assert_eq(idx.block_size, CBFS_BLOCK_DEFAULT);
        cbfs_index_free(&idx);
        cr_assert_eq(fsize(fs.ifd), pass ? sizeof torn : 0, "the sidecar was written");
        cr_assert_eq(fsize(fs.dfd), 0);
    }
    cr_assert(cbfs_index_unborn(fs.dfd, -1));
    cr_assert_eq(cbfs_index_load(fs.dfd, -1, false, &hint, &idx, &rep), CBFS_E_BAD_MAGIC);
    uint8_t bad[CBFS_INDEX_REC_SIZE];
    memset(bad, 0x5a, sizeof bad);
    cr_assert_eq(cbfs_pwrite_full(fs.ifd, bad, sizeof bad, 0), CBFS_OK);
    cr_assert(!cbfs_index_unborn(fs.dfd, fs.ifd));
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, false, &hint, &idx, &rep), CBFS_E_BAD_MAGIC);
    fs_destroy(&fs);
}

/* The first frame's header damaged (a flipped envelope byte, or zeroed):
 * the other frames match, so the file is ours with one damaged block. */
Test(format, first_frame_damaged_is_not_a_leftover)
{
    struct fileset fs;
    fs_create(&fs, 0x3e3e);
    uint8_t b;
    cr_assert_eq(cbfs_pread_full(fs.dfd, &b, 1, 0), CBFS_OK);
    b ^= 0xFF;
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, &b, 1, 0), CBFS_OK);
    struct cbfs_index_report rep;
    assert_not_leftover(&fs, &rep);
    cr_assert_eq(rep.frames_damaged, 1);
    cr_assert_eq(rep.first_damaged_offset, 0);
    const uint8_t zeros[64] = {0};
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, zeros, 64, 0), CBFS_OK);
    assert_not_leftover(&fs, &rep);
    cr_assert_eq(rep.frames_damaged, 1);
    fs_destroy(&fs);
}

/* A file of one frame whose header is damaged: no frame matches, and the
 * header's trace decides. Envelope or file id left, or all zeros: ours
 * (and a tail after it is never cut); both gone: a leftover. */
Test(format, only_frame_damaged)
{
    struct fileset fs;
    fs_create_empty(&fs, 0x4e4e4e4e4e4e4e4eull);
    fs_write_block(&fs, 0, 0, 9);
    uint8_t h[64];
    cr_assert_eq(cbfs_pread_full(fs.dfd, h, 64, 0), CBFS_OK);
    struct cbfs_index idx;
    struct cbfs_index_report rep;

    uint8_t d[64];
    memcpy(d, h, 64);
    d[0] ^= 0xFF; /* envelope gone, file id left */
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, d, 64, 0), CBFS_OK);
    assert_not_leftover(&fs, &rep);
    cr_assert_eq(rep.frames_damaged, 1);

    memcpy(d, h, 64);
    d[50] ^= 0xFF; /* file id gone, envelope left */
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, d, 64, 0), CBFS_OK);
    assert_not_leftover(&fs, &rep);

    memset(d, 0, 64); /* zeroed by a crash, and 'plain' bytes after the frame */
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, d, 64, 0), CBFS_OK);
    const uint64_t dlen = fsize(fs.dfd);
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, "no frame here", 13, dlen), CBFS_OK);
    assert_not_leftover(&fs, &rep);
    cr_assert_eq(rep.data_tail_bytes, 13);
    cr_assert(rep.tail_kept);
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, NULL, &idx, &rep), CBFS_OK);
    cbfs_index_free(&idx);
    cr_assert_eq(fsize(fs.dfd), dlen + 13, "a tail beside no intact frame was cut");

    memcpy(d, h, 64);
    d[0] ^= 0xFF;
    d[50] ^= 0xFF; /* neither left: nothing says it was ours */
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, d, 64, 0), CBFS_OK);
    assert_leftover(&fs);
    fs_destroy(&fs);
}

/* The only frame damaged with no trace left, and where its frame ends a
 * frame of the file that the table refuses (a ulen past the block size) or
 * that does not decode (torn): that frame shows the file, so it is no
 * leftover, and the tail, never cut, shows it again to the reload of the
 * repaired pair (docs/FORMAT.md 3.1 step 5, 3.2). The refused one was cut
 * as a torn tail, and the reload called the file a leftover. */
Test(format, frame_of_the_file_past_the_damaged_frames)
{
    for (int torn = 0; torn < 2; torn++) {
        struct fileset fs;
        fs_create_empty(&fs, 0x7e7e7e7e7e7e7e7eull);
        fs_write_block(&fs, 0, 0, 13);
        uint8_t d[64];
        cr_assert_eq(cbfs_pread_full(fs.dfd, d, 64, 0), CBFS_OK);
        d[0] ^= 0xFF;
        d[50] ^= 0xFF; /* neither the envelope nor the file id left */
        cr_assert_eq(cbfs_pwrite_full(fs.dfd, d, 64, 0), CBFS_OK);
        /* a hole of two blocks: decodes, and the table refuses it */
        static const uint8_t zeros[2 * BS];
        uint8_t frame[CBFS_FRAME_HDR_SIZE + 4 * BS];
        size_t n;
        struct cbfs_frame_hdr h;
        cr_assert_eq(cbfs_frame_encode(cbfs_codec_by_id(CBFS_CODEC_NONE), 0, fs.file_id, 1,
                                       fs.ref.next_gen, zeros, sizeof zeros, frame, sizeof frame,
                                       &n, &h),
                     CBFS_OK);
        if (torn) {
            /* its hash no longer matches its bytes: it does not decode */
            cbfs_put_le64(frame + 40, h.hash ^ 1);
            reseal(frame);
        }
        const uint64_t dlen = fsize(fs.dfd);
        cr_assert_eq(cbfs_pwrite_full(fs.dfd, frame, n, dlen), CBFS_OK);
        struct cbfs_index idx;
        struct cbfs_index_report rep;
        assert_not_leftover(&fs, &rep);
        cr_assert(rep.tail_kept && rep.data_tail_bytes == n, "torn %d", torn);
        cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, NULL, &idx, &rep), CBFS_OK);
        cbfs_index_free(&idx);
        cr_assert_eq(fsize(fs.dfd), dlen + n, "torn %d: the frame of the file was cut", torn);
        assert_not_leftover(&fs, &rep);
        cr_assert(rep.tail_kept, "torn %d", torn);
        fs_destroy(&fs);
    }
}

Test(format, sidecar_newer_version)
{
    struct fileset fs;
    fs_create(&fs, 0x6666);
    uint8_t hdr[64];
    cr_assert_eq(cbfs_pread_full(fs.ifd, hdr, 64, 0), CBFS_OK);
    cbfs_put_le16(hdr + 8, 2);
    reseal(hdr);
    cr_assert_eq(cbfs_pwrite_full(fs.ifd, hdr, 64, 0), CBFS_OK);
    /* Damage that a v1 repair would "fix": must stay untouched. */
    const uint64_t ilen = fsize(fs.ifd), dlen = fsize(fs.dfd);
    cr_assert_eq(ftruncate(fs.ifd, (off_t)(ilen - 10)), 0);
    cr_assert_eq(cbfs_pwrite_full(fs.dfd, "tail", 4, dlen), CBFS_OK);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, true, NULL, &idx, &rep), CBFS_E_VERSION);
    cr_assert(!rep.repaired);
    cr_assert_eq(fsize(fs.ifd), ilen - 10);
    cr_assert_eq(fsize(fs.dfd), dlen + 4);
    fs_destroy(&fs);
}

Test(format, corrupt_frame_payload_detected)
{
    struct fileset fs;
    fs_create(&fs, 0x7777);
    uint8_t scratch[CBFS_FRAME_HDR_SIZE + 2 * BS], out[BS];
    unsigned checked = 0;
    for (uint64_t b = 0; b < fs.ref.nblocks; b++) {
        const struct cbfs_index_entry *e = cbfs_index_get(&fs.ref, b);
        if (!e || (e->flags & CBFS_FRAME_HOLE) || e->plen < 16) continue;
        const uint64_t at = e->offset + CBFS_FRAME_HDR_SIZE + e->plen / 2;
        uint8_t byte;
        cr_assert_eq(cbfs_pread_full(fs.dfd, &byte, 1, at), CBFS_OK);
        byte ^= 0x01;
        cr_assert_eq(cbfs_pwrite_full(fs.dfd, &byte, 1, at), CBFS_OK);
        cr_assert_eq(cbfs_block_read(fs.dfd, e, b, scratch, out), CBFS_E_CORRUPT,
                     "block %llu codec %u", (unsigned long long)b, e->codec);
        checked++;
    }
    cr_assert_gt(checked, 20);
    /* An entry that does not match the frame at its offset is corruption. */
    struct cbfs_index_entry e = *cbfs_index_get(&fs.ref, 0);
    e.generation++;
    cr_assert_eq(cbfs_block_read(fs.dfd, &e, 0, scratch, out), CBFS_E_CORRUPT);
    fs_destroy(&fs);
}

Test(format, index_apply_accounting)
{
    struct cbfs_index idx;
    cbfs_index_init(&idx, BS, 1);
    struct cbfs_index_rec r = {.type = CBFS_REC_BLOCK, .block = 1000, .offset = 0, .plen = 100,
                               .ulen = BS, .generation = 1};
    cr_assert_eq(cbfs_index_apply(&idx, &r), CBFS_OK);
    cr_assert_eq(idx.nblocks, 1001);
    cr_assert_eq(idx.size, 1001ull * BS);
    cr_assert_null(cbfs_index_get(&idx, 999));
    cr_assert_null(cbfs_index_get(&idx, 5000));
    cr_assert_not_null(cbfs_index_get(&idx, 1000));
    r.offset = 164;
    r.generation = 2;
    r.plen = 50;
    cr_assert_eq(cbfs_index_apply(&idx, &r), CBFS_OK);
    cr_assert_eq(idx.live_frames, 1);
    cr_assert_eq(idx.live_bytes, 114);
    cr_assert_eq(idx.dead_frames, 1);
    cr_assert_eq(idx.dead_bytes, 164);
    cr_assert_eq(idx.data_end, 278);
    cr_assert_eq(idx.next_gen, 3);
    /* Truncate into the block: it straddles and stays. */
    struct cbfs_index_rec s = {.type = CBFS_REC_SIZE, .block = 1000ull * BS + 1, .offset = 278,
                               .generation = 3, .flags = CBFS_FRAME_SIZE};
    cr_assert_eq(cbfs_index_apply(&idx, &s), CBFS_OK);
    cr_assert_not_null(cbfs_index_get(&idx, 1000));
    cr_assert_eq(idx.size, 1000ull * BS + 1);
    s.block = 1000ull * BS;
    s.offset = 342;
    s.generation = 4;
    cr_assert_eq(cbfs_index_apply(&idx, &s), CBFS_OK);
    cr_assert_null(cbfs_index_get(&idx, 1000));
    cr_assert_eq(idx.nblocks, 1000);
    cr_assert_eq(idx.live_frames, 0);
    cr_assert_eq(idx.live_bytes, 0);
    cr_assert_eq(idx.dead_frames, 4);
    cr_assert_eq(idx.dead_bytes, 164 + 128 + 114);
    /* Impossible records are refused. */
    r.ulen = BS + 1;
    cr_assert_eq(cbfs_index_apply(&idx, &r), CBFS_E_CORRUPT);
    r.ulen = BS;
    r.block = UINT64_MAX / 2;
    cr_assert_eq(cbfs_index_apply(&idx, &r), CBFS_E_FBIG);
    /* A SIZE past the last block a file may have (a review found 2^60 passed
     * verify and sent stat walking 2^44 blocks). */
    s.block = CBFS_MAX_BLOCKS * BS + 1;
    s.generation = 5;
    cr_assert_eq(cbfs_index_apply(&idx, &s), CBFS_E_FBIG);
    s.block = CBFS_MAX_BLOCKS * BS;
    cr_assert_eq(cbfs_index_apply(&idx, &s), CBFS_OK);
    cbfs_index_free(&idx);
    cbfs_index_free(NULL);
}

/* ---- stock tools decode a sequentially written file ---- */

static void stock_roundtrip(unsigned codec_id, const char *tool)
{
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(codec_id);
    if (!c) cr_skip_test("codec %u not built", codec_id);
    char cmd[512];
    snprintf(cmd, sizeof cmd, "command -v %s >/dev/null 2>&1", tool);
    if (system(cmd) != 0) cr_skip_test("%s not installed", tool);

    char dir[] = "/tmp/cbfs-stock-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    char path[128], outp[128];
    snprintf(path, sizeof path, "%s/data", dir);
    snprintf(outp, sizeof outp, "%s/out", dir);
    const size_t bs = 64 * 1024, nb = 8, tail = 12345;
    const size_t total = (nb - 1) * bs + tail;
    uint8_t *content = malloc(total), *frame = malloc(cbfs_frame_bound(c, bs));
    cr_assert(content && frame);
    cbfs_td_backup(content, total, 5);
    memset(content + 2 * bs, 0, bs);               /* a HOLE block */
    cbfs_td_random(content + 3 * bs, bs, 77);      /* an incompressible block */
    FILE *f = fopen(path, "wb");
    cr_assert_not_null(f);
    for (size_t b = 0; b < nb; b++) {
        const size_t len = b == nb - 1 ? tail : bs;
        size_t n;
        struct cbfs_frame_hdr h;
        cr_assert_eq(cbfs_frame_encode(c, c->default_level, 99, b, b + 1, content + b * bs, len,
                                       frame, cbfs_frame_bound(c, bs), &n, &h),
                     CBFS_OK);
        cr_assert_eq(h.flags & CBFS_FRAME_RAW, 0);
        if (b == 2) cr_assert_eq(h.flags, CBFS_FRAME_HOLE);
        cr_assert_eq(fwrite(frame, 1, n, f), n);
    }
    cr_assert_eq(fclose(f), 0);
    snprintf(cmd, sizeof cmd, "%s -d -q -c '%s' > '%s'", tool, path, outp);
    const int rc = system(cmd);
    uint8_t *got = malloc(total + 1);
    cr_assert_not_null(got);
    f = fopen(outp, "rb");
    cr_assert_not_null(f);
    const size_t n = fread(got, 1, total + 1, f);
    fclose(f);
    unlink(path);
    unlink(outp);
    rmdir(dir);
    cr_assert_eq(rc, 0, "%s failed", cmd);
    cr_assert_eq(n, total, "%s produced %zu bytes, want %zu", tool, n, total);
    cr_assert_eq(memcmp(got, content, total), 0, "%s output differs", tool);
    free(got);
    free(content);
    free(frame);
}

Test(stock, zstd_decodes_sequential_file)
{
    stock_roundtrip(CBFS_CODEC_ZSTD, "zstd");
}

Test(stock, lz4_decodes_sequential_file)
{
    stock_roundtrip(CBFS_CODEC_LZ4, "lz4");
}

/* The engine's fast open (cbfs_index_open) builds the same table as the full
 * check on a clean file, and still finds the cut when the data file lost
 * its last frames (the sidecar ran ahead: the last record has no frame). */
Test(format, fast_open_equals_full_load)
{
    struct fileset fs;
    fs_create(&fs, 0x4242);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    cr_assert_eq(cbfs_index_open(fs.dfd, fs.ifd, false, NULL, &idx, &rep), CBFS_OK);
    assert_same_table(&idx, &fs.ref);
    cr_assert_eq(rep.records_replayed, fs.nrec);
    assert_reads(&fs, &idx);
    cbfs_index_free(&idx);

    /* Cut the data file in the middle of its last frame. */
    const uint64_t dlen = fsize(fs.dfd);
    cr_assert_eq(ftruncate(fs.dfd, (off_t)(dlen - 7)), 0);
    struct cbfs_index full;
    struct cbfs_index_report frep;
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, false, NULL, &full, &frep), CBFS_OK);
    cr_assert_eq(cbfs_index_open(fs.dfd, fs.ifd, false, NULL, &idx, &rep), CBFS_OK);
    assert_same_table(&idx, &full);
    cr_assert_eq(rep.records_replayed, frep.records_replayed);
    cr_assert_eq(rep.records_dropped, frep.records_dropped);
    cbfs_index_free(&idx);
    cbfs_index_free(&full);
    fs_destroy(&fs);
}

/* The fast open's fallback: the last record passes every cheap check (good
 * checksum, frame inside the file) but names another frame — the sidecar ran
 * ahead of the data. Only the full check finds it; the fast open must fall
 * back to it and build the same table, not index the wrong frame. */
Test(format, fast_open_falls_back_when_last_record_mismatches)
{
    struct fileset fs;
    fs_create(&fs, 0x5151);
    uint64_t ilen;
    uint8_t *orig = slurp(fs.ifd, &ilen);
    const uint64_t last = ilen - 64, prev = ilen - 128;
    uint8_t rec[64];
    memcpy(rec, orig + last, 64);
    memcpy(rec + 16, orig + prev + 16, 8); /* offset of the previous record's frame */
    reseal(rec);
    cr_assert_eq(cbfs_pwrite_full(fs.ifd, rec, 64, last), CBFS_OK);
    struct cbfs_index full, fast;
    struct cbfs_index_report frep, rep;
    cr_assert_eq(cbfs_index_load(fs.dfd, fs.ifd, false, NULL, &full, &frep), CBFS_OK);
    cr_assert_eq(frep.records_replayed, fs.nrec - 1);
    cr_assert_eq(cbfs_index_open(fs.dfd, fs.ifd, false, NULL, &fast, &rep), CBFS_OK);
    assert_same_table(&fast, &full);
    cr_assert_eq(rep.records_replayed, frep.records_replayed);
    cbfs_index_free(&fast);
    cbfs_index_free(&full);
    free(orig);
    fs_destroy(&fs);
}

/* ---- cbfs_stock_check: the stock-decode rule, frame by frame ---- */

/* A data file built frame by frame, its index kept as cbfs_index_load would. */
struct stockfile {
    char dir[40], path[64];
    int fd;
    struct cbfs_index idx;
};

static void sf_open(struct stockfile *sf)
{
    strcpy(sf->dir, "/tmp/cbfs-stockchk-XXXXXX");
    cr_assert_not_null(mkdtemp(sf->dir));
    snprintf(sf->path, sizeof sf->path, "%s/data", sf->dir);
    sf->fd = open(sf->path, O_RDWR | O_CREAT | O_TRUNC, 0600);
    cr_assert(sf->fd >= 0);
    cbfs_index_init(&sf->idx, BS, 7);
}

static void sf_append(struct stockfile *sf, const void *frame, size_t n,
                      const struct cbfs_frame_hdr *h)
{
    const uint64_t off = sf->idx.data_end;
    cr_assert_eq(cbfs_pwrite_full(sf->fd, frame, n, off), CBFS_OK);
    struct cbfs_index_rec r;
    cbfs_index_rec_from_frame(h, off, &r);
    cr_assert_eq(cbfs_index_apply(&sf->idx, &r), CBFS_OK);
}

/* Appends block b of len bytes (kind 0 rows, 1 zeros, 2 random) with codec id. */
static void sf_block(struct stockfile *sf, unsigned codec_id, uint64_t b, size_t len, int kind)
{
    const struct cbfs_codec_ops *c = cbfs_codec_by_id(codec_id);
    cr_assert_not_null(c);
    uint8_t buf[BS], frame[CBFS_FRAME_HDR_SIZE + 2 * BS];
    if (kind == 0) cbfs_td_rows(buf, len, b);
    else if (kind == 1) memset(buf, 0, len);
    else cbfs_td_random(buf, len, b);
    size_t n;
    struct cbfs_frame_hdr h;
    cr_assert_eq(cbfs_frame_encode(c, c->default_level, 7, b, sf->idx.next_gen, buf, len, frame,
                                   sizeof frame, &n, &h),
                 CBFS_OK);
    sf_append(sf, frame, n, &h);
}

static void sf_size(struct stockfile *sf, uint64_t size)
{
    uint8_t frame[CBFS_FRAME_HDR_SIZE];
    struct cbfs_frame_hdr h;
    cbfs_frame_size_encode(7, sf->idx.next_gen, size, frame, &h);
    sf_append(sf, frame, sizeof frame, &h);
}

/* Checks the verdict ("yes (TOOL)" or "no: WHY") and closes the file. */
static void sf_expect(struct stockfile *sf, const char *want)
{
    struct cbfs_stock v;
    cr_assert_eq(cbfs_stock_check(sf->fd, &sf->idx, &v), CBFS_OK);
    char got[200];
    if (v.yes)
        snprintf(got, sizeof got, "yes (%s)", v.tool);
    else
        snprintf(got, sizeof got, "no: %s", v.why);
    cr_expect_str_eq(got, want);
    cbfs_index_free(&sf->idx);
    close(sf->fd);
    unlink(sf->path);
    rmdir(sf->dir);
}

Test(stock, check_yes)
{
    struct stockfile sf;
    sf_open(&sf); /* rows, a hole (zstd carries its zeros), random, a short last block */
    for (uint64_t b = 0; b < 4; b++) sf_block(&sf, CBFS_CODEC_ZSTD, b, BS, (int)(b % 3));
    sf_block(&sf, CBFS_CODEC_ZSTD, 4, 100, 0);
    sf_expect(&sf, "yes (zstd -d)");
    sf_open(&sf);
    for (uint64_t b = 0; b < 3; b++) sf_block(&sf, CBFS_CODEC_LZ4, b, BS, (int)(b % 3));
    sf_expect(&sf, "yes (lz4 -d)");
    sf_open(&sf); /* a SIZE frame that changes nothing the stock tools see */
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_size(&sf, BS);
    sf_block(&sf, CBFS_CODEC_ZSTD, 1, 10, 0);
    sf_expect(&sf, "yes (zstd -d)");
    sf_open(&sf); /* frames, but no block frame: both tools output nothing */
    sf_size(&sf, 0);
    sf_expect(&sf, "yes (zstd -d or lz4 -d)");
}

Test(stock, check_no)
{
    struct stockfile sf;
    sf_open(&sf);
    sf_expect(&sf, "no: the data file is empty: nothing to decode (zstd -d calls an empty input "
                   "an error, lz4 -d prints nothing)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_block(&sf, CBFS_CODEC_ZSTD, 2, BS, 0);
    sf_block(&sf, CBFS_CODEC_ZSTD, 1, BS, 0);
    sf_expect(&sf, "no: block 1 stored after block 2");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_block(&sf, CBFS_CODEC_ZSTD, 2, BS, 0);
    sf_expect(&sf, "no: block 1 never written");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_LZ4, 0, BS, 0);
    sf_block(&sf, CBFS_CODEC_LZ4, 1, BS, 0);
    sf_block(&sf, CBFS_CODEC_LZ4, 0, BS, 2);
    sf_expect(&sf, "no: block 0 stored twice (a rewrite)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_block(&sf, CBFS_CODEC_ZSTD, 1, BS, 0);
    sf_size(&sf, BS);
    sf_expect(&sf, "no: block 1 cut off by a truncate (a SIZE frame)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_size(&sf, 100);
    sf_expect(&sf, "no: the size (100) ends inside block 0 (a SIZE frame cut it)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, 100, 0);
    sf_size(&sf, 200);
    sf_expect(&sf, "no: the size (200) is past the data of block 0 (a SIZE frame extended it)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_size(&sf, 3 * BS);
    sf_expect(&sf, "no: block 1 never written");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, 100, 0);
    sf_block(&sf, CBFS_CODEC_ZSTD, 1, BS, 0);
    sf_expect(&sf, "no: block 0 holds 100 of 4096 bytes (cbfs reads the rest as zeros)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    sf_block(&sf, CBFS_CODEC_LZ4, 1, BS, 0);
    sf_expect(&sf, "no: several codecs (zstd, then lz4 from block 1)");
    sf_open(&sf);
    sf_block(&sf, CBFS_CODEC_NONE, 0, BS, 0);
    sf_expect(&sf, "no: codec none");
    sf_open(&sf); /* torn tail: the stock tools fail or stop there */
    sf_block(&sf, CBFS_CODEC_ZSTD, 0, BS, 0);
    cr_assert_eq(cbfs_pwrite_full(sf.fd, "torn", 4, sf.idx.data_end), CBFS_OK);
    char want[96];
    snprintf(want, sizeof want, "no: 4 bytes at offset %llu are not a frame",
             (unsigned long long)sf.idx.data_end);
    sf_expect(&sf, want);
}

/* RAW and payload-less hole frames: what xz/bzip2 write; never stock, whatever the codec
 * byte says. Built by hand since the encoder never writes them with zstd or lz4. */
Test(stock, check_raw_and_bare_hole)
{
    const unsigned kinds[] = {CBFS_FRAME_RAW, CBFS_FRAME_HOLE};
    const char *const want[] = {"no: block 0 stored verbatim (a RAW frame)",
                                "no: block 0 is a hole frame without payload"};
    for (unsigned k = 0; k < 2; k++) {
        struct stockfile sf;
        sf_open(&sf);
        uint8_t frame[CBFS_FRAME_HDR_SIZE + BS];
        memset(frame, 0, sizeof frame);
        struct cbfs_frame_hdr h = {.version = 1, .codec = CBFS_CODEC_ZSTD, .flags = (uint8_t)kinds[k],
                                   .block = 0, .generation = 1, .ulen = BS,
                                   .plen = kinds[k] == CBFS_FRAME_RAW ? BS : 0,
                                   .hash = cbfs_hash64(frame + CBFS_FRAME_HDR_SIZE, BS),
                                   .file_id = 7};
        cbfs_frame_hdr_encode(&h, frame);
        sf_append(&sf, frame, CBFS_FRAME_HDR_SIZE + h.plen, &h);
        sf_expect(&sf, want[k]);
    }
}

/* The block table grows through malloc, then its own mapping (from 1 MiB),
 * then mremap: entries written at each size survive every move, and the new
 * ones read as never written (generation 0). */
Test(format, index_table_grows_across_the_mapping)
{
    struct cbfs_index idx;
    cbfs_index_init(&idx, 65536, 1);
    const uint64_t ns[] = {100, 20000, 40000, 1u << 20, CBFS_MAX_BLOCKS};
    const size_t n = sizeof ns / sizeof ns[0];
    for (size_t k = 0; k < n; k++) {
        cr_assert_eq(cbfs_index_reserve(&idx, ns[k]), CBFS_OK, "reserve %llu",
                     (unsigned long long)ns[k]);
        cr_assert_geq(idx.cap, ns[k]);
        idx.v[ns[k] - 1].generation = ns[k];
    }
    for (size_t k = 0; k < n; k++)
        cr_assert_eq(idx.v[ns[k] - 1].generation, ns[k], "entry %llu lost",
                     (unsigned long long)(ns[k] - 1));
    for (uint64_t b = 0; b < idx.cap; b += 4099) {
        bool set = false;
        for (size_t k = 0; k < n; k++) set |= b == ns[k] - 1;
        if (!set) cr_assert_eq(idx.v[b].generation, 0, "entry %llu", (unsigned long long)b);
    }
    cbfs_index_free(&idx);
    cr_assert_null(idx.v);
}

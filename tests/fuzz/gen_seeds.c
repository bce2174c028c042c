/* Seed corpus generator for the cbfs fuzz targets: real frames and sidecars
 * written by the library itself, with every codec, RAW, HOLE and SIZE frames.
 * Usage: cbfs-fuzz-seeds OUTDIR [GOLDEN_DIR]; writes OUTDIR/frame_hdr/,
 * OUTDIR/block_decode/, OUTDIR/index_replay/ (in the input layout of
 * fuzz_index_replay: u16 LE sidecar length or 0xFFFF, sidecar, data),
 * OUTDIR/index_open/ (the same pairs, each behind several hint bytes) and
 * OUTDIR/store_conf/ (store.conf files, written by cbfs_store_write_conf in
 * a scratch store under $TMPDIR, and hand-edited variants). */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../unit/testdata.h"
#include "cbfs/codec.h"
#include "cbfs/format.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

#define SEED_BS 4096u          /* small blocks keep seeds (and max_len) small */
#define SEED_FILE_ID 0x0123456789ABCDEFull
#define SEED_MAX (64u << 10)   /* a growing buffer's limit: seeds stay small */

struct seed_buf {
    uint8_t b[SEED_MAX];
    size_t n;
};

static int seed_write_one(const char *dir, const char *sub, const char *name, const void *p,
                          size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s/%s", dir, sub, name);
    FILE *const f = fopen(path, "wb");
    if (!f) {
        fprintf(stderr, "cbfs-fuzz-seeds: %s: %s\n", path, strerror(errno));
        return -1;
    }
    const int ok = fwrite(p, 1, n, f) == n;
    if (fclose(f) != 0 || !ok) {
        fprintf(stderr, "cbfs-fuzz-seeds: cannot write %s\n", path);
        return -1;
    }
    return 0;
}

/* fuzz_index_open's hint bytes (its kind in bits 0-1, .size in 2-5,
 * .otherwise in 6-7): none; 4 KiB as candidate (rule 3) and asserted (rule
 * 1); 8 KiB unbacked (refused); 4 KiB store-wide (rule 5 taken) and 8 KiB
 * store-wide (refused by the 4 KiB blocks that look smaller). */
static const uint8_t seed_hints[] = {0x00, 0x05, 0x06, 0x09, 0x43, 0x83};

/* Writes OUTDIR/SUB/NAME; an index_replay input is also written, once per
 * hint byte in front of it, as index_open/NAME.hXX. */
static int seed_write(const char *dir, const char *sub, const char *name, const void *p,
                      size_t n)
{
    if (seed_write_one(dir, sub, name, p, n)) return -1;
    if (strcmp(sub, "index_replay") != 0) return 0;
    static uint8_t buf[1 + 2 * SEED_MAX + 2];
    if (n > sizeof buf - 1) return -1;
    memcpy(buf + 1, p, n);
    for (size_t i = 0; i < sizeof seed_hints; i++) {
        char hname[256];
        snprintf(hname, sizeof hname, "%s.h%02x", name, seed_hints[i]);
        buf[0] = seed_hints[i];
        if (seed_write_one(dir, "index_open", hname, buf, n + 1)) return -1;
    }
    return 0;
}

static int seed_mkdir(const char *dir, const char *sub)
{
    char path[4096];
    snprintf(path, sizeof path, "%s%s%s", dir, sub ? "/" : "", sub ? sub : "");
    if (mkdir(path, 0755) != 0 && errno != EEXIST) {
        fprintf(stderr, "cbfs-fuzz-seeds: mkdir %s: %s\n", path, strerror(errno));
        return -1;
    }
    return 0;
}

/* Block contents: 0 rows (compressible), 1 zeros (HOLE), 2 random (RAW for
 * xz/bzip2), 3 a 1000-byte partial block of rows, 4 an empty block. */
enum { KIND_ROWS, KIND_ZERO, KIND_RANDOM, KIND_PARTIAL, KIND_EMPTY, KIND_COUNT };
static const char *const kind_names[KIND_COUNT] = {"rows", "zero", "random", "partial", "empty"};

static size_t seed_block(int kind, uint8_t *buf, uint64_t seed)
{
    switch (kind) {
    case KIND_ROWS: cbfs_td_rows(buf, SEED_BS, seed); return SEED_BS;
    case KIND_ZERO: memset(buf, 0, SEED_BS); return SEED_BS;
    case KIND_RANDOM: cbfs_td_random(buf, SEED_BS, seed); return SEED_BS;
    case KIND_PARTIAL: cbfs_td_rows(buf, 1000, seed); return 1000;
    default: return 0;
    }
}

/* Appends one frame for block to the data buffer and its record to the list. */
static int seed_add_frame(struct seed_buf *data, struct cbfs_index_rec *recs, size_t *nrec,
                          const struct cbfs_codec_ops *codec, uint64_t block, uint64_t gen,
                          const uint8_t *blk, size_t len)
{
    struct cbfs_frame_hdr h;
    size_t flen = 0;
    if (cbfs_frame_bound(codec, len) > SEED_MAX - data->n) return -1;
    /* bzip2 at its default level asks the decoder for 3.6 MB of state per
     * block, which costs ~5 ms under ASan; level 1 (400 KB) keeps the fuzzer
     * fast and exercises the same decoder (mutations reach the level byte). */
    const int level = codec->id == CBFS_CODEC_BZIP2 ? codec->min_level : codec->default_level;
    const cbfs_err e = cbfs_frame_encode(codec, level, SEED_FILE_ID, block, gen,
                                         blk, len, data->b + data->n, SEED_MAX - data->n,
                                         &flen, &h);
    if (e) {
        fprintf(stderr, "cbfs-fuzz-seeds: encode: %s\n", cbfs_err_str(e));
        return -1;
    }
    cbfs_index_rec_from_frame(&h, data->n, &recs[(*nrec)++]);
    data->n += flen;
    return 0;
}

static void seed_add_size(struct seed_buf *data, struct cbfs_index_rec *recs, size_t *nrec,
                          uint64_t gen, uint64_t size)
{
    struct cbfs_frame_hdr h;
    cbfs_frame_size_encode(SEED_FILE_ID, gen, size, data->b + data->n, &h);
    cbfs_index_rec_from_frame(&h, data->n, &recs[(*nrec)++]);
    data->n += CBFS_FRAME_HDR_SIZE;
}

/* One fuzz_index_replay input: sidecar (header + the first nside records,
 * plus torn bytes of the next one), data (cut to dlen). */
static int seed_write_pair(const char *dir, const char *name, const struct seed_buf *data,
                           size_t dlen, const struct cbfs_index_rec *recs, size_t nrec,
                           int sidecar, size_t nside, size_t torn)
{
    static uint8_t out[2 + SEED_MAX + SEED_MAX];
    size_t n = 2;
    if (sidecar) {
        const struct cbfs_index_rec hdr = {.type = CBFS_REC_HEADER,
                                           .version = CBFS_FORMAT_VERSION,
                                           .block_size = SEED_BS,
                                           .file_id = SEED_FILE_ID,
                                           .created_ns = 1700000000000000000ull};
        cbfs_index_rec_encode(&hdr, out + n);
        n += CBFS_INDEX_REC_SIZE;
        for (size_t i = 0; i < nrec && i < nside + (torn ? 1 : 0); i++) {
            uint8_t rec[CBFS_INDEX_REC_SIZE];
            cbfs_index_rec_encode(&recs[i], rec);
            const size_t take = i < nside ? sizeof rec : torn;
            memcpy(out + n, rec, take);
            n += take;
        }
        cbfs_put_le16(out, (uint16_t)(n - 2));
    } else {
        cbfs_put_le16(out, 0xFFFF);
    }
    memcpy(out + n, data->b, dlen);
    n += dlen;
    return seed_write(dir, "index_replay", name, out, n);
}

/* Frames of every codec and block kind, plus SIZE frames. */
static int seed_frames(const char *dir)
{
    static uint8_t blk[SEED_BS];
    static struct seed_buf one;
    char name[128];
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *const codec = cbfs_codec_by_id(id);
        if (!codec) continue;
        for (int k = 0; k < KIND_COUNT; k++) {
            struct cbfs_index_rec rec;
            size_t nrec = 0;
            one.n = 0;
            const size_t len = seed_block(k, blk, 42 + (uint64_t)k);
            if (seed_add_frame(&one, &rec, &nrec, codec, (uint64_t)k, 1 + (uint64_t)k, blk, len))
                return -1;
            snprintf(name, sizeof name, "%s_%s.frame", codec->name, kind_names[k]);
            if (seed_write(dir, "block_decode", name, one.b, one.n)) return -1;
            snprintf(name, sizeof name, "%s_%s.hdr", codec->name, kind_names[k]);
            if (seed_write(dir, "frame_hdr", name, one.b, CBFS_FRAME_HDR_SIZE)) return -1;
        }
    }
    uint8_t hdr[CBFS_FRAME_HDR_SIZE];
    cbfs_frame_size_encode(SEED_FILE_ID, 7, 40000, hdr, NULL);
    if (seed_write(dir, "block_decode", "size.frame", hdr, sizeof hdr)) return -1;
    if (seed_write(dir, "frame_hdr", "size.hdr", hdr, sizeof hdr)) return -1;
    return 0;
}

/* Whole files: per codec, blocks 0-3 of every kind, block 0 rewritten, a SIZE
 * frame; as clean, lagging, torn, sidecar-less and tail-garbage variants. */
static int seed_files(const char *dir)
{
    static uint8_t blk[SEED_BS];
    static struct seed_buf data;
    struct cbfs_index_rec recs[16];
    char name[128];
    for (unsigned id = 1; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *const codec = cbfs_codec_by_id(id);
        if (!codec) continue;
        size_t nrec = 0;
        uint64_t gen = 1;
        data.n = 0;
        const int kinds[] = {KIND_ROWS, KIND_ZERO, KIND_RANDOM, KIND_PARTIAL};
        for (uint64_t b = 0; b < 4; b++) {
            const size_t len = seed_block(kinds[b], blk, 100 + b);
            if (seed_add_frame(&data, recs, &nrec, codec, b, gen++, blk, len)) return -1;
        }
        const size_t len = seed_block(KIND_ROWS, blk, 999);
        if (seed_add_frame(&data, recs, &nrec, codec, 0, gen++, blk, len)) return -1;
        seed_add_size(&data, recs, &nrec, gen++, 3 * SEED_BS + 500);
        const size_t full = data.n;

        snprintf(name, sizeof name, "%s_clean.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full, recs, nrec, 1, nrec, 0)) return -1;
        snprintf(name, sizeof name, "%s_lagging.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full, recs, nrec, 1, nrec - 2, 0)) return -1;
        snprintf(name, sizeof name, "%s_torn.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full, recs, nrec, 1, nrec - 1, 20)) return -1;
        snprintf(name, sizeof name, "%s_nosidecar.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full, recs, nrec, 0, 0, 0)) return -1;
        snprintf(name, sizeof name, "%s_hdronly.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full, recs, nrec, 1, 0, 0)) return -1;
        /* data cut inside the last block frame: torn frame + records past it */
        snprintf(name, sizeof name, "%s_torndata.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full - CBFS_FRAME_HDR_SIZE - 10, recs, nrec, 1,
                            nrec, 0))
            return -1;
        /* garbage after the last frame */
        memset(data.b + full, 0x5A, 100);
        snprintf(name, sizeof name, "%s_tail.pair", codec->name);
        if (seed_write_pair(dir, name, &data, full + 100, recs, nrec, 1, nrec, 0)) return -1;
    }
    return 0;
}

/* The golden v1 pair (docs/FORMAT.md 5), if its directory was given. */
static int seed_golden(const char *dir, const char *golden)
{
    static struct seed_buf side, data;
    char path[4096];
    struct seed_buf *const bufs[2] = {&side, &data};
    const char *const names[2] = {"v1.data.cbfsidx", "v1.data"};
    for (int i = 0; i < 2; i++) {
        snprintf(path, sizeof path, "%s/%s", golden, names[i]);
        FILE *const f = fopen(path, "rb");
        if (!f) {
            fprintf(stderr, "cbfs-fuzz-seeds: %s: %s\n", path, strerror(errno));
            return -1;
        }
        bufs[i]->n = fread(bufs[i]->b, 1, SEED_MAX, f);
        fclose(f);
    }
    static uint8_t out[2 + SEED_MAX + SEED_MAX];
    if (side.n >= 0xFFFF) return -1;
    cbfs_put_le16(out, (uint16_t)side.n);
    memcpy(out + 2, side.b, side.n);
    memcpy(out + 2 + side.n, data.b, data.n);
    if (seed_write(dir, "index_replay", "golden_v1.pair", out, 2 + side.n + data.n)) return -1;
    /* and each of its frames on its own */
    uint64_t off = 0;
    int i = 0;
    struct cbfs_frame_hdr h;
    while (data.n - off >= CBFS_FRAME_HDR_SIZE &&
           cbfs_frame_hdr_decode(data.b + off, &h) == CBFS_OK &&
           data.n - off - CBFS_FRAME_HDR_SIZE >= h.plen) {
        char name[64];
        snprintf(name, sizeof name, "golden_%02d.frame", i++);
        if (seed_write(dir, "block_decode", name, data.b + off, CBFS_FRAME_HDR_SIZE + h.plen))
            return -1;
        off += CBFS_FRAME_HDR_SIZE + h.plen;
    }
    return 0;
}

/* store.conf as cbfs_store_write_conf writes it, for every codec, in a
 * scratch store (removed again); then hand-edited variants a reader meets:
 * a pre-layout file, comments, CRLF and blanks, codec=NAME:LEVEL, settings. */
static int seed_store_conf(const char *dir)
{
    char tmpl[PATH_MAX], name[64];
    const char *const tmp = getenv("TMPDIR");
    snprintf(tmpl, sizeof tmpl, "%s/cbfs-fuzz-seeds.XXXXXX", tmp && *tmp ? tmp : "/tmp");
    struct cbfs_store *st = NULL;
    pid_t holder;
    int rc = -1;
    if (!mkdtemp(tmpl) || cbfs_store_open(tmpl, &st) != CBFS_OK ||
        cbfs_store_lock(st, false, &holder) != CBFS_OK) {
        fprintf(stderr, "cbfs-fuzz-seeds: scratch store %s: %s\n", tmpl, strerror(errno));
        goto out;
    }
    const int root = cbfs_store_fd(st);
    static const uint32_t sizes[] = {4096, 65536, 1u << 20};
    for (unsigned id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const struct cbfs_codec_ops *const codec = cbfs_codec_by_id(id);
        if (!codec) continue;
        for (unsigned layout = 1; layout <= CBFS_LAYOUT_NEWEST; layout++) {
            struct cbfs_store_conf conf;
            cbfs_store_conf_init(&conf, codec, layout == 1 ? codec->max_level
                                                           : codec->default_level,
                                 sizes[(id + layout) % 3]);
            conf.layout = layout;
            static char text[1024];
            ssize_t n = -1;
            if (cbfs_store_write_conf(st, &conf) == CBFS_OK) {
                const int fd = openat(root, CBFS_STORE_DIR "/" CBFS_STORE_CONF,
                                      O_RDONLY | O_CLOEXEC);
                if (fd >= 0) {
                    n = read(fd, text, sizeof text);
                    close(fd);
                }
            }
            if (n <= 0) {
                fprintf(stderr, "cbfs-fuzz-seeds: cannot write or read back store.conf\n");
                goto out;
            }
            snprintf(name, sizeof name, "%s_layout%u.conf", codec->name, layout);
            if (seed_write(dir, "store_conf", name, text, (size_t)n)) goto out;
        }
    }
    static const char *const edited[] = {
        "format_version=1\nuuid=00112233445566778899aabbccddeeff\ncreated=2024-05-01T10:00:00Z\n"
        "codec=zstd\nlevel=3\nblock_size=131072\n",
        "# hand-edited\r\n  format_version = 1 \r\nlayout=2\r\n\r\nuuid=ffeeddccbbaa99887766554433221100\r\n"
        "codec=lz4\r\nblock_size=64K\r\n# end\r\n",
        "format_version=1\nlayout=2\ncodec=zstd:19\nblock_size=1M\nfuture_key=whatever\n",
        "format_version=1\nlayout=1\nuuid=0123456789abcdef0123456789abcdef\ncodec=none\n"
        "created=\nblock_size=4096\nworkers=4\n",
    };
    for (size_t i = 0; i < sizeof edited / sizeof edited[0]; i++) {
        snprintf(name, sizeof name, "edited_%zu.conf", i);
        if (seed_write(dir, "store_conf", name, edited[i], strlen(edited[i]))) goto out;
    }
    rc = 0;
out:
    if (st) {
        const int rfd = cbfs_store_fd(st);
        (void)unlinkat(rfd, CBFS_STORE_DIR "/" CBFS_STORE_CONF, 0);
        (void)unlinkat(rfd, CBFS_STORE_DIR "/" CBFS_STORE_LOCK, 0);
        (void)unlinkat(rfd, CBFS_STORE_DIR, AT_REMOVEDIR);
        cbfs_store_close(st);
    }
    (void)rmdir(tmpl);
    return rc;
}

int main(int argc, char **argv)
{
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s OUTDIR [GOLDEN_DIR]\n", argv[0]);
        return 2;
    }
    const char *const dir = argv[1];
    if (seed_mkdir(dir, NULL) || seed_mkdir(dir, "frame_hdr") || seed_mkdir(dir, "block_decode") ||
        seed_mkdir(dir, "index_replay") || seed_mkdir(dir, "index_open") ||
        seed_mkdir(dir, "store_conf"))
        return 1;
    if (seed_frames(dir) || seed_files(dir) || seed_store_conf(dir)) return 1;
    if (argc == 3 && seed_golden(dir, argv[2])) return 1;
    return 0;
}

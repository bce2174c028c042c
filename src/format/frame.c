/* Frames, format version 1: the 64-byte frame header (a zstd/lz4 skippable
 * frame), whole-frame encode (HOLE / RAW / compressed payload), payload decode
 * with the XXH3 check, and the positional reads of headers and blocks.
 * docs/FORMAT.md is the byte-level spec this file implements. */
#include <limits.h>
#include <string.h>

#include "cbfs/format.h"
#include "cbfs/util.h"

/* Header field offsets (docs/FORMAT.md, "Frame header"). */
enum {
    FH_SKIP_MAGIC = 0,
    FH_SKIP_SIZE = 4,
    FH_MAGIC = 8,
    FH_VERSION = 12, /* == CBFS_FRAME_ENVELOPE_SIZE: the envelope ends here */
    FH_CODEC = 13,
    FH_FLAGS = 14,
    FH_LEVEL = 15,
    FH_BLOCK = 16,
    FH_GEN = 24,
    FH_ULEN = 32,
    FH_PLEN = 36,
    FH_HASH = 40,
    FH_FILE_ID = 48,
    FH_CHECKSUM = 56
};

void cbfs_frame_hdr_encode(const struct cbfs_frame_hdr *h, uint8_t out[CBFS_FRAME_HDR_SIZE])
{
    memset(out, 0, CBFS_FRAME_HDR_SIZE);
    cbfs_put_le32(out + FH_SKIP_MAGIC, CBFS_SKIPPABLE_MAGIC);
    cbfs_put_le32(out + FH_SKIP_SIZE, CBFS_SKIPPABLE_CONTENT);
    cbfs_put_le32(out + FH_MAGIC, CBFS_FRAME_MAGIC);
    out[FH_VERSION] = h->version;
    out[FH_CODEC] = h->codec;
    out[FH_FLAGS] = h->flags;
    out[FH_LEVEL] = (uint8_t)h->level;
    cbfs_put_le64(out + FH_BLOCK, h->block);
    cbfs_put_le64(out + FH_GEN, h->generation);
    cbfs_put_le32(out + FH_ULEN, h->ulen);
    cbfs_put_le32(out + FH_PLEN, h->plen);
    cbfs_put_le64(out + FH_HASH, h->hash);
    cbfs_put_le64(out + FH_FILE_ID, h->file_id);
    cbfs_put_le64(out + FH_CHECKSUM, cbfs_hash64(out, FH_CHECKSUM));
}

bool cbfs_frame_is_envelope(const uint8_t *head, size_t n)
{
    return n >= CBFS_FRAME_ENVELOPE_SIZE &&
           cbfs_get_le32(head + FH_SKIP_MAGIC) == CBFS_SKIPPABLE_MAGIC &&
           cbfs_get_le32(head + FH_SKIP_SIZE) == CBFS_SKIPPABLE_CONTENT &&
           cbfs_get_le32(head + FH_MAGIC) == CBFS_FRAME_MAGIC;
}

bool cbfs_frame_envelope_damaged(const uint8_t *head, size_t n)
{
    if (n < CBFS_FRAME_ENVELOPE_SIZE) return false;
    const int fields = (cbfs_get_le32(head + FH_SKIP_MAGIC) == CBFS_SKIPPABLE_MAGIC) +
                       (cbfs_get_le32(head + FH_SKIP_SIZE) == CBFS_SKIPPABLE_CONTENT) +
                       (cbfs_get_le32(head + FH_MAGIC) == CBFS_FRAME_MAGIC);
    return fields == 2; /* all three: the envelope itself */
}

bool cbfs_frame_hdr_names(const uint8_t *head, size_t n, uint64_t file_id)
{
    return n >= FH_FILE_ID + 8 && cbfs_get_le64(head + FH_FILE_ID) == file_id;
}

bool cbfs_frame_hdr_trace(const uint8_t *head, size_t n, uint64_t file_id)
{
    /* A bit flipped in the envelope leaves the file id; one flipped in the
     * id leaves the envelope. */
    return cbfs_frame_is_envelope(head, n) || cbfs_frame_hdr_names(head, n, file_id);
}

cbfs_err cbfs_frame_hdr_decode(const uint8_t in[CBFS_FRAME_HDR_SIZE], struct cbfs_frame_hdr *h)
{
    if (!cbfs_frame_is_envelope(in, CBFS_FRAME_HDR_SIZE)) return CBFS_E_BAD_MAGIC;
    if (cbfs_get_le64(in + FH_CHECKSUM) != cbfs_hash64(in, FH_CHECKSUM)) return CBFS_E_CORRUPT;

    struct cbfs_frame_hdr t;
    t.version = in[FH_VERSION];
    t.codec = in[FH_CODEC];
    t.flags = in[FH_FLAGS];
    t.level = (int8_t)in[FH_LEVEL];
    t.block = cbfs_get_le64(in + FH_BLOCK);
    t.generation = cbfs_get_le64(in + FH_GEN);
    t.ulen = cbfs_get_le32(in + FH_ULEN);
    t.plen = cbfs_get_le32(in + FH_PLEN);
    t.hash = cbfs_get_le64(in + FH_HASH);
    t.file_id = cbfs_get_le64(in + FH_FILE_ID);

    /* A checksummed header we do not understand was written by a newer cbfs:
     * say so instead of calling it garbage (and never truncate it away). An
     * unknown codec id is the same case: ids are only ever added. */
    if (t.version > CBFS_FORMAT_VERSION || (t.flags & ~CBFS_FRAME_FLAGS_KNOWN) ||
        t.codec > CBFS_CODEC_MAX_ID)
        return CBFS_E_VERSION;
    /* Sanity: checksum-valid but impossible for a version 1 writer. */
    if (t.version == 0 || t.generation == 0 || t.ulen > CBFS_BLOCK_MAX) return CBFS_E_CORRUPT;
    if ((t.flags & (CBFS_FRAME_HOLE | CBFS_FRAME_RAW)) == (CBFS_FRAME_HOLE | CBFS_FRAME_RAW))
        return CBFS_E_CORRUPT;
    if (t.flags & CBFS_FRAME_SIZE) {
        if (t.flags != CBFS_FRAME_SIZE || t.plen != 0 || t.ulen != 0 || t.hash != 0)
            return CBFS_E_CORRUPT;
    } else if ((t.flags & CBFS_FRAME_RAW) && t.plen != t.ulen) {
        return CBFS_E_CORRUPT;
    }
    *h = t;
    return CBFS_OK;
}

size_t cbfs_frame_bound(const struct cbfs_codec_ops *codec, size_t block_len)
{
    size_t payload = block_len;
    if (codec && codec->id != CBFS_CODEC_NONE) {
        const size_t b = codec->bound(block_len);
        if (b > payload) payload = b;
    }
    return CBFS_FRAME_HDR_SIZE + payload;
}

/* Level as recorded in the header: informational, clamped to int8. */
static int8_t cbfs_frame_level(int level)
{
    if (level > INT8_MAX) return INT8_MAX;
    if (level < INT8_MIN) return INT8_MIN;
    return (int8_t)level;
}

cbfs_err cbfs_frame_encode(const struct cbfs_codec_ops *codec, int level, uint64_t file_id,
                           uint64_t block, uint64_t generation, const void *data, size_t len,
                           void *out, size_t out_cap, size_t *out_len,
                           struct cbfs_frame_hdr *h)
{
    if (!codec || !out || !out_len || !h || (len && !data) || len > CBFS_BLOCK_MAX ||
        generation == 0)
        return CBFS_E_INVAL;
    if (out_cap < CBFS_FRAME_HDR_SIZE) return CBFS_E_DST_SMALL;

    uint8_t *const payload = (uint8_t *)out + CBFS_FRAME_HDR_SIZE;
    const size_t pcap = out_cap - CBFS_FRAME_HDR_SIZE;
    const bool none = codec->id == CBFS_CODEC_NONE;
    struct cbfs_frame_hdr t = {
        .version = CBFS_FORMAT_VERSION,
        .codec = codec->id,
        .flags = 0,
        .level = none ? 0 : cbfs_frame_level(level),
        .block = block,
        .generation = generation,
        .ulen = (uint32_t)len,
        .plen = 0,
        .hash = cbfs_hash64(data, len),
        .file_id = file_id,
    };
    size_t plen = 0;

    if (cbfs_is_zero(data, len)) {
        /* A hole. Stock-stream codecs still carry the (tiny) native encoding
         * of the zeros so that `zstd -d` / `lz4 -d` of the file stay exact;
         * cbfs itself ignores that payload. */
        t.flags = CBFS_FRAME_HOLE;
        if (codec->stock_stream) {
            const cbfs_err e = cbfs_codec_compress(codec, level, data, len, payload, pcap, &plen);
            if (e) return e;
        }
    } else if (none) {
        if (pcap < len) return CBFS_E_DST_SMALL;
        memcpy(payload, data, len);
        plen = len;
    } else {
        cbfs_err e = cbfs_codec_compress(codec, level, data, len, payload, pcap, &plen);
        if (e == CBFS_E_DST_SMALL && !codec->stock_stream && pcap >= len) {
            plen = len; /* did not fit: certainly not smaller, store RAW below */
            e = CBFS_OK;
        }
        if (e) return e;
        /* Stock-stream codecs store incompressible input in their own
         * uncompressed blocks, so the stream stays stock-decodable. */
        if (!codec->stock_stream && plen >= len) {
            if (pcap < len) return CBFS_E_DST_SMALL;
            t.flags = CBFS_FRAME_RAW;
            memcpy(payload, data, len);
            plen = len;
        }
    }
    if (plen > UINT32_MAX) return CBFS_E_CODEC_FAIL;
    t.plen = (uint32_t)plen;
    cbfs_frame_hdr_encode(&t, out);
    *out_len = CBFS_FRAME_HDR_SIZE + plen;
    *h = t;
    return CBFS_OK;
}

void cbfs_frame_size_encode(uint64_t file_id, uint64_t generation, uint64_t size,
                            uint8_t out[CBFS_FRAME_HDR_SIZE], struct cbfs_frame_hdr *h)
{
    const struct cbfs_frame_hdr t = {
        .version = CBFS_FORMAT_VERSION,
        .codec = CBFS_CODEC_NONE,
        .flags = CBFS_FRAME_SIZE,
        .level = 0,
        .block = size,
        .generation = generation,
        .ulen = 0,
        .plen = 0,
        .hash = 0,
        .file_id = file_id,
    };
    cbfs_frame_hdr_encode(&t, out);
    if (h) *h = t;
}

cbfs_err cbfs_frame_decode(const struct cbfs_frame_hdr *h, const void *payload, void *out)
{
    if (h->flags & CBFS_FRAME_SIZE) return CBFS_E_INVAL; /* not a block */
    if (h->flags & CBFS_FRAME_HOLE) {
        /* The header's hash is that of ulen zero bytes: checking it costs one
         * pass over the zeros and keeps "CBFS_OK means the hash matched". */
        memset(out, 0, h->ulen);
        return cbfs_hash64(out, h->ulen) == h->hash ? CBFS_OK : CBFS_E_CORRUPT;
    }
    cbfs_err e = CBFS_OK;
    if ((h->flags & CBFS_FRAME_RAW) || h->codec == CBFS_CODEC_NONE) {
        if (h->plen != h->ulen) {
            e = CBFS_E_CORRUPT;
            goto fail;
        }
        memcpy(out, payload, h->ulen);
    } else {
        const struct cbfs_codec_ops *const codec = cbfs_codec_by_id(h->codec);
        if (!codec) return CBFS_E_CODEC_MISSING;
        e = cbfs_codec_decompress(codec, payload, h->plen, out, h->ulen);
        if (e) goto fail;
    }
    if (cbfs_hash64(out, h->ulen) != h->hash) {
        e = CBFS_E_CORRUPT;
        goto fail;
    }
    return CBFS_OK;
fail:
    /* Whatever a failed decode left behind must not look like data. */
    memset(out, 0, h->ulen);
    return e;
}

cbfs_err cbfs_frame_read_hdr(int data_fd, uint64_t off, uint64_t file_size,
                             struct cbfs_frame_hdr *h)
{
    uint8_t buf[CBFS_FRAME_HDR_SIZE];
    if (off > file_size || file_size - off < CBFS_FRAME_HDR_SIZE) return CBFS_E_TRUNCATED;
    cbfs_err e = cbfs_pread_full(data_fd, buf, sizeof buf, off);
    if (e) return e;
    e = cbfs_frame_hdr_decode(buf, h);
    if (e) return e;
    if (file_size - off - CBFS_FRAME_HDR_SIZE < h->plen) return CBFS_E_TRUNCATED;
    return CBFS_OK;
}

cbfs_err cbfs_block_check_decode(const struct cbfs_index_entry *e, uint64_t block,
                                 const void *frame, void *out)
{
    if (e->generation == 0 || (e->flags & CBFS_FRAME_SIZE)) return CBFS_E_INVAL;
    if (e->flags & CBFS_FRAME_HOLE) {
        memset(out, 0, e->ulen);
        return CBFS_OK;
    }
    struct cbfs_frame_hdr h;
    cbfs_err err = cbfs_frame_hdr_decode(frame, &h);
    if (err == CBFS_E_BAD_MAGIC) return CBFS_E_CORRUPT; /* the index pointed at non-frame bytes */
    if (err) return err;
    if (h.block != block || h.generation != e->generation || h.plen != e->plen ||
        h.ulen != e->ulen || h.hash != e->hash || h.flags != e->flags || h.codec != e->codec)
        return CBFS_E_CORRUPT;
    return cbfs_frame_decode(&h, (const uint8_t *)frame + CBFS_FRAME_HDR_SIZE, out);
}

cbfs_err cbfs_block_read(int data_fd, const struct cbfs_index_entry *e, uint64_t block,
                         void *scratch, void *out)
{
    if (e->generation != 0 && !(e->flags & (CBFS_FRAME_HOLE | CBFS_FRAME_SIZE))) {
        cbfs_err err = cbfs_pread_full(data_fd, scratch, CBFS_FRAME_HDR_SIZE + (size_t)e->plen,
                                       e->offset);
        if (err) return err; /* CBFS_E_TRUNCATED: data file shorter than the index says */
    }
    return cbfs_block_check_decode(e, block, scratch, out);
}

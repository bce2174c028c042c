/* Index sidecar, format version 1: 64-byte record encode/decode, the
 * in-memory block table that records are applied to (with live/garbage
 * accounting), and appends to the sidecar. docs/FORMAT.md is the spec;
 * cbfs_index_load (load.c) replays and repairs sidecars. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/util.h"

/* Record field offsets (docs/FORMAT.md, "Index records"). */
enum {
    IR_MAGIC = 0,
    IR_TYPE = 4,
    IR_CODEC = 5,
    IR_FLAGS = 6,
    /* HEADER */
    IR_VERSION = 8,
    IR_BLOCK_SIZE = 12,
    IR_FILE_ID = 16,
    IR_CREATED = 24,
    /* BLOCK / SIZE */
    IR_BLOCK = 8,
    IR_OFFSET = 16,
    IR_PLEN = 24,
    IR_ULEN = 28,
    IR_GEN = 32,
    IR_HASH = 40,
    IR_CHECKSUM = 56
};

void cbfs_index_rec_encode(const struct cbfs_index_rec *r, uint8_t out[CBFS_INDEX_REC_SIZE])
{
    memset(out, 0, CBFS_INDEX_REC_SIZE);
    cbfs_put_le32(out + IR_MAGIC, CBFS_INDEX_MAGIC);
    out[IR_TYPE] = r->type;
    switch (r->type) {
    case CBFS_REC_HEADER:
        cbfs_put_le16(out + IR_VERSION, r->version);
        cbfs_put_le32(out + IR_BLOCK_SIZE, r->block_size);
        cbfs_put_le64(out + IR_FILE_ID, r->file_id);
        cbfs_put_le64(out + IR_CREATED, r->created_ns);
        break;
    case CBFS_REC_BLOCK:
        out[IR_CODEC] = r->codec;
        out[IR_FLAGS] = r->flags;
        cbfs_put_le64(out + IR_BLOCK, r->block);
        cbfs_put_le64(out + IR_OFFSET, r->offset);
        cbfs_put_le32(out + IR_PLEN, r->plen);
        cbfs_put_le32(out + IR_ULEN, r->ulen);
        cbfs_put_le64(out + IR_GEN, r->generation);
        cbfs_put_le64(out + IR_HASH, r->hash);
        break;
    case CBFS_REC_SIZE:
        /* Byte 6 repeats the SIZE frame flag, so a record's flags byte always
         * equals its frame's; plen/ulen/hash of a SIZE frame are zero. */
        out[IR_FLAGS] = CBFS_FRAME_SIZE;
        cbfs_put_le64(out + IR_BLOCK, r->block);
        cbfs_put_le64(out + IR_OFFSET, r->offset);
        cbfs_put_le64(out + IR_GEN, r->generation);
        break;
    default:
        break; /* only tests encode unknown types, to check they are refused */
    }
    cbfs_put_le64(out + IR_CHECKSUM, cbfs_hash64(out, IR_CHECKSUM));
}

/* @return 1 if in[from..to) is all zero (reserved bytes). */
static int cbfs_rec_zero(const uint8_t *in, size_t from, size_t to)
{
    return cbfs_is_zero(in + from, to - from);
}

cbfs_err cbfs_index_rec_decode(const uint8_t in[CBFS_INDEX_REC_SIZE], struct cbfs_index_rec *r)
{
    if (cbfs_get_le32(in + IR_MAGIC) != CBFS_INDEX_MAGIC) return CBFS_E_BAD_MAGIC;
    if (cbfs_get_le64(in + IR_CHECKSUM) != cbfs_hash64(in, IR_CHECKSUM)) return CBFS_E_CORRUPT;

    struct cbfs_index_rec t;
    memset(&t, 0, sizeof t);
    t.type = in[IR_TYPE];
    switch (t.type) {
    case CBFS_REC_HEADER:
        t.version = cbfs_get_le16(in + IR_VERSION);
        t.block_size = cbfs_get_le32(in + IR_BLOCK_SIZE);
        t.file_id = cbfs_get_le64(in + IR_FILE_ID);
        t.created_ns = cbfs_get_le64(in + IR_CREATED);
        /* Version first: a newer header may use the reserved bytes. */
        if (t.version > CBFS_FORMAT_VERSION) return CBFS_E_VERSION;
        if (t.version == 0 || !cbfs_rec_zero(in, 5, 8) || !cbfs_rec_zero(in, 10, 12) ||
            !cbfs_rec_zero(in, 32, 56))
            return CBFS_E_CORRUPT;
        if (t.block_size < CBFS_BLOCK_MIN || t.block_size > CBFS_BLOCK_MAX) return CBFS_E_CORRUPT;
        break;
    case CBFS_REC_BLOCK:
        t.codec = in[IR_CODEC];
        t.flags = in[IR_FLAGS];
        t.block = cbfs_get_le64(in + IR_BLOCK);
        t.offset = cbfs_get_le64(in + IR_OFFSET);
        t.plen = cbfs_get_le32(in + IR_PLEN);
        t.ulen = cbfs_get_le32(in + IR_ULEN);
        t.generation = cbfs_get_le64(in + IR_GEN);
        t.hash = cbfs_get_le64(in + IR_HASH);
        if ((t.flags & ~CBFS_FRAME_FLAGS_KNOWN) || t.codec > CBFS_CODEC_MAX_ID)
            return CBFS_E_VERSION;
        if (in[7] || !cbfs_rec_zero(in, 48, 56)) return CBFS_E_CORRUPT;
        if ((t.flags & CBFS_FRAME_SIZE) || t.generation == 0 || t.ulen > CBFS_BLOCK_MAX ||
            (t.flags & (CBFS_FRAME_HOLE | CBFS_FRAME_RAW)) ==
                (CBFS_FRAME_HOLE | CBFS_FRAME_RAW) ||
            ((t.flags & CBFS_FRAME_RAW) && t.plen != t.ulen))
            return CBFS_E_CORRUPT;
        break;
    case CBFS_REC_SIZE:
        t.flags = CBFS_FRAME_SIZE;
        t.block = cbfs_get_le64(in + IR_BLOCK);
        t.offset = cbfs_get_le64(in + IR_OFFSET);
        t.generation = cbfs_get_le64(in + IR_GEN);
        if (in[5] || (in[6] != 0 && in[6] != CBFS_FRAME_SIZE) || in[7] ||
            !cbfs_rec_zero(in, 24, 32) || !cbfs_rec_zero(in, 40, 56) || t.generation == 0)
            return CBFS_E_CORRUPT;
        break;
    default:
        return CBFS_E_VERSION; /* record types are only ever added */
    }
    *r = t;
    return CBFS_OK;
}

void cbfs_index_rec_from_frame(const struct cbfs_frame_hdr *h, uint64_t offset,
                               struct cbfs_index_rec *r)
{
    memset(r, 0, sizeof *r);
    r->type = (h->flags & CBFS_FRAME_SIZE) ? CBFS_REC_SIZE : CBFS_REC_BLOCK;
    r->codec = r->type == CBFS_REC_SIZE ? 0 : h->codec;
    r->flags = h->flags;
    r->block = h->block;
    r->offset = offset;
    r->plen = h->plen;
    r->ulen = h->ulen;
    r->generation = h->generation;
    r->hash = h->hash;
}

void cbfs_index_init(struct cbfs_index *idx, uint32_t block_size, uint64_t file_id)
{
    memset(idx, 0, sizeof *idx);
    idx->block_size = block_size;
    idx->file_id = file_id;
    idx->next_gen = 1;
}

/* A table of this many bytes or more lives in an anonymous mapping of its
 * own, grown with mremap: the kernel gives zeroed pages on first touch, so a
 * block far out in a sparse file costs the pages that are touched, not a
 * table zeroed up to it (2.5 GiB resident for the last block a file may
 * have, at 256 KiB blocks, for one write of one byte by any user of the
 * mount). Smaller tables stay with malloc (it maps the larger of them on its
 * own too, but realloc's growth zeroes every new entry here). The mapping is
 * accounted as malloc's is (no MAP_NORESERVE): under strict overcommit or an
 * address-space limit, memory the system cannot promise fails here, where it
 * is reported. */
#define CBFS_INDEX_MAP_MIN ((size_t)1 << 20)

static size_t cbfs_index_map_len(size_t bytes)
{
    const size_t page = (size_t)sysconf(_SC_PAGESIZE);
    return (bytes + page - 1) / page * page;
}

/* Tables only grow, so one of CBFS_INDEX_MAP_MIN bytes or more went through
 * the mmap branch of cbfs_index_reserve and every smaller one is malloc's. */
static bool cbfs_index_mapped(uint64_t cap)
{
    return cap * sizeof(struct cbfs_index_entry) >= CBFS_INDEX_MAP_MIN;
}

void cbfs_index_free(struct cbfs_index *idx)
{
    if (!idx) return;
    if (cbfs_index_mapped(idx->cap))
        munmap(idx->v, cbfs_index_map_len((size_t)idx->cap * sizeof *idx->v));
    else
        free(idx->v);
    idx->v = NULL;
    idx->cap = 0;
    idx->nblocks = 0;
}

cbfs_err cbfs_index_reserve(struct cbfs_index *idx, uint64_t n)
{
    if (n <= idx->cap) return CBFS_OK;
    uint64_t cap = idx->cap ? idx->cap : 64;
    while (cap < n) cap = cap > UINT64_MAX / 2 ? n : cap * 2;
    if (cap > CBFS_MAX_BLOCKS) cap = n; /* no doubling past the cap: n <= CBFS_MAX_BLOCKS */
    if (cap > SIZE_MAX / sizeof(struct cbfs_index_entry)) return CBFS_E_NOMEM;
    const size_t old = (size_t)idx->cap * sizeof *idx->v, bytes = (size_t)cap * sizeof *idx->v;
    struct cbfs_index_entry *v;
    if (bytes < CBFS_INDEX_MAP_MIN) {
        v = realloc(idx->v, bytes);
        if (!v) return CBFS_E_NOMEM;
        memset((char *)v + old, 0, bytes - old);
    } else if (cbfs_index_mapped(idx->cap)) { /* the pages past the old length come zeroed */
        void *const p = mremap(idx->v, cbfs_index_map_len(old), cbfs_index_map_len(bytes),
                               MREMAP_MAYMOVE);
        if (p == MAP_FAILED) return CBFS_E_NOMEM;
        v = p;
    } else {
        void *const p = mmap(NULL, cbfs_index_map_len(bytes), PROT_READ | PROT_WRITE,
                             MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED) return CBFS_E_NOMEM;
        if (old) memcpy(p, idx->v, old);
        free(idx->v);
        v = p;
    }
    idx->v = v;
    idx->cap = cap;
    return CBFS_OK;
}

/* Moves entry b (if any) from the live to the garbage counters and clears it. */
static void cbfs_index_kill(struct cbfs_index *idx, uint64_t b)
{
    struct cbfs_index_entry *const e = &idx->v[b];
    if (e->generation == 0) return;
    const uint64_t bytes = CBFS_FRAME_HDR_SIZE + (uint64_t)e->plen;
    idx->live_frames--;
    idx->live_bytes -= bytes;
    idx->dead_frames++;
    idx->dead_bytes += bytes;
    if (idx->on_dead) idx->on_dead(idx->on_dead_arg, e->offset, e->plen);
    memset(e, 0, sizeof *e);
}

cbfs_err cbfs_index_apply(struct cbfs_index *idx, const struct cbfs_index_rec *r)
{
    const uint64_t bs = idx->block_size;
    if (bs == 0 || r->generation == 0) return CBFS_E_INVAL;
    const uint64_t frame_bytes = CBFS_FRAME_HDR_SIZE + (uint64_t)r->plen;
    if (r->offset > UINT64_MAX - frame_bytes) return CBFS_E_CORRUPT;
    /* Logical sizes stay within off_t: CBFS_MAX_BLOCKS blocks of at most
     * CBFS_BLOCK_MAX bytes (the header's block size is checked) are 2^50. */

    if (r->type == CBFS_REC_BLOCK) {
        if (r->ulen > bs) return CBFS_E_CORRUPT;
        if (r->block >= CBFS_MAX_BLOCKS) return CBFS_E_FBIG;
        const cbfs_err e = cbfs_index_reserve(idx, r->block + 1);
        if (e) return e;
        cbfs_index_kill(idx, r->block);
        idx->v[r->block] = (struct cbfs_index_entry){
            .offset = r->offset,
            .generation = r->generation,
            .hash = r->hash,
            .plen = r->plen,
            .ulen = r->ulen,
            .codec = r->codec,
            .flags = r->flags,
        };
        idx->live_frames++;
        idx->live_bytes += frame_bytes;
        if (r->block >= idx->nblocks) idx->nblocks = r->block + 1;
        const uint64_t end = r->block * bs + r->ulen;
        if (end > idx->size) idx->size = end;
    } else if (r->type == CBFS_REC_SIZE) {
        /* the writer's limit too (cbfs_file_truncate): a bigger size would
         * make a reader walk or print blocks no writer could have made */
        if (!cbfs_size_fits(r->block, bs)) return CBFS_E_FBIG;
        idx->size = r->block;
        /* Blocks wholly at or past the new size are gone; a block straddling
         * it keeps its entry (the engine zero-fills reads past size). */
        const uint64_t keep = r->block / bs + (r->block % bs != 0);
        for (uint64_t b = keep; b < idx->nblocks; b++) cbfs_index_kill(idx, b);
        if (keep < idx->nblocks) idx->nblocks = keep;
        /* The SIZE frame is metadata: garbage as soon as it is applied. */
        idx->dead_frames++;
        idx->dead_bytes += frame_bytes;
    } else {
        return CBFS_E_INVAL;
    }
    if (r->generation >= idx->next_gen) idx->next_gen = r->generation + 1;
    if (r->offset + frame_bytes > idx->data_end) idx->data_end = r->offset + frame_bytes;
    return CBFS_OK;
}

const struct cbfs_index_entry *cbfs_index_get(const struct cbfs_index *idx, uint64_t b)
{
    if (b >= idx->nblocks || idx->v[b].generation == 0) return NULL;
    return &idx->v[b];
}

cbfs_err cbfs_index_write_recs(int idx_fd, const struct cbfs_index_rec *r, size_t n,
                               uint64_t at)
{
    /* Encode in chunks so big batches need no allocation. */
    uint8_t buf[64 * CBFS_INDEX_REC_SIZE];
    const size_t per = sizeof buf / CBFS_INDEX_REC_SIZE;
    while (n) {
        const size_t k = n < per ? n : per;
        for (size_t i = 0; i < k; i++) cbfs_index_rec_encode(&r[i], buf + i * CBFS_INDEX_REC_SIZE);
        const cbfs_err e = cbfs_pwrite_full(idx_fd, buf, k * CBFS_INDEX_REC_SIZE, at);
        if (e) return e;
        at += k * CBFS_INDEX_REC_SIZE;
        r += k;
        n -= k;
    }
    return CBFS_OK;
}

cbfs_err cbfs_index_append(struct cbfs_index *idx, int idx_fd, const struct cbfs_index_rec *r,
                           size_t n)
{
    if (idx->torn) {
        if (ftruncate(idx_fd, (off_t)idx->index_end) != 0) return cbfs_err_from_errno(errno);
        idx->torn = false;
    }
    const cbfs_err e = cbfs_index_write_recs(idx_fd, r, n, idx->index_end);
    if (e) {
        /* All of r or none: ENOSPC may come after some records went down,
         * and the caller applies all of r or none. So the sidecar is cut
         * back to where the append began (idx->torn where it cannot be). */
        idx->torn = ftruncate(idx_fd, (off_t)idx->index_end) != 0;
        return e;
    }
    idx->index_end += (uint64_t)n * CBFS_INDEX_REC_SIZE;
    return CBFS_OK;
}

cbfs_err cbfs_index_read_header(int idx_fd, struct cbfs_index_rec *hdr)
{
    uint8_t buf[CBFS_INDEX_REC_SIZE];
    cbfs_err e = cbfs_pread_full(idx_fd, buf, sizeof buf, 0);
    if (!e) e = cbfs_index_rec_decode(buf, hdr);
    if (!e && hdr->type != CBFS_REC_HEADER) e = CBFS_E_BAD_MAGIC;
    return e;
}

cbfs_err cbfs_index_put_header(const struct cbfs_index *idx, int idx_fd)
{
    if (idx->block_size < CBFS_BLOCK_MIN || idx->block_size > CBFS_BLOCK_MAX) return CBFS_E_INVAL;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    const struct cbfs_index_rec h = {
        .type = CBFS_REC_HEADER,
        .version = CBFS_FORMAT_VERSION,
        .block_size = idx->block_size,
        .file_id = idx->file_id,
        .created_ns = (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec,
    };
    uint8_t buf[CBFS_INDEX_REC_SIZE];
    cbfs_index_rec_encode(&h, buf);
    return cbfs_pwrite_full(idx_fd, buf, sizeof buf, 0);
}

cbfs_err cbfs_index_write_header(struct cbfs_index *idx, int idx_fd)
{
    const cbfs_err e = cbfs_index_put_header(idx, idx_fd);
    if (e) return e;
    idx->index_end = CBFS_INDEX_REC_SIZE;
    return CBFS_OK;
}

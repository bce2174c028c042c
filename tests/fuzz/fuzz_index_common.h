/* What the two index targets share (fuzz_index_replay: cbfs_index_load;
 * fuzz_index_open: cbfs_index_open): the input's split into sidecar and data
 * file, the table's invariants, the checksum fix-ups, and the filter of the
 * known large-table finding. */
#ifndef CBFS_FUZZ_INDEX_COMMON_H
#define CBFS_FUZZ_INDEX_COMMON_H

#include "fuzz_common.h"

#define CBFS_FUZZ_NO_SIDECAR 0xFFFFu

/* One sidecar + data file pair to load. */
struct cbfs_fuzz_case {
    const uint8_t *side; /* NULL: no sidecar */
    size_t slen;
    const uint8_t *data;
    size_t dlen;
    const struct cbfs_bs_hint *hint; /* fuzz_index_open's; NULL: none */
};

/* @return 1 if fd holds exactly len bytes equal to buf. */
static inline int cbfs_fuzz_same_content(int fd, const uint8_t *buf, size_t len)
{
    const off_t end = lseek(fd, 0, SEEK_END);
    if (end < 0 || (size_t)end != len) return 0;
    if (!len) return 1;
    uint8_t *const tmp = malloc(len);
    if (!tmp) return 1; /* cannot tell; not the library's fault */
    const int same = cbfs_pread_full(fd, tmp, len, 0) == CBFS_OK && memcmp(tmp, buf, len) == 0;
    free(tmp);
    return same;
}

/* Errors a load or an open may return for bad input (I/O on a memfd cannot fail). */
static inline int cbfs_fuzz_load_err_ok(cbfs_err e)
{
    return e == CBFS_E_VERSION || e == CBFS_E_WRONG_FILE || e == CBFS_E_BAD_MAGIC ||
           e == CBFS_E_BLOCK_SIZE || e == CBFS_E_NOMEM || e == CBFS_E_CODEC_MISSING;
}

/* Reads every block of a loaded table back; checks the table's invariants. */
static inline void cbfs_fuzz_check_table(int data_fd, const struct cbfs_index *idx, uint64_t dsize)
{
    CBFS_FUZZ_CHECK(idx->block_size >= CBFS_BLOCK_MIN && idx->block_size <= CBFS_BLOCK_MAX,
                    "block size %u", idx->block_size);
    CBFS_FUZZ_CHECK(idx->nblocks <= idx->cap, "nblocks %llu > cap %llu",
                    (unsigned long long)idx->nblocks, (unsigned long long)idx->cap);
    CBFS_FUZZ_CHECK(idx->data_end <= dsize, "data_end %llu past the data file (%llu)",
                    (unsigned long long)idx->data_end, (unsigned long long)dsize);

    uint8_t *scratch = NULL, *out = NULL;
    uint64_t live = 0, live_bytes = 0;
    for (uint64_t b = 0; b < idx->nblocks; b++) {
        const struct cbfs_index_entry *const e = cbfs_index_get(idx, b);
        if (!e) continue;
        live++;
        live_bytes += CBFS_FRAME_HDR_SIZE + (uint64_t)e->plen;
        CBFS_FUZZ_CHECK(e->ulen <= idx->block_size, "block %llu: ulen %u > block size",
                        (unsigned long long)b, e->ulen);
        CBFS_FUZZ_CHECK(!(e->flags & CBFS_FRAME_SIZE), "SIZE frame in the block table");
        CBFS_FUZZ_CHECK(e->offset <= dsize &&
                            dsize - e->offset >= CBFS_FRAME_HDR_SIZE + (uint64_t)e->plen,
                        "block %llu: frame not inside the data file", (unsigned long long)b);

        /* Scratch and output exactly as large as the contract says, so ASan
         * sees any overrun. */
        const size_t need_s = CBFS_FRAME_HDR_SIZE + (size_t)e->plen;
        const size_t need_o = e->ulen ? e->ulen : 1;
        free(scratch);
        free(out);
        scratch = malloc(need_s);
        out = malloc(need_o);
        if (!scratch || !out) break;
        const cbfs_err err = cbfs_block_read(data_fd, e, b, scratch, out);
        if (err == CBFS_OK) {
            if (e->flags & CBFS_FRAME_HOLE)
                CBFS_FUZZ_CHECK(cbfs_is_zero(out, e->ulen), "HOLE block not zeros");
            else
                CBFS_FUZZ_CHECK(XXH3_64bits(out, e->ulen) == e->hash,
                                "block %llu read OK with wrong bytes", (unsigned long long)b);
        } else {
            CBFS_FUZZ_CHECK(err == CBFS_E_CORRUPT || err == CBFS_E_TRUNCATED ||
                                err == CBFS_E_VERSION || err == CBFS_E_CODEC_MISSING ||
                                err == CBFS_E_NOMEM,
                            "block %llu: unexpected error %d (%s)", (unsigned long long)b,
                            (int)err, cbfs_err_str(err));
        }
    }
    free(scratch);
    free(out);
    CBFS_FUZZ_CHECK(live == idx->live_frames && live_bytes == idx->live_bytes,
                    "live counters %llu/%llu, table has %llu/%llu",
                    (unsigned long long)idx->live_frames, (unsigned long long)idx->live_bytes,
                    (unsigned long long)live, (unsigned long long)live_bytes);
}

/* Two loads of the same files must give the same table. */
static inline void cbfs_fuzz_same_table(const struct cbfs_index *a, const struct cbfs_index *b,
                                 const char *what)
{
    CBFS_FUZZ_CHECK(a->block_size == b->block_size && a->file_id == b->file_id &&
                        a->size == b->size && a->nblocks == b->nblocks &&
                        a->next_gen == b->next_gen && a->data_end == b->data_end &&
                        a->live_frames == b->live_frames && a->live_bytes == b->live_bytes,
                    "%s: tables differ (bs %u/%u size %llu/%llu nblocks %llu/%llu next_gen "
                    "%llu/%llu data_end %llu/%llu live %llu/%llu)",
                    what, a->block_size, b->block_size, (unsigned long long)a->size,
                    (unsigned long long)b->size, (unsigned long long)a->nblocks,
                    (unsigned long long)b->nblocks, (unsigned long long)a->next_gen,
                    (unsigned long long)b->next_gen, (unsigned long long)a->data_end,
                    (unsigned long long)b->data_end, (unsigned long long)a->live_frames,
                    (unsigned long long)b->live_frames);
    for (uint64_t i = 0; i < a->nblocks; i++) {
        const struct cbfs_index_entry *const x = &a->v[i], *const y = &b->v[i];
        CBFS_FUZZ_CHECK(x->offset == y->offset && x->generation == y->generation &&
                            x->hash == y->hash && x->plen == y->plen && x->ulen == y->ulen &&
                            x->codec == y->codec && x->flags == y->flags,
                        "%s: entry %llu differs", what, (unsigned long long)i);
    }
}

/* Fixes the checksum of a frame header at off, if it looks like one. */
static inline int cbfs_fuzz_fix_frame_at(uint8_t *data, size_t dlen, uint64_t off)
{
    if (off > dlen || dlen - off < CBFS_FRAME_HDR_SIZE) return 0;
    if (!cbfs_frame_is_envelope(data + off, dlen - off)) return 0;
    cbfs_fuzz_fix_checksum(data + off);
    return 1;
}

/* Fixes every sidecar record with the index magic, every frame header on the
 * back-to-back chain from offset 0, and every frame a record points at. */
static inline void cbfs_fuzz_fixup(uint8_t *side, size_t slen, uint8_t *data, size_t dlen)
{
    for (size_t off = 0; side && slen - off >= CBFS_INDEX_REC_SIZE; off += CBFS_INDEX_REC_SIZE) {
        uint8_t *const r = side + off;
        if (cbfs_get_le32(r) != CBFS_INDEX_MAGIC) continue;
        cbfs_fuzz_fix_checksum(r);
        if (off) cbfs_fuzz_fix_frame_at(data, dlen, cbfs_get_le64(r + 16));
    }
    uint64_t off = 0;
    while (cbfs_fuzz_fix_frame_at(data, dlen, off))
        off += CBFS_FRAME_HDR_SIZE + (uint64_t)cbfs_get_le32(data + off + 36);
}

/* Known finding (README.md): the in-memory table is a dense array of 40-byte
 * entries indexed by block number, so a frame for block N costs 40 * N bytes
 * of memory; a single forged frame at a high block number makes the load
 * allocate gigabytes (libFuzzer reports it as out-of-memory). To keep fuzzing
 * past it, inputs naming any block above this are skipped, unless
 * CBFS_FUZZ_BIG_TABLES=1 is set (to reproduce the finding). */
#define CBFS_FUZZ_MAX_BLOCK (1u << 16)

static inline int cbfs_fuzz_big_tables(void)
{
    static int v = -1;
    if (v < 0) {
        const char *const s = getenv("CBFS_FUZZ_BIG_TABLES");
        v = s && *s == '1';
    }
    return v;
}

/* @return 1 if any block record (64-aligned in the sidecar) or any frame header
 * (at any offset of the data file: replay may point anywhere) names a block
 * above CBFS_FUZZ_MAX_BLOCK. */
static inline int cbfs_fuzz_names_huge_block(const uint8_t *side, size_t slen, const uint8_t *data,
                                      size_t dlen)
{
    for (size_t off = 0; side && slen - off >= CBFS_INDEX_REC_SIZE; off += CBFS_INDEX_REC_SIZE) {
        const uint8_t *const r = side + off;
        if (cbfs_get_le32(r) == CBFS_INDEX_MAGIC && r[4] == CBFS_REC_BLOCK &&
            cbfs_get_le64(r + 8) > CBFS_FUZZ_MAX_BLOCK)
            return 1;
    }
    for (size_t off = 0; dlen >= CBFS_FRAME_HDR_SIZE && off <= dlen - CBFS_FRAME_HDR_SIZE; off++) {
        const uint8_t *const f = data + off;
        if (f[0] == 0x5C && cbfs_frame_is_envelope(f, CBFS_FRAME_HDR_SIZE) &&
            !(f[14] & CBFS_FRAME_SIZE) && cbfs_get_le64(f + 16) > CBFS_FUZZ_MAX_BLOCK)
            return 1;
    }
    return 0;
}

/* The input both targets take after their own prefix: u16 LE sidecar length
 * L (CBFS_FUZZ_NO_SIDECAR: no sidecar), then L sidecar bytes (fewer if the
 * input ends), then the data file. Runs run on the pair as it is and, where
 * that changes anything, again with every reachable checksum fixed
 * (cbfs_fuzz_fixup), so that mutated fields get past the hashes. @return
 * libFuzzer's: -1 for an input the large-table filter skips (not kept). */
static inline int cbfs_fuzz_index_input(const uint8_t *in, size_t size,
                                        const struct cbfs_bs_hint *hint,
                                        void (*run)(const struct cbfs_fuzz_case *c))
{
    if (size < 2) return 0;
    const unsigned l = cbfs_get_le16(in);
    struct cbfs_fuzz_case c = {.hint = hint};
    size_t slen = 0;
    if (l != CBFS_FUZZ_NO_SIDECAR) slen = l < size - 2 ? l : size - 2;
    /* One copy of the whole input: the fixed-up variant edits it in place. */
    uint8_t *const buf = malloc(size);
    if (!buf) return 0;
    memcpy(buf, in, size);
    c.side = l != CBFS_FUZZ_NO_SIDECAR ? buf + 2 : NULL;
    c.slen = slen;
    c.data = buf + 2 + slen;
    c.dlen = size - 2 - slen;
    if (!cbfs_fuzz_big_tables() && cbfs_fuzz_names_huge_block(c.side, slen, c.data, c.dlen)) {
        free(buf);
        return -1;
    }
    run(&c);
    cbfs_fuzz_fixup(l != CBFS_FUZZ_NO_SIDECAR ? buf + 2 : NULL, slen, buf + 2 + slen, c.dlen);
    if (memcmp(buf, in, size) != 0) run(&c);
    free(buf);
    return 0;
}

#endif

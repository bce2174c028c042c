/* libFuzzer target: cbfs_index_open (the hot-path load of the daemon and of
 * `cbfs stat`) on a fuzzed sidecar + data file pair, with a fuzzed block-size
 * hint. Input layout: one hint byte (below), then fuzz_index_replay's input:
 * u16 LE sidecar length L (0xFFFF = no sidecar, idx_fd -1), L sidecar bytes
 * (fewer if the input ends), then the data file. Both go into memfd files.
 *
 * Hint byte: bits 0-1 the kind (0: NULL hint; 1: candidate .size; 2: .size
 * asserted; 3: .size 0, only .otherwise), bits 2-5 .size (0: none, 1..13:
 * CBFS_BLOCK_MIN << (n - 1), 4 KiB .. 16 MiB; 14, 15: none), bits 6-7
 * .otherwise (none, 4 KiB, 8 KiB, 1 MiB). So every rule of
 * cbfs_index_rebuild_block_size (docs/FORMAT.md 3.3) is reachable: the
 * asserted size (1), block 0 only (2), a candidate backed by a whole block
 * (3), a block over half the largest size (4), the store-wide size unless
 * the frames look like smaller blocks (5, cbfs_load_looks_smaller).
 *
 * Contracts checked (only what include/cbfs/format.h states):
 *  - read-only open writes nothing; its verdict is OK or VERSION / WRONG_FILE
 *    / BAD_MAGIC / BLOCK_SIZE / NOMEM / CODEC_MISSING with an empty table;
 *  - an OK table: valid block size, every entry inside the data file, live
 *    counters match, and each block reads back (scratch 64 + plen, output
 *    ulen) as the right bytes or a clean error (open leaves the frame checks
 *    to the read: a wrong frame must be CBFS_E_CORRUPT there, never wrong
 *    bytes);
 *  - the hint: an unborn file gets bs->size, else CBFS_BLOCK_DEFAULT; a
 *    rebuilt table under an asserted size has that size (rule 1) and a
 *    refused one is CBFS_E_BLOCK_SIZE; a file with a usable sidecar header
 *    gives the same verdict and table with no hint (the hint is "used only
 *    for a rebuild");
 *  - with no usable sidecar (sidecar_missing: no record to replay, so nothing
 *    that open checks less), open and cbfs_index_load agree exactly;
 *  - open with repair on copies gives the read-only verdict; a refused
 *    file is untouched;
 *  - a pair that cbfs_index_load repaired is a sidecar cbfs wrote: on it
 *    open gives the same verdict, table and replay counts as the full load
 *    (where that load finds no damaged frame: open reads the frame headers of
 *    the first and last record only, so it cannot count damage between).
 * Run as is and again with every reachable checksum fixed (as
 * fuzz_index_replay), with its filter on blocks above 2^16
 * (CBFS_FUZZ_BIG_TABLES=1 turns it off). */
#include <xxhash.h>

#include "fuzz_index_common.h"

/* The hint byte (see the top of the file) as a hint; NULL for kind 0. */
static const struct cbfs_bs_hint *cbfs_fuzz_hint_of(uint8_t h, struct cbfs_bs_hint *out)
{
    static const uint32_t otherwise[4] = {0, CBFS_BLOCK_MIN, 2 * CBFS_BLOCK_MIN, 1u << 20};
    const unsigned kind = h & 3u, si = (h >> 2) & 15u;
    uint32_t size = 0;
    if (si >= 1 && si <= 13) size = CBFS_BLOCK_MIN << (si - 1);
    if (kind == 0) return NULL;
    *out = (struct cbfs_bs_hint){.size = kind == 3 ? 0 : size,
                                 .asserted = kind == 2,
                                 .otherwise = otherwise[h >> 6]};
    return out;
}

/* Open and load agree: verdict, table and what the report says of it. */
static void cbfs_fuzz_same_result(cbfs_err ea, const struct cbfs_index *a,
                                  const struct cbfs_index_report *ra, cbfs_err eb,
                                  const struct cbfs_index *b,
                                  const struct cbfs_index_report *rb, const char *what)
{
    CBFS_FUZZ_CHECK(ea == eb, "%s: open says %s, load %s", what, cbfs_err_str(ea),
                    cbfs_err_str(eb));
    if (ea != CBFS_OK) return;
    cbfs_fuzz_same_table(a, b, what);
    CBFS_FUZZ_CHECK(ra->sidecar_missing == rb->sidecar_missing &&
                        ra->records_replayed == rb->records_replayed &&
                        ra->records_dropped == rb->records_dropped &&
                        ra->frames_rescanned == rb->frames_rescanned &&
                        ra->data_tail_bytes == rb->data_tail_bytes &&
                        ra->tail_kept == rb->tail_kept && ra->unborn == rb->unborn &&
                        ra->frames_unreachable == rb->frames_unreachable,
                    "%s: reports differ (missing %d/%d replayed %llu/%llu dropped %llu/%llu "
                    "rescanned %llu/%llu tail %llu/%llu kept %d/%d)",
                    what, ra->sidecar_missing, rb->sidecar_missing,
                    (unsigned long long)ra->records_replayed,
                    (unsigned long long)rb->records_replayed,
                    (unsigned long long)ra->records_dropped,
                    (unsigned long long)rb->records_dropped,
                    (unsigned long long)ra->frames_rescanned,
                    (unsigned long long)rb->frames_rescanned,
                    (unsigned long long)ra->data_tail_bytes,
                    (unsigned long long)rb->data_tail_bytes, ra->tail_kept, rb->tail_kept);
}

static void cbfs_fuzz_run_case(const struct cbfs_fuzz_case *c)
{
    int dfd = -1, ifd = -1, dfd2 = -1, ifd2 = -1;
    struct cbfs_index idx, idx2, idx3, idx4;
    struct cbfs_index_report rep, rep2, rep3, rep4;
    cbfs_index_init(&idx, 0, 0);
    cbfs_index_init(&idx2, 0, 0);
    cbfs_index_init(&idx3, 0, 0);
    cbfs_index_init(&idx4, 0, 0);
    const struct cbfs_bs_hint *const hint = c->hint;

    /* 1. Read-only open: writes nothing, whatever the verdict. */
    dfd = cbfs_fuzz_memfd("data", c->data, c->dlen);
    if (dfd < 0) goto out;
    if (c->side) {
        ifd = cbfs_fuzz_memfd("side", c->side, c->slen);
        if (ifd < 0) goto out;
    }
    const cbfs_err e = cbfs_index_open(dfd, ifd, false, hint, &idx, &rep);
    CBFS_FUZZ_CHECK(cbfs_fuzz_same_content(dfd, c->data, c->dlen), "read-only open wrote data");
    CBFS_FUZZ_CHECK(!c->side || cbfs_fuzz_same_content(ifd, c->side, c->slen),
                    "read-only open wrote the sidecar");
    CBFS_FUZZ_CHECK(!rep.repaired, "read-only open says it repaired");
    if (e == CBFS_OK) {
        CBFS_FUZZ_CHECK(rep.data_tail_bytes == c->dlen - idx.data_end, "data_tail_bytes");
        cbfs_fuzz_check_table(dfd, &idx, c->dlen);
        if (rep.unborn) {
            const uint32_t want = hint && hint->size ? hint->size : CBFS_BLOCK_DEFAULT;
            CBFS_FUZZ_CHECK(idx.block_size == want && idx.nblocks == 0,
                            "unborn file: block size %u, hint says %u", idx.block_size, want);
        } else if (rep.sidecar_missing && hint && hint->asserted) {
            CBFS_FUZZ_CHECK(idx.block_size == hint->size,
                            "rebuild took block size %u over the asserted %u", idx.block_size,
                            hint->size);
        }
    } else {
        CBFS_FUZZ_CHECK(cbfs_fuzz_load_err_ok(e), "open: unexpected error %d (%s)", (int)e,
                        cbfs_err_str(e));
        CBFS_FUZZ_CHECK(idx.v == NULL && idx.nblocks == 0, "failed open left a table");
        CBFS_FUZZ_CHECK(e != CBFS_E_BLOCK_SIZE || rep.sidecar_missing,
                        "BLOCK_SIZE with a usable sidecar");
    }

    /* 2. The hint is used only for a rebuild (and an unborn file). */
    if (hint && !rep.sidecar_missing && !rep.unborn && e != CBFS_E_NOMEM) {
        const cbfs_err en = cbfs_index_open(dfd, ifd, false, NULL, &idx2, &rep2);
        if (en != CBFS_E_NOMEM)
            cbfs_fuzz_same_result(e, &idx, &rep, en, &idx2, &rep2, "hint vs no hint");
        cbfs_index_free(&idx2);
    }

    /* 3. The full load on the same files. With no usable sidecar there is no
     * record for open to check less: both rebuild from the frames alike. */
    const cbfs_err el = cbfs_index_load(dfd, ifd, false, hint, &idx2, &rep2);
    if (e == CBFS_E_NOMEM || el == CBFS_E_NOMEM) goto out;
    CBFS_FUZZ_CHECK(cbfs_fuzz_load_err_ok(el) || el == CBFS_OK, "load: unexpected error %s",
                    cbfs_err_str(el));
    if (rep.sidecar_missing && rep2.sidecar_missing)
        cbfs_fuzz_same_result(e, &idx, &rep, el, &idx2, &rep2, "rebuild: open vs load");
    cbfs_index_free(&idx2);

    /* 4. Open with repair (as the daemon opens) on copies: the read-only
     * verdict; a refused file is untouched. */
    dfd2 = cbfs_fuzz_memfd("data2", c->data, c->dlen);
    if (dfd2 < 0) goto out;
    if (c->side) {
        ifd2 = cbfs_fuzz_memfd("side2", c->side, c->slen);
        if (ifd2 < 0) goto out;
    }
    const cbfs_err e2 = cbfs_index_open(dfd2, ifd2, true, hint, &idx2, &rep2);
    if (e2 == CBFS_E_NOMEM) goto out;
    CBFS_FUZZ_CHECK(e2 == e, "repair open says %s, read-only open %s", cbfs_err_str(e2),
                    cbfs_err_str(e));
    if (e2 != CBFS_OK) {
        CBFS_FUZZ_CHECK(cbfs_fuzz_same_content(dfd2, c->data, c->dlen),
                        "refused repair open (%s) wrote data", cbfs_err_str(e2));
        CBFS_FUZZ_CHECK(!c->side || cbfs_fuzz_same_content(ifd2, c->side, c->slen),
                        "refused repair open (%s) wrote the sidecar", cbfs_err_str(e2));
    }
    cbfs_index_free(&idx2);
    close(dfd2);
    dfd2 = -1;
    if (ifd2 >= 0) close(ifd2);
    ifd2 = -1;

    /* 5. A pair cbfs_index_load repaired holds a sidecar cbfs wrote: there
     * open promises the full load's result. */
    if (!c->side || el != CBFS_OK) goto out;
    dfd2 = cbfs_fuzz_memfd("data3", c->data, c->dlen);
    ifd2 = cbfs_fuzz_memfd("side3", c->side, c->slen);
    if (dfd2 < 0 || ifd2 < 0) goto out;
    const cbfs_err er = cbfs_index_load(dfd2, ifd2, true, hint, &idx2, &rep2);
    cbfs_index_free(&idx2);
    if (er != CBFS_OK || rep2.frames_unreachable || rep2.unborn) goto out;
    const cbfs_err e3 = cbfs_index_load(dfd2, ifd2, false, hint, &idx3, &rep3);
    if (e3 != CBFS_OK || rep3.sidecar_missing || rep3.frames_damaged || rep3.records_lost ||
        rep3.records_dropped || rep3.frames_rescanned)
        goto out; /* fuzz_index_replay checks the repaired pair itself */
    const cbfs_err e4 = cbfs_index_open(dfd2, ifd2, false, hint, &idx4, &rep4);
    if (e4 == CBFS_E_NOMEM) goto out;
    cbfs_fuzz_same_result(e4, &idx4, &rep4, e3, &idx3, &rep3, "repaired pair: open vs load");

out:
    cbfs_index_free(&idx);
    cbfs_index_free(&idx2);
    cbfs_index_free(&idx3);
    cbfs_index_free(&idx4);
    if (dfd >= 0) close(dfd);
    if (ifd >= 0) close(ifd);
    if (dfd2 >= 0) close(dfd2);
    if (ifd2 >= 0) close(ifd2);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    if (size < 3) return 0;
    struct cbfs_bs_hint hint_buf;
    const struct cbfs_bs_hint *const hint = cbfs_fuzz_hint_of(in[0], &hint_buf);
    return cbfs_fuzz_index_input(in + 1, size - 1, hint, cbfs_fuzz_run_case);
}

/* libFuzzer target: cbfs_index_load on a fuzzed sidecar + data file pair.
 * Input layout: u16 LE sidecar length L (0xFFFF = no sidecar, idx_fd -1),
 * then L sidecar bytes (fewer if the input ends), then the data file. Both go
 * into memfd files. Each case is loaded read-only (must write nothing), then
 * with repair on copies (same verdict and table; a repaired pair must reload
 * clean), and every entry of a loaded table is read back with cbfs_block_read
 * (correct bytes or a clean error). The case is run as is and again with the
 * checksums of every record and every reachable frame header fixed, so that
 * mutated fields get past the hashes. */
#include <xxhash.h>

#include "fuzz_index_common.h"

/* The rebuild's candidate block size (as a store's): a fuzzed file with a
 * 4 KiB frame past block 0 is rebuilt, others may be refused. */
static const struct cbfs_bs_hint cbfs_fuzz_hint = {.size = 4096};

static void cbfs_fuzz_run_case(const struct cbfs_fuzz_case *c)
{
    int dfd = -1, ifd = -1, dfd2 = -1, ifd2 = -1;
    struct cbfs_index idx, idx2, idx3;
    struct cbfs_index_report rep, rep2, rep3;
    cbfs_index_init(&idx, 0, 0);
    cbfs_index_init(&idx2, 0, 0);
    cbfs_index_init(&idx3, 0, 0);

    /* 1. Read-only: writes nothing, whatever the verdict. */
    dfd = cbfs_fuzz_memfd("data", c->data, c->dlen);
    if (dfd < 0) goto out;
    if (c->side) {
        ifd = cbfs_fuzz_memfd("side", c->side, c->slen);
        if (ifd < 0) goto out;
    }
    const cbfs_err e = cbfs_index_load(dfd, ifd, false, &cbfs_fuzz_hint, &idx, &rep);
    CBFS_FUZZ_CHECK(cbfs_fuzz_same_content(dfd, c->data, c->dlen), "read-only load wrote data");
    CBFS_FUZZ_CHECK(!c->side || cbfs_fuzz_same_content(ifd, c->side, c->slen),
                    "read-only load wrote the sidecar");
    CBFS_FUZZ_CHECK(!rep.repaired, "read-only load says it repaired");
    if (e == CBFS_OK) {
        CBFS_FUZZ_CHECK(rep.data_tail_bytes == c->dlen - idx.data_end, "data_tail_bytes");
        cbfs_fuzz_check_table(dfd, &idx, c->dlen);
    } else {
        CBFS_FUZZ_CHECK(cbfs_fuzz_load_err_ok(e), "load: unexpected error %d (%s)", (int)e,
                        cbfs_err_str(e));
        CBFS_FUZZ_CHECK(idx.v == NULL && idx.nblocks == 0, "failed load left a table");
    }

    /* 2. Repair on copies: same verdict and table; refused files untouched. */
    dfd2 = cbfs_fuzz_memfd("data2", c->data, c->dlen);
    if (dfd2 < 0) goto out;
    if (c->side) {
        ifd2 = cbfs_fuzz_memfd("side2", c->side, c->slen);
        if (ifd2 < 0) goto out;
    }
    const cbfs_err e2 = cbfs_index_load(dfd2, ifd2, true, &cbfs_fuzz_hint, &idx2, &rep2);
    if (e == CBFS_E_NOMEM || e2 == CBFS_E_NOMEM) goto out;
    CBFS_FUZZ_CHECK(e2 == e, "repair load says %s, read-only load %s", cbfs_err_str(e2),
                    cbfs_err_str(e));
    if (e2 != CBFS_OK) {
        CBFS_FUZZ_CHECK(cbfs_fuzz_same_content(dfd2, c->data, c->dlen),
                        "refused repair (%s) wrote data", cbfs_err_str(e2));
        CBFS_FUZZ_CHECK(!c->side || cbfs_fuzz_same_content(ifd2, c->side, c->slen),
                        "refused repair (%s) wrote the sidecar", cbfs_err_str(e2));
        goto out;
    }
    cbfs_fuzz_same_table(&idx, &idx2, "read-only vs repair");
    CBFS_FUZZ_CHECK(rep2.frames_unreachable == rep.frames_unreachable,
                    "frames_unreachable differs with repair");
    if (rep2.frames_unreachable) {
        /* a sidecar of the frames before them would lose them: nothing written */
        CBFS_FUZZ_CHECK(!rep2.repaired && cbfs_fuzz_same_content(dfd2, c->data, c->dlen) &&
                            (!c->side || cbfs_fuzz_same_content(ifd2, c->side, c->slen)),
                        "a rebuild with frames it cannot reach was repaired");
        goto out;
    }

    /* 3. A repaired pair reloads clean (docs/FORMAT.md 3.2). */
    const cbfs_err e3 = cbfs_index_load(dfd2, ifd2, false, &cbfs_fuzz_hint, &idx3, &rep3);
    if (e3 == CBFS_E_NOMEM) goto out;
    CBFS_FUZZ_CHECK(e3 == CBFS_OK, "repaired pair does not reload: %s", cbfs_err_str(e3));
    /* Without a sidecar repair creates none: the reload rescans every frame.
     * A tail holding frame magic is damage, not a torn write: repair keeps it
     * (tail_kept), so the reload sees the same tail; so does a rebuild that
     * passed over torn writes with no sidecar to record them; any other tail
     * is cut. Either way the reload sees the tail the repair left. */
    const uint64_t tail = rep2.data_tail_bytes;
    CBFS_FUZZ_CHECK(tail == (rep2.tail_kept || (!c->side && rep2.torn_bytes_skipped)
                                 ? rep.data_tail_bytes
                                 : 0),
                    "repair left a tail of %llu bytes of %llu", (unsigned long long)tail,
                    (unsigned long long)rep.data_tail_bytes);
    CBFS_FUZZ_CHECK(rep2.tail_kept == rep.tail_kept, "tail_kept differs with repair");
    CBFS_FUZZ_CHECK(rep3.records_dropped == 0 && (!c->side || rep3.frames_rescanned == 0) &&
                        rep3.data_tail_bytes == tail && rep3.tail_kept == rep2.tail_kept,
                    "repaired pair reloads with dropped %llu rescanned %llu tail %llu "
                    "(kept %d, expected %llu)",
                    (unsigned long long)rep3.records_dropped,
                    (unsigned long long)rep3.frames_rescanned,
                    (unsigned long long)rep3.data_tail_bytes, (int)rep3.tail_kept,
                    (unsigned long long)tail);
    CBFS_FUZZ_CHECK(!c->side || !rep3.sidecar_missing, "repaired sidecar is not usable");
    cbfs_fuzz_same_table(&idx, &idx3, "before vs after repair");
    const off_t dend = lseek(dfd2, 0, SEEK_END);
    cbfs_fuzz_check_table(dfd2, &idx3, dend < 0 ? 0 : (uint64_t)dend);

out:
    cbfs_index_free(&idx);
    cbfs_index_free(&idx2);
    cbfs_index_free(&idx3);
    if (dfd >= 0) close(dfd);
    if (ifd >= 0) close(ifd);
    if (dfd2 >= 0) close(dfd2);
    if (ifd2 >= 0) close(ifd2);
}

int LLVMFuzzerTestOneInput(const uint8_t *in, size_t size)
{
    return cbfs_fuzz_index_input(in, size, NULL, cbfs_fuzz_run_case);
}

/* libFuzzer target: cbfs_frame_hdr_decode on 64 bytes. A header that decodes
 * must re-encode to exactly the same 64 bytes (every byte of a v1 header is a
 * field, a magic or the checksum) and decode again to the same fields. The
 * input is tried as is and, if its checksum is wrong, with the checksum fixed
 * so that the field checks behind it get fuzzed too. */
#include "fuzz_common.h"

static void cbfs_fuzz_hdr_roundtrip(const uint8_t in[CBFS_FRAME_HDR_SIZE])
{
    struct cbfs_frame_hdr h;
    if (cbfs_frame_hdr_decode(in, &h) != CBFS_OK) return;

    /* What decode accepted obeys the sanity rules of docs/FORMAT.md 2.1. */
    CBFS_FUZZ_CHECK(h.version == CBFS_FORMAT_VERSION, "version %u accepted", h.version);
    CBFS_FUZZ_CHECK(h.codec <= CBFS_CODEC_MAX_ID, "codec %u accepted", h.codec);
    CBFS_FUZZ_CHECK(!(h.flags & ~CBFS_FRAME_FLAGS_KNOWN), "flags %#x accepted", h.flags);
    CBFS_FUZZ_CHECK(h.generation != 0, "generation 0 accepted");
    CBFS_FUZZ_CHECK(h.ulen <= CBFS_BLOCK_MAX, "ulen %u accepted", h.ulen);
    CBFS_FUZZ_CHECK(!(h.flags & CBFS_FRAME_RAW) || h.plen == h.ulen, "RAW with plen != ulen");

    uint8_t out[CBFS_FRAME_HDR_SIZE];
    cbfs_frame_hdr_encode(&h, out);
    CBFS_FUZZ_CHECK(memcmp(in, out, sizeof out) == 0, "re-encoded header differs");

    struct cbfs_frame_hdr h2;
    CBFS_FUZZ_CHECK(cbfs_frame_hdr_decode(out, &h2) == CBFS_OK, "re-encoded header rejected");
    CBFS_FUZZ_CHECK(h2.version == h.version && h2.codec == h.codec && h2.flags == h.flags &&
                        h2.level == h.level && h2.block == h.block &&
                        h2.generation == h.generation && h2.ulen == h.ulen &&
                        h2.plen == h.plen && h2.hash == h.hash && h2.file_id == h.file_id,
                    "second decode gives other fields");
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    uint8_t in[CBFS_FRAME_HDR_SIZE] = {0};
    memcpy(in, data, size < sizeof in ? size : sizeof in);
    cbfs_fuzz_hdr_roundtrip(in);

    struct cbfs_frame_hdr h;
    if (cbfs_frame_hdr_decode(in, &h) == CBFS_E_CORRUPT) {
        cbfs_fuzz_fix_checksum(in);
        cbfs_fuzz_hdr_roundtrip(in);
    }
    return 0;
}

/* libFuzzer target: one frame (64-byte header + payload) through
 * cbfs_frame_hdr_decode and cbfs_frame_decode into a buffer of exactly ulen
 * bytes (ASan catches any write past it). Contract under test: "never wrong
 * bytes" — CBFS_OK means the output's XXH3 equals the header's hash (a HOLE
 * block is ulen zeros). A header with a bad checksum is retried with the
 * checksum fixed, so mutated ulen/plen/flags/codec reach the decoders. */
#include <xxhash.h>

#include "fuzz_common.h"

static void cbfs_fuzz_decode_frame(const uint8_t *frame, size_t size)
{
    struct cbfs_frame_hdr h;
    if (cbfs_frame_hdr_decode(frame, &h) != CBFS_OK) return;
    const size_t avail = size - CBFS_FRAME_HDR_SIZE;
    if (h.plen > avail) return; /* a reader would see a truncated frame */

    /* Exactly plen payload bytes in their own allocation: a decoder reading
     * past the payload is caught as well. */
    uint8_t *const payload = malloc(h.plen ? h.plen : 1);
    uint8_t *const out = malloc(h.ulen ? h.ulen : 1);
    if (!payload || !out) goto out;
    memcpy(payload, frame + CBFS_FRAME_HDR_SIZE, h.plen);
    memset(out, 0xA5, h.ulen ? h.ulen : 1);

    const cbfs_err e = cbfs_frame_decode(&h, payload, out);
    if (h.flags & CBFS_FRAME_SIZE) {
        CBFS_FUZZ_CHECK(e != CBFS_OK, "SIZE frame decoded as a block");
    } else if (e == CBFS_OK) {
        if (h.flags & CBFS_FRAME_HOLE) {
            CBFS_FUZZ_CHECK(cbfs_is_zero(out, h.ulen), "HOLE block is not zeros");
            CBFS_FUZZ_CHECK(XXH3_64bits(out, h.ulen) == h.hash,
                            "HOLE frame decoded although its hash is not XXH3(zeros)");
        } else {
            CBFS_FUZZ_CHECK(XXH3_64bits(out, h.ulen) == h.hash,
                            "CBFS_OK with wrong bytes (codec %u flags %#x ulen %u plen %u)",
                            h.codec, h.flags, h.ulen, h.plen);
        }
    } else {
        /* A corrupt block must not leave plausible data behind. */
        if (e == CBFS_E_CORRUPT)
            CBFS_FUZZ_CHECK(cbfs_is_zero(out, h.ulen), "failed decode left bytes in the output");
        CBFS_FUZZ_CHECK(e == CBFS_E_CORRUPT || e == CBFS_E_CODEC_MISSING || e == CBFS_E_NOMEM,
                        "unexpected error %d (%s)", (int)e, cbfs_err_str(e));
    }
out:
    free(payload);
    free(out);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < CBFS_FRAME_HDR_SIZE) return 0;
    uint8_t *const frame = malloc(size);
    if (!frame) return 0;
    memcpy(frame, data, size);
    cbfs_fuzz_decode_frame(frame, size);

    struct cbfs_frame_hdr h;
    if (cbfs_frame_hdr_decode(frame, &h) == CBFS_E_CORRUPT) {
        cbfs_fuzz_fix_checksum(frame);
        cbfs_fuzz_decode_frame(frame, size);
    }
    free(frame);
    return 0;
}

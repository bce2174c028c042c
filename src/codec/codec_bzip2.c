/* Codec "bzip2" (on-disk id 4): each block is one complete .bz2 stream (block
 * and stream CRCs inside). libbz2 allocates per call, so there is no context.
 * Decoding uses the streaming calls, not BZ2_bzBuffToBuffDecompress, because
 * the latter silently ignores bytes after the end of the stream. */
#include <limits.h>

#include <bzlib.h>

#include "codec/codec_impl.h"

static char bzip2_ctx_sentinel;

static void *bzip2_ctx_new(void)
{
    return &bzip2_ctx_sentinel;
}

static void bzip2_ctx_free(void *ctx)
{
    (void)ctx;
}

/* The bound bzip2's manual gives for BZ2_bzBuffToBuffCompress. */
static size_t bzip2_bound(size_t src_len)
{
    return src_len + src_len / 100 + 600;
}

static cbfs_err bzip2_compress(void *ctx, int level, const void *src, size_t src_len, void *dst,
                               size_t dst_cap, size_t *dst_len)
{
    (void)ctx;
    if (src_len > UINT_MAX) return CBFS_E_CODEC_FAIL; /* libbz2 lengths are unsigned int */
    unsigned int out_len = dst_cap > UINT_MAX ? UINT_MAX : (unsigned int)dst_cap;
    /* libbz2 takes char * but does not write to the source; it refuses a
     * NULL source even for zero bytes. */
    char *in = src_len ? (char *)src : (char *)"";
    const int r = BZ2_bzBuffToBuffCompress(dst, &out_len, in, (unsigned int)src_len,
                                           level /* blockSize100k */, 0 /* verbosity */,
                                           0 /* default workFactor */);
    switch (r) {
    case BZ_OK: *dst_len = out_len; return CBFS_OK;
    case BZ_OUTBUFF_FULL: return CBFS_E_DST_SMALL;
    case BZ_MEM_ERROR: return CBFS_E_NOMEM;
    default: return CBFS_E_CODEC_FAIL;
    }
}

static cbfs_err bzip2_decompress(void *ctx, const void *src, size_t src_len, void *dst,
                                 size_t dst_len)
{
    (void)ctx;
    if (src_len > UINT_MAX || dst_len > UINT_MAX) return CBFS_E_CORRUPT;
    bz_stream s = {0};
    cbfs_err err = CBFS_E_CORRUPT;
    int r = BZ2_bzDecompressInit(&s, 0 /* verbosity */, 0 /* not small */);
    if (r != BZ_OK) return r == BZ_MEM_ERROR ? CBFS_E_NOMEM : CBFS_E_CODEC_FAIL;
    s.next_in = (char *)src;
    s.avail_in = (unsigned int)src_len;
    s.next_out = dst;
    s.avail_out = (unsigned int)dst_len;
    /* Normally one call runs to the end of the stream; repeat while it makes
     * progress so a block that ends exactly at the end of dst is finished. */
    for (;;) {
        const unsigned int in0 = s.avail_in, out0 = s.avail_out;
        r = BZ2_bzDecompress(&s);
        if (r != BZ_OK || (s.avail_in == in0 && s.avail_out == out0)) break;
    }
    if (r == BZ_MEM_ERROR) {
        err = CBFS_E_NOMEM;
        goto out;
    }
    /* BZ_OK without the end of the stream: input ended early, or the output
     * would exceed dst_len (BZ_OUTBUFF_FULL in the one-shot API). After the
     * end: no trailing bytes and exactly dst_len bytes. */
    if (r == BZ_STREAM_END && s.avail_in == 0 && s.avail_out == 0) err = CBFS_OK;
out:
    BZ2_bzDecompressEnd(&s);
    return err;
}

const struct cbfs_codec_ops cbfs_codec_bzip2_ops = {
    .id = CBFS_CODEC_BZIP2,
    .name = "bzip2",
    .min_level = 1,
    .default_level = 9,
    .max_level = 9,
    .stock_stream = false,
    .ctx_new = bzip2_ctx_new,
    .ctx_free = bzip2_ctx_free,
    .bound = bzip2_bound,
    .compress = bzip2_compress,
    .decompress = bzip2_decompress,
};

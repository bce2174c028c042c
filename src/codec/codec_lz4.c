/* Codec "lz4" (on-disk id 1): one LZ4 frame per block, so a sequentially
 * written file is also a stream `lz4 -d` decodes. Per-thread LZ4F contexts;
 * no LZ4 checksums (the cbfs frame header carries an XXH3 of the block). */
#include <stdlib.h>

#define LZ4F_STATIC_LINKING_ONLY /* LZ4F_compressFrame_usingCDict, LZ4F_getErrorCode */
#include <lz4frame.h>

#include "codec/codec_impl.h"

struct lz4_ctx {
    LZ4F_cctx *cctx;
    LZ4F_dctx *dctx;
};

static void lz4_ctx_free(void *p)
{
    struct lz4_ctx *ctx = p;
    if (!ctx) return;
    LZ4F_freeCompressionContext(ctx->cctx); /* both accept NULL */
    LZ4F_freeDecompressionContext(ctx->dctx);
    free(ctx);
}

static void *lz4_ctx_new(void)
{
    struct lz4_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) goto fail;
    if (LZ4F_isError(LZ4F_createCompressionContext(&ctx->cctx, LZ4F_VERSION))) goto fail;
    if (LZ4F_isError(LZ4F_createDecompressionContext(&ctx->dctx, LZ4F_VERSION))) goto fail;
    return ctx;
fail:
    lz4_ctx_free(ctx);
    return NULL;
}

/* The one set of frame preferences, shared by compress and bound so that the
 * bound is the one LZ4F checks against. level 0 only for bound(), where the
 * level does not matter. */
static LZ4F_preferences_t lz4_prefs(int level, size_t src_len)
{
    LZ4F_preferences_t p = {0};
    p.frameInfo.blockSizeID = LZ4F_max4MB; /* LZ4F shrinks it to fit src_len */
    p.frameInfo.blockMode = LZ4F_blockIndependent;
    p.frameInfo.contentChecksumFlag = LZ4F_noContentChecksum;
    p.frameInfo.blockChecksumFlag = LZ4F_noBlockChecksum;
    p.frameInfo.frameType = LZ4F_frame;
    p.frameInfo.contentSize = (unsigned long long)src_len; /* 0 = not stored */
    p.compressionLevel = level; /* < 3: fast mode, 3..12: HC */
    p.autoFlush = 1;
    return p;
}

static size_t lz4_bound(size_t src_len)
{
    const LZ4F_preferences_t p = lz4_prefs(0, src_len);
    return LZ4F_compressFrameBound(src_len, &p);
}

static cbfs_err lz4_compress(void *p, int level, const void *src, size_t src_len, void *dst,
                             size_t dst_cap, size_t *dst_len)
{
    struct lz4_ctx *ctx = p;
    const LZ4F_preferences_t prefs = lz4_prefs(level, src_len);
    const size_t r =
        LZ4F_compressFrame_usingCDict(ctx->cctx, dst, dst_cap, src, src_len, NULL, &prefs);
    if (LZ4F_isError(r)) {
        /* LZ4F refuses any dst_cap below its bound, even if the data would fit. */
        if (LZ4F_getErrorCode(r) == LZ4F_ERROR_dstMaxSize_tooSmall) return CBFS_E_DST_SMALL;
        if (LZ4F_getErrorCode(r) == LZ4F_ERROR_allocation_failed) return CBFS_E_NOMEM;
        return CBFS_E_CODEC_FAIL;
    }
    *dst_len = r;
    return CBFS_OK;
}

static cbfs_err lz4_decompress(void *p, const void *src, size_t src_len, void *dst,
                               size_t dst_len)
{
    struct lz4_ctx *ctx = p;
    const unsigned char *in = src;
    unsigned char *out = dst;
    size_t in_pos = 0, out_pos = 0;

    /* A previous call may have stopped mid-frame on an error. */
    LZ4F_resetDecompressionContext(ctx->dctx);
    for (;;) {
        size_t in_n = src_len - in_pos, out_n = dst_len - out_pos;
        const size_t r = LZ4F_decompress(ctx->dctx, out ? out + out_pos : NULL, &out_n,
                                         in ? in + in_pos : NULL, &in_n, NULL);
        /* LZ4F allocates its buffers in the first call that reads a frame
         * header (and again for a larger block size): that failure is no
         * damage. Taken for one, a read logged the block as unreadable and
         * cbfs verify reported it corrupt, and a load's rescan past lost
         * records took the frame for a torn write (helper-57). */
        if (LZ4F_isError(r))
            return LZ4F_getErrorCode(r) == LZ4F_ERROR_allocation_failed ? CBFS_E_NOMEM
                                                                          : CBFS_E_CORRUPT;
        in_pos += in_n;
        out_pos += out_n;
        if (r == 0) break; /* frame complete (and its content size matched) */
        /* No progress: the input ended early or the output would exceed dst_len. */
        if (in_n == 0 && out_n == 0) return CBFS_E_CORRUPT;
    }
    /* Exactly one frame, exactly the block: trailing bytes or a short block
     * are corruption, never partial success. */
    if (in_pos != src_len || out_pos != dst_len) return CBFS_E_CORRUPT;
    return CBFS_OK;
}

const struct cbfs_codec_ops cbfs_codec_lz4_ops = {
    .id = CBFS_CODEC_LZ4,
    .name = "lz4",
    .min_level = 1,
    .default_level = 1,
    .max_level = 12,
    .stock_stream = true, /* LZ4F stores incompressible blocks uncompressed */
    .ctx_new = lz4_ctx_new,
    .ctx_free = lz4_ctx_free,
    .bound = lz4_bound,
    .compress = lz4_compress,
    .decompress = lz4_decompress,
};

/* Codec "zstd" (on-disk id 2): one zstd frame per block with the content size
 * in the frame header and no zstd checksum (the cbfs frame header carries an
 * XXH3), so a sequentially written file is a stream `zstd -d` decodes. */
#include <stdlib.h>

#include <zstd.h>
#include <zstd_errors.h>

#include "codec/codec_impl.h"

struct zstd_ctx {
    ZSTD_CCtx *cctx;
    ZSTD_DCtx *dctx;
};

static void zstd_ctx_free(void *p)
{
    struct zstd_ctx *ctx = p;
    if (!ctx) return;
    ZSTD_freeCCtx(ctx->cctx); /* both accept NULL */
    ZSTD_freeDCtx(ctx->dctx);
    free(ctx);
}

static void *zstd_ctx_new(void)
{
    struct zstd_ctx *ctx = calloc(1, sizeof *ctx);
    if (!ctx) goto fail;
    ctx->cctx = ZSTD_createCCtx();
    if (!ctx->cctx) goto fail;
    ctx->dctx = ZSTD_createDCtx();
    if (!ctx->dctx) goto fail;
    /* Fixed for the context's life; only the level changes per call. */
    if (ZSTD_isError(ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_contentSizeFlag, 1))) goto fail;
    if (ZSTD_isError(ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_checksumFlag, 0))) goto fail;
    return ctx;
fail:
    zstd_ctx_free(ctx);
    return NULL;
}

static size_t zstd_bound(size_t src_len)
{
    return ZSTD_compressBound(src_len);
}

static cbfs_err zstd_compress(void *p, int level, const void *src, size_t src_len, void *dst,
                              size_t dst_cap, size_t *dst_len)
{
    struct zstd_ctx *ctx = p;
    /* Drop any half-done session left by a failed call; parameters stay. */
    ZSTD_CCtx_reset(ctx->cctx, ZSTD_reset_session_only);
    if (ZSTD_isError(ZSTD_CCtx_setParameter(ctx->cctx, ZSTD_c_compressionLevel, level)))
        return CBFS_E_CODEC_FAIL;
    const size_t r = ZSTD_compress2(ctx->cctx, dst, dst_cap, src, src_len);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_dstSize_tooSmall) return CBFS_E_DST_SMALL;
        if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation) return CBFS_E_NOMEM;
        return CBFS_E_CODEC_FAIL;
    }
    *dst_len = r;
    return CBFS_OK;
}

static cbfs_err zstd_decompress(void *p, const void *src, size_t src_len, void *dst,
                                size_t dst_len)
{
    struct zstd_ctx *ctx = p;
    /* Exactly one frame spanning the whole payload (no trailing bytes, no
     * second frame), declaring exactly the block's size. */
    const size_t fsize = ZSTD_findFrameCompressedSize(src, src_len);
    if (ZSTD_isError(fsize) || fsize != src_len) return CBFS_E_CORRUPT;
    const unsigned long long csize = ZSTD_getFrameContentSize(src, src_len);
    if (csize == ZSTD_CONTENTSIZE_UNKNOWN || csize == ZSTD_CONTENTSIZE_ERROR ||
        csize != (unsigned long long)dst_len)
        return CBFS_E_CORRUPT;
    const size_t r = ZSTD_decompressDCtx(ctx->dctx, dst, dst_len, src, src_len);
    if (ZSTD_isError(r)) {
        if (ZSTD_getErrorCode(r) == ZSTD_error_memory_allocation) return CBFS_E_NOMEM;
        return CBFS_E_CORRUPT;
    }
    if (r != dst_len) return CBFS_E_CORRUPT;
    return CBFS_OK;
}

const struct cbfs_codec_ops cbfs_codec_zstd_ops = {
    .id = CBFS_CODEC_ZSTD,
    .name = "zstd",
    .min_level = 1,
    .default_level = 3,
    .max_level = 19,
    .stock_stream = true, /* zstd stores incompressible blocks raw */
    .ctx_new = zstd_ctx_new,
    .ctx_free = zstd_ctx_free,
    .bound = zstd_bound,
    .compress = zstd_compress,
    .decompress = zstd_decompress,
};

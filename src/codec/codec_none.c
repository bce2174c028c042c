/* Codec "none" (on-disk id 0): the payload is the block's bytes verbatim.
 * Used for plain files and as the always-available fallback; it needs no
 * context, so ctx_new hands out a static sentinel. */
#include <string.h>

#include "codec/codec_impl.h"

static char none_ctx_sentinel;

static void *none_ctx_new(void)
{
    return &none_ctx_sentinel;
}

static void none_ctx_free(void *ctx)
{
    (void)ctx;
}

static size_t none_bound(size_t src_len)
{
    return src_len;
}

static cbfs_err none_compress(void *ctx, int level, const void *src, size_t src_len, void *dst,
                              size_t dst_cap, size_t *dst_len)
{
    (void)ctx;
    (void)level;
    if (src_len > dst_cap) return CBFS_E_DST_SMALL;
    if (src_len) memcpy(dst, src, src_len);
    *dst_len = src_len;
    return CBFS_OK;
}

static cbfs_err none_decompress(void *ctx, const void *src, size_t src_len, void *dst,
                                size_t dst_len)
{
    (void)ctx;
    /* A verbatim payload has exactly the block's length; anything else is a
     * short or padded payload. */
    if (src_len != dst_len) return CBFS_E_CORRUPT;
    if (dst_len) memcpy(dst, src, dst_len);
    return CBFS_OK;
}

const struct cbfs_codec_ops cbfs_codec_none_ops = {
    .id = CBFS_CODEC_NONE,
    .name = "none",
    .min_level = 0,
    .default_level = 0,
    .max_level = 0,
    .stock_stream = false,
    .ctx_new = none_ctx_new,
    .ctx_free = none_ctx_free,
    .bound = none_bound,
    .compress = none_compress,
    .decompress = none_decompress,
};

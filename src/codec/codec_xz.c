/* Codec "xz" (on-disk id 3): each block is one complete .xz stream (LZMA2,
 * CRC32 check) made with liblzma's single-call buffer API, so a payload can be
 * checked with `xz -t`. liblzma keeps no state between calls: no context. */
#include <stdint.h>

#include <lzma.h>

#include "codec/codec_impl.h"

static char xz_ctx_sentinel;

static void *xz_ctx_new(void)
{
    return &xz_ctx_sentinel;
}

static void xz_ctx_free(void *ctx)
{
    (void)ctx;
}

static size_t xz_bound(size_t src_len)
{
    return lzma_stream_buffer_bound(src_len); /* 0 only if src_len is absurd */
}

static cbfs_err xz_compress(void *ctx, int level, const void *src, size_t src_len, void *dst,
                            size_t dst_cap, size_t *dst_len)
{
    (void)ctx;
    lzma_options_lzma opt;
    if (lzma_lzma_preset(&opt, (uint32_t)level)) return CBFS_E_CODEC_FAIL;
    /* The encoder's memory and setup time grow with the dictionary, and a
     * dictionary larger than the input buys nothing: use the smallest power
     * of two >= max(src_len, 4 KiB), never more than the preset's (preset 6
     * would otherwise allocate ~90 MB per 1 MiB block). */
    uint64_t dict = LZMA_DICT_SIZE_MIN; /* 4 KiB */
    while (dict < src_len && dict < opt.dict_size) dict <<= 1;
    if (dict < opt.dict_size) opt.dict_size = (uint32_t)dict;

    const lzma_filter filters[] = {
        {.id = LZMA_FILTER_LZMA2, .options = &opt},
        {.id = LZMA_VLI_UNKNOWN, .options = NULL},
    };
    size_t out_pos = 0;
    const lzma_ret r = lzma_stream_buffer_encode((lzma_filter *)filters, LZMA_CHECK_CRC32, NULL,
                                                 src, src_len, dst, &out_pos, dst_cap);
    switch (r) {
    case LZMA_OK: *dst_len = out_pos; return CBFS_OK;
    case LZMA_BUF_ERROR: return CBFS_E_DST_SMALL;
    case LZMA_MEM_ERROR: return CBFS_E_NOMEM;
    default: return CBFS_E_CODEC_FAIL;
    }
}

static cbfs_err xz_decompress(void *ctx, const void *src, size_t src_len, void *dst,
                              size_t dst_len)
{
    (void)ctx;
    /* The stream is bounded by dst_len and verified by its CRC32s; corrupt
     * headers fail their own CRC before any large allocation. */
    uint64_t memlimit = UINT64_MAX;
    size_t in_pos = 0, out_pos = 0;
    const lzma_ret r = lzma_stream_buffer_decode(&memlimit, 0, NULL, src, &in_pos, src_len, dst,
                                                 &out_pos, dst_len);
    if (r == LZMA_MEM_ERROR) return CBFS_E_NOMEM;
    /* LZMA_BUF_ERROR covers both "input ended early" and "output would be
     * longer than dst_len". One stream, no trailing bytes, exact length. */
    if (r != LZMA_OK) return CBFS_E_CORRUPT;
    if (in_pos != src_len || out_pos != dst_len) return CBFS_E_CORRUPT;
    return CBFS_OK;
}

const struct cbfs_codec_ops cbfs_codec_xz_ops = {
    .id = CBFS_CODEC_XZ,
    .name = "xz",
    .min_level = 0,
    .default_level = 6,
    .max_level = 9,
    .stock_stream = false,
    .ctx_new = xz_ctx_new,
    .ctx_free = xz_ctx_free,
    .bound = xz_bound,
    .compress = xz_compress,
    .decompress = xz_decompress,
};

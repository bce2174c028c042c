/* Codec layer: one ops table per codec, indexed by the on-disk codec id.
 * Codec code knows nothing of frames, files or FUSE. Contexts are per thread
 * (cbfs_codec_compress/decompress fetch the calling thread's own), so any
 * thread — pool worker, FUSE thread, tool — can call in without locking. */
#ifndef CBFS_CODEC_H
#define CBFS_CODEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cbfs/err.h"

/* On-disk codec ids: never renumber, never reuse. */
enum cbfs_codec_id {
    CBFS_CODEC_NONE = 0,
    CBFS_CODEC_LZ4 = 1,
    CBFS_CODEC_ZSTD = 2,
    CBFS_CODEC_XZ = 3,
    CBFS_CODEC_BZIP2 = 4,
    CBFS_CODEC_MAX_ID = 4
};

struct cbfs_codec_ops {
    uint8_t id;         /* enum cbfs_codec_id */
    const char *name;   /* "lz4", as used in mount options */
    int min_level;      /* levels as data, checked by cbfs_codec_check_level */
    int default_level;
    int max_level;
    /* true when the payload is a native stream that stock tools decode (zstd
     * frame, LZ4 frame) and that already stores incompressible input as
     * uncompressed blocks: the writer then never uses the RAW frame flag, so
     * a sequentially written file stays decodable by `zstd -d` / `lz4 -d`. */
    bool stock_stream;
    /* Context for one thread. @return NULL on allocation failure. */
    void *(*ctx_new)(void);
    void (*ctx_free)(void *ctx); /* NULL is a no-op */
    /* Largest output compress can produce for src_len input. */
    size_t (*bound)(size_t src_len);
    /* Compresses src into one self-contained payload (for xz/bzip2: a native
     * .xz/.bz2 stream). level is already range-checked.
     * @return CBFS_OK and *dst_len, CBFS_E_DST_SMALL, or CBFS_E_CODEC_FAIL. */
    cbfs_err (*compress)(void *ctx, int level, const void *src, size_t src_len, void *dst,
                         size_t dst_cap, size_t *dst_len);
    /* Decodes a payload that must expand to exactly dst_len bytes.
     * @return CBFS_OK, or CBFS_E_CORRUPT for anything malformed, short, long
     * or trailing — never partial success. */
    cbfs_err (*decompress)(void *ctx, const void *src, size_t src_len, void *dst,
                           size_t dst_len);
};

/* @return the ops for an on-disk id, or NULL if unknown or not built in. */
const struct cbfs_codec_ops *cbfs_codec_by_id(unsigned id);

/* Looks up a codec by name ("lz4").
 * @return CBFS_E_CODEC_UNKNOWN (name unknown) or CBFS_E_CODEC_MISSING (known,
 * not built). */
cbfs_err cbfs_codec_by_name(const char *name, const struct cbfs_codec_ops **out);

/* Parses a codec spec: "zstd", "zstd:3" or "none". Without ":N" the level is
 * the codec's default. On failure writes one clear sentence to msg (e.g.
 * "unknown codec 'zip'; known codecs: none, lz4, zstd, xz, bzip2" or
 * "zstd level 40 is out of range (1..19)"). */
cbfs_err cbfs_codec_parse(const char *spec, const struct cbfs_codec_ops **codec, int *level,
                          char *msg, size_t msg_cap);

/* @return CBFS_OK, or CBFS_E_CODEC_LEVEL with a sentence naming the range in msg. */
cbfs_err cbfs_codec_check_level(const struct cbfs_codec_ops *codec, int level, char *msg,
                                size_t msg_cap);

/* Writes "none, lz4, zstd, xz, bzip2" (built codecs, id order) into buf. */
void cbfs_codec_list(char *buf, size_t cap);

/* Compress / decompress with the calling thread's context for this codec,
 * created on first use and freed when the thread exits. Same contracts as the
 * ops; CBFS_E_NOMEM if a context cannot be created. */
cbfs_err cbfs_codec_compress(const struct cbfs_codec_ops *codec, int level, const void *src,
                             size_t src_len, void *dst, size_t dst_cap, size_t *dst_len);
cbfs_err cbfs_codec_decompress(const struct cbfs_codec_ops *codec, const void *src,
                               size_t src_len, void *dst, size_t dst_len);

#endif

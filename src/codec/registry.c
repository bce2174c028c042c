/* Codec registry: the table of built codecs indexed by on-disk id, name and
 * spec parsing with one-sentence error messages, and the per-thread codec
 * contexts behind cbfs_codec_compress / cbfs_codec_decompress. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "cbfs/codec.h"
#include "codec/codec_impl.h"

/* Built codecs by on-disk id; NULL where a codec was left out of the build. */
static const struct cbfs_codec_ops *const codec_table[CBFS_CODEC_MAX_ID + 1] = {
    [CBFS_CODEC_NONE] = &cbfs_codec_none_ops,
#ifdef CBFS_HAVE_LZ4
    [CBFS_CODEC_LZ4] = &cbfs_codec_lz4_ops,
#endif
#ifdef CBFS_HAVE_ZSTD
    [CBFS_CODEC_ZSTD] = &cbfs_codec_zstd_ops,
#endif
#ifdef CBFS_HAVE_XZ
    [CBFS_CODEC_XZ] = &cbfs_codec_xz_ops,
#endif
#ifdef CBFS_HAVE_BZIP2
    [CBFS_CODEC_BZIP2] = &cbfs_codec_bzip2_ops,
#endif
};

/* Every codec cbfs knows, built or not, so that "xz" in a build without
 * liblzma says "not built" rather than "unknown". */
static const char *const codec_known_names[CBFS_CODEC_MAX_ID + 1] = {
    [CBFS_CODEC_NONE] = "none", [CBFS_CODEC_LZ4] = "lz4",     [CBFS_CODEC_ZSTD] = "zstd",
    [CBFS_CODEC_XZ] = "xz",     [CBFS_CODEC_BZIP2] = "bzip2",
};

static const char *const codec_build_options[CBFS_CODEC_MAX_ID + 1] = {
    [CBFS_CODEC_LZ4] = "CBFS_WITH_LZ4",
    [CBFS_CODEC_ZSTD] = "CBFS_WITH_ZSTD",
    [CBFS_CODEC_XZ] = "CBFS_WITH_XZ",
    [CBFS_CODEC_BZIP2] = "CBFS_WITH_BZIP2",
};

/* snprintf into an optional caller buffer (msg may be NULL / msg_cap 0). */
static void codec_msg(char *msg, size_t msg_cap, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void codec_msg(char *msg, size_t msg_cap, const char *fmt, ...)
{
    if (!msg || msg_cap == 0) return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, msg_cap, fmt, ap);
    va_end(ap);
}

const struct cbfs_codec_ops *cbfs_codec_by_id(unsigned id)
{
    if (id > CBFS_CODEC_MAX_ID) return NULL;
    return codec_table[id];
}

/* name is matched case-insensitively ("ZSTD" from a mount option is fine).
 * @return the known id, or -1. */
static int codec_known_id(const char *name, size_t len)
{
    for (int id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        const char *const known = codec_known_names[id];
        if (strlen(known) == len && strncasecmp(known, name, len) == 0) return id;
    }
    return -1;
}

/* Looks up the first len bytes of name, writing a sentence on failure. */
static cbfs_err codec_lookup(const char *name, size_t len, const struct cbfs_codec_ops **out,
                             char *msg, size_t msg_cap)
{
    char list[64];
    const int id = codec_known_id(name, len);
    if (id < 0) {
        cbfs_codec_list(list, sizeof list);
        codec_msg(msg, msg_cap, "unknown codec '%.*s'; known codecs: %s",
                  len > INT_MAX ? INT_MAX : (int)len, name, list);
        return CBFS_E_CODEC_UNKNOWN;
    }
    if (!codec_table[id]) {
        cbfs_codec_list(list, sizeof list);
        codec_msg(msg, msg_cap,
                  "codec '%s' is not built into this cbfs (rebuild with -D%s=ON); "
                  "available codecs: %s",
                  codec_known_names[id], codec_build_options[id], list);
        return CBFS_E_CODEC_MISSING;
    }
    *out = codec_table[id];
    return CBFS_OK;
}

cbfs_err cbfs_codec_by_name(const char *name, const struct cbfs_codec_ops **out)
{
    if (!name || !out) return CBFS_E_INVAL;
    return codec_lookup(name, strlen(name), out, NULL, 0);
}

cbfs_err cbfs_codec_check_level(const struct cbfs_codec_ops *codec, int level, char *msg,
                                size_t msg_cap)
{
    if (!codec) return CBFS_E_INVAL;
    if (level < codec->min_level || level > codec->max_level) {
        codec_msg(msg, msg_cap, "%s level %d is out of range (%d..%d)", codec->name, level,
                  codec->min_level, codec->max_level);
        return CBFS_E_CODEC_LEVEL;
    }
    return CBFS_OK;
}

cbfs_err cbfs_codec_parse(const char *spec, const struct cbfs_codec_ops **codec, int *level,
                          char *msg, size_t msg_cap)
{
    if (!spec || !codec || !level) return CBFS_E_INVAL;
    const char *const colon = strchr(spec, ':');
    const size_t name_len = colon ? (size_t)(colon - spec) : strlen(spec);
    const struct cbfs_codec_ops *c = NULL;
    cbfs_err err = codec_lookup(spec, name_len, &c, msg, msg_cap);
    if (err) return err;
    if (!colon) {
        *codec = c;
        *level = c->default_level;
        return CBFS_OK;
    }

    /* Strict integer after the colon: digits, '-' first only; no blanks, no
     * '+', no trailing junk (strtol would take " 3" and "+3"). */
    const char *const num = colon + 1;
    char *end = NULL;
    errno = 0;
    const long v = strtol(num, &end, 10);
    const char *const digits = *num == '-' ? num + 1 : num;
    if (!isdigit((unsigned char)*digits) || *end != '\0') {
        codec_msg(msg, msg_cap,
                  "malformed codec spec '%s': expected NAME or NAME:LEVEL with LEVEL an "
                  "integer in %d..%d",
                  spec, c->min_level, c->max_level);
        return CBFS_E_INVAL;
    }
    if (errno == ERANGE || v < INT_MIN || v > INT_MAX) {
        codec_msg(msg, msg_cap, "%s level %s is out of range (%d..%d)", c->name, num,
                  c->min_level, c->max_level);
        return CBFS_E_CODEC_LEVEL;
    }
    err = cbfs_codec_check_level(c, (int)v, msg, msg_cap);
    if (err) return err;
    *codec = c;
    *level = (int)v;
    return CBFS_OK;
}

void cbfs_codec_list(char *buf, size_t cap)
{
    if (!buf || cap == 0) return;
    size_t used = 0;
    buf[0] = '\0';
    for (int id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        if (!codec_table[id]) continue;
        const int n = snprintf(buf + used, cap - used, "%s%s", used ? ", " : "",
                               codec_table[id]->name);
        if (n < 0 || (size_t)n >= cap - used) return; /* truncated, still terminated */
        used += (size_t)n;
    }
}

/* ---- per-thread contexts ----
 * One pthread key per codec id. A thread's context is created on its first
 * call for that codec and freed by the key destructor when the thread exits,
 * so pool workers, FUSE threads and tools each own theirs and never lock.
 * The keys live as long as the process (never deleted). */

static pthread_key_t codec_keys[CBFS_CODEC_MAX_ID + 1];
static pthread_once_t codec_keys_once = PTHREAD_ONCE_INIT;
static bool codec_keys_ok; /* written once under codec_keys_once */

/* Key destructors get only the value, so one per id tells them which
 * ctx_free to call. Only run for non-NULL values, i.e. built codecs. */
#define CBFS_CODEC_DTOR_(ID)                                                                  \
    static void codec_ctx_dtor_##ID(void *ctx)                                                \
    {                                                                                         \
        if (codec_table[ID]) codec_table[ID]->ctx_free(ctx);                                  \
    }
CBFS_CODEC_DTOR_(0)
CBFS_CODEC_DTOR_(1)
CBFS_CODEC_DTOR_(2)
CBFS_CODEC_DTOR_(3)
CBFS_CODEC_DTOR_(4)
#undef CBFS_CODEC_DTOR_

static void (*const codec_dtors[CBFS_CODEC_MAX_ID + 1])(void *) = {
    codec_ctx_dtor_0, codec_ctx_dtor_1, codec_ctx_dtor_2, codec_ctx_dtor_3, codec_ctx_dtor_4,
};

static void codec_keys_create(void)
{
    for (int id = 0; id <= CBFS_CODEC_MAX_ID; id++) {
        if (pthread_key_create(&codec_keys[id], codec_dtors[id]) != 0) return;
    }
    codec_keys_ok = true;
}

/* @return the calling thread's context for codec, creating it on first use. */
static cbfs_err codec_thread_ctx(const struct cbfs_codec_ops *codec, void **out)
{
    /* Only registry codecs: their id selects the key and the destructor. */
    if (!codec || codec->id > CBFS_CODEC_MAX_ID || codec_table[codec->id] != codec)
        return CBFS_E_INVAL;
    pthread_once(&codec_keys_once, codec_keys_create);
    if (!codec_keys_ok) return CBFS_E_NOMEM;
    void *ctx = pthread_getspecific(codec_keys[codec->id]);
    if (!ctx) {
        ctx = codec->ctx_new();
        if (!ctx) return CBFS_E_NOMEM;
        if (pthread_setspecific(codec_keys[codec->id], ctx) != 0) {
            codec->ctx_free(ctx);
            return CBFS_E_NOMEM;
        }
    }
    *out = ctx;
    return CBFS_OK;
}

cbfs_err cbfs_codec_compress(const struct cbfs_codec_ops *codec, int level, const void *src,
                             size_t src_len, void *dst, size_t dst_cap, size_t *dst_len)
{
    void *ctx = NULL;
    cbfs_err err = codec_thread_ctx(codec, &ctx);
    if (err) return err;
    /* Cheap, and it keeps a bad level from ever reaching a library. */
    if (level < codec->min_level || level > codec->max_level) return CBFS_E_CODEC_LEVEL;
    return codec->compress(ctx, level, src, src_len, dst, dst_cap, dst_len);
}

cbfs_err cbfs_codec_decompress(const struct cbfs_codec_ops *codec, const void *src,
                               size_t src_len, void *dst, size_t dst_len)
{
    void *ctx = NULL;
    cbfs_err err = codec_thread_ctx(codec, &ctx);
    if (err) return err;
    return codec->decompress(ctx, src, src_len, dst, dst_len);
}

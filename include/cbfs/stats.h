/* The user.cbfs.stats text: a running daemon's counters for `cbfs stats`, one
 * "key=value\n" line per field, daemon fields first, then CBFS_ENGINE_STATS
 * (engine.h), in list order. The lists are the one schema: they give struct
 * cbfs_stats, the encoder (mount.cbfs) and the decoder (the cbfs tool). */
#ifndef CBFS_STATS_H
#define CBFS_STATS_H

#include <stddef.h>
#include <stdint.h>

#include "cbfs/engine.h"
#include "cbfs/err.h"

/* The virtual, read-only xattr on the mount root that holds the text. */
#define CBFS_XATTR_STATS "user.cbfs.stats"

/* X(key, type): the daemon's description. U64 and I64 are decimal (I64 may
 * be negative: zstd's fast levels); STR is any text without NUL or newline,
 * shorter than CBFS_STATS_STR_MAX. The engine's statistics are all U64. */
#define CBFS_STATS_DAEMON(X)                                                            \
    X(uptime_ns, U64) X(workers, U64) X(codec, STR) X(level, I64) X(block_size, U64)
#define CBFS_STATS_STR_MAX 32
/* Room for the whole text and its NUL, every field at its longest
 * (test_stats.c): the daemon's reply buffer and the tool's read buffer. */
#define CBFS_STATS_TEXT_MAX 4096

#define CBFS_STATS_FIELD_U64_(key) uint64_t key;
#define CBFS_STATS_FIELD_I64_(key) int64_t key;
#define CBFS_STATS_FIELD_STR_(key) char key[CBFS_STATS_STR_MAX];
#define CBFS_STATS_FIELD_(key, type) CBFS_STATS_FIELD_##type##_(key)
/* One sample: every line of the text. */
struct cbfs_stats {
    CBFS_STATS_DAEMON(CBFS_STATS_FIELD_)
    struct cbfs_engine_stats st;
};
#undef CBFS_STATS_FIELD_
#undef CBFS_STATS_FIELD_STR_
#undef CBFS_STATS_FIELD_I64_
#undef CBFS_STATS_FIELD_U64_

/* Writes the text of s into buf, NUL-terminated. STR fields must be
 * NUL-terminated and hold no newline. @return CBFS_E_DST_SMALL if the text
 * and its NUL do not fit in cap (buf then holds a cut prefix); *len is the
 * length of the whole text either way. */
cbfs_err cbfs_stats_encode(const struct cbfs_stats *s, char *buf, size_t cap, size_t *len);

/* Parses len bytes of text into *s. Every line must be key=value ending in a
 * newline; every key of the lists must be present, once, with a valid value.
 * Unknown keys are skipped, so a newer daemon's additions do not break an
 * older tool. @return CBFS_E_INVAL with one sentence in msg (may be NULL)
 * naming the line and what is wrong; *s is then undefined. */
cbfs_err cbfs_stats_decode(const char *text, size_t len, struct cbfs_stats *s, char *msg,
                           size_t msg_cap);

#endif

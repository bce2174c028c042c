/* The settings a user chooses, each parsed, range-checked, defaulted and
 * described in one place: one table in src/store/settings.c holds every
 * setting's name, parser, allowed range, default and help line. mount.cbfs -o,
 * .cbfs/store.conf, cbfs mkfs -o and mount.cbfs --help all go through it.
 *
 * Typical use:
 *   cbfs_settings_init(&s)                    built-in defaults, nothing given
 *   cbfs_settings_set(&s, scope, key, val)    per key=value, in any order
 *   cbfs_settings_resolve(&s, conf)           the store's defaults for what was
 *                                             not given, then the checks that
 *                                             need several settings */
#ifndef CBFS_SETTINGS_H
#define CBFS_SETTINGS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"

struct cbfs_store_conf;

/* Where a setting may be given (a bit mask). */
enum {
    CBFS_SCOPE_STORE = 1u << 0, /* store.conf and cbfs mkfs -o: the store's defaults */
    CBFS_SCOPE_MOUNT = 1u << 1, /* mount.cbfs -o */
};

/* One bit each in cbfs_settings.given. */
enum cbfs_setting_id {
    CBFS_SET_CODEC,
    CBFS_SET_LEVEL, /* level=N, not codec=NAME:N */
    CBFS_SET_BLOCK_SIZE,
    CBFS_SET_WORKERS,
    CBFS_SET_CACHE_SIZE,
    CBFS_SET_READAHEAD,
    CBFS_SET_INFLIGHT,
    CBFS_SET_ATTR_TIMEOUT,
    CBFS_SET_WRITEBACK_CACHE,
    CBFS_SET_FUSE_THREADS,
    CBFS_SET_CLONE_FD,
    CBFS_SET_MAX_BACKGROUND,
    CBFS_SET_FUSE_READAHEAD,
    CBFS_SET_COUNT_
};

struct cbfs_settings {
    /* The store's defaults (CBFS_SCOPE_STORE and CBFS_SCOPE_MOUNT). */
    const struct cbfs_codec_ops *codec; /* codec for new files */
    int level;                          /* its level (valid for it once resolved) */
    uint32_t block_size;                /* block size of new files */
    /* The daemon's tuning (CBFS_SCOPE_MOUNT only). */
    unsigned workers;        /* compression threads; 0 = online CPUs */
    uint64_t cache_bytes;    /* decompressed-block cache; never 0 (cache_size=0 is refused);
                                the settings table's default is the only one */
    unsigned readahead;      /* blocks; 0 = off */
    uint64_t inflight_bytes; /* 0 = automatic (the engine's default) */
    double attr_timeout;     /* seconds */
    bool writeback_cache;
    /* The FUSE channel (tuning for many cores; docs/PERF.md). */
    unsigned fuse_threads;   /* most threads serving requests; 0 = automatic
                                (cbfs_settings_fuse_threads) */
    bool clone_fd;           /* one /dev/fuse queue per thread */
    unsigned max_background; /* kernel's queue of async requests (writeback); 0 = its own */
    uint64_t fuse_readahead; /* bytes the kernel reads ahead (read_ahead_kb); 0 = its own */

    unsigned given;   /* bit (1u << enum cbfs_setting_id): set by cbfs_settings_set */
    int level_wanted; /* level=N until it is checked against its codec */
};

/* fuse_threads=0: twice the online CPUs, within these (measured on 2 cores:
 * 4 serving threads instead of libfuse's 10 gave 1 MiB writes +14 % and
 * 8 KiB writes +15 %, docs/PERF.md; more only contend for the file locks). */
#define CBFS_FUSE_THREADS_AUTO_MIN 4
#define CBFS_FUSE_THREADS_AUTO_MAX 10

/* The serving threads for fuse_threads=set: set itself, or for 0 twice the
 * online CPUs within [CBFS_FUSE_THREADS_AUTO_MIN, CBFS_FUSE_THREADS_AUTO_MAX]. */
unsigned cbfs_settings_fuse_threads(unsigned set);

/* Fills s with the built-in defaults (the ones --help shows); nothing given. */
void cbfs_settings_init(struct cbfs_settings *s);

/* @return true if key names a setting allowed in scope. */
bool cbfs_settings_known(const char *key, unsigned scope);

/* Applies key=val (val NULL: the key was given without '='). codec=NAME[:N]
 * sets the codec and its level; level=N wins over it whatever the order and
 * is checked against the codec by cbfs_settings_check_level or
 * cbfs_settings_resolve. On error writes one sentence naming the option and
 * what it allows into msg.
 * @return CBFS_E_INVAL (unknown in scope, malformed, out of range),
 * CBFS_E_CODEC_UNKNOWN/MISSING/LEVEL. */
cbfs_err cbfs_settings_set(struct cbfs_settings *s, unsigned scope, const char *key,
                           const char *val, char *msg, size_t msg_cap);

/* Checks a given level=N against the codec chosen so far and makes it the
 * level. No-op without level=. @return CBFS_E_CODEC_LEVEL with msg. */
cbfs_err cbfs_settings_check_level(struct cbfs_settings *s, char *msg, size_t msg_cap);

/* Takes codec (with its level) and block size from the store's conf when they
 * were not given (conf NULL: keep the built-in defaults), then checks what
 * depends on several settings: level= against the codec, inflight >= one
 * block. @return CBFS_OK or CBFS_E_CODEC_LEVEL / CBFS_E_INVAL with msg. */
cbfs_err cbfs_settings_resolve(struct cbfs_settings *s, const struct cbfs_store_conf *conf,
                               char *msg, size_t msg_cap);

/* The "needs a value" / "takes no value" check of a key=value item, for
 * options outside the table that follow the same convention. @return
 * CBFS_E_INVAL with msg. */
cbfs_err cbfs_settings_check_value(const char *key, const char *val, bool wants_value,
                                   char *msg, size_t msg_cap);

/* Called by cbfs_settings_split_list for one key[=value] item of a list (val
 * NULL: no '='). On error writes msg as cbfs_settings_set does.
 * @return CBFS_OK to go on, else the error that ends the split. */
typedef cbfs_err (*cbfs_settings_item_fn)(void *ctx, const char *key, const char *val,
                                          char *msg, size_t msg_cap);

/* Splits an -o option list, the one rule for mount.cbfs -o and cbfs mkfs -o:
 * items are separated by commas and a backslash makes the next character
 * literal, so "\," is a comma inside a value and "\\" a backslash (the
 * escapes of libfuse's own option lists); key and value part at the first
 * '=' after unescaping.
 * Empty items ("a,,b") are skipped. Calls one for each other item, in order,
 * and stops at its first error.
 * @return CBFS_OK, CBFS_E_NOMEM (msg untouched) or what one returned. */
cbfs_err cbfs_settings_split_list(const char *list, cbfs_settings_item_fn one, void *ctx,
                                  char *msg, size_t msg_cap);

/* Applies every item of an -o list (cbfs_settings_split_list) with
 * cbfs_settings_set, stopping at the first refused one. @return as
 * cbfs_settings_set, or CBFS_E_NOMEM (msg untouched). */
cbfs_err cbfs_settings_set_list(struct cbfs_settings *s, unsigned scope, const char *list,
                                char *msg, size_t msg_cap);

/* Writes one help line per setting in scope: "  key=ARG  what (allowed;
 * default D)", defaults as cbfs_settings_init sets them. */
void cbfs_settings_help(FILE *out, unsigned scope);

/* Writes the names of the settings in scope, "codec, level, block_size". */
void cbfs_settings_names(unsigned scope, char *buf, size_t cap);

#endif

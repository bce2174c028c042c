/* Settings: one table row per setting (name, where it may be given, value
 * kind with its range, default, help line). Parsing, defaults, error messages
 * and --help are all read from the table, so a range or a default is written
 * once. See include/cbfs/settings.h. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/settings.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

#define CBFS_SETTINGS_STR_(x) #x
#define CBFS_SETTINGS_STR(x) CBFS_SETTINGS_STR_(x) /* a number in a help text */

#define CBFS_SCOPE_BOTH (CBFS_SCOPE_STORE | CBFS_SCOPE_MOUNT)

/* The codec of a store's first mount (or mkfs) when none is given. */
#if CBFS_HAVE_LZ4
#define CBFS_SETTINGS_CODEC "lz4"
#else
#define CBFS_SETTINGS_CODEC "none"
#endif

/* How a value is read; each kind has one parser and one "allowed" phrase. */
enum cbfs_setting_kind {
    CBFS_KIND_CODEC,   /* NAME[:LEVEL] -> codec + level */
    CBFS_KIND_LEVEL,   /* int, checked against the codec later */
    CBFS_KIND_BLOCK,   /* size, cbfs_block_size_valid -> uint32_t */
    CBFS_KIND_UINT,    /* unsigned in min..max */
    CBFS_KIND_SIZE,    /* cbfs_parse_size -> uint64_t */
    CBFS_KIND_SECONDS, /* double in min..max */
    CBFS_KIND_FLAG,    /* bool: no value or on/yes/1 -> true, off/no/0 -> false */
};

struct cbfs_setting {
    const char *name;
    const char *arg; /* value placeholder in --help; a flag's ("[=on|off]") is optional */
    unsigned scope;
    enum cbfs_setting_kind kind;
    size_t off;        /* UINT, SIZE, SECONDS, FLAG: the field in struct cbfs_settings
                        * (0 for the other kinds, whose code names their fields) */
    uint64_t min, max; /* CBFS_KIND_UINT, CBFS_KIND_SECONDS; CBFS_KIND_SIZE when max
                        * is not 0: then 0 or a multiple of min up to max; when
                        * only min is: at least min */
    double def;        /* numeric kinds: the built-in default */
    const char *help;
};

#define CBFS_F_(field) offsetof(struct cbfs_settings, field)

static const struct cbfs_setting cbfs_settings_table[CBFS_SET_COUNT_] = {
    [CBFS_SET_CODEC] = {"codec", "NAME[:LEVEL]", CBFS_SCOPE_BOTH, CBFS_KIND_CODEC, 0, 0, 0, 0,
                        "codec for new files"},
    [CBFS_SET_LEVEL] = {"level", "N", CBFS_SCOPE_BOTH, CBFS_KIND_LEVEL, 0, 0, 0, 0,
                        "compression level, wins over codec=NAME:LEVEL"},
    [CBFS_SET_BLOCK_SIZE] = {"block_size", "SIZE", CBFS_SCOPE_BOTH, CBFS_KIND_BLOCK, 0, 0, 0,
                             CBFS_BLOCK_DEFAULT,
                             "block size of new files"}, /* range: cbfs_block_size_valid */
    [CBFS_SET_WORKERS] = {"workers", "N", CBFS_SCOPE_MOUNT, CBFS_KIND_UINT, CBFS_F_(workers), 0,
                          256, 0, "compression threads, 0 = one per online CPU"},
    /* The one default of the cache's size: the engine has none of its own
     * (it refuses 0). Not 0: there is no mount without a cache. */
    [CBFS_SET_CACHE_SIZE] = {"cache_size", "SIZE", CBFS_SCOPE_MOUNT, CBFS_KIND_SIZE,
                             CBFS_F_(cache_bytes), 1, 0, 64u << 20, "decompressed-block cache"},
    /* 32 with fuse_readahead=2M (below); the cache bounds what all readers
     * hold decoded ahead (src/engine/cache.h). */
    [CBFS_SET_READAHEAD] = {"readahead", "N", CBFS_SCOPE_MOUNT, CBFS_KIND_UINT, CBFS_F_(readahead),
                            0, 4096, 32, "blocks decoded ahead of a sequential reader, 0 = off"},
    [CBFS_SET_INFLIGHT] = {"inflight", "SIZE", CBFS_SCOPE_MOUNT, CBFS_KIND_SIZE,
                           CBFS_F_(inflight_bytes), 0, 0, 0,
                           "bound on data waiting for compression, at least one block, "
                           "0 = automatic"},
    [CBFS_SET_ATTR_TIMEOUT] = {"attr_timeout", "SEC", CBFS_SCOPE_MOUNT, CBFS_KIND_SECONDS,
                               CBFS_F_(attr_timeout), 0, 86400, 1.0, "kernel attribute cache time"},
    /* On by default since the engine seals out-of-order writeback in block
     * order and KILLPRIV_V2 spares the per-write GETXATTR (docs/PERF.md). */
    [CBFS_SET_WRITEBACK_CACHE] = {"writeback_cache", "[=on|off]", CBFS_SCOPE_MOUNT, CBFS_KIND_FLAG,
                                  CBFS_F_(writeback_cache), 0, 0, 1,
                                  "let the kernel cache writes and send them in large pieces"},
    /* Channel tuning, for measuring on many cores (docs/PERF.md); libfuse's
     * own defaults: 10 threads, one queue, the kernel's 12 background. */
    [CBFS_SET_FUSE_THREADS] =
        {"fuse_threads", "N", CBFS_SCOPE_MOUNT, CBFS_KIND_UINT, CBFS_F_(fuse_threads), 0, 256, 0,
         "most threads serving FUSE requests, 0 = twice the online "
         "CPUs, " CBFS_SETTINGS_STR(CBFS_FUSE_THREADS_AUTO_MIN) " to " CBFS_SETTINGS_STR(
             CBFS_FUSE_THREADS_AUTO_MAX)},
    [CBFS_SET_CLONE_FD] = {"clone_fd", "[=on|off]", CBFS_SCOPE_MOUNT, CBFS_KIND_FLAG,
                           CBFS_F_(clone_fd), 0, 0, 0, "one /dev/fuse queue per serving thread"},
    [CBFS_SET_MAX_BACKGROUND] = {"max_background", "N", CBFS_SCOPE_MOUNT, CBFS_KIND_UINT,
                                 CBFS_F_(max_background), 0, 65535, 0,
                                 "async requests the kernel keeps in flight (writeback), "
                                 "0 = the kernel's default"},
    /* Raised from the kernel's 128K: a sequential reader's requests become
     * 1 MiB (max_write's pages), two in flight, a quarter of the round trips
     * and thread switches for a restore; 2M with readahead=32 restored lz4
     * 1.13x faster than 1M with 8 on 16 cores (4M: 1.14-1.23x, lz4 and
     * zstd:1), alike on 2 (docs/PERF.md, fifteenth session). Set after INIT
     * (main.c). */
    [CBFS_SET_FUSE_READAHEAD] = {"fuse_readahead", "SIZE", CBFS_SCOPE_MOUNT, CBFS_KIND_SIZE,
                                 CBFS_F_(fuse_readahead), 4u << 10, 1u << 30, 2u << 20,
                                 "how far ahead the kernel reads for a sequential reader "
                                 "(needs root), 0 = the kernel's own"},
};

#define CBFS_FIELD_(s, r, type) ((type *)((char *)(s) + (r)->off))

/* What a setting accepts, as a phrase that fits "give ..." and help lines. */
static void cbfs_setting_allowed(const struct cbfs_setting *r, char *buf, size_t cap)
{
    char lo[64], hi[24];
    switch (r->kind) {
    case CBFS_KIND_CODEC:
        cbfs_codec_list(lo, sizeof lo);
        snprintf(buf, cap, "one of %s, with :LEVEL for a level", lo);
        break;
    case CBFS_KIND_LEVEL: snprintf(buf, cap, "a whole number in the codec's range"); break;
    case CBFS_KIND_BLOCK:
        snprintf(buf, cap, "a power of two from %s to %s",
                 cbfs_format_size(CBFS_BLOCK_MIN, lo, sizeof lo),
                 cbfs_format_size(CBFS_BLOCK_MAX, hi, sizeof hi));
        break;
    case CBFS_KIND_UINT:
        snprintf(buf, cap, "a whole number from %llu to %llu", (unsigned long long)r->min,
                 (unsigned long long)r->max);
        break;
    case CBFS_KIND_SIZE:
        if (r->max)
            snprintf(buf, cap, "0 or a multiple of %s up to %s",
                     cbfs_format_size(r->min, lo, sizeof lo),
                     cbfs_format_size(r->max, hi, sizeof hi));
        else if (r->min == 1)
            snprintf(buf, cap, "a size such as 64M or 1G, not 0");
        else if (r->min)
            snprintf(buf, cap, "a size such as 64M or 1G, at least %s",
                     cbfs_format_size(r->min, lo, sizeof lo));
        else
            snprintf(buf, cap, "a size such as 64M or 1G");
        break;
    case CBFS_KIND_SECONDS:
        snprintf(buf, cap, "seconds from %llu to %llu, e.g. 1 or 0.5",
                 (unsigned long long)r->min, (unsigned long long)r->max);
        break;
    case CBFS_KIND_FLAG: snprintf(buf, cap, "no value (on), on or off"); break;
    }
}

/* The value of r in s, as a user would write it. */
static void cbfs_setting_show(const struct cbfs_setting *r, const struct cbfs_settings *s,
                              char *buf, size_t cap)
{
    switch (r->kind) {
    case CBFS_KIND_CODEC: snprintf(buf, cap, "%s", s->codec->name); break;
    case CBFS_KIND_LEVEL: snprintf(buf, cap, "set by the codec"); break;
    case CBFS_KIND_BLOCK: cbfs_format_size(s->block_size, buf, cap); break;
    case CBFS_KIND_UINT: snprintf(buf, cap, "%u", *CBFS_FIELD_(s, r, const unsigned)); break;
    case CBFS_KIND_SIZE: cbfs_format_size(*CBFS_FIELD_(s, r, const uint64_t), buf, cap); break;
    case CBFS_KIND_SECONDS: snprintf(buf, cap, "%g", *CBFS_FIELD_(s, r, const double)); break;
    case CBFS_KIND_FLAG:
        snprintf(buf, cap, "%s", *CBFS_FIELD_(s, r, const bool) ? "on" : "off");
        break;
    }
}

/* "KEY=VAL: give ALLOWED" into msg. @return CBFS_E_INVAL. */
static cbfs_err cbfs_setting_refuse(const struct cbfs_setting *r, const char *val, char *msg,
                                    size_t cap)
{
    char allowed[128];
    cbfs_setting_allowed(r, allowed, sizeof allowed);
    snprintf(msg, cap, "%s=%s: give %s", r->name, val, allowed);
    return CBFS_E_INVAL;
}

static cbfs_err cbfs_setting_parse(const struct cbfs_setting *r, struct cbfs_settings *s,
                                   const char *val, char *msg, size_t cap)
{
    long n;
    uint64_t size;
    switch (r->kind) {
    case CBFS_KIND_CODEC:
        return cbfs_codec_parse(val, &s->codec, &s->level, msg, cap);
    case CBFS_KIND_LEVEL:
        if (!cbfs_parse_long(val, INT_MIN, INT_MAX, &n))
            return cbfs_setting_refuse(r, val, msg, cap);
        s->level_wanted = (int)n;
        return CBFS_OK;
    case CBFS_KIND_BLOCK:
        if (cbfs_parse_size(val, &size) != CBFS_OK || !cbfs_block_size_valid(size))
            return cbfs_setting_refuse(r, val, msg, cap);
        s->block_size = (uint32_t)size;
        return CBFS_OK;
    case CBFS_KIND_UINT:
        if (!cbfs_parse_long(val, (long)r->min, (long)r->max, &n))
            return cbfs_setting_refuse(r, val, msg, cap);
        *CBFS_FIELD_(s, r, unsigned) = (unsigned)n;
        return CBFS_OK;
    case CBFS_KIND_SIZE:
        if (cbfs_parse_size(val, &size) != CBFS_OK ||
            (r->max && size && (size % r->min || size > r->max)) || (!r->max && size < r->min))
            return cbfs_setting_refuse(r, val, msg, cap);
        *CBFS_FIELD_(s, r, uint64_t) = size;
        return CBFS_OK;
    case CBFS_KIND_SECONDS:
        if (!cbfs_parse_seconds(val, (double)r->min, (double)r->max, CBFS_FIELD_(s, r, double)))
            return cbfs_setting_refuse(r, val, msg, cap);
        return CBFS_OK;
    case CBFS_KIND_FLAG:
        if (!val || !strcmp(val, "on") || !strcmp(val, "yes") || !strcmp(val, "1"))
            *CBFS_FIELD_(s, r, bool) = true;
        else if (!strcmp(val, "off") || !strcmp(val, "no") || !strcmp(val, "0"))
            *CBFS_FIELD_(s, r, bool) = false;
        else
            return cbfs_setting_refuse(r, val, msg, cap);
        return CBFS_OK;
    }
    return CBFS_E_INVAL;
}

void cbfs_settings_init(struct cbfs_settings *s)
{
    memset(s, 0, sizeof *s);
    /* "none" is always built: the fallback cannot fail. */
    if (cbfs_codec_by_name(CBFS_SETTINGS_CODEC, &s->codec) != CBFS_OK)
        (void)cbfs_codec_by_name("none", &s->codec);
    s->level = s->codec->default_level;
    for (size_t i = 0; i < CBFS_SET_COUNT_; i++) {
        const struct cbfs_setting *const r = &cbfs_settings_table[i];
        switch (r->kind) {
        case CBFS_KIND_BLOCK: s->block_size = (uint32_t)r->def; break;
        case CBFS_KIND_UINT: *CBFS_FIELD_(s, r, unsigned) = (unsigned)r->def; break;
        case CBFS_KIND_SIZE: *CBFS_FIELD_(s, r, uint64_t) = (uint64_t)r->def; break;
        case CBFS_KIND_SECONDS: *CBFS_FIELD_(s, r, double) = r->def; break;
        case CBFS_KIND_FLAG: *CBFS_FIELD_(s, r, bool) = r->def != 0; break;
        default: break; /* codec and level above */
        }
    }
}

static const struct cbfs_setting *cbfs_settings_find(const char *key, unsigned scope)
{
    for (size_t i = 0; i < CBFS_SET_COUNT_; i++)
        if ((cbfs_settings_table[i].scope & scope) && strcmp(cbfs_settings_table[i].name, key) == 0)
            return &cbfs_settings_table[i];
    return NULL;
}

bool cbfs_settings_known(const char *key, unsigned scope)
{
    return cbfs_settings_find(key, scope) != NULL;
}

cbfs_err cbfs_settings_check_value(const char *key, const char *val, bool wants_value,
                                   char *msg, size_t msg_cap)
{
    if (wants_value && (!val || !*val)) {
        snprintf(msg, msg_cap, "option %s needs a value (%s=...)", key, key);
        return CBFS_E_INVAL;
    }
    if (!wants_value && val) {
        snprintf(msg, msg_cap, "option %s takes no value; write just '%s'", key, key);
        return CBFS_E_INVAL;
    }
    return CBFS_OK;
}

cbfs_err cbfs_settings_split_list(const char *list, cbfs_settings_item_fn one, void *ctx,
                                  char *msg, size_t msg_cap)
{
    char *const item = malloc(strlen(list) + 1);
    if (!item) return CBFS_E_NOMEM;
    cbfs_err e = CBFS_OK;
    size_t n = 0;
    for (const char *s = list;; s++) {
        if (*s == '\\' && s[1]) {
            item[n++] = *++s;
            continue;
        }
        if (*s != ',' && *s != '\0') {
            item[n++] = *s;
            continue;
        }
        item[n] = '\0';
        if (n > 0) {
            char *const val = strchr(item, '=');
            if (val) *val = '\0';
            e = one(ctx, item, val ? val + 1 : NULL, msg, msg_cap);
        }
        n = 0;
        if (e || *s == '\0') break;
    }
    free(item);
    return e;
}

/* cbfs_settings_set_list's item function: ctx is a struct cbfs_settings_to. */
struct cbfs_settings_to {
    struct cbfs_settings *s;
    unsigned scope;
};
static cbfs_err cbfs_settings_set_item(void *ctx, const char *key, const char *val, char *msg,
                                       size_t msg_cap)
{
    const struct cbfs_settings_to *const to = ctx;
    return cbfs_settings_set(to->s, to->scope, key, val, msg, msg_cap);
}

cbfs_err cbfs_settings_set_list(struct cbfs_settings *s, unsigned scope, const char *list,
                                char *msg, size_t msg_cap)
{
    struct cbfs_settings_to to = {s, scope};
    return cbfs_settings_split_list(list, cbfs_settings_set_item, &to, msg, msg_cap);
}

cbfs_err cbfs_settings_set(struct cbfs_settings *s, unsigned scope, const char *key,
                           const char *val, char *msg, size_t msg_cap)
{
    const struct cbfs_setting *const r = cbfs_settings_find(key, scope);
    if (!r) {
        char known[160];
        cbfs_settings_names(scope, known, sizeof known);
        snprintf(msg, msg_cap, "unknown option '%s' (known: %s)", key, known);
        return CBFS_E_INVAL;
    }
    /* a flag takes a value or none; every other setting needs one */
    cbfs_err e = r->kind == CBFS_KIND_FLAG
                     ? CBFS_OK
                     : cbfs_settings_check_value(key, val, true, msg, msg_cap);
    if (e) return e;
    e = cbfs_setting_parse(r, s, val, msg, msg_cap);
    if (e) return e;
    s->given |= 1u << (r - cbfs_settings_table);
    return CBFS_OK;
}

cbfs_err cbfs_settings_check_level(struct cbfs_settings *s, char *msg, size_t msg_cap)
{
    if (!(s->given & (1u << CBFS_SET_LEVEL))) return CBFS_OK;
    const bool in_range =
        s->level_wanted >= s->codec->min_level && s->level_wanted <= s->codec->max_level;
    if (!in_range && s->codec->min_level == s->codec->max_level) {
        snprintf(msg, msg_cap,
                 "level=%d given, but codec %s has no levels; choose a codec with levels "
                 "(e.g. codec=zstd) or drop level=",
                 s->level_wanted, s->codec->name);
        return CBFS_E_CODEC_LEVEL;
    }
    const cbfs_err e = cbfs_codec_check_level(s->codec, s->level_wanted, msg, msg_cap);
    if (e) return e;
    s->level = s->level_wanted;
    return CBFS_OK;
}

cbfs_err cbfs_settings_resolve(struct cbfs_settings *s, const struct cbfs_store_conf *conf,
                               char *msg, size_t msg_cap)
{
    if (conf && !(s->given & (1u << CBFS_SET_CODEC))) {
        s->codec = conf->codec;
        s->level = conf->level;
    }
    if (conf && !(s->given & (1u << CBFS_SET_BLOCK_SIZE))) s->block_size = conf->block_size;
    const cbfs_err e = cbfs_settings_check_level(s, msg, msg_cap);
    if (e) return e;
    if (s->inflight_bytes && s->inflight_bytes < s->block_size) {
        snprintf(msg, msg_cap,
                 "inflight=%llu bytes is less than one block (%u bytes); give at least the "
                 "block size, or 0 for the default",
                 (unsigned long long)s->inflight_bytes, s->block_size);
        return CBFS_E_INVAL;
    }
    return CBFS_OK;
}

void cbfs_settings_help(FILE *out, unsigned scope)
{
    struct cbfs_settings def;
    cbfs_settings_init(&def);
    for (size_t i = 0; i < CBFS_SET_COUNT_; i++) {
        const struct cbfs_setting *const r = &cbfs_settings_table[i];
        if (!(r->scope & scope)) continue;
        char key[48], allowed[128], shown[48], text[320];
        snprintf(key, sizeof key, "%s%s%s", r->name, r->kind != CBFS_KIND_FLAG ? "=" : "",
                 r->arg);
        cbfs_setting_allowed(r, allowed, sizeof allowed);
        cbfs_setting_show(r, &def, shown, sizeof shown);
        if (r->kind == CBFS_KIND_FLAG)
            snprintf(text, sizeof text, "%s (default %s)", r->help, shown);
        else
            snprintf(text, sizeof text, "%s (%s; default %s)", r->help, allowed, shown);
        cbfs_print_wrapped(out, fprintf(out, "  %-19s ", key), 22, text);
    }
}

void cbfs_settings_names(unsigned scope, char *buf, size_t cap)
{
    size_t n = 0;
    if (cap) buf[0] = '\0';
    for (size_t i = 0; i < CBFS_SET_COUNT_ && n < cap; i++) {
        if (!(cbfs_settings_table[i].scope & scope)) continue;
        const int w =
            snprintf(buf + n, cap - n, "%s%s", n ? ", " : "", cbfs_settings_table[i].name);
        if (w < 0) break;
        n += (size_t)w;
    }
}

unsigned cbfs_settings_fuse_threads(unsigned set)
{
    if (set) return set;
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const long t = 2 * (cpus > 0 ? cpus : 1);
    return t < CBFS_FUSE_THREADS_AUTO_MIN   ? CBFS_FUSE_THREADS_AUTO_MIN
           : t > CBFS_FUSE_THREADS_AUTO_MAX ? CBFS_FUSE_THREADS_AUTO_MAX
                                            : (unsigned)t;
}

/* Settings tests: every setting's valid and invalid values, ranges, scopes and
 * defaults; level= against its codec; the store's defaults; help texts that
 * show the real defaults; and the mount.cbfs command line built on them. */
#include <criterion/criterion.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/options.h"
#include "cbfs/settings.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

static const struct cbfs_codec_ops *codec(const char *name)
{
    const struct cbfs_codec_ops *c = NULL;
    cr_assert_eq(cbfs_codec_by_name(name, &c), CBFS_OK, "codec %s not built", name);
    return c;
}

/* Sets key=val on fresh settings; @return the error, msg filled. */
static cbfs_err set1(struct cbfs_settings *s, unsigned scope, const char *key, const char *val,
                     char *msg, size_t cap)
{
    cbfs_settings_init(s);
    msg[0] = '\0';
    return cbfs_settings_set(s, scope, key, val, msg, cap);
}

Test(settings, builtin_defaults)
{
    struct cbfs_settings s;
    cbfs_settings_init(&s);
#if CBFS_HAVE_LZ4
    cr_assert_eq(s.codec, codec("lz4"));
#else
    cr_assert_eq(s.codec, codec("none"));
#endif
    cr_assert_eq(s.level, s.codec->default_level);
    cr_assert_eq(s.block_size, CBFS_BLOCK_DEFAULT);
    cr_assert_eq(s.workers, 0);
    cr_assert_eq(s.cache_bytes, 64u << 20);
    cr_assert_eq(s.readahead, 32);
    cr_assert_eq(s.inflight_bytes, 0);
    cr_assert_eq(s.attr_timeout, 1.0);
    cr_assert(s.writeback_cache); /* on by default: docs/PERF.md */
    cr_assert_eq(s.fuse_readahead, 2u << 20);
    cr_assert_eq(s.given, 0);
}

/* The one strict whole-number parser (settings, bench, verify). */
Test(settings, fuse_threads_automatic)
{
    cr_assert_eq(cbfs_settings_fuse_threads(7), 7);
    const long cpus = sysconf(_SC_NPROCESSORS_ONLN);
    const unsigned want = cpus < 2 ? 4 : cpus > 5 ? 10 : (unsigned)(2 * cpus);
    cr_assert_eq(cbfs_settings_fuse_threads(0), want, "%u for %ld CPUs",
                 cbfs_settings_fuse_threads(0), cpus);
}

Test(settings, parse_long_is_strict)
{
    long v;
    cr_assert(cbfs_parse_long("42", 1, 100, &v) && v == 42);
    cr_assert(cbfs_parse_long("-3", -5, 5, &v) && v == -3);
    static const char *const bad[] = {"", " 4", "+4", "4 ", "0x10", "1e2", "-1", "101",
                                      "-18446744073709551615", "99999999999999999999"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        cr_assert(!cbfs_parse_long(bad[i], 0, 100, &v), "took '%s'", bad[i]);
    cr_assert(!cbfs_parse_long(NULL, 0, 100, &v));
}

Test(settings, valid_values)
{
    static const struct {
        const char *key, *val;
    } ok[] = {
        {"codec", "none"},        {"codec", "lz4"},           {"level", "1"},
        {"level", "-5"},          {"block_size", "4K"},       {"block_size", "16M"},
        {"block_size", "65536"},  {"block_size", "1MiB"},     {"workers", "0"},
        {"workers", "256"},       {"cache_size", "1"},        {"cache_size", "1G"},
        {"readahead", "0"},       {"readahead", "4096"},      {"inflight", "64M"},
        {"attr_timeout", "0"},    {"attr_timeout", "0.5"},    {"attr_timeout", "86400"},
        {"fuse_readahead", "0"},  {"fuse_readahead", "4K"},   {"fuse_readahead", "1G"},
        {"writeback_cache", NULL},
    };
    for (size_t i = 0; i < sizeof ok / sizeof ok[0]; i++) {
        struct cbfs_settings s;
        char msg[256];
        cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, ok[i].key, ok[i].val, msg, sizeof msg), CBFS_OK,
                     "%s=%s: %s", ok[i].key, ok[i].val, msg);
        cr_assert_neq(s.given, 0);
    }
    struct cbfs_settings s;
    char msg[256];
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "block_size", "1M", msg, sizeof msg), CBFS_OK);
    cr_assert_eq(s.block_size, 1u << 20);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "workers", "256", msg, sizeof msg), CBFS_OK);
    cr_assert_eq(s.workers, 256);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "cache_size", "128M", msg, sizeof msg), CBFS_OK);
    cr_assert_eq(s.cache_bytes, 128u << 20);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "readahead", "16", msg, sizeof msg), CBFS_OK);
    cr_assert_eq(s.readahead, 16);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "inflight", "32M", msg, sizeof msg), CBFS_OK);
    cr_assert_eq(s.inflight_bytes, 32u << 20);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "attr_timeout", "2.5", msg, sizeof msg), CBFS_OK);
    cr_assert_eq(s.attr_timeout, 2.5);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "writeback_cache", "off", msg, sizeof msg), CBFS_OK);
    cr_assert_not(s.writeback_cache);
    cr_assert_eq(s.given, 1u << CBFS_SET_WRITEBACK_CACHE);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "writeback_cache", NULL, msg, sizeof msg), CBFS_OK);
    cr_assert(s.writeback_cache);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "writeback_cache", "no", msg, sizeof msg), CBFS_OK);
    cr_assert_not(s.writeback_cache);
    cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, "writeback_cache", "on", msg, sizeof msg), CBFS_OK);
    cr_assert(s.writeback_cache);
}

/* Each refusal names the option, the value and what is allowed. */
Test(settings, invalid_values_name_the_option_and_range)
{
    static const struct {
        const char *key, *val;
        cbfs_err err;
        const char *says;
    } bad[] = {
        {"codec", "zip", CBFS_E_CODEC_UNKNOWN, "zip"},
        {"codec", "zstd:99", CBFS_E_CODEC_LEVEL, "1..19"},
        {"codec", "zstd:x", CBFS_E_INVAL, "zstd:x"},
        {"codec", "", CBFS_E_INVAL, "needs a value"},
        {"codec", NULL, CBFS_E_INVAL, "needs a value"},
        {"level", "abc", CBFS_E_INVAL, "level=abc: give a whole number"},
        {"level", "3.5", CBFS_E_INVAL, "level=3.5"},
        {"level", "99999999999", CBFS_E_INVAL, "level=99999999999"},
        {"level", " 3", CBFS_E_INVAL, "level= 3"},
        {"block_size", "3000", CBFS_E_INVAL, "block_size=3000: give a power of two from 4K to 16M"},
        {"block_size", "2K", CBFS_E_INVAL, "from 4K to 16M"},
        {"block_size", "32M", CBFS_E_INVAL, "from 4K to 16M"},
        {"block_size", "12K", CBFS_E_INVAL, "power of two"},
        {"block_size", "-4K", CBFS_E_INVAL, "block_size=-4K"},
        {"block_size", "1X", CBFS_E_INVAL, "block_size=1X"},
        {"workers", "257", CBFS_E_INVAL, "workers=257: give a whole number from 0 to 256"},
        {"workers", "-1", CBFS_E_INVAL, "from 0 to 256"},
        {"workers", "4x", CBFS_E_INVAL, "workers=4x"},
        {"readahead", "4097", CBFS_E_INVAL, "readahead=4097: give a whole number from 0 to 4096"},
        {"cache_size", "lots", CBFS_E_INVAL, "cache_size=lots: give a size"},
        /* no mount is without a cache (the engine refuses 0) */
        {"cache_size", "0", CBFS_E_INVAL, "cache_size=0: give a size such as 64M or 1G, not 0"},
        {"inflight", "-1M", CBFS_E_INVAL, "inflight=-1M"},
        {"fuse_readahead", "1K", CBFS_E_INVAL,
         "fuse_readahead=1K: give 0 or a multiple of 4K up to 1G"},
        {"fuse_readahead", "5000", CBFS_E_INVAL, "multiple of 4K"},
        {"fuse_readahead", "2G", CBFS_E_INVAL, "up to 1G"},
        {"attr_timeout", " 1", CBFS_E_INVAL, "attr_timeout= 1"},
        {"attr_timeout", "0x10", CBFS_E_INVAL, "attr_timeout=0x10"},
        {"attr_timeout", "-1", CBFS_E_INVAL, "attr_timeout=-1: give seconds from 0 to 86400"},
        {"attr_timeout", "86401", CBFS_E_INVAL, "from 0 to 86400"},
        {"attr_timeout", "nan", CBFS_E_INVAL, "attr_timeout=nan"},
        {"attr_timeout", "inf", CBFS_E_INVAL, "attr_timeout=inf"},
        {"attr_timeout", "1s", CBFS_E_INVAL, "attr_timeout=1s"},
        {"writeback_cache", "maybe", CBFS_E_INVAL,
         "writeback_cache=maybe: give no value (on), on or off"},
        {"writeback_cache", "", CBFS_E_INVAL, "give no value (on), on or off"},
        {"bogus", "1", CBFS_E_INVAL, "unknown option 'bogus'"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cbfs_settings s;
        char msg[256];
        cr_assert_eq(set1(&s, CBFS_SCOPE_MOUNT, bad[i].key, bad[i].val, msg, sizeof msg),
                     bad[i].err, "%s=%s: %s", bad[i].key, bad[i].val, msg);
        cr_assert_not_null(strstr(msg, bad[i].says), "%s=%s: message '%s' lacks '%s'",
                           bad[i].key, bad[i].val, msg, bad[i].says);
        cr_assert_eq(s.given, 0, "a refused value counts as not given");
    }
}

Test(settings, scopes)
{
    static const char *const store[] = {"codec", "level", "block_size"};
    static const char *const mount_only[] = {"workers",         "cache_size",    "readahead",
                                             "inflight",        "attr_timeout",  "writeback_cache",
                                             "fuse_readahead"};
    for (size_t i = 0; i < 3; i++) {
        cr_assert(cbfs_settings_known(store[i], CBFS_SCOPE_STORE));
        cr_assert(cbfs_settings_known(store[i], CBFS_SCOPE_MOUNT));
    }
    for (size_t i = 0; i < sizeof mount_only / sizeof *mount_only; i++) {
        cr_assert_not(cbfs_settings_known(mount_only[i], CBFS_SCOPE_STORE));
        cr_assert(cbfs_settings_known(mount_only[i], CBFS_SCOPE_MOUNT));
    }
    cr_assert_not(cbfs_settings_known("ro", CBFS_SCOPE_MOUNT), "FUSE flags are not settings");
    char names[160], msg[256];
    cbfs_settings_names(CBFS_SCOPE_STORE, names, sizeof names);
    cr_assert_str_eq(names, "codec, level, block_size");
    struct cbfs_settings s;
    cr_assert_eq(set1(&s, CBFS_SCOPE_STORE, "workers", "4", msg, sizeof msg), CBFS_E_INVAL);
    cr_assert_str_eq(msg, "unknown option 'workers' (known: codec, level, block_size)");
}

/* Applies "k=v" items in order, then resolves against conf. */
static cbfs_err set_all(struct cbfs_settings *s, const char *const *items, size_t n,
                        const struct cbfs_store_conf *conf, char *msg, size_t cap)
{
    cbfs_settings_init(s);
    for (size_t i = 0; i < n; i++) {
        char kv[64];
        snprintf(kv, sizeof kv, "%s", items[i]);
        char *val = strchr(kv, '=');
        if (val) *val++ = '\0';
        const cbfs_err e = cbfs_settings_set(s, CBFS_SCOPE_MOUNT, kv, val, msg, cap);
        if (e) return e;
    }
    return cbfs_settings_resolve(s, conf, msg, cap);
}
#define SET_ALL(s, conf, msg, ...)                                                              \
    set_all((s), (const char *const[]){__VA_ARGS__},                                            \
            sizeof((const char *const[]){__VA_ARGS__}) / sizeof(const char *), (conf), (msg),   \
            sizeof(msg))

Test(settings, level_wins_over_codec_level_in_any_order)
{
    struct cbfs_settings s;
    char msg[256];
    cr_assert_eq(SET_ALL(&s, NULL, msg, "level=5", "codec=zstd:3"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.codec, codec("zstd"));
    cr_assert_eq(s.level, 5);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "codec=zstd:3", "level=7"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.level, 7);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "codec=zstd:3"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.level, 3);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "codec=zstd"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.level, codec("zstd")->default_level);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "codec=zstd", "level=20"), CBFS_E_CODEC_LEVEL);
    cr_assert_not_null(strstr(msg, "1..19"), "%s", msg);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "codec=none", "level=1"), CBFS_E_CODEC_LEVEL);
    cr_assert_not_null(strstr(msg, "no levels"), "%s", msg);
    /* store.conf always records a level, also none's only one */
    cr_assert_eq(SET_ALL(&s, NULL, msg, "codec=none", "level=0"), CBFS_OK, "%s", msg);
}

Test(settings, store_defaults_fill_what_was_not_given)
{
    struct cbfs_store_conf conf = {.codec = codec("zstd"), .level = 9, .block_size = 1u << 20};
    struct cbfs_settings s;
    char msg[256];
    cr_assert_eq(SET_ALL(&s, &conf, msg, "workers=2"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.codec, conf.codec);
    cr_assert_eq(s.level, 9);
    cr_assert_eq(s.block_size, 1u << 20);
    cr_assert_eq(s.workers, 2);
    /* level= alone is checked against the store's codec. */
    cr_assert_eq(SET_ALL(&s, &conf, msg, "level=12"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.codec, conf.codec);
    cr_assert_eq(s.level, 12);
    cr_assert_eq(SET_ALL(&s, &conf, msg, "level=25"), CBFS_E_CODEC_LEVEL);
    /* What was given wins. */
    cr_assert_eq(SET_ALL(&s, &conf, msg, "codec=none", "block_size=64K"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.codec, codec("none"));
    cr_assert_eq(s.level, 0);
    cr_assert_eq(s.block_size, 64u << 10);
    /* No store.conf yet: the built-in defaults. */
    cr_assert_eq(SET_ALL(&s, NULL, msg, "workers=2"), CBFS_OK, "%s", msg);
    cr_assert_eq(s.block_size, CBFS_BLOCK_DEFAULT);
}

Test(settings, inflight_at_least_one_block)
{
    struct cbfs_store_conf conf = {.codec = codec("none"), .level = 0, .block_size = 1u << 20};
    struct cbfs_settings s;
    char msg[256];
    cr_assert_eq(SET_ALL(&s, NULL, msg, "inflight=256K"), CBFS_OK, "%s", msg);
    cr_assert_eq(SET_ALL(&s, &conf, msg, "inflight=256K"), CBFS_E_INVAL);
    cr_assert_not_null(strstr(msg, "inflight="), "%s", msg);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "block_size=64K", "inflight=64K"), CBFS_OK, "%s", msg);
    cr_assert_eq(SET_ALL(&s, NULL, msg, "block_size=64K", "inflight=60K"), CBFS_E_INVAL);
    cr_assert_eq(SET_ALL(&s, &conf, msg, "inflight=0"), CBFS_OK, "0 means automatic: %s", msg);
}

/* Captures what fn writes to a stream. */
static char *capture(void (*fn)(FILE *out, void *arg), void *arg)
{
    char *text = NULL;
    size_t len = 0;
    FILE *const f = open_memstream(&text, &len);
    cr_assert_not_null(f);
    fn(f, arg);
    fclose(f);
    return text;
}

static void help_of(FILE *out, void *arg)
{
    cbfs_settings_help(out, *(const unsigned *)arg);
}

static void usage_of(FILE *out, void *arg)
{
    (void)arg;
    cbfs_options_usage(out, "mount.cbfs");
}

/* s's line for key and its continuation lines, joined with single spaces. */
static char *help_entry(const char *help, const char *key)
{
    char needle[48];
    snprintf(needle, sizeof needle, "\n  %s", key);
    const char *p = strstr(help, needle);
    cr_assert_not_null(p, "no help line for %s in:\n%s", key, help);
    char *out = calloc(1, strlen(p) + 1);
    size_t n = 0;
    for (p++;; p++) {
        if (*p == '\n' && strncmp(p + 1, "                      ", 22) != 0) break;
        if (*p == '\n' || *p == ' ') {
            if (n && out[n - 1] != ' ') out[n++] = ' ';
            continue;
        }
        out[n++] = *p;
    }
    return out;
}

Test(settings, help_shows_the_real_defaults_and_ranges)
{
    unsigned scope = CBFS_SCOPE_MOUNT;
    char *const text = capture(help_of, &scope);
    char *help = malloc(strlen(text) + 2);
    sprintf(help, "\n%s", text);
    struct cbfs_settings def;
    cbfs_settings_init(&def);
    char want[96], size[24];
    static const char *const keys[] = {"codec=", "level=",        "block_size=",
                                       "workers=", "cache_size=", "readahead=",
                                       "inflight=", "attr_timeout=", "writeback_cache[=on|off] "};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) free(help_entry(help, keys[i]));

    char *e = help_entry(help, "codec=");
    snprintf(want, sizeof want, "default %s)", def.codec->name);
    cr_assert_not_null(strstr(e, want), "%s", e);
    free(e);
    e = help_entry(help, "block_size=");
    snprintf(want, sizeof want, "from 4K to 16M; default %s)",
             cbfs_format_size(CBFS_BLOCK_DEFAULT, size, sizeof size));
    cr_assert_not_null(strstr(e, want), "%s", e);
    cr_assert_not_null(strstr(e, "default 256K"), "%s", e);
    free(e);
    e = help_entry(help, "workers=");
    cr_assert_not_null(strstr(e, "from 0 to 256; default 0)"), "%s", e);
    free(e);
    e = help_entry(help, "cache_size=");
    snprintf(want, sizeof want, "default %s)",
             cbfs_format_size(def.cache_bytes, size, sizeof size));
    cr_assert_not_null(strstr(e, want), "%s", e);
    free(e);
    e = help_entry(help, "readahead=");
    snprintf(want, sizeof want, "from 0 to 4096; default %u)", def.readahead);
    cr_assert_not_null(strstr(e, want), "%s", e);
    free(e);
    e = help_entry(help, "attr_timeout=");
    snprintf(want, sizeof want, "default %g)", def.attr_timeout);
    cr_assert_not_null(strstr(e, want), "%s", e);
    free(e);
    e = help_entry(help, "writeback_cache[=on|off] ");
    cr_assert_not_null(strstr(e, "(default on)"), "%s", e);
    free(e);
    for (const char *l = help; (l = strchr(l, '\n')) && l[1]; l++)
        cr_assert_leq(strcspn(l + 1, "\n"), 79, "help line too long: %.*s", 100, l + 1);
    free(help);
    free(text);

    scope = CBFS_SCOPE_STORE;
    char *const store = capture(help_of, &scope);
    cr_assert_not_null(strstr(store, "block_size=SIZE"));
    cr_assert_null(strstr(store, "workers"), "mkfs help lists a mount-only setting:\n%s", store);
    free(store);
}

Test(settings, mount_usage_uses_the_table)
{
    char *const text = capture(usage_of, NULL);
    cr_assert_not_null(strstr(text, "default 256K"), "%s", text);
    cr_assert_null(strstr(text, "first mount: 1M"), "the stale 1M default is back");
    cr_assert_not_null(strstr(text, "allow_other"));
    cr_assert_not_null(strstr(text, "x-*"));
    free(text);
}

Test(settings, size_format_round_trip)
{
    static const uint64_t sizes[] = {0, 1, 1000, 4096, 256u << 10, 1u << 20, 3u << 20,
                                     1ull << 30, 1ull << 40, 5ull << 50, (1u << 20) + 1024};
    static const char *const text[] = {"0",  "1",  "1000", "4K",    "256K", "1M",
                                       "3M", "1G", "1T",   "5120T", "1025K"};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        char buf[32];
        cr_assert_str_eq(cbfs_format_size(sizes[i], buf, sizeof buf), text[i]);
        uint64_t back;
        cr_assert_eq(cbfs_parse_size(buf, &back), CBFS_OK);
        cr_assert_eq(back, sizes[i]);
    }
}

/* strtoull skips blanks and takes a sign: " -1" was 2^64 - 1, and cat's
 * --range then wrote from past the end of its buffer. */
Test(settings, size_parser_refusals)
{
    static const char *const bad[] = {"", " 1", " -1", "-1", "+5", "1KK", "K", "1 K", "1X",
                                      "99999999999999999999", "16777216T"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        uint64_t v = 7;
        cr_assert_eq(cbfs_parse_size(bad[i], &v), CBFS_E_INVAL, "took '%s' as %llu", bad[i],
                     (unsigned long long)v);
    }
    uint64_t v;
    cr_assert_eq(cbfs_parse_size("18446744073709551615", &v), CBFS_OK);
    cr_assert_eq(v, UINT64_MAX);
}

Test(settings, block_size_rule)
{
    for (uint64_t bs = 1; bs <= (64u << 20); bs <<= 1)
        cr_assert_eq(cbfs_block_size_valid(bs), bs >= CBFS_BLOCK_MIN && bs <= CBFS_BLOCK_MAX,
                     "%llu", (unsigned long long)bs);
    cr_assert_not(cbfs_block_size_valid(0));
    cr_assert_not(cbfs_block_size_valid(CBFS_BLOCK_MIN + CBFS_BLOCK_MIN / 2));
    cr_assert_not(cbfs_block_size_valid((1ull << 32) + CBFS_BLOCK_MIN));
}

/* ---- -o lists (cbfs_settings_split_list), shared by mount.cbfs and mkfs ---- */

/* Records each item as "key=val" or "key" (no '='); stops with CBFS_E_INVAL
 * at key "stop". */
struct split_seen {
    char items[8][64];
    int n;
};
static cbfs_err split_record(void *ctx, const char *key, const char *val, char *msg, size_t cap)
{
    struct split_seen *const seen = ctx;
    if (strcmp(key, "stop") == 0) {
        snprintf(msg, cap, "stopped");
        return CBFS_E_INVAL;
    }
    cr_assert_lt(seen->n, 8);
    snprintf(seen->items[seen->n++], sizeof seen->items[0], "%s%s%s", key, val ? "=" : "",
             val ? val : "");
    return CBFS_OK;
}
static cbfs_err split(const char *list, struct split_seen *seen, char *msg, size_t cap)
{
    memset(seen, 0, sizeof *seen);
    msg[0] = '\0';
    return cbfs_settings_split_list(list, split_record, seen, msg, cap);
}

Test(settings, split_list_escapes_and_empty_items)
{
    struct split_seen seen;
    char msg[64];
    cr_assert_eq(split("a=1\\,2,,b\\\\,c=,d=x=y,\\=e,f\\", &seen, msg, sizeof msg), CBFS_OK);
    cr_assert_eq(seen.n, 6);
    cr_assert_str_eq(seen.items[0], "a=1,2");  /* "\," is a comma in the value */
    cr_assert_str_eq(seen.items[1], "b\\");    /* "\\" a backslash; ",," skipped */
    cr_assert_str_eq(seen.items[2], "c=");     /* empty value, not no value */
    cr_assert_str_eq(seen.items[3], "d=x=y");  /* split at the first '=' */
    cr_assert_str_eq(seen.items[4], "=e");     /* an escaped '=' still splits */
    cr_assert_str_eq(seen.items[5], "f\\");    /* a trailing backslash is literal */
    cr_assert_eq(split("", &seen, msg, sizeof msg), CBFS_OK);
    cr_assert_eq(seen.n, 0);
    cr_assert_eq(split("a,stop,b", &seen, msg, sizeof msg), CBFS_E_INVAL);
    cr_assert_eq(seen.n, 1, "items after the failing one were applied");
    cr_assert_str_eq(msg, "stopped");
}

/* mkfs's -o list (cbfs_settings_set_list, CBFS_SCOPE_STORE) reads an escaped
 * comma as mount.cbfs -o does: one value, refused whole with its comma, not
 * split into two settings. */
Test(settings, set_list_store_scope)
{
    struct cbfs_settings s;
    char msg[256] = "";
    cbfs_settings_init(&s);
    cr_assert_eq(cbfs_settings_set_list(&s, CBFS_SCOPE_STORE, "codec=zstd:3,block_size=64K", msg,
                                        sizeof msg),
                 CBFS_OK, "%s", msg);
    cr_assert_eq(s.codec, codec("zstd"));
    cr_assert_eq(s.level, 3);
    cr_assert_eq(s.block_size, 64u << 10);
    cbfs_settings_init(&s);
    cr_assert_neq(cbfs_settings_set_list(&s, CBFS_SCOPE_STORE, "codec=zstd\\,block_size=64K",
                                         msg, sizeof msg),
                  CBFS_OK);
    cr_assert(strstr(msg, "zstd,block_size=64K"), "%s", msg);
    cr_assert_eq(s.block_size, CBFS_BLOCK_DEFAULT);
    cr_assert_eq(cbfs_settings_set_list(&s, CBFS_SCOPE_STORE, "block_size=64K,workers=2", msg,
                                        sizeof msg),
                 CBFS_E_INVAL, "a mount-only setting is refused in the store scope");
}

/* ---- the mount.cbfs command line (cbfs/options.h) ---- */

static cbfs_err parse(struct cbfs_options *o, char *msg, size_t cap, int argc,
                      const char **argv)
{
    msg[0] = '\0';
    return cbfs_options_parse(argc, (char *const *)argv, o, msg, cap);
}
#define PARSE(o, msg, ...)                                                                      \
    parse((o), (msg), sizeof(msg),                                                              \
          sizeof((const char *[]){"mount.cbfs", __VA_ARGS__}) / sizeof(const char *),           \
          (const char *[]){"mount.cbfs", __VA_ARGS__})

Test(options, settings_fuse_options_and_noise)
{
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "-o", "codec=zstd:3,block_size=64K,workers=2", "/s", "/m", "-o",
                       "allow_other,noauto,x-systemd.automount,fsname=a\\,b,ro,readahead=4"),
                 CBFS_OK, "%s", msg);
    cr_assert_str_eq(o.store, "/s");
    cr_assert_str_eq(o.mountpoint, "/m");
    cr_assert_eq(o.set.codec, codec("zstd"));
    cr_assert_eq(o.set.level, 3);
    cr_assert_eq(o.set.block_size, 64u << 10);
    cr_assert_eq(o.set.workers, 2);
    cr_assert_eq(o.set.readahead, 4);
    cr_assert(cbfs_options_readonly(&o));
    cr_assert(o.fsname_set);
    char *list;
    cr_assert_eq(cbfs_options_fuse_list(&o, "/s", &list), CBFS_OK);
    cr_assert_str_eq(list, "default_permissions,subtype=cbfs,ro,allow_other,fsname=a\\,b");
    free(list);
    cbfs_options_free(&o);
}

/* "--" ends the flags; what follows is positional. It was dropped: "S -- M"
 * mounted S in place on itself, "-- S M" had no mount point. */
Test(options, double_dash_ends_the_flags)
{
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "-f", "/s", "--", "/m"), CBFS_OK, "%s", msg);
    cr_assert_str_eq(o.store, "/s");
    cr_assert_str_eq(o.mountpoint, "/m");
    cbfs_options_free(&o);
    cr_assert_eq(PARSE(&o, msg, "-f", "--", "/s", "-m"), CBFS_OK, "%s", msg);
    cr_assert_str_eq(o.store, "/s");
    cr_assert_str_eq(o.mountpoint, "-m", "after --, a name that starts with '-' is a name");
    cbfs_options_free(&o);
    cr_assert_eq(PARSE(&o, msg, "/s", "--", "/m", "/x"), CBFS_E_INVAL);
    cr_assert(strstr(msg, "too many arguments"), "%s", msg);
    cbfs_options_free(&o);
}

/* fstab's flags take no value: given one, they are an error, not dropped
 * (default_permissions=0 would pass for turning something off); user=NAME is
 * mount(8)'s and comment= and x-* carry values. */
Test(options, noise_flags_with_a_value_are_refused)
{
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "-o", "default_permissions=0", "/s", "/m"), CBFS_E_INVAL);
    cr_assert_not_null(strstr(msg, "default_permissions takes no value"), "%s", msg);
    cbfs_options_free(&o);
    cr_assert_eq(PARSE(&o, msg, "-o", "nofail=1", "/s", "/m"), CBFS_E_INVAL);
    cbfs_options_free(&o);
    cr_assert_eq(PARSE(&o, msg, "-o", "user=backup,comment=x,x-systemd.requires=a,nofail",
                       "/s", "/m"),
                 CBFS_OK, "%s", msg);
    cbfs_options_free(&o);
}

Test(options, defaults_when_nothing_is_given)
{
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "/m"), CBFS_OK, "%s", msg);
    cr_assert_str_eq(o.store, "/m");
    cr_assert_str_eq(o.mountpoint, "/m");
    cr_assert_eq(cbfs_options_resolve(&o, NULL, msg, sizeof msg), CBFS_OK, "%s", msg);
    struct cbfs_settings def;
    cbfs_settings_init(&def);
    cr_assert_eq(o.set.codec, def.codec);
    cr_assert_eq(o.set.block_size, def.block_size);
    cr_assert_eq(o.set.readahead, def.readahead);
    cr_assert_eq(o.set.attr_timeout, def.attr_timeout);
    cbfs_options_free(&o);
}

Test(options, level_waits_for_the_stores_codec)
{
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "-o", "level=15", "/s", "/m"), CBFS_OK, "%s", msg);
    struct cbfs_store_conf conf = {.codec = codec("zstd"), .level = 3, .block_size = 1u << 20};
    cr_assert_eq(cbfs_options_resolve(&o, &conf, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(o.set.codec, conf.codec);
    cr_assert_eq(o.set.level, 15);
    cr_assert_eq(o.set.block_size, 1u << 20);
    cbfs_options_free(&o);
    /* with codec= on the command line it is checked at once */
    cr_assert_eq(PARSE(&o, msg, "-o", "codec=lz4,level=99", "/s", "/m"), CBFS_E_CODEC_LEVEL);
    cr_assert_not_null(strstr(msg, "99"), "%s", msg);
}

Test(options, refusals)
{
    static const struct {
        const char *opts, *says;
    } bad[] = {
        {"bogus_option=1", "unknown mount option 'bogus_option'"},
        {"block_size=3000", "block_size=3000: give a power of two from 4K to 16M"},
        {"workers=999", "workers=999: give a whole number from 0 to 256"},
        {"codec=zip", "zip"},
        {"ro=1", "option ro takes no value"},
        {"allow_other=yes", "option allow_other takes no value"},
        {"fsname", "option fsname needs a value"},
        {"debug=1", "option debug takes no value"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        struct cbfs_options o;
        char msg[256];
        cr_assert_neq(PARSE(&o, msg, "-o", bad[i].opts, "/s", "/m"), CBFS_OK, "%s", bad[i].opts);
        cr_assert_not_null(strstr(msg, bad[i].says), "%s: '%s'", bad[i].opts, msg);
    }
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "-o", "codec=lz4"), CBFS_E_INVAL);
    cr_assert_not_null(strstr(msg, "no mount point"), "%s", msg);
    cr_assert_eq(PARSE(&o, msg, "/a", "/b", "/c"), CBFS_E_INVAL);
    cr_assert_not_null(strstr(msg, "too many arguments"), "%s", msg);
    cr_assert_eq(PARSE(&o, msg, "-t", "ext4", "/s", "/m"), CBFS_E_INVAL);
    cr_assert_eq(PARSE(&o, msg, "--help"), CBFS_OK);
    cr_assert(o.help);
}

Test(options, atime_flags_are_accepted_and_libfuse_gets_only_its_own)
{
    struct cbfs_options o;
    char msg[256];
    cr_assert_eq(PARSE(&o, msg, "-o",
                       "relatime,nodiratime,lazytime,strictatime,noatime,nosuid,noexec", "/s",
                       "/m"),
                 CBFS_OK, "%s", msg);
    char *list;
    cr_assert_eq(cbfs_options_fuse_list(&o, "/s", &list), CBFS_OK);
    /* strictatime wins over noatime, as in the kernel */
    cr_assert_str_eq(list, "default_permissions,subtype=cbfs,fsname=/s,nosuid,noexec");
    free(list);
    cr_assert_not(cbfs_options_noatime(&o));
    cr_assert(cbfs_options_nodiratime(&o));
    cbfs_options_free(&o);

    cr_assert_eq(PARSE(&o, msg, "-o", "noatime,ro,allow_other", "/s", "/m"), CBFS_OK, "%s", msg);
    cr_assert(cbfs_options_noatime(&o));
    cr_assert_eq(cbfs_options_fuse_list(&o, "/s", &list), CBFS_OK);
    cr_assert_str_eq(list, "default_permissions,subtype=cbfs,fsname=/s,ro,noatime,allow_other");
    free(list);
    cr_assert_not(cbfs_options_nodiratime(&o));
    cbfs_options_free(&o);
    cr_assert_eq(PARSE(&o, msg, "-o", "noatime,nodiratime,atime,diratime", "/s", "/m"), CBFS_OK);
    cr_assert_not(cbfs_options_noatime(&o), "the last of noatime/atime wins");
    cr_assert_not(cbfs_options_nodiratime(&o));
    cbfs_options_free(&o);
}

Test(options, remount_takes_what_mount8_passes)
{
    struct cbfs_options o;
    char msg[256];
    /* mount(8) passes the mount table's options, then the new ones */
    cr_assert_eq(PARSE(&o, msg, "/s", "/m", "-o",
                       "ro,nosuid,nodev,noatime,remount,user_id=0,group_id=0,"
                       "default_permissions,allow_other,codec=zstd"),
                 CBFS_OK, "%s", msg);
    cr_assert(o.remount);
    cr_assert(cbfs_options_readonly(&o));
    cr_assert_str_eq(o.mountpoint, "/m");
    cr_assert_eq(cbfs_options_remount_flags(&o, ST_RELATIME | ST_NOEXEC),
                 MS_REMOUNT | MS_RDONLY | MS_NOSUID | MS_NODEV | MS_NOATIME | MS_NOEXEC |
                     MS_RELATIME);
    cbfs_options_free(&o);
    /* the helper run by hand: what is not given stays as the mount has it */
    cr_assert_eq(PARSE(&o, msg, "-o", "remount,rw", "/m"), CBFS_OK, "%s", msg);
    cr_assert_eq(cbfs_options_remount_flags(&o, ST_RDONLY | ST_NOSUID | ST_NODEV | ST_NOATIME),
                 MS_REMOUNT | MS_NOSUID | MS_NODEV | MS_NOATIME);
    cbfs_options_free(&o);
    cr_assert_eq(PARSE(&o, msg, "-o", "remount,atime,suid", "/m"), CBFS_OK, "%s", msg);
    cr_assert_eq(cbfs_options_remount_flags(&o, ST_NOSUID | ST_NODEV | ST_NOATIME),
                 MS_REMOUNT | MS_NODEV);
    cbfs_options_free(&o);
    /* the kernel's own options only come with a remount */
    cr_assert_eq(PARSE(&o, msg, "-o", "user_id=0", "/s", "/m"), CBFS_E_INVAL);
    cr_assert_not_null(strstr(msg, "user_id= is the kernel's"), "%s", msg);
    cr_assert_eq(PARSE(&o, msg, "-o", "remount,group_id", "/m"), CBFS_E_INVAL);
    cr_assert_not_null(strstr(msg, "needs a value"), "%s", msg);
}

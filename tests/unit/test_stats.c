/* The user.cbfs.stats text (cbfs/stats.h): encode -> decode gives the sample
 * back, the encoder writes exactly the text the tool and older tools parse,
 * and the decoder refuses every malformed text with a message, never a
 * default. */
#include <criterion/criterion.h>
#include <stdio.h>
#include <string.h>

#include "cbfs/stats.h"

/* Every field distinct, level negative (zstd fast levels). */
static void st_sample(struct cbfs_stats *s)
{
    memset(s, 0, sizeof *s);
    s->uptime_ns = 10000000000ull;
    s->workers = 2;
    snprintf(s->codec, sizeof s->codec, "zstd");
    s->level = -5;
    s->block_size = 1048576;
    uint64_t v = 1000;
#define ST_SET_(name) s->st.name = v++;
    CBFS_ENGINE_STATS(ST_SET_)
#undef ST_SET_
    s->st.logical_written = UINT64_MAX;
}

/* The text mount.cbfs writes: key order and number format are part of the
 * interface (t_tool_stats.sh); keys are only ever added (write_errors,
 * read_errors and stream_gaps came after the first release; older tools skip them). */
static const char st_golden[] = "uptime_ns=10000000000\nworkers=2\ncodec=zstd\nlevel=-5\n"
                                "block_size=1048576\nlogical_written=18446744073709551615\n"
                                "physical_written=1001\nlogical_read=1002\nphysical_read=1003\n"
                                "blocks_compressed=1004\nblocks_raw=1005\nblocks_hole=1006\n"
                                "ns_compress=1007\nns_store_write=1008\nns_wait_slots=1009\n"
                                "ns_decompress=1010\nns_store_read=1011\n"
                                "cache_hits=1012\ncache_misses=1013\nreadahead_hits=1014\n"
                                "write_errors=1015\nread_errors=1016\nstream_gaps=1017\n"
                                "inflight_bytes=1018\n";

Test(stats, encode_is_the_wire_text)
{
    struct cbfs_stats s;
    st_sample(&s);
    char buf[4096];
    size_t n;
    cr_assert_eq(cbfs_stats_encode(&s, buf, sizeof buf, &n), CBFS_OK);
    cr_assert_eq(n, strlen(st_golden));
    cr_assert_str_eq(buf, st_golden);
}

Test(stats, roundtrip)
{
    struct cbfs_stats s, back;
    st_sample(&s);
    char buf[4096], msg[128] = "";
    size_t n;
    cr_assert_eq(cbfs_stats_encode(&s, buf, sizeof buf, &n), CBFS_OK);
    cr_assert_eq(cbfs_stats_decode(buf, n, &back, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(memcmp(&s, &back, sizeof s), 0);

    /* extremes: the signed field, an empty and a longest string */
    static const char *const codecs[] = {"", "abcdefghijklmnopqrstuvwxyz01234"};
    for (int i = 0; i < 2; i++) {
        s.level = i ? INT64_MAX : INT64_MIN;
        memset(s.codec, 0, sizeof s.codec);
        strcpy(s.codec, codecs[i]);
        cr_assert_eq(cbfs_stats_encode(&s, buf, sizeof buf, &n), CBFS_OK);
        cr_assert_eq(cbfs_stats_decode(buf, n, &back, NULL, 0), CBFS_OK);
        cr_assert_eq(memcmp(&s, &back, sizeof s), 0, "level %lld codec '%s'",
                     (long long)s.level, s.codec);
    }
}

/* The longest text there can be, every number at its most digits and the
 * codec name at its longest, fits in CBFS_STATS_TEXT_MAX with its NUL. */
Test(stats, longest_text_fits)
{
    struct cbfs_stats s;
    memset(&s, 0, sizeof s);
#define ST_MAX_(name) s.st.name = UINT64_MAX;
    CBFS_ENGINE_STATS(ST_MAX_)
#undef ST_MAX_
    s.uptime_ns = s.workers = s.block_size = UINT64_MAX;
    s.level = INT64_MIN;
    memset(s.codec, 'z', sizeof s.codec - 1);
    char buf[CBFS_STATS_TEXT_MAX];
    size_t n = 0;
    cr_assert_eq(cbfs_stats_encode(&s, buf, sizeof buf, &n), CBFS_OK, "%zu bytes", n);
}

Test(stats, encode_reports_short_buffer)
{
    struct cbfs_stats s;
    st_sample(&s);
    const size_t want = strlen(st_golden);
    char buf[4096];
    size_t n = 0;
    cr_assert_eq(cbfs_stats_encode(&s, buf, want, &n), CBFS_E_DST_SMALL); /* no room for NUL */
    cr_assert_eq(n, want);
    cr_assert_eq(strncmp(buf, st_golden, want - 1), 0);
    cr_assert_eq(buf[want - 1], '\0');
    cr_assert_eq(cbfs_stats_encode(&s, buf, 10, &n), CBFS_E_DST_SMALL);
    cr_assert_eq(n, want);
    cr_assert_eq(cbfs_stats_encode(&s, NULL, 0, &n), CBFS_E_DST_SMALL);
    cr_assert_eq(n, want);
    cr_assert_eq(cbfs_stats_encode(&s, buf, want + 1, &n), CBFS_OK);
}

Test(stats, decode_skips_unknown_keys)
{
    char text[4096];
    snprintf(text, sizeof text, "some_future_key=1\n%sother=text with = signs\n", st_golden);
    struct cbfs_stats s, want;
    st_sample(&want);
    char msg[128] = "";
    cr_assert_eq(cbfs_stats_decode(text, strlen(text), &s, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(memcmp(&s, &want, sizeof s), 0);
}

/* Replaces the first line starting with `key=` by `line` (NULL: drops it). */
static size_t st_edit(char *out, size_t cap, const char *key, const char *line)
{
    const size_t klen = strlen(key);
    size_t n = 0;
    for (const char *p = st_golden; *p;) {
        const char *nl = strchr(p, '\n') + 1;
        const bool hit = strncmp(p, key, klen) == 0 && p[klen] == '=';
        const char *src = hit ? line : p;
        const size_t len = hit ? (line ? strlen(line) : 0) : (size_t)(nl - p);
        cr_assert_lt(n + len, cap);
        if (len) memcpy(out + n, src, len);
        n += len;
        p = nl;
    }
    out[n] = '\0';
    return n;
}

static void st_rejects(const char *text, size_t len, const char *why, const char *msg_part)
{
    struct cbfs_stats s;
    char msg[256] = "";
    cr_assert_eq(cbfs_stats_decode(text, len, &s, msg, sizeof msg), CBFS_E_INVAL,
                 "accepted %s", why);
    cr_assert_not_null(strstr(msg, msg_part), "%s: message '%s' lacks '%s'", why, msg, msg_part);
    cr_assert_eq(cbfs_stats_decode(text, len, &s, NULL, 0), CBFS_E_INVAL, "%s, msg NULL", why);
}

Test(stats, decode_rejects_bad_values)
{
    static const struct {
        const char *key, *line, *msg;
    } cases[] = {
        {"cache_hits", "cache_hits=\n", "cache_hits wants"},
        {"cache_hits", "cache_hits=12x\n", "'12x'"},
        {"cache_hits", "cache_hits=-1\n", "cache_hits wants"},
        {"cache_hits", "cache_hits=+1\n", "cache_hits wants"},
        {"cache_hits", "cache_hits= 1\n", "cache_hits wants"},
        {"cache_hits", "cache_hits=0x10\n", "cache_hits wants"},
        {"cache_hits", "cache_hits=18446744073709551616\n", "cache_hits wants"},
        {"workers", "workers=99999999999999999999999\n", "workers wants"},
        {"level", "level=9223372036854775808\n", "level wants"},
        {"level", "level=-9223372036854775809\n", "level wants"},
        {"level", "level=-\n", "level wants"},
        {"level", "level=3.5\n", "level wants"},
        {"codec", "codec=abcdefghijklmnopqrstuvwxyz012345\n", "codec wants"},
        {"cache_hits", NULL, "no cache_hits line"},
        {"uptime_ns", NULL, "no uptime_ns line"},
        {"inflight_bytes", NULL, "no inflight_bytes line"},
        {"workers", "workers=2\nworkers=2\n", "workers given twice"},
        {"workers", "workers 2\n", "line 2 is not key=value"},
        {"workers", "=2\n", "line 2 is not key=value"},
        {"workers", "\n", "line 2 is not key=value"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char text[4096];
        const size_t n = st_edit(text, sizeof text, cases[i].key, cases[i].line);
        st_rejects(text, n, cases[i].line ? cases[i].line : cases[i].key, cases[i].msg);
    }
}

Test(stats, decode_rejects_cut_or_odd_text)
{
    const size_t n = strlen(st_golden);
    st_rejects(st_golden, 0, "empty text", "no uptime_ns line");
    st_rejects(st_golden, n - 1, "no final newline", "does not end in a newline");
    st_rejects(st_golden, n / 2, "text cut in half", "does not end in a newline");
    st_rejects("garbage", 7, "garbage", "line 1");

    char text[4096];
    memcpy(text, st_golden, n);
    memcpy(strstr(text, "codec=zstd") + 7, "z\0d", 3); /* NUL inside a string value */
    st_rejects(text, n, "NUL in codec", "codec wants");
}

/* Encoder and decoder of the user.cbfs.stats text (cbfs/stats.h): one table,
 * built from the X-macro lists, drives both, so the daemon and the tool can
 * never disagree on a key, its type or its order. */
#include <assert.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "cbfs/stats.h"

enum cbfs_stats_type { CBFS_STATS_U64, CBFS_STATS_I64, CBFS_STATS_STR };

static const struct cbfs_stats_key {
    const char *key;
    enum cbfs_stats_type type;
    size_t off, size;
} cbfs_stats_keys[] = {
#define CBFS_STATS_DAEMON_KEY_(key, type)                                               \
    {#key, CBFS_STATS_##type, offsetof(struct cbfs_stats, key),                         \
     sizeof(((struct cbfs_stats *)0)->key)},
    CBFS_STATS_DAEMON(CBFS_STATS_DAEMON_KEY_)
#undef CBFS_STATS_DAEMON_KEY_
#define CBFS_STATS_ENGINE_KEY_(name)                                                    \
    {#name, CBFS_STATS_U64, offsetof(struct cbfs_stats, st.name), sizeof(uint64_t)},
    CBFS_ENGINE_STATS(CBFS_STATS_ENGINE_KEY_)
#undef CBFS_STATS_ENGINE_KEY_
};
#define CBFS_STATS_NKEYS (sizeof cbfs_stats_keys / sizeof cbfs_stats_keys[0])
_Static_assert(CBFS_STATS_NKEYS <= 64, "the decoder tracks seen keys in a uint64_t");

cbfs_err cbfs_stats_encode(const struct cbfs_stats *s, char *buf, size_t cap, size_t *len)
{
    size_t n = 0;
    for (size_t i = 0; i < CBFS_STATS_NKEYS; i++) {
        const struct cbfs_stats_key *const k = &cbfs_stats_keys[i];
        const char *const field = (const char *)s + k->off;
        char *const dst = n < cap ? buf + n : NULL;
        const size_t room = n < cap ? cap - n : 0;
        int w;
        if (k->type == CBFS_STATS_STR) {
            assert(memchr(field, '\0', k->size) && !strchr(field, '\n'));
            w = snprintf(dst, room, "%s=%s\n", k->key, field);
        } else if (k->type == CBFS_STATS_I64) {
            int64_t v;
            memcpy(&v, field, sizeof v);
            w = snprintf(dst, room, "%s=%" PRId64 "\n", k->key, v);
        } else {
            uint64_t v;
            memcpy(&v, field, sizeof v);
            w = snprintf(dst, room, "%s=%" PRIu64 "\n", k->key, v);
        }
        n += (size_t)w;
    }
    *len = n;
    return n < cap ? CBFS_OK : CBFS_E_DST_SMALL;
}

/* Decimal digits only, no sign, no spaces, no overflow. */
static bool cbfs_stats_parse_u64(const char *p, size_t n, uint64_t *out)
{
    uint64_t v = 0;
    if (n == 0) return false;
    for (size_t i = 0; i < n; i++) {
        if (p[i] < '0' || p[i] > '9') return false;
        const unsigned d = (unsigned)(p[i] - '0');
        if (v > (UINT64_MAX - d) / 10) return false;
        v = v * 10 + d;
    }
    *out = v;
    return true;
}

static bool cbfs_stats_parse_i64(const char *p, size_t n, int64_t *out)
{
    const bool neg = n > 0 && p[0] == '-';
    uint64_t mag;
    if (!cbfs_stats_parse_u64(p + neg, n - neg, &mag)) return false;
    if (mag > (uint64_t)INT64_MAX + neg || (neg && mag == 0)) return false;
    *out = neg ? -(int64_t)(mag - 1) - 1 : (int64_t)mag;
    return true;
}

/* Stores the value of one known key. @return false if it does not parse. */
static bool cbfs_stats_set(const struct cbfs_stats_key *k, const char *val, size_t n,
                           struct cbfs_stats *s)
{
    char *const field = (char *)s + k->off;
    if (k->type == CBFS_STATS_STR) {
        if (n >= k->size || memchr(val, '\0', n)) return false;
        memcpy(field, val, n);
        field[n] = '\0';
        return true;
    }
    if (k->type == CBFS_STATS_I64) {
        int64_t v;
        if (!cbfs_stats_parse_i64(val, n, &v)) return false;
        memcpy(field, &v, sizeof v);
        return true;
    }
    uint64_t v;
    if (!cbfs_stats_parse_u64(val, n, &v)) return false;
    memcpy(field, &v, sizeof v);
    return true;
}

static const struct cbfs_stats_key *cbfs_stats_find(const char *key, size_t n, size_t *index)
{
    for (size_t i = 0; i < CBFS_STATS_NKEYS; i++) {
        if (strlen(cbfs_stats_keys[i].key) == n && memcmp(cbfs_stats_keys[i].key, key, n) == 0) {
            *index = i;
            return &cbfs_stats_keys[i];
        }
    }
    return NULL;
}

cbfs_err cbfs_stats_decode(const char *text, size_t len, struct cbfs_stats *s, char *msg,
                           size_t msg_cap)
{
    static const char *const want[] = {[CBFS_STATS_U64] = "an unsigned decimal number",
                                       [CBFS_STATS_I64] = "a decimal number",
                                       [CBFS_STATS_STR] = "short text"};
    char scratch[1];
    uint64_t seen = 0;
    unsigned line = 0;
    if (!msg) {
        msg = scratch;
        msg_cap = sizeof scratch;
    }
    memset(s, 0, sizeof *s);
    for (size_t pos = 0; pos < len;) {
        const char *const p = text + pos;
        const char *const nl = memchr(p, '\n', len - pos);
        line++;
        if (!nl) {
            snprintf(msg, msg_cap, "line %u does not end in a newline (text cut short?)", line);
            return CBFS_E_INVAL;
        }
        const size_t n = (size_t)(nl - p);
        pos += n + 1;
        const char *const eq = memchr(p, '=', n);
        if (!eq || eq == p) {
            snprintf(msg, msg_cap, "line %u is not key=value: '%.*s'", line, (int)n, p);
            return CBFS_E_INVAL;
        }
        size_t i;
        const struct cbfs_stats_key *const k = cbfs_stats_find(p, (size_t)(eq - p), &i);
        if (!k) continue; /* a newer daemon's key */
        if (seen & (1ull << i)) {
            snprintf(msg, msg_cap, "line %u: %s given twice", line, k->key);
            return CBFS_E_INVAL;
        }
        seen |= 1ull << i;
        if (!cbfs_stats_set(k, eq + 1, (size_t)(nl - eq - 1), s)) {
            snprintf(msg, msg_cap, "line %u: %s wants %s, not '%.*s'", line, k->key,
                     want[k->type], (int)(nl - eq - 1), eq + 1);
            return CBFS_E_INVAL;
        }
    }
    for (size_t i = 0; i < CBFS_STATS_NKEYS; i++) {
        if (!(seen & (1ull << i))) {
            snprintf(msg, msg_cap, "no %s line (not the text of a cbfs daemon?)",
                     cbfs_stats_keys[i].key);
            return CBFS_E_INVAL;
        }
    }
    return CBFS_OK;
}

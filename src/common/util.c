/* Hashing, size parsing, full-length positional I/O and other small helpers. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "cbfs/util.h"

uint64_t cbfs_hash64(const void *data, size_t len)
{
    return XXH3_64bits(data, len);
}

int cbfs_is_zero(const void *data, size_t len)
{
    const unsigned char *p = data;
    /* Check a short prefix byte-wise, then compare the buffer with itself
     * shifted: memcmp is vectorised and this touches each byte twice at most. */
    size_t head = len < 16 ? len : 16;
    for (size_t i = 0; i < head; i++)
        if (p[i]) return 0;
    if (len <= 16) return 1;
    return memcmp(p, p + 16, len - 16) == 0;
}

cbfs_err cbfs_parse_size(const char *s, uint64_t *out)
{
    if (!s || !*s) return CBFS_E_INVAL;
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || s[0] == '-') return CBFS_E_INVAL;
    unsigned shift = 0;
    switch (*end) {
    case '\0': break;
    case 'k': case 'K': shift = 10; end++; break;
    case 'm': case 'M': shift = 20; end++; break;
    case 'g': case 'G': shift = 30; end++; break;
    case 't': case 'T': shift = 40; end++; break;
    default: return CBFS_E_INVAL;
    }
    if (shift && (*end == 'i' || *end == 'I')) end++; /* accept KiB, MiB */
    if (shift && (*end == 'b' || *end == 'B')) end++;
    if (*end) return CBFS_E_INVAL;
    if (shift && v > (UINT64_MAX >> shift)) return CBFS_E_INVAL;
    *out = (uint64_t)v << shift;
    return CBFS_OK;
}

const char *cbfs_format_size(uint64_t n, char *buf, size_t cap)
{
    static const char units[] = "KMGT";
    int u = -1;
    while (u < 3 && n && n % 1024 == 0) {
        n /= 1024;
        u++;
    }
    if (u < 0)
        snprintf(buf, cap, "%" PRIu64, n);
    else
        snprintf(buf, cap, "%" PRIu64 "%c", n, units[u]);
    return buf;
}

void cbfs_print_wrapped(FILE *out, int col, int indent, const char *text)
{
    for (const char *w = text; *w;) {
        const size_t n = strcspn(w, " ");
        if (n) {
            if (col > indent && col + 1 + (int)n >= 80)
                col = fprintf(out, "\n%*s", indent, "") - 1;
            col += fprintf(out, "%s%.*s", col > indent ? " " : "", (int)n, w);
        }
        w += n;
        w += strspn(w, " ");
    }
    fputc('\n', out);
}

cbfs_err cbfs_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    char *p = buf;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cbfs_err_from_errno(errno);
        }
        if (n == 0) return CBFS_E_TRUNCATED;
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return CBFS_OK;
}

cbfs_err cbfs_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
    const char *p = buf;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cbfs_err_from_errno(errno);
        }
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
    }
    return CBFS_OK;
}

uint64_t cbfs_random64(void)
{
    uint64_t v = 0;
    char *p = (char *)&v;
    size_t got = 0;
    while (got < sizeof v) {
        ssize_t n = getrandom(p + got, sizeof v - got, 0);
        if (n < 0) {
            if (errno == EINTR) continue;
            /* getrandom cannot fail on Linux >= 3.17 with a valid buffer;
             * fall back to the clock so ids still differ. */
            return v ^ cbfs_now_ns() ^ ((uint64_t)getpid() << 32);
        }
        got += (size_t)n;
    }
    return v;
}

uint64_t cbfs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

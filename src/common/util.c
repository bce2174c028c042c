/* Hashing, size parsing, full-length positional I/O and other small helpers. */
#include <dirent.h>
#include <fcntl.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>
#ifdef CBFS_HAVE_XXH_DISPATCH
#include <xxh_x86dispatch.h> /* the fastest XXH3 this CPU runs (CMakeLists.txt) */
#endif

#include "cbfs/util.h"

uint64_t cbfs_hash64(const void *data, size_t len)
{
#ifdef CBFS_HAVE_XXH_DISPATCH
    return XXH3_64bits_dispatch(data, len);
#else
    return XXH3_64bits(data, len);
#endif
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

bool cbfs_parse_seconds(const char *s, double min, double max, double *out)
{
    if (!s || !*s || strspn(s, "0123456789.") != strlen(s)) return false;
    char *end;
    errno = 0;
    const double t = strtod(s, &end);
    if (errno || end == s || *end || !(t >= min && t <= max)) return false;
    *out = t;
    return true;
}

bool cbfs_parse_long(const char *s, long min, long max, long *out)
{
    if (!s || (!isdigit((unsigned char)s[0]) && !(s[0] == '-' && min < 0))) return false;
    char *end;
    errno = 0;
    const long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < min || v > max) return false;
    *out = v;
    return true;
}

cbfs_err cbfs_parse_size(const char *s, uint64_t *out)
{
    /* digits first: strtoull also takes " 5", "+5" and " -1" (as 2^64 - 1) */
    if (!s || !isdigit((unsigned char)*s)) return CBFS_E_INVAL;
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

cbfs_err cbfs_pread_upto(int fd, void *buf, size_t len, uint64_t off, size_t *moved)
{
    char *p = buf;
    *moved = 0;
    while (len) {
        ssize_t n = pread(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cbfs_err_from_errno(errno);
        }
        if (n == 0) break; /* the end of the file */
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
        *moved += (size_t)n;
    }
    return CBFS_OK;
}

int cbfs_noatime_begin(int fd)
{
    const int fl = fcntl(fd, F_GETFL);
    return fl != -1 && !(fl & O_NOATIME) && fcntl(fd, F_SETFL, fl | O_NOATIME) == 0 ? fl : -1;
}

void cbfs_noatime_end(int fd, int saved)
{
    if (saved != -1) (void)fcntl(fd, F_SETFL, saved);
}

cbfs_err cbfs_pread_full(int fd, void *buf, size_t len, uint64_t off)
{
    size_t got;
    const cbfs_err e = cbfs_pread_upto(fd, buf, len, off, &got);
    return e ? e : got < len ? CBFS_E_TRUNCATED : CBFS_OK;
}

cbfs_err cbfs_pwrite_upto(int fd, const void *buf, size_t len, uint64_t off, size_t *moved)
{
    const char *p = buf;
    *moved = 0;
    while (len) {
        ssize_t n = pwrite(fd, p, len, (off_t)off);
        if (n < 0) {
            if (errno == EINTR) continue;
            return cbfs_err_from_errno(errno);
        }
        if (n == 0) return CBFS_E_IO; /* no progress and no reason: never loop on it */
        p += n;
        len -= (size_t)n;
        off += (uint64_t)n;
        *moved += (size_t)n;
    }
    return CBFS_OK;
}

cbfs_err cbfs_pwrite_full(int fd, const void *buf, size_t len, uint64_t off)
{
    size_t done;
    return cbfs_pwrite_upto(fd, buf, len, off, &done);
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

void cbfs_procfd(char buf[CBFS_PROCFD_MAX], int fd)
{
    (void)snprintf(buf, CBFS_PROCFD_MAX, "/proc/self/fd/%d", fd);
}

cbfs_err cbfs_procfd_path(int fd, char *buf, size_t cap)
{
    char proc[CBFS_PROCFD_MAX];
    cbfs_procfd(proc, fd);
    const ssize_t n = readlink(proc, buf, cap - 1);
    if (n < 0) {
        buf[0] = '\0';
        return cbfs_err_from_errno(errno);
    }
    buf[n] = '\0';
    return (size_t)n == cap - 1 ? CBFS_E_NAMETOOLONG : CBFS_OK; /* maybe cut */
}

uint64_t cbfs_now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cbfs_dir_name_cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

cbfs_err cbfs_dir_read_names(int fd, char ***names, size_t *count)
{
    *names = NULL;
    *count = 0;
    DIR *const d = fdopendir(fd);
    if (!d) {
        const cbfs_err e = cbfs_err_from_errno(errno);
        close(fd);
        return e;
    }
    char **v = NULL;
    size_t n = 0, cap = 0;
    cbfs_err e = CBFS_OK;
    const struct dirent *de;
    errno = 0;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0) continue;
        if (n == cap) {
            cap = cap ? cap * 2 : 32;
            char **const nv = realloc(v, cap * sizeof *v);
            if (!nv) {
                e = CBFS_E_NOMEM;
                break;
            }
            v = nv;
        }
        if (!(v[n] = strdup(de->d_name))) {
            e = CBFS_E_NOMEM;
            break;
        }
        n++;
        errno = 0;
    }
    if (e == CBFS_OK && errno) e = cbfs_err_from_errno(errno);
    closedir(d);
    if (e) {
        cbfs_dir_free_names(v, n);
        return e;
    }
    if (n) qsort(v, n, sizeof *v, cbfs_dir_name_cmp); /* v is NULL for an empty directory */
    *names = v;
    *count = n;
    return CBFS_OK;
}

void cbfs_dir_free_names(char **names, size_t count)
{
    for (size_t i = 0; i < count; i++) free(names[i]);
    free(names);
}

void cbfs_mounts_unescape(char *s)
{
    char *w = s;
    for (const char *r = s; *r; w++) {
        if (r[0] == '\\' && r[1] >= '0' && r[1] <= '3' && r[2] >= '0' && r[2] <= '7' &&
            r[3] >= '0' && r[3] <= '7') {
            *w = (char)((r[1] - '0') * 64 + (r[2] - '0') * 8 + (r[3] - '0'));
            r += 4;
        } else {
            *w = *r++;
        }
    }
    *w = '\0';
}

bool cbfs_mountinfo_parse(char *line, struct cbfs_mountinfo *m)
{
    line[strcspn(line, "\n")] = '\0';
    /* f: ID PARENT MAJ:MIN ROOT POINT OPTIONS, then, past the optional tags
     * up to "-": TYPE SOURCE SUPER_OPTIONS */
    char *save = NULL, *f[9] = {NULL};
    size_t nf = 0;
    bool sep = false;
    for (char *t = strtok_r(line, " ", &save); t && nf < 9; t = strtok_r(NULL, " ", &save)) {
        if (nf == 6 && !sep) {
            sep = strcmp(t, "-") == 0;
            continue;
        }
        f[nf++] = t;
    }
    if (nf < 9) return false;
    cbfs_mounts_unescape(f[3]);
    cbfs_mounts_unescape(f[4]);
    cbfs_mounts_unescape(f[7]);
    *m = (struct cbfs_mountinfo){
        .dev = f[2], .root = f[3], .point = f[4], .type = f[6], .source = f[7], .super = f[8]};
    return true;
}

cbfs_err cbfs_mount_fuse_dev(const char *mnt, char *dev, size_t cap)
{
    FILE *mi = fopen("/proc/self/mountinfo", "re");
    if (!mi) return cbfs_err_from_errno(errno);
    /* The last line at mnt is the topmost mount there. */
    char *line = NULL;
    size_t lcap = 0;
    bool found = false;
    struct cbfs_mountinfo m;
    while (getline(&line, &lcap, mi) > 0) {
        if (!cbfs_mountinfo_parse(line, &m) || strcmp(m.point, mnt) != 0) continue;
        if (strcmp(m.type, "fuse") == 0 || strncmp(m.type, "fuse.", 5) == 0) {
            snprintf(dev, cap, "%s", m.dev);
            found = true;
        }
    }
    free(line);
    fclose(mi);
    return found ? CBFS_OK : CBFS_E_NOENT;
}

cbfs_err cbfs_mount_set_read_ahead(const char *mnt, uint64_t bytes)
{
    char dev[32];
    const cbfs_err e = cbfs_mount_fuse_dev(mnt, dev, sizeof dev);
    if (e) return e;
    char path[64], val[24];
    snprintf(path, sizeof path, "/sys/class/bdi/%s/read_ahead_kb", dev);
    const int n = snprintf(val, sizeof val, "%" PRIu64 "\n", bytes >> 10);
    const int fd = open(path, O_WRONLY | O_CLOEXEC);
    /* not CBFS_E_NOENT, which says the mount is not there */
    if (fd < 0) return errno == ENOENT ? CBFS_E_NOTSUP : cbfs_err_from_errno(errno);
    cbfs_err err = CBFS_OK;
    const ssize_t w = write(fd, val, (size_t)n);
    if (w < 0) err = cbfs_err_from_errno(errno);
    else if (w != n) err = CBFS_E_IO;
    close(fd);
    return err;
}

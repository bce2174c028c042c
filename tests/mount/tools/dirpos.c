/* dirpos: checks a directory's listing through readdir positions, as a
 * program that walks, saves and restores its place sees them.
 *   dirpos seek DIR [EXPECTED]   readdir with telldir after every entry, then
 *       seekdir back to saved places (after more entries were read) and to
 *       every place in turn for a sample; rewinddir; each must go on with the
 *       entries after the place, none twice, none skipped
 *   dirpos getdents DIR BUFSIZE [EXPECTED]   the getdents64 system call with
 *       a buffer of BUFSIZE bytes: every entry once (where an entry does not
 *       fit, EINVAL, that call is made again with 512 bytes)
 *   dirpos watch DIR STABLE SECONDS [BAD_ERE]   lists DIR over and over for
 *       SECONDS while others change it: every name of the file STABLE exactly
 *       once in each listing, no name twice, no name matching the extended
 *       regular expression BAD_ERE (hidden names); with DIRPOS_BUF=N in the
 *       environment through getdents64 with a buffer of N bytes; with
 *       DIRPOS_STABLE_ONLY=1 a changing name may come twice (tmpfs lists a
 *       name renamed over during the listing at its old and its new place)
 * With DIRPOS_STAT=1 in the environment each entry is also lstat'ed as it is
 * read (as ls -l does; the kernel then asks for READDIRPLUS).
 * EXPECTED is a file of names, one a line ("." and ".." left out): the
 * listing must be exactly these. Prints one line per problem and exits 1 on
 * any, 0 otherwise. Build: cc -O2 -o dirpos dirpos.c */
#define _GNU_SOURCE
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

struct names {
    char **v;
    size_t n, cap;
};

static int problems;

static void problem(const char *fmt, const char *a, long b)
{
    if (problems++ < 20) {
        printf(fmt, a, b);
        putchar('\n');
    }
}

static void names_add(struct names *s, const char *name)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, s->cap * sizeof *s->v);
        if (!s->v) abort();
    }
    s->v[s->n++] = strdup(name);
}

static void names_free(struct names *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->v[i]);
    free(s->v);
    s->v = NULL;
    s->n = s->cap = 0;
}

static int cmp(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static int is_dot(const char *n)
{
    return strcmp(n, ".") == 0 || strcmp(n, "..") == 0;
}

static void names_load(struct names *s, const char *path)
{
    FILE *const f = fopen(path, "r");
    if (!f) {
        perror(path);
        exit(2);
    }
    char *line = NULL;
    size_t cap = 0;
    ssize_t len;
    while ((len = getline(&line, &cap, f)) > 0) {
        if (line[len - 1] == '\n') line[len - 1] = '\0';
        names_add(s, line);
    }
    free(line);
    fclose(f);
}

/* got (in listing order) against want (any order): no name twice, and the
 * same set as want when one is given */
static void names_check(const char *what, const struct names *got, const struct names *want)
{
    char **const v = malloc((got->n + 1) * sizeof *v);
    memcpy(v, got->v, got->n * sizeof *v);
    qsort(v, got->n, sizeof *v, cmp);
    for (size_t i = 1; i < got->n; i++)
        if (strcmp(v[i - 1], v[i]) == 0) problem("%s: listed twice", v[i], 0);
    if (want) {
        char **const w = malloc((want->n + 1) * sizeof *w);
        memcpy(w, want->v, want->n * sizeof *w);
        qsort(w, want->n, sizeof *w, cmp);
        size_t i = 0, j = 0;
        while (i < got->n || j < want->n) {
            const int c = i == got->n ? 1 : j == want->n ? -1 : strcmp(v[i], w[j]);
            if (c < 0)
                problem("%s: listed, not expected", v[i++], 0);
            else if (c > 0)
                problem("%s: missing from the listing", w[j++], 0);
            else
                i++, j++;
        }
        free(w);
    }
    if (problems) printf("  (in %s)\n", what);
    free(v);
}

static int with_stat; /* DIRPOS_STAT=1: lstat each entry as it is read (ls -l) */

static void stat_entry(DIR *d, const char *name)
{
    struct stat st;
    if (with_stat && fstatat(dirfd(d), name, &st, AT_SYMLINK_NOFOLLOW) != 0)
        problem("%s: lstat failed: errno %ld", name, errno);
}

/* one full pass: the names (dots left out) and the telldir after each */
static void read_all(DIR *d, struct names *s, long **pos)
{
    struct dirent *e;
    size_t cap = 0;
    *pos = NULL;
    for (;;) {
        errno = 0;
        e = readdir(d);
        if (!e) break;
        if (is_dot(e->d_name)) continue;
        stat_entry(d, e->d_name);
        names_add(s, e->d_name);
        if (s->n > cap) {
            cap = s->n * 2;
            *pos = realloc(*pos, cap * sizeof **pos);
        }
        (*pos)[s->n - 1] = telldir(d);
    }
    if (errno) problem("readdir: %s (errno %ld)", strerror(errno), errno);
}

/* after seekdir to pos[i], readdir must give s->v[i+1], s->v[i+2], ... for
 * count entries (to the end if count is 0) */
static void check_from(DIR *d, const struct names *s, const long *pos, size_t i, size_t count)
{
    seekdir(d, pos[i]);
    size_t k = i + 1, seen = 0;
    struct dirent *e;
    while ((count == 0 || seen < count) && (e = readdir(d))) {
        if (is_dot(e->d_name)) continue;
        stat_entry(d, e->d_name);
        if (k >= s->n) {
            problem("%s: read past the end after seekdir to entry %ld", e->d_name, (long)i);
            return;
        }
        if (strcmp(e->d_name, s->v[k]) != 0) {
            printf("after seekdir to the place after entry %zu (%s): got %s, want %s\n", i, s->v[i],
                   e->d_name, s->v[k]);
            problems++;
            return;
        }
        k++;
        seen++;
    }
    if (count == 0 && k != s->n)
        problem("%s: listing ended early after a seekdir, at entry %ld", s->v[k], (long)k);
}

static int cmd_seek(const char *dir, const char *expected)
{
    DIR *const d = opendir(dir);
    if (!d) {
        perror(dir);
        return 2;
    }
    struct names s = {0}, want = {0};
    long *pos;
    read_all(d, &s, &pos);
    if (expected) names_load(&want, expected);
    names_check("first pass", &s, expected ? &want : NULL);
    if (problems) return 1;
    if (s.n == 0) return 0;

    /* rewinddir: the same listing again */
    rewinddir(d);
    struct names again = {0};
    long *pos2;
    read_all(d, &again, &pos2);
    if (again.n != s.n)
        problem("rewinddir: another count the second time (%s%ld)", "", (long)again.n);
    for (size_t i = 0; i < s.n && i < again.n; i++)
        if (strcmp(s.v[i], again.v[i]) != 0 || pos[i] != pos2[i]) {
            problem("%s: another entry or place after rewinddir, at %ld", s.v[i], (long)i);
            break;
        }
    names_free(&again);
    free(pos2);

    /* a saved place, more entries read, then back: for places spread over
     * the listing, the next 3 entries must follow the saved one */
    const size_t step = s.n > 200 ? s.n / 200 : 1;
    for (size_t i = 0; i < s.n; i += step)
        check_from(d, &s, pos, i, 3);
    /* back to the very first saved place, then read to the end */
    check_from(d, &s, pos, 0, 0);
    /* from the middle to the end, then from a quarter (backwards) */
    check_from(d, &s, pos, s.n / 2, 0);
    check_from(d, &s, pos, s.n / 4, 0);
    /* seekdir to each place in reverse order, one entry each */
    for (size_t i = s.n - 1; i-- > 0;) {
        if (s.n > 2000 && i % 7) continue;
        check_from(d, &s, pos, i, 1);
        if (problems > 20) break;
    }
    /* the last place: nothing follows */
    seekdir(d, pos[s.n - 1]);
    struct dirent *e;
    while ((e = readdir(d)))
        if (!is_dot(e->d_name)) {
            problem("%s: returned after a seekdir to the end", e->d_name, 0);
            break;
        }
    closedir(d);
    printf("%zu entries, %s\n", s.n, problems ? "problems" : "ok");
    names_free(&s);
    names_free(&want);
    free(pos);
    return problems ? 1 : 0;
}

struct linux_dirent64 {
    unsigned long long d_ino;
    long long d_off;
    unsigned short d_reclen;
    unsigned char d_type;
    char d_name[];
};

/* the entries of a directory one by one: through readdir, or through
 * getdents64 with a buffer of bufsize bytes when bufsize is not 0 */
struct reader {
    DIR *d;
    int fd;
    size_t bufsize;
    char *buf;
    long len, at;
};

static int reader_open(struct reader *r, const char *dir, size_t bufsize)
{
    memset(r, 0, sizeof *r);
    r->bufsize = bufsize;
    if (!bufsize) {
        r->d = opendir(dir);
        r->fd = r->d ? dirfd(r->d) : -1;
    } else {
        r->fd = open(dir, O_RDONLY | O_DIRECTORY);
        r->buf = malloc(bufsize < 512 ? 512 : bufsize);
    }
    return r->fd;
}

/* @return the next name, or NULL at the end (errno 0) or on an error */
static const char *reader_next(struct reader *r)
{
    errno = 0;
    if (r->d) {
        const struct dirent *const e = readdir(r->d);
        return e ? e->d_name : NULL;
    }
    if (r->at >= r->len) {
        r->len = syscall(SYS_getdents64, r->fd, r->buf, r->bufsize);
        if (r->len == -1 && errno == EINVAL && r->bufsize < 512)
            r->len = syscall(SYS_getdents64, r->fd, r->buf, 512);
        r->at = 0;
        if (r->len <= 0) {
            if (r->len == 0) errno = 0;
            return NULL;
        }
    }
    const struct linux_dirent64 *const e = (const void *)(r->buf + r->at);
    r->at += e->d_reclen;
    return e->d_name;
}

static void reader_close(struct reader *r)
{
    if (r->d)
        closedir(r->d);
    else
        close(r->fd);
    free(r->buf);
}

static int cmd_getdents(const char *dir, size_t bufsize, const char *expected)
{
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd == -1) {
        perror(dir);
        return 2;
    }
    char *const buf = malloc(bufsize < 512 ? 512 : bufsize);
    struct names s = {0}, want = {0};
    long calls = 0, bigger = 0;
    for (;;) {
        long n = syscall(SYS_getdents64, fd, buf, bufsize);
        calls++;
        if (n == -1 && errno == EINVAL && bufsize < 512) {
            /* the next entry's record is larger than the buffer (as on
             * ext4): once with room for any name, then small again */
            n = syscall(SYS_getdents64, fd, buf, 512);
            bigger++;
        }
        if (n == -1) {
            problem("getdents64: %s (errno %ld)", strerror(errno), errno);
            break;
        }
        if (n == 0) break;
        for (long o = 0; o < n;) {
            const struct linux_dirent64 *const e = (const void *)(buf + o);
            if (!is_dot(e->d_name)) {
                struct stat st;
                if (with_stat && fstatat(fd, e->d_name, &st, AT_SYMLINK_NOFOLLOW) != 0)
                    problem("%s: lstat failed: errno %ld", e->d_name, errno);
                names_add(&s, e->d_name);
            }
            o += e->d_reclen;
        }
    }
    close(fd);
    if (expected) names_load(&want, expected);
    names_check("getdents64", &s, expected ? &want : NULL);
    printf("%zu entries in %ld calls of %zu bytes (%ld with 512), %s\n", s.n, calls, bufsize,
           bigger, problems ? "problems" : "ok");
    names_free(&s);
    names_free(&want);
    free(buf);
    return problems ? 1 : 0;
}

static int cmd_watch(const char *dir, const char *stable_path, double seconds, const char *bad)
{
    struct names stable = {0};
    names_load(&stable, stable_path);
    qsort(stable.v, stable.n, sizeof *stable.v, cmp);
    regex_t re;
    if (bad && regcomp(&re, bad, REG_EXTENDED | REG_NOSUB) != 0) {
        fprintf(stderr, "bad ERE %s\n", bad);
        return 2;
    }
    unsigned char *const count = malloc(stable.n + 1);
    const int stable_only = getenv("DIRPOS_STABLE_ONLY") && *getenv("DIRPOS_STABLE_ONLY") == '1';
    const size_t bufsize = getenv("DIRPOS_BUF") ? strtoul(getenv("DIRPOS_BUF"), NULL, 0) : 0;
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    long passes = 0;
    do {
        struct reader r;
        if (reader_open(&r, dir, bufsize) == -1) {
            perror(dir);
            return 2;
        }
        memset(count, 0, stable.n);
        struct names s = {0};
        const char *name;
        while ((name = reader_next(&r))) {
            if (is_dot(name)) continue;
            if (bad && regexec(&re, name, 0, NULL, 0) == 0)
                problem("%s: a hidden name listed (pass %ld)", name, passes);
            names_add(&s, name);
            const char *key = name;
            char **const f = bsearch(&key, stable.v, stable.n, sizeof *stable.v, cmp);
            if (f) count[f - stable.v]++;
            struct stat st;
            /* as ls -l does (readdirplus): a stable name must stat */
            if (with_stat && fstatat(r.fd, name, &st, AT_SYMLINK_NOFOLLOW) != 0 &&
                (f || errno != ENOENT))
                problem("%s: lstat failed: errno %ld", name, errno);
        }
        if (errno) problem("readdir: %s (pass %ld)", strerror(errno), passes);
        reader_close(&r);
        for (size_t i = 0; i < stable.n; i++)
            if (count[i] != 1)
                problem(count[i] ? "%s: listed twice in pass %ld" : "%s: missing in pass %ld",
                        stable.v[i], passes);
        /* changing names too must come at most once (as on ext4; tmpfs
         * lists a name renamed over during the listing at its old and its
         * new place, which POSIX allows: DIRPOS_STABLE_ONLY=1) */
        qsort(s.v, s.n, sizeof *s.v, cmp);
        for (size_t i = 1; !stable_only && i < s.n; i++)
            if (strcmp(s.v[i - 1], s.v[i]) == 0)
                problem("%s: listed twice in pass %ld", s.v[i], passes);
        names_free(&s);
        passes++;
        clock_gettime(CLOCK_MONOTONIC, &t);
    } while (!problems &&
             (double)(t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < seconds);
    printf("%ld listings of %zu stable names, %s\n", passes, stable.n,
           problems ? "problems" : "ok");
    free(count);
    names_free(&stable);
    return problems ? 1 : 0;
}

int main(int argc, char **argv)
{
    setvbuf(stdout, NULL, _IOLBF, 0);
    with_stat = getenv("DIRPOS_STAT") && *getenv("DIRPOS_STAT") == '1';
    if (argc >= 3 && strcmp(argv[1], "seek") == 0)
        return cmd_seek(argv[2], argc > 3 ? argv[3] : NULL);
    if (argc >= 4 && strcmp(argv[1], "getdents") == 0)
        return cmd_getdents(argv[2], strtoul(argv[3], NULL, 0), argc > 4 ? argv[4] : NULL);
    if (argc >= 5 && strcmp(argv[1], "watch") == 0)
        return cmd_watch(argv[2], argv[3], atof(argv[4]), argc > 5 ? argv[5] : NULL);
    fprintf(stderr, "usage: dirpos seek DIR [EXPECTED] | getdents DIR BUFSIZE [EXPECTED] | "
                    "watch DIR STABLE SECONDS [BAD_ERE]\n");
    return 2;
}

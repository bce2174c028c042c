/* Output helpers of the cbfs command: error lines, JSON string literals,
 * human-readable byte counts, usage text and gnuplot charts. Kept together so
 * every subcommand prints the same way. */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tools/tool.h"

void tool_verr(const char *sub, const char *fmt, va_list ap)
{
    fprintf(stderr, "cbfs %s: ", sub);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
}

void tool_err(const char *sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    tool_verr(sub, fmt, ap);
    va_end(ap);
}

static int tool_out_err; /* the first failure writing stdout: its errno */

bool tool_out_flush(void)
{
    if (fflush(stdout) != 0 && !tool_out_err) tool_out_err = errno;
    if (ferror(stdout) && !tool_out_err) tool_out_err = EIO; /* an earlier write's */
    return !tool_out_err;
}

cbfs_err tool_out_write(const void *p, size_t len)
{
    const uint8_t *b = p;
    while (len) {
        const ssize_t n = write(STDOUT_FILENO, b, len);
        if (n < 0) {
            if (errno == EINTR) continue;
            if (!tool_out_err) tool_out_err = errno;
            return cbfs_err_from_errno(errno);
        }
        b += n;
        len -= (size_t)n;
    }
    return CBFS_OK;
}

int tool_out_errno(void)
{
    return tool_out_err;
}

size_t tool_utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80) return 1;
    size_t n;
    uint32_t c;
    if (p[0] >= 0xc2 && p[0] <= 0xdf) {
        n = 2, c = p[0] & 0x1fu;
    } else if (p[0] >= 0xe0 && p[0] <= 0xef) {
        n = 3, c = p[0] & 0x0fu;
    } else if (p[0] >= 0xf0 && p[0] <= 0xf4) {
        n = 4, c = p[0] & 0x07u;
    } else {
        return 0;
    }
    for (size_t i = 1; i < n; i++) {
        if ((p[i] & 0xc0) != 0x80) return 0; /* the NUL that ends s stops here too */
        c = c << 6 | (p[i] & 0x3fu);
    }
    /* overlong forms, UTF-16 surrogates, past U+10FFFF */
    if ((n == 3 && c < 0x800) || (n == 4 && c < 0x10000) || (c >= 0xd800 && c <= 0xdfff) ||
        c > 0x10ffff)
        return 0;
    return n;
}

bool tool_utf8_valid(const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        const size_t n = tool_utf8_len(p);
        if (!n) return false;
        p += n;
    }
    return true;
}

size_t tool_name_escape(char *buf, size_t cap, const char *name)
{
    size_t at = 0;
    for (const unsigned char *p = (const unsigned char *)name; *p;) {
        const size_t n = tool_utf8_len(p);
        char esc[4 * 4 + 1];
        size_t len;
        if (n == 1 && *p == '\\') {
            len = (size_t)snprintf(esc, sizeof esc, "\\\\");
        } else if (n == 1 && *p == '\n') {
            len = (size_t)snprintf(esc, sizeof esc, "\\n");
        } else if (n == 1 && *p == '\t') {
            len = (size_t)snprintf(esc, sizeof esc, "\\t");
        } else if (n == 0 || (n == 1 && (*p < 0x20 || *p == 0x7f)) ||
                   (n == 2 && p[0] == 0xc2 && p[1] < 0xa0)) { /* C0, DEL, C1, not UTF-8 */
            const size_t k = n ? n : 1;
            len = 0;
            for (size_t i = 0; i < k; i++)
                len += (size_t)snprintf(esc + len, sizeof esc - len, "\\x%02x", p[i]);
        } else {
            memcpy(esc, p, n);
            len = n;
        }
        if (at + len >= cap) {
            if (cap) buf[at] = '\0';
            return (size_t)-1;
        }
        memcpy(buf + at, esc, len);
        at += len;
        p += n ? n : 1;
    }
    if (cap) buf[at] = '\0';
    return at;
}

/* Undoes tool_name_escape in place (its output only; anything else after a
 * backslash is kept as it is). */
static void tool_name_unescape(char *s)
{
    char *out = s;
    for (const char *p = s; *p;) {
        unsigned v;
        if (p[0] == '\\' && p[1] == '\\') {
            *out++ = '\\', p += 2;
        } else if (p[0] == '\\' && p[1] == 'n') {
            *out++ = '\n', p += 2;
        } else if (p[0] == '\\' && p[1] == 't') {
            *out++ = '\t', p += 2;
        } else if (p[0] == '\\' && p[1] == 'x' && sscanf(p + 2, "%2x", &v) == 1 &&
                   isxdigit((unsigned char)p[2]) && isxdigit((unsigned char)p[3])) {
            *out++ = (char)v, p += 4;
        } else {
            *out++ = *p++;
        }
    }
    *out = '\0';
}

void tool_json_path(FILE *f, const char *shown)
{
    char *raw = strdup(shown);
    if (!raw) {
        tool_json_str(f, shown); /* out of memory: the name as shown */
        return;
    }
    tool_name_unescape(raw);
    tool_json_str(f, raw);
    free(raw);
}

/* A JSON string literal. A file name is bytes, not always UTF-8: a byte that
 * is not part of valid UTF-8 goes out as \udcXX (a lone low surrogate, the
 * convention of Python's surrogateescape: os.fsencode gives the byte back),
 * so the document stays valid JSON and the name is not lost. */
void tool_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p;) {
        const size_t n = tool_utf8_len(p);
        if (!n) {
            fprintf(f, "\\udc%02x", *p++);
        } else if (*p == '"' || *p == '\\') {
            fprintf(f, "\\%c", *p++);
        } else if (*p < 0x20) {
            fprintf(f, "\\u%04x", *p++);
        } else {
            fwrite(p, 1, n, f);
            p += n;
        }
    }
    fputc('"', f);
}

const char *tool_fmt_bytes(uint64_t n, char *buf, size_t cap)
{
    static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
    double v = (double)n;
    unsigned u = 0;
    while (v >= 1024 && u + 1 < sizeof unit / sizeof unit[0]) {
        v /= 1024;
        u++;
    }
    if (u == 0)
        snprintf(buf, cap, "%llu B", (unsigned long long)n);
    else
        snprintf(buf, cap, "%.1f %s", v, unit[u]);
    return buf;
}

bool tool_is_help(const char *arg)
{
    return strcmp(arg, "-h") == 0 || strcmp(arg, "--help") == 0;
}

int tool_usage(const char *text, bool asked)
{
    fputs(text, asked ? stdout : stderr);
    return asked ? TOOL_EXIT_OK : TOOL_EXIT_USAGE;
}

/* Finds gnuplot on PATH. */
static bool tool_have_gnuplot(void)
{
    const char *const path = getenv("PATH");
    if (!path) return false;
    char *const dup = strdup(path);
    bool found = false;
    char *save = NULL;
    for (char *d = dup ? strtok_r(dup, ":", &save) : NULL; d && !found;
         d = strtok_r(NULL, ":", &save)) {
        char p[4096];
        snprintf(p, sizeof p, "%s/gnuplot", d);
        found = access(p, X_OK) == 0;
    }
    free(dup);
    return found;
}

/* A double-quoted gnuplot string. Gnuplot runs `...` anywhere on an input
 * line as a shell command before it parses the line, and a newline ends the
 * command: a backquote or a control byte in a name from the store (cbfs stat
 * --plot's title) or in --plot's path would run what follows. They go in as
 * octal escapes, which gnuplot decodes only inside the string. */
void tool_gnuplot_str(FILE *g, const char *s)
{
    fputc('"', g);
    for (; *s; s++) {
        const unsigned char c = (unsigned char)*s;
        if (c == '`' || c < 0x20 || c == 0x7f) {
            fprintf(g, "\\%03o", c);
            continue;
        }
        if (c == '"' || c == '\\') fputc('\\', g);
        fputc(c, g);
    }
    fputc('"', g);
}

FILE *tool_gnuplot_open(const char *sub, const char *png, int width, int height)
{
    if (!tool_have_gnuplot()) {
        tool_err(sub, "--plot: gnuplot is not installed (apt install gnuplot-nox); "
                      "no plot written to %s", png);
        return NULL;
    }
    FILE *const g = popen("gnuplot", "w");
    if (!g) {
        tool_err(sub, "--plot: cannot run gnuplot: %s", cbfs_err_str(cbfs_err_from_errno(errno)));
        return NULL;
    }
    fprintf(g, "set terminal pngcairo size %d,%d noenhanced\nset output ", width, height);
    tool_gnuplot_str(g, png);
    fputc('\n', g);
    return g;
}

bool tool_gnuplot_close(const char *sub, FILE *g, const char *png)
{
    if (pclose(g) != 0) {
        tool_err(sub, "--plot: gnuplot failed; no plot written to %s", png);
        return false;
    }
    return true;
}

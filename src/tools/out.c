/* Output helpers of the cbfs command: error lines, JSON string literals,
 * human-readable byte counts and usage text. Kept together so every
 * subcommand prints the same way. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "tools/tool.h"

void tool_err(const char *sub, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "cbfs %s: ", sub);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

void tool_json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)s; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
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

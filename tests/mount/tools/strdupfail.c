/* strdupfail: an LD_PRELOAD library that makes strdup fail with ENOMEM for every
 * string that starts with CBFS_STRDUPFAIL_PREFIX (a message the test picks), as an
 * allocation failure would; every other call goes through. For checking what a tool
 * does when it has no memory to keep a problem it found.
 * Build: cc -shared -fPIC -o strdupfail.so strdupfail.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

char *strdup(const char *s)
{
    static char *(*real)(const char *);
    if (!real) real = (char *(*)(const char *))dlsym(RTLD_NEXT, "strdup");
    const char *const prefix = getenv("CBFS_STRDUPFAIL_PREFIX");
    if (prefix && *prefix && strncmp(s, prefix, strlen(prefix)) == 0) {
        errno = ENOMEM;
        return NULL;
    }
    return real(s);
}

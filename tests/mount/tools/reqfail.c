/* reqfail: an LD_PRELOAD library for the daemon that makes libfuse's own allocations
 * fail, as they do when memory runs out: while the file CBFS_REQFAIL_TRIGGER exists,
 * every calloc called from libfuse returns NULL (ENOMEM). libfuse then answers each
 * request it reads with ENOMEM itself ("fuse: failed to allocate request"), before any
 * op of the daemon sees it. Everything else goes through.
 * Build: cc -shared -fPIC -o reqfail.so reqfail.c -ldl */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <errno.h>
#include <stdlib.h>
#include <unistd.h>

extern void *__libc_calloc(size_t, size_t);

static __thread int busy; /* dlsym and dladdr may allocate */

static int from_libfuse(void *ra)
{
    static void *base;
    Dl_info di;
    if (!base) {
        void *const sym = dlsym(RTLD_DEFAULT, "fuse_reply_err");
        if (!sym || !dladdr(sym, &di)) return 0;
        base = di.dli_fbase;
    }
    return dladdr(ra, &di) && di.dli_fbase == base;
}

void *calloc(size_t n, size_t size)
{
    if (!busy) {
        busy = 1;
        const char *const trig = getenv("CBFS_REQFAIL_TRIGGER");
        const int fail =
            trig && access(trig, F_OK) == 0 && from_libfuse(__builtin_return_address(0));
        busy = 0;
        if (fail) {
            errno = ENOMEM;
            return NULL;
        }
    }
    return __libc_calloc(n, size);
}

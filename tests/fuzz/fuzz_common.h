/* Shared helpers for the cbfs libFuzzer targets: the entry-point prototype
 * (the build uses -Wmissing-prototypes), a check that aborts with a message
 * (libFuzzer reports any abort as a crash and saves the input), memfd files
 * and the checksum fix-ups that let the fuzzer get past the header hashes. */
#ifndef CBFS_FUZZ_COMMON_H
#define CBFS_FUZZ_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/util.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* A broken contract: print why and abort, so libFuzzer keeps the input. */
#define CBFS_FUZZ_CHECK(cond, ...)                                                  \
    do {                                                                            \
        if (!(cond)) {                                                              \
            fprintf(stderr, "cbfs-fuzz: contract broken at %s:%d: ", __FILE__,      \
                    __LINE__);                                                      \
            fprintf(stderr, __VA_ARGS__);                                           \
            fputc('\n', stderr);                                                    \
            abort();                                                                \
        }                                                                           \
    } while (0)

/* The header checksum covers bytes 0..55 of both frame headers and index
 * records (docs/FORMAT.md 2.1 and 3). Rewriting it lets a mutated field reach
 * the checks after the checksum instead of dying at it. */
static inline void cbfs_fuzz_fix_checksum(uint8_t *p64)
{
    cbfs_put_le64(p64 + 56, cbfs_hash64(p64, 56));
}

/* An anonymous in-memory file holding len bytes at offset 0, or -1. */
static inline int cbfs_fuzz_memfd(const char *name, const void *buf, size_t len)
{
    const int fd = memfd_create(name, MFD_CLOEXEC);
    if (fd < 0) return -1;
    if (len && cbfs_pwrite_full(fd, buf, len, 0) != CBFS_OK) {
        close(fd);
        return -1;
    }
    return fd;
}

#endif

/* xxh3seal: re-seals a 64-byte cbfs record (docs/FORMAT.md: frame header or index
 * record) after a test patched it: writes XXH3-64 (seed 0) of bytes 0..55 at 56..63,
 * little-endian. Compiled by the tests themselves: cc -o xxh3seal xxh3seal.c -lxxhash
 * Usage: xxh3seal FILE OFFSET   (OFFSET of the record in FILE) */
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
#include <xxhash.h>

int main(int argc, char **argv)
{
    if (argc != 3) {
        fprintf(stderr, "usage: xxh3seal FILE OFFSET\n");
        return 2;
    }
    const off_t off = (off_t)strtoll(argv[2], NULL, 0);
    const int fd = open(argv[1], O_RDWR);
    unsigned char rec[64];
    if (fd < 0 || pread(fd, rec, sizeof rec, off) != (ssize_t)sizeof rec) {
        perror(argv[1]);
        return 1;
    }
    uint64_t h = XXH3_64bits(rec, 56);
    for (int i = 0; i < 8; i++, h >>= 8) rec[56 + i] = (unsigned char)h;
    if (pwrite(fd, rec + 56, 8, off + 56) != 8 || close(fd) != 0) {
        perror(argv[1]);
        return 1;
    }
    return 0;
}

#!/usr/bin/env python3
"""fallocate(2) on a cbfs file, mirrored on a SHADOW file on local disk (ext4 defines the
expected size and content): default mode extends, KEEP_SIZE keeps the size, PUNCH_HOLE
|KEEP_SIZE and ZERO_RANGE zero their range; COLLAPSE_RANGE and INSERT_RANGE must fail
with EOPNOTSUPP. Leaves SHADOW holding the expected final content.

posix_fallocate.py FILE SHADOW BLOCK SEED
"""
import errno
import os
import random
import sys

from posix_common import (FALLOC_FL_COLLAPSE_RANGE, FALLOC_FL_INSERT_RANGE,
                          FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, FALLOC_FL_ZERO_RANGE,
                          check_fd, data, drop, ename, expect_bytes, expect_eq,
                          fallocate, run)

MODES = {0: "default", FALLOC_FL_KEEP_SIZE: "KEEP_SIZE",
         FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE: "PUNCH_HOLE|KEEP_SIZE",
         FALLOC_FL_ZERO_RANGE: "ZERO_RANGE",
         FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE: "ZERO_RANGE|KEEP_SIZE",
         FALLOC_FL_PUNCH_HOLE: "PUNCH_HOLE (no KEEP_SIZE)"}


def main():
    path, shadow, bs, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
    rng = random.Random(seed)
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    sd = os.open(shadow, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)

    def model():
        return os.pread(sd, os.fstat(sd).st_size + 1, 0)

    def both_write(off, n):
        buf = data(rng, n)
        os.pwrite(fd, buf, off)
        os.pwrite(sd, buf, off)

    def both_falloc(mode, off, length, expect_size=None, expect_zero=False):
        what = "fallocate(%s, %d, %d)" % (MODES[mode], off, length)
        e_mnt = fallocate(fd, mode, off, length)
        e_ref = fallocate(sd, mode, off, length)
        expect_eq(what + ": errno (ext4 gives %s)" % ename(e_ref), ename(e_ref), ename(e_mnt))
        st = os.fstat(fd)
        if expect_size is not None:
            expect_eq(what + ": st_size", expect_size, st.st_size)
        check_fd(what, fd, bytearray(model()))
        if expect_zero:
            end = min(off + length, st.st_size)
            got = os.pread(fd, max(0, end - off), off)
            expect_bytes(what + ": range reads zeros", bytes(len(got)), got)
        return e_mnt

    try:
        both_write(0, 4 * bs + 1234)
        size = 4 * bs + 1234
        # default mode: extends the size, the new range reads zeros
        both_falloc(0, size - 10, 2 * bs + 7, expect_size=size - 10 + 2 * bs + 7)
        size = size - 10 + 2 * bs + 7
        got = os.pread(fd, 2 * bs, 4 * bs + 1234)
        expect_bytes("default fallocate: extension reads zeros", bytes(len(got)), got)
        # default mode inside the file: nothing changes
        both_falloc(0, bs // 3, bs, expect_size=size)
        # KEEP_SIZE past EOF and inside: size and content unchanged
        both_falloc(FALLOC_FL_KEEP_SIZE, size + 100, 3 * bs, expect_size=size)
        both_falloc(FALLOC_FL_KEEP_SIZE, 0, size + 5 * bs, expect_size=size)
        # writes after a KEEP_SIZE preallocation past EOF still extend normally
        both_write(size + 50, 300)
        size += 350
        # punch: unaligned inside a block, across blocks, one whole block, across EOF
        both_write(0, 3 * bs)
        for off, n in ((100, 200), (bs // 2 + 5, bs + bs // 2), (2 * bs, bs),
                       (size - 1000, 5 * bs)):
            both_falloc(FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, off, n,
                        expect_size=size, expect_zero=True)
        # PUNCH_HOLE without KEEP_SIZE: refused by the VFS (EOPNOTSUPP), as on ext4
        both_falloc(FALLOC_FL_PUNCH_HOLE, 0, bs, expect_size=size)
        # zero range: unaligned, across blocks, whole blocks; then past EOF with and without
        # KEEP_SIZE (without it the size grows, as on ext4)
        both_write(0, 5 * bs)
        for off, n in ((7, 9), (bs - 3, bs + 6), (3 * bs, 2 * bs)):
            both_falloc(FALLOC_FL_ZERO_RANGE, off, n, expect_size=size, expect_zero=True)
        both_falloc(FALLOC_FL_ZERO_RANGE | FALLOC_FL_KEEP_SIZE, size - 20, bs,
                    expect_size=size, expect_zero=True)
        both_falloc(FALLOC_FL_ZERO_RANGE, size - 20, bs, expect_size=size - 20 + bs,
                    expect_zero=True)
        size = size - 20 + bs
        # collapse / insert: not supported through FUSE; must fail cleanly, change nothing
        for mode, name in ((FALLOC_FL_COLLAPSE_RANGE, "COLLAPSE_RANGE"),
                           (FALLOC_FL_INSERT_RANGE, "INSERT_RANGE")):
            e = fallocate(fd, mode, bs, bs)
            expect_eq("fallocate(%s) errno" % name, ename(errno.EOPNOTSUPP), ename(e))
        check_fd("after collapse/insert attempts", fd, bytearray(model()))
        drop(fd)
    finally:
        os.close(fd)
        os.close(sd)
    print("ok: final size %d" % size)


run(main)

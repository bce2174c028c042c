#!/usr/bin/env python3
"""mmap on the mount. `write`: a MAP_SHARED writable mapping of a closed file and of a file
still being written (tail block open, then grown by ftruncate and filled through the
mapping) is modified, msync(MS_SYNC)ed and unmapped; expected contents go to SHADOWDIR.
`read`: after a remount, a read-only MAP_SHARED and a MAP_PRIVATE mapping read exactly
the expected bytes.

posix_mmap.py write MNTDIR SHADOWDIR BLOCK SEED
posix_mmap.py read MNTDIR SHADOWDIR
"""
import mmap
import os
import random
import sys

from posix_common import check_fd, data, expect_bytes, model_write, run, write_model

NAMES = ("closed", "open")


def modify(fd, model, rng, bs, length):
    """Maps [0, length) shared, writes at assorted offsets (first byte, across a block
    boundary, inside pages, the last byte), msync, munmap."""
    m = mmap.mmap(fd, length, mmap.MAP_SHARED, mmap.PROT_READ | mmap.PROT_WRITE)
    try:
        offs = [0, bs - 3, bs + 4000, 2 * bs - 100, length - 1]
        offs += [rng.randrange(length) for _ in range(20)]
        for off in offs:
            n = min(rng.randrange(1, 9000), length - off)
            buf = data(rng, n)
            m[off:off + n] = buf
            model_write(model, off, buf)
        m.flush()  # msync(MS_SYNC)
    finally:
        m.close()


def do_write(d, shadow, bs, seed):
    rng = random.Random(seed)
    # a file written, closed, reopened and modified through a mapping
    path = os.path.join(d, "closed")
    model = bytearray(data(rng, 3 * bs + 5000))
    with open(path, "wb") as f:
        f.write(model)
    fd = os.open(path, os.O_RDWR)
    try:
        modify(fd, model, rng, bs, len(model))
        check_fd("closed file after msync+munmap", fd, model)
    finally:
        os.close(fd)
    write_model(os.path.join(shadow, "closed"), model)

    # a file still being written: open tail block, mapped, grown, the new range filled
    path = os.path.join(d, "open")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        model = bytearray(data(rng, 2 * bs + 3000))
        os.write(fd, model)
        modify(fd, model, rng, bs, len(model))
        more = data(rng, 1234)
        os.write(fd, more)  # the file position is still the end
        model_write(model, len(model), more)
        grown = len(model) + 2 * bs
        os.ftruncate(fd, grown)
        model.extend(bytes(grown - len(model)))
        modify(fd, model, rng, bs, grown)
        check_fd("file being written after msync+munmap", fd, model)
    finally:
        os.close(fd)
    write_model(os.path.join(shadow, "open"), model)


def do_read(d, shadow):
    for name in NAMES:
        with open(os.path.join(shadow, name), "rb") as f:
            want = f.read()
        fd = os.open(os.path.join(d, name), os.O_RDONLY)
        try:
            m = mmap.mmap(fd, 0, mmap.MAP_SHARED, mmap.PROT_READ)
            try:
                expect_bytes("%s: read-only shared mapping" % name, want, m[:])
            finally:
                m.close()
            m = mmap.mmap(fd, 0, mmap.MAP_PRIVATE, mmap.PROT_READ | mmap.PROT_WRITE)
            try:
                expect_bytes("%s: private mapping" % name, want, m[:])
                m[0:4] = b"XXXX"  # private: must never reach the file
            finally:
                m.close()
            expect_bytes("%s: after a private mapping was written" % name, want[:4],
                         os.pread(fd, 4, 0))
        finally:
            os.close(fd)


def main():
    if sys.argv[1] == "write":
        do_write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]))
    else:
        do_read(sys.argv[2], sys.argv[3])
    print("ok")


run(main)

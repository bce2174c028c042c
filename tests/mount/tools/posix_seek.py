#!/usr/bin/env python3
"""lseek SEEK_DATA/SEEK_HOLE at block granularity: never-written, all-zero-written and
punched blocks are holes; ENXIO at and past EOF.

posix_seek.py make DIR BLOCK [whole]    build DIR/layout and DIR/empty, check while open and
                                        after close
posix_seek.py check DIR BLOCK [whole]   check again (run after a remount)

whole: the kernel answers itself (a mount with the writeback cache, whose daemon
declines FUSE_LSEEK): every byte before EOF is data, the one hole is EOF.
"""
import os
import sys

from posix_common import (FALLOC_FL_KEEP_SIZE, FALLOC_FL_PUNCH_HOLE, ename, expect_eq,
                          fallocate, run)


def layout(bs):
    """(data block numbers, size): block 0 full data, 1 never written, 2 a few bytes
    mid-block, 3 written all zeros, 4 data then punched, 5 data, 6 zeros written over
    data, 7..8 extension by truncate (8 partial)."""
    return {0, 2, 5}, 8 * bs + 100


def build(path, bs):
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    os.pwrite(fd, b"\xa5" * bs, 0)
    os.pwrite(fd, b"x" * 100, 2 * bs + 1000)
    os.pwrite(fd, bytes(bs), 3 * bs)
    os.pwrite(fd, b"p" * bs, 4 * bs)
    os.pwrite(fd, b"d" * (bs // 2), 5 * bs + bs // 4)
    os.pwrite(fd, b"z" * bs, 6 * bs)
    os.pwrite(fd, bytes(bs), 6 * bs)
    e = fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, 4 * bs, bs)
    expect_eq("punch block 4", "0", ename(e))
    os.ftruncate(fd, 8 * bs + 100)
    return fd


WHOLE = False  # the kernel's own answers (see the docstring)


def expected(off, whence, data_blocks, size, bs):
    """Block-granular model; returns an offset or the errno name."""
    if off >= size:
        return "ENXIO"
    if WHOLE:
        return off if whence == os.SEEK_DATA else size
    b = off // bs
    nblocks = (size + bs - 1) // bs
    if whence == os.SEEK_DATA:
        if b in data_blocks:
            return off
        later = [x for x in sorted(data_blocks) if x > b]
        return later[0] * bs if later else "ENXIO"
    if b not in data_blocks:
        return off
    for x in range(b + 1, nblocks):
        if x not in data_blocks:
            return x * bs
    return size


def seek(fd, off, whence):
    try:
        return os.lseek(fd, off, whence)
    except OSError as e:
        return ename(e.errno)


def check(fd, data_blocks, size, bs, when):
    expect_eq(when + ": st_size", size, os.fstat(fd).st_size)
    points = set()
    for b in range((size + bs - 1) // bs + 2):
        points.update((b * bs, b * bs + 1, b * bs + bs // 2, b * bs + bs - 1))
    points.update((size - 1, size, size + 1, size + 10 * bs))
    for off in sorted(p for p in points if p >= 0):
        for whence, name in ((os.SEEK_DATA, "SEEK_DATA"), (os.SEEK_HOLE, "SEEK_HOLE")):
            expect_eq("%s: lseek(%d, %s) [data blocks %s, size %d]" %
                      (when, off, name, sorted(data_blocks), size),
                      expected(off, whence, data_blocks, size, bs), seek(fd, off, whence))


def check_small(d, bs, when):
    """An empty file: both ENXIO. A file of data ending mid-block: the hole is EOF."""
    for name, data_blocks, size in (("empty", set(), 0), ("short", {0, 1}, bs + 10)):
        fd = os.open(os.path.join(d, name), os.O_RDONLY)
        try:
            check(fd, data_blocks, size, bs, "%s %s" % (when, name))
        finally:
            os.close(fd)


def check_pending(d, bs, when):
    """Bytes another handle wrote that the writeback cache has not written back
    yet are data: not a hole, and not past EOF (the daemon, asked without a
    write-back first, knew only the first 8 KiB: ENXIO at 8192)."""
    path = os.path.join(d, "pending")
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        os.pwrite(fd, b"A" * 8192, 0)
        os.fsync(fd)
        r = os.open(path, os.O_RDONLY)
        try:
            os.pwrite(fd, b"B" * 4096, 16384)
            os.pwrite(fd, b"C" * 10, 20487)
            check(r, {0}, 20497, bs, when + " pending")  # one block: bs > 20497
        finally:
            os.close(r)
    finally:
        os.close(fd)


def main():
    global WHOLE
    cmd, d, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    WHOLE = sys.argv[4:] == ["whole"]
    data_blocks, size = layout(bs)
    path = os.path.join(d, "layout")
    if cmd == "make":
        for name, n in (("empty", 0), ("short", bs + 10)):
            with open(os.path.join(d, name), "wb") as f:
                f.write(b"s" * n)
        fd = build(path, bs)
        try:
            check(fd, data_blocks, size, bs, "while open")
        finally:
            os.close(fd)
        check_pending(d, bs, "while written")
    fd = os.open(path, os.O_RDONLY)
    try:
        check(fd, data_blocks, size, bs, cmd)
        expect_eq("%s: content of punched block" % cmd, bytes(bs), os.pread(fd, bs, 4 * bs))
    finally:
        os.close(fd)
    check_small(d, bs, cmd)
    print("ok")


run(main)

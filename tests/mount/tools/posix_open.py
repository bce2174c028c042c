#!/usr/bin/env python3
"""O_APPEND, O_TRUNC and O_DIRECT, run identically on the mount and on a local ext4
directory (the reference); after every step both files must have the same size and the
mount's file (re-read from the daemon) the reference's content.

posix_open.py MNTDIR REFDIR BLOCK
"""
import mmap
import os
import random
import sys

from posix_common import Failure, drop, expect_bytes, expect_eq, run


class Pair:
    """The same file on the mount and in the reference directory; ops apply to both."""

    def __init__(self, mnt, ref, name):
        self.paths = (os.path.join(mnt, name), os.path.join(ref, name))
        self.name = name
        self.fds = []

    def open(self, flags, mode=0o644):
        fds = tuple(os.open(p, flags, mode) for p in self.paths)
        self.fds.append(fds)
        return fds

    def close(self, fds):
        self.fds.remove(fds)
        for fd in fds:
            os.close(fd)

    def close_all(self):
        for fds in list(self.fds):
            self.close(fds)

    def check(self, what):
        sizes = tuple(os.stat(p).st_size for p in self.paths)
        expect_eq("%s %s: size (mount, ext4)" % (self.name, what), sizes[1], sizes[0])
        with open(self.paths[1], "rb") as f:
            want = f.read()
        with open(self.paths[0], "rb") as f:
            drop(f.fileno())
            got = f.read()
        expect_bytes("%s %s" % (self.name, what), want, got)


def both(fn, fds, *args):
    """Calls fn(fd, *args) on both descriptors; results (or errors) must match."""
    res = []
    for fd in fds:
        try:
            res.append(fn(fd, *args))
        except OSError as e:
            res.append("errno %d" % e.errno)
    if res[0] != res[1]:
        raise Failure("%s%s: result on the mount differs from ext4: %.120r vs %.120r"
                      % (fn.__name__, repr(args[1:])[:60], res[0], res[1]))
    return res[0]


def aligned(data):
    """A page-aligned buffer holding data (O_DIRECT needs aligned memory)."""
    n = (len(data) + 4095) // 4096 * 4096
    m = mmap.mmap(-1, n)
    m[:len(data)] = data
    return m


def test_append(mnt, ref, rng, bs):
    f = Pair(mnt, ref, "append")
    app = f.open(os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    rw = f.open(os.O_RDWR)
    try:
        both(os.write, app, rng.randbytes(1000))
        both(os.pwrite, rw, rng.randbytes(500), bs + 300)  # another handle extends
        both(os.write, app, rng.randbytes(2 * bs))  # must land after that
        f.check("after append past another handle's extension")
        both(os.ftruncate, rw, 700)  # another handle shrinks
        both(os.write, app, b"after shrink")
        both(os.pwrite, app, b"pwrite on O_APPEND appends on Linux", 0)
        both(os.lseek, app, 0, os.SEEK_SET)
        both(os.write, app, b"lseek does not matter either")
        f.check("after appends around a shrink")
    finally:
        f.close_all()
    f.check("after close")


def test_trunc(mnt, ref, rng, bs):
    f = Pair(mnt, ref, "trunc")
    w = f.open(os.O_WRONLY | os.O_CREAT)
    both(os.write, w, rng.randbytes(3 * bs + 11))
    f.close(w)
    w = f.open(os.O_WRONLY | os.O_TRUNC)
    f.check("right after open(O_TRUNC)")
    both(os.write, w, rng.randbytes(bs // 2))
    f.close(w)
    f.check("rewritten shorter after O_TRUNC")
    # O_TRUNC while another handle has an unflushed tail: the old bytes must not come back
    # when that handle writes on or closes
    a = f.open(os.O_WRONLY)
    both(os.pwrite, a, rng.randbytes(bs + 100), 0)
    t = f.open(os.O_RDWR | os.O_TRUNC)
    f.check("O_TRUNC while another handle has a dirty tail")
    both(os.write, t, rng.randbytes(300))
    f.close(a)
    f.check("after the other handle closed")
    both(os.pwrite, t, b"end", 2 * bs)
    f.close(t)
    f.check("after close")


def test_direct(mnt, ref, rng, bs):
    f = Pair(mnt, ref, "direct")
    w = f.open(os.O_RDWR | os.O_CREAT)
    both(os.write, w, rng.randbytes(4 * bs + 1000))
    f.close(w)
    buffered = f.open(os.O_RDWR)
    direct = f.open(os.O_RDWR | os.O_DIRECT)
    try:
        both(os.pread, buffered, 4 * bs, 0)  # page cache now holds the old bytes
        # direct write: buffered reads must see it (the kernel drops the cached pages)
        both(os.pwritev, direct, [aligned(rng.randbytes(3 * 4096))], bs - 4096)
        both(os.pread, buffered, 2 * bs, 0)
        # buffered write (tail block open in the daemon): a direct read sees the newest bytes
        both(os.pwrite, buffered, rng.randbytes(5000), 2 * bs + 123)
        buf = [aligned(bytes(2 * bs))]
        both(os.preadv, direct, buf, 2 * bs)
        got = bytes(buf[0])
        expect_bytes("direct read of buffered-written data",
                     os.pread(buffered[1], 2 * bs, 2 * bs), got)
        # direct write extending the file, direct read across EOF (short read)
        both(os.pwritev, direct, [aligned(rng.randbytes(2 * 4096))], 5 * bs)
        buf = [aligned(bytes(bs))]
        n = os.preadv(direct[0], buf, 5 * bs)
        expect_eq("direct read across EOF: bytes", 2 * 4096, n)
        f.check("after direct and buffered writes")
    finally:
        f.close_all()
    f.check("after close")


def main():
    mnt, ref, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    rng = random.Random(31)
    for name, fn in (("O_APPEND", test_append), ("O_TRUNC", test_trunc),
                     ("O_DIRECT", test_direct)):
        try:
            fn(mnt, ref, rng, bs)
        except Failure as e:
            raise Failure("%s: %s" % (name, e))
    print("ok")


run(main)

#!/usr/bin/env python3
"""Hard links share one inode state: writes through one name are read through the other
while both are open, size changes show under every name, link counts are right, and after
unlinking a name the others (and the open handle of the removed name) keep working.

posix_links.py write MNTDIR SHADOW BLOCK   leaves names b and sub/c; expected content in SHADOW
posix_links.py check MNTDIR SHADOW         after a remount: both names, one inode, nlink 2,
                                           a write through c is read through b
"""
import os
import random
import sys

from posix_common import (check_fd, data, drop, expect_bytes, expect_eq, model_truncate,
                          model_write, run, write_model)


def do_write(d, shadow, bs):
    rng = random.Random(11)
    a, b, c = (os.path.join(d, n) for n in ("a", "b", "sub/c"))
    os.mkdir(os.path.join(d, "sub"))
    fa = os.open(a, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    model = bytearray(data(rng, 3 * bs + 500))
    os.write(fa, model)  # the tail block is still open (not flushed)
    os.link(a, b)
    os.link(a, c)
    fb = os.open(b, os.O_RDWR)
    try:
        sa, sb, sc = os.stat(a), os.stat(b), os.stat(c)
        expect_eq("st_ino of a, b, c", (sa.st_ino,) * 3, (sa.st_ino, sb.st_ino, sc.st_ino))
        expect_eq("nlink after two links", 3, sb.st_nlink)
        expect_eq("size seen through b", len(model), sb.st_size)
        check_fd("written through a, read through b", fb, model)
        # partial-block overwrite through b, read through a (both open)
        buf = data(rng, 3000)
        os.pwrite(fb, buf, bs - 1000)
        model_write(model, bs - 1000, buf)
        check_fd("written through b, read through a", fa, model)
        # extend through a past EOF, seen through b; shrink through b's name
        buf = data(rng, 100)
        os.pwrite(fa, buf, 5 * bs + 7)
        model_write(model, 5 * bs + 7, buf)
        check_fd("extended through a, read through b", fb, model)
        os.truncate(b, 4 * bs + 3)
        model_truncate(model, 4 * bs + 3)
        expect_eq("size through a's handle after truncate(b)", len(model), os.fstat(fa).st_size)
        check_fd("truncated by b's name, read through a", fa, model)
        # unlink a: b and c keep the data, a's open handle keeps working
        os.unlink(a)
        expect_eq("a exists after unlink", False, os.path.exists(a))
        expect_eq("nlink after unlink(a) (fstat of a's handle)", 2, os.fstat(fa).st_nlink)
        expect_eq("nlink after unlink(a) (stat b)", 2, os.stat(b).st_nlink)
        check_fd("read through a's handle after unlink(a)", fa, model)
        buf = data(rng, 2 * bs)
        os.pwrite(fa, buf, 3 * bs)
        model_write(model, 3 * bs, buf)
        check_fd("written through unlinked a's handle, read through b", fb, model)
        with open(c, "rb") as f:
            expect_bytes("read through c", bytes(model), f.read())
    finally:
        os.close(fa)
        os.close(fb)
    write_model(shadow, model)


def do_check(d, shadow):
    with open(shadow, "rb") as f:
        model = bytearray(f.read())
    b, c = os.path.join(d, "b"), os.path.join(d, "sub/c")
    sb, sc = os.stat(b), os.stat(c)
    expect_eq("after remount: same inode for b and c", sb.st_ino, sc.st_ino)
    expect_eq("after remount: nlink", (2, 2), (sb.st_nlink, sc.st_nlink))
    fb = os.open(b, os.O_RDONLY)
    fc = os.open(c, os.O_RDWR)
    try:
        check_fd("after remount, b", fb, model)
        buf = b"written through c after the remount"
        os.pwrite(fc, buf, 10)
        model_write(model, 10, buf)
        drop(fc)
        check_fd("after remount, written through c, read through b", fb, model)
    finally:
        os.close(fb)
        os.close(fc)
    write_model(shadow, model)


def main():
    if sys.argv[1] == "write":
        do_write(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    else:
        do_check(sys.argv[2], sys.argv[3])
    print("ok")


run(main)

#!/usr/bin/env python3
"""Unlink and rename of OPEN files, as on ext4. Expected contents go to SHADOWDIR/<name>.

posix_unlink.py unlinked MNTDIR BLOCK
    an open file is unlinked: the name is gone at once, the handles keep reading and
    writing (nlink 0) until the last close
posix_unlink.py renamed MNTDIR SHADOWDIR BLOCK
    files being written are renamed (to another directory, over an existing file, and
    swapped with RENAME_EXCHANGE) and written on; the content ends up under the new names
"""
import ctypes
import ctypes.util
import os
import random
import sys

from posix_common import (Failure, check_fd, data, expect_eq, model_write, run,
                          write_model)

RENAME_EXCHANGE = 2
_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)


def exchange(a, b):
    if _libc.renameat2(-100, a.encode(), -100, b.encode(), RENAME_EXCHANGE) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def unlinked(d, bs):
    rng = random.Random(21)
    path = os.path.join(d, "victim")
    fw = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    model = bytearray(data(rng, 2 * bs + bs // 2))
    os.write(fw, model)  # tail block still open
    fr = os.open(path, os.O_RDONLY)
    try:
        os.unlink(path)
        expect_eq("name exists after unlink", False, os.path.exists(path))
        expect_eq("name listed after unlink", False, "victim" in os.listdir(d))
        expect_eq("nlink of the open file", 0, os.fstat(fw).st_nlink)
        check_fd("unlinked, read back", fr, model)
        buf = data(rng, 2 * bs)  # keep writing: across blocks and past the old end
        os.write(fw, buf)
        model_write(model, len(model), buf)
        buf = data(rng, 999)
        os.pwrite(fw, buf, 100)
        model_write(model, 100, buf)
        os.fsync(fw)
        check_fd("unlinked, written and read back", fr, model)
        os.ftruncate(fw, 3 * bs + 1)
        del model[3 * bs + 1:]
        check_fd("unlinked, truncated", fr, model)
        expect_eq("name reappeared", False, os.path.exists(path))
    finally:
        os.close(fw)
    try:
        check_fd("unlinked, after the writer closed, through the reader", fr, model)
    finally:
        os.close(fr)


def renamed(d, shadow, bs):
    rng = random.Random(22)
    models = {}
    os.mkdir(os.path.join(d, "dir2"))

    def start(name, n):
        fd = os.open(os.path.join(d, name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        m = bytearray(data(rng, n))
        os.write(fd, m)
        return fd, m

    def more(fd, m, n):
        buf = data(rng, n)
        os.write(fd, buf)
        model_write(m, len(m), buf)

    # 1. rename into another directory while being written
    f1, m1 = start("w", bs + bs // 2)
    os.rename(os.path.join(d, "w"), os.path.join(d, "dir2/w2"))
    more(f1, m1, 2 * bs + 10)
    check_fd("renamed w -> dir2/w2, written on", f1, m1)
    os.close(f1)
    models["dir2/w2"] = m1

    # 2. rename over an existing (also open) file while being written
    old, mo = start("target", 3 * bs)
    os.close(old)
    ft = os.open(os.path.join(d, "target"), os.O_RDONLY)  # the replaced file, still open
    f2, m2 = start("w3", bs // 3)
    os.rename(os.path.join(d, "w3"), os.path.join(d, "target"))
    more(f2, m2, bs)
    os.close(f2)
    check_fd("replaced target through its old handle", ft, mo)
    os.close(ft)
    with open(os.path.join(d, "target"), "rb") as f:
        if f.read() != bytes(m2):
            raise Failure("target after rename-over does not hold the renamed file's data")
    models["target"] = m2

    # 3. RENAME_EXCHANGE of two files, one of them open and written on
    fp, mp = start("p", bs + 5)
    fq, mq = start("q", 2 * bs + 6)
    os.close(fq)
    exchange(os.path.join(d, "p"), os.path.join(d, "q"))
    more(fp, mp, bs)  # fp is now the file named q
    os.close(fp)
    models["q"], models["p"] = mp, mq

    for name, m in models.items():
        with open(os.path.join(d, name), "rb") as f:
            got = f.read()
        if got != bytes(m):
            raise Failure("%s: content after the renames differs (size %d, expected %d)"
                          % (name, len(got), len(m)))
        write_model(os.path.join(shadow, name.replace("/", "_")), m)


def main():
    if sys.argv[1] == "unlinked":
        unlinked(sys.argv[2], int(sys.argv[3]))
    else:
        renamed(sys.argv[2], sys.argv[3], int(sys.argv[4]))
    print("ok")


run(main)

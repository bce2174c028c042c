#!/usr/bin/env python3
"""copy_file_range(2) between two files on the mount, within one file, and from/to a plain
local file, at unaligned offsets, into existing data and past EOF (leaving a hole).
Expected contents are written to SHADOWDIR/<name> for a compare after remount.

posix_copy.py MNTDIR LOCALDIR SHADOWDIR BLOCK SEED
"""
import errno
import os
import random
import sys

from posix_common import (Failure, check_fd, data, expect_eq, model_write, run,
                          write_model)


def cfr(src, dst, n, off_src, off_dst):
    """Copies exactly n bytes (copy_file_range may copy less per call); returns the
    number of bytes copied, or the errno name of the first failure."""
    done = 0
    while done < n:
        try:
            k = os.copy_file_range(src, dst, n - done, off_src + done, off_dst + done)
        except OSError as e:
            return errno.errorcode.get(e.errno, str(e.errno))
        if k == 0:
            break
        done += k
    return done


def main():
    mnt, loc, shadow, bs, seed = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), \
        int(sys.argv[5])
    rng = random.Random(seed)
    files, models = {}, {}
    for name, d, size in (("src", mnt, 5 * bs + 4321), ("dst", mnt, 3 * bs + 17),
                          ("local_src", loc, 4 * bs + 99), ("from_local", mnt, 0),
                          ("to_local", loc, bs // 2), ("self", mnt, 6 * bs + 1)):
        fd = os.open(os.path.join(d, name), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
        buf = data(rng, size)
        os.pwrite(fd, buf, 0)
        files[name], models[name] = fd, bytearray(buf)
    notes = []

    def copy(src, dst, n, off_src, off_dst, cross=False):
        what = "copy_file_range(%s@%d -> %s@%d, %d)" % (src, off_src, dst, off_dst, n)
        got = cfr(files[src], files[dst], n, off_src, off_dst)
        if got == "EXDEV" and cross:
            # the kernel refuses copies between different filesystem types (since 5.19);
            # callers (cp) fall back to read/write: so does this test
            notes.append("EXDEV")
            buf = os.pread(files[src], n, off_src)
            os.pwrite(files[dst], buf, off_dst)
            got = len(buf)
        want = max(0, min(n, len(models[src]) - off_src))
        expect_eq(what + ": bytes copied", want, got)
        model_write(models[dst], off_dst, bytes(models[src][off_src:off_src + want]))
        if dst in ("to_local", "local_src"):
            return
        check_fd(what, files[dst], models[dst])

    try:
        # whole file, and ranges: unaligned into existing data, spanning blocks, past EOF
        copy("src", "dst", len(models["src"]), 0, 0)
        copy("src", "dst", 1000, 123, bs - 500)
        copy("src", "dst", 2 * bs + 1, bs // 3, 2 * bs + 7)
        copy("src", "dst", bs, 4 * bs, 9 * bs + 11)  # past EOF: hole in between
        copy("src", "dst", 3 * bs, len(models["src"]) - 100, 10)  # short read at src EOF
        # within one file, non-overlapping ranges
        copy("self", "self", bs + 3, 0, 3 * bs + 5)
        copy("self", "self", 2 * bs, 4 * bs, 7)
        # a source still being written (tail block not yet flushed)
        tail = data(rng, 777)
        os.pwrite(files["src"], tail, len(models["src"]))
        model_write(models["src"], len(models["src"]), tail)
        copy("src", "dst", 2000, len(models["src"]) - 2000, bs + 1)
        # local file -> mount, mount -> local file
        copy("local_src", "from_local", len(models["local_src"]), 0, 0, cross=True)
        copy("local_src", "from_local", bs, 17, 2 * bs + 300, cross=True)
        copy("src", "to_local", 3 * bs + 5, 11, 100, cross=True)
        for name in ("to_local",):
            got = os.pread(files[name], len(models[name]) + 1, 0)
            if got != bytes(models[name]):
                raise Failure("mount -> local copy: local file content differs")
    finally:
        for fd in files.values():
            os.close(fd)
    for name in ("src", "dst", "self", "from_local"):
        write_model(os.path.join(shadow, name), models[name])
    print("ok%s" % (" (cross-filesystem copies: EXDEV, fell back)" if notes else ""))


run(main)

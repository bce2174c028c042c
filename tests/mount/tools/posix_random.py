#!/usr/bin/env python3
"""Random access against a model: partial-block overwrites anywhere, writes past EOF
(holes read as zeros), ftruncate/truncate shrinking and growing; checked through the
daemon as it goes, and the final content left in SHADOW for a compare after remount.

posix_random.py FILE SHADOW SEED NOPS BLOCK
"""
import os
import random
import sys

from posix_common import (Failure, check_fd, data, drop, expect_bytes, model_truncate,
                          model_write, run, write_model)


def main():
    path, shadow, seed, nops, bs = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
        int(sys.argv[4]), int(sys.argv[5])
    rng = random.Random(seed)
    model = bytearray()
    log = []
    fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
    fd2 = os.open(path, os.O_RDWR)  # a second handle of the same inode

    def step(what):
        log.append(what)

    try:
        # Fixed scenario first, so the classic bug gets a clear message: a shrunk-then-grown
        # range must read as zeros, also inside the block that straddled the short end.
        base = data(rng, 5 * bs + 333)
        os.pwrite(fd, base, 0)
        model_write(model, 0, base)
        step("pwrite 0 +%d" % len(base))
        cut = bs + bs // 2 + 17
        os.ftruncate(fd, cut)
        model_truncate(model, cut)
        step("ftruncate %d" % cut)
        os.truncate(path, 4 * bs + 5)
        model_truncate(model, 4 * bs + 5)
        step("truncate(path) %d" % (4 * bs + 5))
        drop(fd)
        got = os.pread(fd2, 4 * bs, cut)
        expect_bytes("shrunk to %d then grown: range read back" % cut, bytes(len(got)), got)
        tail = data(rng, 100)
        hole_at = 9 * bs + 7
        os.pwrite(fd2, tail, hole_at)
        model_write(model, hole_at, tail)
        step("pwrite(fd2) past EOF %d +100" % hole_at)
        check_fd("fixed scenario", fd, model)

        for i in range(nops):
            r = rng.random()
            size = len(model)
            h = fd if rng.random() < 0.7 else fd2
            if r < 0.55:  # overwrite anywhere (mostly partial blocks, some spanning blocks)
                off = rng.randrange(0, size + 1) if size else 0
                n = rng.choice([1, rng.randrange(1, 512), rng.randrange(1, bs),
                                rng.randrange(bs, 3 * bs)])
                buf = data(rng, n)
                os.pwrite(h, buf, off)
                model_write(model, off, buf)
                step("pwrite %d +%d" % (off, n))
            elif r < 0.70:  # past EOF, leaving a hole
                off = size + rng.randrange(1, 4 * bs)
                buf = data(rng, rng.randrange(1, 2 * bs))
                os.pwrite(h, buf, off)
                model_write(model, off, buf)
                step("pwrite past EOF %d +%d" % (off, len(buf)))
            elif r < 0.85:  # shrink
                n = rng.randrange(0, size + 1) if size else 0
                if rng.random() < 0.5:
                    os.ftruncate(h, n)
                    step("ftruncate %d" % n)
                else:
                    os.truncate(path, n)
                    step("truncate(path) %d" % n)
                model_truncate(model, n)
            else:  # grow
                n = size + rng.randrange(1, 3 * bs)
                os.ftruncate(h, n)
                model_truncate(model, n)
                step("ftruncate grow %d" % n)
            if i % 10 == 9:
                check_fd("after op %d" % i, fd, model)
        check_fd("at the end", fd2, model)
    except Failure as e:
        raise Failure("%s [seed %d; last ops: %s]" % (e, seed, "; ".join(log[-6:])))
    finally:
        os.close(fd2)
        os.close(fd)
    write_model(shadow, model)
    print("ok: %d ops, final size %d" % (len(log), len(model)))


run(main)

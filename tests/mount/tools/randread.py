#!/usr/bin/env python3
"""Reads FILE at N random offsets/lengths (some unaligned, some crossing block
boundaries or EOF) and compares every read with the same range of REF.
Usage: randread.py FILE REF [N [SEED]]; exit 1 with the first mismatch."""
import os
import random
import sys

path, ref = sys.argv[1], sys.argv[2]
n = int(sys.argv[3]) if len(sys.argv) > 3 else 200
rng = random.Random(int(sys.argv[4]) if len(sys.argv) > 4 else 7)
with open(ref, "rb") as f:
    want = f.read()
size = len(want)
st = os.stat(path)
if st.st_size != size:
    sys.exit("randread: %s has size %d, expected %d" % (path, st.st_size, size))
fd = os.open(path, os.O_RDONLY)
for i in range(n):
    kind = rng.random()
    if kind < 0.3:
        length = rng.randint(1, 512)
    elif kind < 0.7:
        length = rng.randint(1, 128 << 10)
    else:
        length = rng.randint(128 << 10, 3 << 20)
    off = rng.randint(0, size) if i % 10 else max(0, size - rng.randint(0, length))
    got = os.pread(fd, length, off)
    exp = want[off:off + length]
    if got != exp:
        bad = next((k for k in range(min(len(got), len(exp))) if got[k] != exp[k]),
                   min(len(got), len(exp)))
        sys.exit("randread: read #%d off=%d len=%d: got %d bytes, expected %d; first "
                 "difference at file offset %d" % (i, off, length, len(got), len(exp), off + bad))
os.close(fd)
print("randread: %d reads ok" % n)

#!/usr/bin/env python3
"""Reads a file through the mount block by block and compares it with the original.

blockcheck.py FILE ORIGINAL BLOCK_SIZE
Prints one summary line "ok N eio N short N wrong N eio_blocks LIST" where each block
is: ok (identical), eio (read fails with EIO), short (fewer bytes than the original,
all of them correct) or wrong (any byte differs: the one result never allowed).
The file is opened once, O_RDONLY; an open that fails prints "open ERRNO_NAME".
Exit status 0 unless a block is wrong."""
import errno
import os
import sys

path, orig_path, bs = sys.argv[1], sys.argv[2], int(sys.argv[3])
with open(orig_path, "rb") as f:
    orig = f.read()
try:
    fd = os.open(path, os.O_RDONLY)
except OSError as e:
    print("open %s" % errno.errorcode.get(e.errno, e.errno))
    sys.exit(0)
res = {"ok": 0, "eio": 0, "short": 0, "wrong": 0}
eio_blocks, wrong_blocks = [], []
nblocks = (max(len(orig), os.fstat(fd).st_size) + bs - 1) // bs
for b in range(nblocks):
    want = orig[b * bs:(b + 1) * bs]
    try:
        got = os.pread(fd, bs, b * bs)
    except OSError as e:
        if e.errno != errno.EIO:
            print("block %d: unexpected error %s" % (b, e.strerror))
            res["wrong"] += 1
            wrong_blocks.append(b)
            continue
        res["eio"] += 1
        eio_blocks.append(b)
        continue
    if got == want:
        res["ok"] += 1
    elif len(got) < len(want) and got == want[:len(got)]:
        res["short"] += 1
    else:
        res["wrong"] += 1
        wrong_blocks.append(b)
os.close(fd)
print("ok %d eio %d short %d wrong %d eio_blocks %s%s" % (
    res["ok"], res["eio"], res["short"], res["wrong"], ",".join(map(str, eio_blocks)) or "-",
    (" wrong_blocks " + ",".join(map(str, wrong_blocks))) if wrong_blocks else ""))
sys.exit(1 if res["wrong"] else 0)

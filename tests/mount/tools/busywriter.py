#!/usr/bin/env python3
"""Writes N files of SIZE bytes into DIR, one after the other (open, write in 256K
chunks, close), and after each close(2) returned 0 appends "name sha256" to RECORD
(fsync'd, outside the mount). Stops quietly, exit 0, when the mount goes away
(open fails). Usage: busywriter.py DIR N SIZE RECORD"""
import hashlib
import os
import random
import sys

d, n, size, record = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4]
rec = os.open(record, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
base = b"".join(b"%08d,busy-writer,row,compressible,payload\n" % i for i in range(size // 40 + 1))
for i in range(n):
    rng = random.Random(i)
    data = bytearray(base[:size])
    for _ in range(64):  # make every file distinct
        data[rng.randrange(size)] = rng.randrange(256)
    name = "f%02d" % i
    try:
        fd = os.open(os.path.join(d, name), os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    except OSError as e:
        print("busywriter: stopped before %s: %s" % (name, e.strerror))
        break
    try:
        for o in range(0, size, 256 << 10):
            os.write(fd, data[o:o + (256 << 10)])
        os.close(fd)
    except OSError as e:
        print("busywriter: %s not recorded: %s" % (name, e.strerror))
        break
    os.write(rec, b"%s %s\n" % (name.encode(), hashlib.sha256(data).hexdigest().encode()))
    os.fsync(rec)
os.close(rec)

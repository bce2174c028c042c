#!/usr/bin/env python3
"""Copies SRC to DST with one write(2) of ONE byte per call (the worst case for a
block writer: every call lands inside the open block). Usage: bytewriter.py SRC DST"""
import os
import sys

src, dst = sys.argv[1], sys.argv[2]
with open(src, "rb") as f:
    data = f.read()
fd = os.open(dst, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
mv = memoryview(data)
for i in range(len(data)):
    if os.write(fd, mv[i:i + 1]) != 1:
        sys.exit("bytewriter: short write at offset %d" % i)
os.fsync(fd)
os.close(fd)

#!/usr/bin/env python3
"""Walks the frames of a cbfs data file in the STORE (docs/FORMAT.md, version 1).

frames.py FILE            one line per frame: index offset block codec flags ulen plen
frames.py --codecs FILE   distinct codec ids of compressed frames (flags 0), e.g. "2"
Exit 1 if the file is not a clean sequence of frames."""
import struct
import sys

SKIP_MAGIC, FRAME_MAGIC = 0x184D2A5C, 0x52464243


def walk(path):
    with open(path, "rb") as f:
        data = f.read()
    off, frames = 0, []
    while off < len(data):
        if off + 64 > len(data):
            sys.exit("frames: %s: truncated header at %d" % (path, off))
        magic, size, fmagic = struct.unpack_from("<III", data, off)
        if magic != SKIP_MAGIC or size != 56 or fmagic != FRAME_MAGIC:
            sys.exit("frames: %s: no cbfs frame at offset %d" % (path, off))
        codec, flags = data[off + 13], data[off + 14]
        block, = struct.unpack_from("<Q", data, off + 16)
        ulen, plen = struct.unpack_from("<II", data, off + 32)
        frames.append((len(frames), off, block, codec, flags, ulen, plen))
        off += 64 + plen
    return frames


def main():
    args = sys.argv[1:]
    codecs = args and args[0] == "--codecs"
    if codecs:
        args = args[1:]
    if len(args) != 1:
        sys.exit(__doc__)
    frames = walk(args[0])
    if codecs:
        print(" ".join(str(c) for c in sorted({fr[3] for fr in frames if fr[4] == 0})))
    else:
        for fr in frames:
            print("%d %d %d %d %d %d %d" % fr)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""What a mount holds after a crash, in a word per name, for the crash-point tests.

crashstate.py [--part TAG] [--mix OLD~NEW]... MNT TAGDIR NAME...
Prints one line: NAME=TAG for each NAME (a path below MNT), TAG the name of the file of
TAGDIR whose bytes it reads (bit-exact), "-" where it does not exist, ERR(text) where
it cannot be read (text: the errno's name, EIO), ?SIZE:SHA where it reads bytes no file of TAGDIR holds; then
extra=PATH for each file of the mount not named. With --part TAG: a NAME that reads as
part of TAG's bytes, never acknowledged (its length at most TAG's, and each 64 KiB of it
TAG's bytes there or zeros, a block not written yet), is NAME=~TAG (NAME=~TAG:0 if empty).
With --mix OLD~NEW (tags; repeatable, the first that fits wins): a NAME that reads as
an existing file OLD rewritten in place towards NEW and cut short by a crash (its length
from OLD's to NEW's, and each 64 KiB of it OLD's bytes there, zeros past OLD's end (a
block of an append not written yet), or NEW's bytes there) is NAME=OLD~NEW.
"""
import errno
import hashlib
import os
import sys

CHUNK = 64 * 1024


def part_of(data, whole):
    if len(data) > len(whole):
        return False
    for o in range(0, len(data), CHUNK):
        got = data[o:o + CHUNK]
        if got != whole[o:o + len(got)] and got.count(0) != len(got):
            return False
    return True


def mix_of(data, old, new):
    if not min(len(old), len(new)) <= len(data) <= max(len(old), len(new)):
        return False
    base = old + bytes(max(0, len(data) - len(old)))
    for o in range(0, len(data), CHUNK):
        got = data[o:o + CHUNK]
        if got != base[o:o + len(got)] and got != new[o:o + len(got)]:
            return False
    return True


def main():
    args = sys.argv[1:]
    part, mixes = None, []
    while args[:1] in (["--part"], ["--mix"]):
        if args[0] == "--part":
            part = args[1]
        else:
            mixes.append(tuple(args[1].split("~", 1)))
        args = args[2:]
    mnt, tagdir, names = args[0], args[1], args[2:]
    known, blobs = {}, {}
    for tag in sorted(os.listdir(tagdir)):
        with open(os.path.join(tagdir, tag), "rb") as f:
            blobs[tag] = f.read()
        known.setdefault(hashlib.sha256(blobs[tag]).hexdigest(), tag)
    out = []
    for n in names:
        try:
            with open(os.path.join(mnt, n), "rb") as f:
                data = f.read()
        except FileNotFoundError:
            out.append(f"{n}=-")
            continue
        except OSError as e:
            out.append(f"{n}=ERR({errno.errorcode.get(e.errno, e.errno)})")
            continue
        h = hashlib.sha256(data).hexdigest()
        if h in known:
            out.append(f"{n}={known[h]}")
        elif part is not None and part_of(data, blobs[part]):
            out.append(f"{n}=~{part}" + ("" if data else ":0"))
        else:
            mix = next((f"{o}~{w}" for o, w in mixes if mix_of(data, blobs[o], blobs[w])), None)
            out.append(f"{n}={mix}" if mix else f"{n}=?{len(data)}:{h[:12]}")
    for root, dirs, files in os.walk(mnt):
        dirs.sort()
        for fn in sorted(files):
            p = os.path.relpath(os.path.join(root, fn), mnt)
            if p not in names:
                out.append(f"extra={p}")
    print(" ".join(out))


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""One line per entry of a directory tree, sorted, for comparing a backup with its source.

treemanifest.py DIR [--no-owner] [--no-sparse]

Per entry (names printed with repr(), so any byte in a name survives): type, mode (with
setuid/setgid/sticky), uid:gid, link count, mtime (not for symlinks: tools differ in
whether they can set it), size and SHA-256 for files, target for symlinks, rdev for
devices, user.* xattrs (name=hex value), and a hard-link group: the first path (sorted)
sharing the inode, so "a and b are one file" is compared, not inode numbers.
A regular file is also marked "sparse" when it occupies less than half its size on disk
(what `tar -S` / `rsync -S` must preserve outside cbfs); --no-sparse leaves that out.
"""
import hashlib
import os
import stat
import sys


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while True:
            b = f.read(1 << 20)
            if not b:
                break
            h.update(b)
    return h.hexdigest()


def user_xattrs(path):
    try:
        names = os.listxattr(path, follow_symlinks=False)
    except OSError:
        return "xattr-error"
    out = []
    for n in sorted(x for x in names if x.startswith("user.")):
        out.append("%s=%s" % (n, os.getxattr(path, n, follow_symlinks=False).hex()))
    return ",".join(out)


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    owner = "--no-owner" not in sys.argv
    sparse = "--no-sparse" not in sys.argv
    root = args[0]
    entries = []
    for dirpath, dirnames, filenames in os.walk(root):
        for n in dirnames + filenames:
            entries.append(os.path.relpath(os.path.join(dirpath, n), root))
    entries.append(".")
    entries.sort()
    first = {}  # (dev, ino) -> first path, for hard-link groups
    lines = []
    for rel in entries:
        p = os.path.join(root, rel)
        st = os.lstat(p)
        f = [repr(rel), stat.filemode(st.st_mode), "%o" % stat.S_IMODE(st.st_mode)]
        if owner:
            f.append("%d:%d" % (st.st_uid, st.st_gid))
        if not stat.S_ISDIR(st.st_mode):
            f.append("nlink=%d" % st.st_nlink)
            key = (st.st_dev, st.st_ino)
            f.append("group=%r" % first.setdefault(key, rel))
        if not stat.S_ISLNK(st.st_mode):
            f.append("mtime=%d" % st.st_mtime)
        if stat.S_ISREG(st.st_mode):
            f.append("size=%d" % st.st_size)
            f.append(sha256(p))
            if sparse and st.st_size >= 1 << 20 and st.st_blocks * 512 * 2 < st.st_size:
                f.append("sparse")
        elif stat.S_ISLNK(st.st_mode):
            f.append("-> %r" % os.readlink(p))
        elif stat.S_ISCHR(st.st_mode) or stat.S_ISBLK(st.st_mode):
            f.append("rdev=%d,%d" % (os.major(st.st_rdev), os.minor(st.st_rdev)))
        if not stat.S_ISLNK(st.st_mode):
            f.append("xattrs[%s]" % user_xattrs(p))
        lines.append(" ".join(f))
    sys.stdout.write("\n".join(lines) + "\n")


if __name__ == "__main__":
    main()

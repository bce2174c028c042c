#!/usr/bin/env python3
"""Crash-test writer and verifier for tests/mount/t_crash.sh.

crashwriter.py write MNT LOG SEED NAME...   write into MNT/NAME (NAME may exist: it is
    extended and overwritten) until an error (the daemon was killed) or a size cap
crashwriter.py verify MNT LOG STATE          after the remount: check every durable byte

The writer interleaves the files: appends and random overwrites of 8 KiB..1 MiB, an
fsync(2) every few writes, sometimes close(2) + reopen. The log (outside the mount,
appended with write(2), so it survives a killed daemon) has one line per event:
  B name size sha256   content of the file when the writer opened it first
  W seq name off len   before a write; its bytes are content(seq, len), see below
  D name off len sha   AFTER fsync()/close() returned 0: this range is durable, sha256
                       of the range as written (the writer's own copy of the file)
  S name               after the D lines of that sync: every earlier W of name is durable
Contract checked by `verify`: every byte written before the last S of its file reads
back exactly (bytes covered by a later, non-durable write may hold the old or the new
value: those are "ambiguous" and skipped), every D range that no later W touched has
its logged sha256, and every file reads fully without error. STATE/<name> receives the
file's contents as read back, so the next cycle's verifier knows the base of a file
that the next writer extends (its B line must match).
Prints "verified BYTES lost BYTES ambiguous BYTES files N"; exit 1 if anything is lost.
"""
import hashlib
import os
import random
import sys

MAX_SIZE = 12 << 20  # per file; past it the writer only overwrites


def content(seq, n):
    """Deterministic bytes of write `seq`: a mix of compressible rows, random bytes
    (incompressible) and zeros (holes), so every frame kind shows up."""
    rng = random.Random(seq)
    kind = rng.random()
    if kind < 0.45:
        row = b"%010d,crash-row,seq,%d,compressible payload text\n" % (seq, rng.randrange(1 << 30))
        return (row * (n // len(row) + 1))[:n]
    if kind < 0.9:
        return rng.randbytes(n)
    return bytes(n)


def wsize(rng):
    return min(1 << 20, int(8192 * 2 ** rng.uniform(0, 7)))  # 8 KiB .. 1 MiB, log-uniform


def sha(b):
    return hashlib.sha256(b).hexdigest()


def write_main(mnt, logpath, seed, names):
    rng = random.Random(seed)
    log = os.open(logpath, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

    def logline(s):
        os.write(log, (s + "\n").encode())

    # every open is relative to the mount's root, held open: after the daemon is killed
    # and the mount detached, paths would resolve in the directory below the mount
    root = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    files = {}
    for name in names:
        path = name
        base = bytearray()
        try:
            fd = os.open(path, os.O_RDONLY, dir_fd=root)
        except FileNotFoundError:
            fd = -1
        if fd >= 0:
            with os.fdopen(fd, "rb", buffering=0) as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    base += b
        logline("B %s %d %s" % (name, len(base), sha(base) if base else "-"))
        files[name] = {"path": path, "model": bytearray(base), "fd": None, "pending": [],
                       "every": rng.randint(1, 6), "since": 0}

    def sync(name, how):
        st = files[name]
        if how == "fsync":
            os.fsync(st["fd"])
        else:
            os.close(st["fd"])
            st["fd"] = None
        for off, n in st["pending"]:
            logline("D %s %d %d %s" % (name, off, n, sha(st["model"][off:off + n])))
        logline("S %s" % name)
        st["pending"], st["since"] = [], 0

    seq = seed * 1000000
    try:
        while True:
            name = rng.choice(names)
            st = files[name]
            if st["fd"] is None:
                st["fd"] = os.open(st["path"], os.O_WRONLY | os.O_CREAT, 0o644, dir_fd=root)
            size = len(st["model"])
            n = wsize(rng)
            if size > 0 and (rng.random() < 0.15 or size >= MAX_SIZE):
                off = rng.randrange(0, size)  # random overwrite (may extend the file)
                if rng.random() < 0.5:
                    off -= off % 4096
            else:
                off = size
            if off + n > MAX_SIZE + (1 << 20):
                n = max(1, MAX_SIZE + (1 << 20) - off)
            seq += 1
            data = content(seq, n)
            logline("W %d %s %d %d" % (seq, name, off, n))
            done = os.pwrite(st["fd"], data, off)
            if done != n:
                raise OSError(0, "short write %d of %d" % (done, n))
            if off > len(st["model"]):
                st["model"].extend(bytes(off - len(st["model"])))
            st["model"][off:off + n] = data
            st["pending"].append((off, n))
            st["since"] += 1
            if st["since"] >= st["every"]:
                sync(name, "close" if rng.random() < 0.15 else "fsync")
                st["every"] = rng.randint(1, 6)
    except OSError as e:
        print("crashwriter: stopped after seq %d: %s" % (seq, e.strerror or e))
    return 0


def verify_main(mnt, logpath, state):
    with open(logpath) as f:
        lines = [ln.split() for ln in f if ln.strip()]
    base, last_s = {}, {}
    for i, ln in enumerate(lines):
        if ln[0] == "B" and ln[1] not in base:
            base[ln[1]] = (int(ln[2]), ln[3])
        elif ln[0] == "S":
            last_s[ln[1]] = i
    verified = lost = ambiguous = 0
    problems = []
    for name, (bsize, bsha) in sorted(base.items()):
        model = bytearray()
        if bsize:
            with open(os.path.join(state, name.replace("/", "%")), "rb") as f:
                model = bytearray(f.read())
            if len(model) != bsize or sha(model) != bsha:
                problems.append("%s: the writer's base differs from the last verified state" % name)
        writes_after = []  # (line index, off, len) of writes after the last S
        writes = []        # every write of the file: (line index, off, len)
        dranges = []       # (line index, off, len, sha)
        s_at = last_s.get(name, -1)
        for i, ln in enumerate(lines):
            if ln[0] == "W" and ln[2] == name:
                off, n = int(ln[3]), int(ln[4])
                writes.append((i, off, n))
                if i < s_at:
                    if off > len(model):
                        model.extend(bytes(off - len(model)))
                    model[off:off + n] = content(int(ln[1]), n)
                else:
                    writes_after.append((i, off, n))
            elif ln[0] == "D" and ln[1] == name:
                dranges.append((i, int(ln[2]), int(ln[3]), ln[4]))
        path = os.path.join(mnt, name)
        actual = bytearray()
        err = None
        try:
            with open(path, "rb", buffering=0) as f:
                while True:
                    b = f.read(1 << 20)
                    if not b:
                        break
                    actual += b
        except FileNotFoundError as e:
            if len(model) or any(ln[0] == "W" and ln[2] == name for ln in lines[:s_at]):
                err = e  # durable data was written: the file must exist
        except OSError as e:
            err = e
        if err is not None:
            problems.append("%s: unreadable at offset %d: %s" % (name, len(actual), err.strerror))
        # durable bytes = the model; mask out what a later, non-durable write may have changed
        amb = bytearray(len(model))
        for _, off, n in writes_after:
            if off < len(model):
                end = min(len(model), off + n)
                amb[off:end] = b"\x01" * (end - off)
        namb = amb.count(1)
        ambiguous += namb
        if len(actual) < len(model):
            problems.append("%s: size %d < durable size %d" % (name, len(actual), len(model)))
        bad = 0
        first_bad = None
        # compare in 64 KiB chunks; only chunks that differ are inspected byte by byte
        for c in range(0, len(model), 65536):
            want, got, a = model[c:c + 65536], actual[c:c + 65536], amb[c:c + 65536]
            if want == got:
                continue
            for j in range(len(want)):
                if a[j] == 0 and (j >= len(got) or got[j] != want[j]):
                    bad += 1
                    if first_bad is None:
                        first_bad = c + j
        if bad:
            problems.append("%s: %d durable byte(s) wrong or missing, first at offset %d" %
                            (name, bad, first_bad))
        lost += bad
        verified += len(model) - namb - bad
        # the writer's own durability claims, for ranges no later write touched
        for i, off, n, dsha in dranges:
            if any(j > i and o < off + n and off < o + m for j, o, m in writes):
                continue  # rewritten later: the model check above covers it
            if sha(actual[off:off + n]) != dsha:
                problems.append("%s: durable range %d+%d: sha differs" % (name, off, n))
        with open(os.path.join(state, name.replace("/", "%")), "wb") as f:
            f.write(actual)
    for p in problems[:20]:
        print("crashwriter verify: " + p)
    print("verified %d lost %d ambiguous %d files %d" % (verified, lost, ambiguous, len(base)))
    return 1 if problems else 0


def main():
    a = sys.argv[1:]
    if len(a) >= 5 and a[0] == "write":
        return write_main(a[1], a[2], int(a[3]), a[4:])
    if len(a) == 4 and a[0] == "verify":
        return verify_main(a[1], a[2], a[3])
    sys.exit(__doc__)


if __name__ == "__main__":
    sys.exit(main())

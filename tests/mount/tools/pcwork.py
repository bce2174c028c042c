#!/usr/bin/env python3
"""Power-cut workload and checker for cbfs (run by t_powercut.sh).

  pcwork.py write MNT DIR LOG SEED NOPS [EMU_PID]
      Runs NOPS seeded random operations in MNT/DIR (backup-tool patterns: 1 MiB and
      8 KiB sequential writes, block rewrites in the middle, a file rewritten from the
      start, O_TRUNC, ftruncate, a tmp file renamed over another, unlink, fsync,
      fdatasync, close, directory fsync) and then keeps writing without syncing until an
      error stops it (the power cut). Every operation is logged to LOG (a file outside the
      emulated disk) BEFORE it is issued ("O ...") and after it returned ("D n" or
      "E n errno"). With EMU_PID the writer arms the emulator's cut itself at chosen
      moments (SIGRTMIN+k: cut at the k-th FSYNC from now; SIGRTMIN+10+k: at the k-th WRITE).
  pcwork.py check MNT DIR LOG
      Replays LOG into a model and checks MNT/DIR after the power cut: every name holds
      one of the files it may hold; a file's every 4 KiB page holds its content at the
      file's last acknowledged point (fsync/fdatasync/close returned 0) or a version
      written after it (never other bytes); EIO is allowed only for a page with data never
      acknowledged; the size lies between the smallest and largest size since the ack.
      Prints one line "checked N files B bytes, eio E pages, unacked-pages U" and exits 0,
      or prints the problems and exits 1.
  PC_PROFILE (both modes): "rewrite" (block rewrites of an acknowledged file under another
      file's journal commits); "holeappend" (ftruncate up to odd or page-aligned sizes, then
      1 MiB / 8 KiB appends at the size, some through O_APPEND; up again mid-stream, down
      into a stored block, writes into the hole after all, preallocated files written from
      0: the write that starts at size_set, docs/ENGINE.md, Write path, step 5);
      "holepar" (holeappend with some 1 MiB appends made by 2-4 threads at once, each its
      own page-aligned range: the reorder window's spare slots).
  PC_PLAIN=1 (check): the files are plain (codec=none), the store file system's own: a
      page with writes since the ack may be torn between them as the disk's sectors
      landed, so each 512-byte sector of it must hold that sector of an allowed version,
      or zeros (a block the file system had allocated but not yet written); acknowledged
      pages are checked whole, as for compressed files.
"""
import errno
import hashlib
import os
import random
import signal
import sys

PAGE = 4096
SECTOR = 512
ZERO = bytes(PAGE)


def gen(seed, n):
    """n bytes of test data from seed: random, compressible and all-zero pages mixed."""
    r = random.Random(seed)
    out = bytearray()
    while len(out) < n:
        k = r.random()
        if k < 0.1:
            out += ZERO
        elif k < 0.55:
            out += r.randbytes(PAGE)
        else:
            word = r.randbytes(r.randint(3, 40))
            out += (word * (PAGE // len(word) + 1))[:PAGE]
    return bytes(out[:n])


# ---------------------------------------------------------------- the operations

class Ops:
    """Generates the operation list from a seed (the same list for write and check)."""

    def __init__(self, seed, nops, names):
        self.r = random.Random(seed)
        self.nops = nops
        self.names = names

    def plan(self):
        r = self.r
        ops = []
        if os.environ.get("PC_PROFILE") == "holeappend":
            return self.plan_holeappend()
        if os.environ.get("PC_PROFILE") == "holepar":
            # holeappend with some appends as parallel writers (threads) of one file
            return [o if o[0] != "app" or o[3] != 1 << 20 or o[5] or (o[4] & 3)
                    else ("par", o[1], 2 + (o[4] >> 2) % 3, o[2], o[4]) for o in self.plan_holeappend()]
        if os.environ.get("PC_PROFILE") == "rewrite":
            # an acknowledged file whose blocks are rewritten (never synced) while another
            # file's fdatasyncs commit the journal under the rewrites' writeback
            ops.append(("seq", "f0", 16, 1 << 20, r.getrandbits(32)))
            ops.append(("fsync", "f0"))
            ops.append(("fsyncdir",))
            for _ in range(self.nops * 20):
                if r.random() < 0.7:
                    ops.append(("pwrite", "f0", r.random(), r.choice([4096, 65536, 262144, 300000]), r.getrandbits(32)))
                else:
                    ops.append(("seq", "f1", r.randint(1, 8), 8192, r.getrandbits(32)))
                    ops.append(("fdatasync", "f1"))
            return ops
        # first: create every file with some content (sequential 1 MiB / 8 KiB writes)
        for nm in self.names:
            if r.random() < 0.5:
                ops.append(("seq", nm, r.randint(1, 6), 1 << 20, r.getrandbits(32)))
            else:
                ops.append(("seq", nm, r.randint(16, 300), 8192, r.getrandbits(32)))
            ops.append((r.choice(["fsync", "close", "fdatasync"]), nm))
        ops.append(("fsyncdir",))
        tmpn = 0
        for _ in range(self.nops):
            nm = r.choice(self.names)
            k = r.random()
            if k < 0.22:
                if r.random() < 0.5:
                    ops.append(("seq", nm, r.randint(1, 4), 1 << 20, r.getrandbits(32)))
                else:
                    ops.append(("seq", nm, r.randint(8, 200), 8192, r.getrandbits(32)))
            elif k < 0.42:
                # rewrite of a block (or a few) in the middle: offsets as fraction of size
                ops.append(("pwrite", nm, r.random(), r.choice([512, 4096, 8192, 65536, 200000]),
                            r.getrandbits(32)))
            elif k < 0.48:
                ops.append(("rewrite", nm, r.randint(1, 3), r.getrandbits(32)))
            elif k < 0.52:
                ops.append(("otrunc", nm, r.randint(0, 2), r.getrandbits(32)))
            elif k < 0.58:
                ops.append(("truncate", nm, r.random() * 1.3))
            elif k < 0.64:
                tmp = "tmp%d" % tmpn
                tmpn += 1
                ops.append(("seq", tmp, r.randint(1, 3), 1 << 20, r.getrandbits(32)))
                if r.random() < 0.7:
                    ops.append(("fsync", tmp))
                ops.append(("close", tmp))
                ops.append(("rename", tmp, nm))
                if r.random() < 0.6:
                    ops.append(("fsyncdir",))
            elif k < 0.66:
                ops.append(("unlink", nm))
                if r.random() < 0.5:
                    ops.append(("fsyncdir",))
            elif k < 0.76:
                ops.append(("fsync", nm))
            elif k < 0.82:
                ops.append(("fdatasync", nm))
            elif k < 0.92:
                ops.append(("close", nm))
            elif k < 0.95:
                ops.append(("fsyncdir",))
            else:
                # arm the emulator (cut at the k-th FSYNC or WRITE from now) right before an
                # interesting moment: a close's fdatasync pair, an fsync, a rename over a
                # file (sidecar moved aside), a new file's first flush, an unlink
                what = r.choice(["close", "fsync", "rename", "first", "unlink"])
                ops.append(("arm", r.choice(["fsync", "fsync", "write"]), r.randint(1, 4)))
                if what in ("close", "fsync"):
                    ops.append((what, nm))
                elif what == "unlink":
                    ops.append(("unlink", nm))
                else:
                    tmp = "tmp%d" % tmpn
                    tmpn += 1
                    ops.append(("seq", tmp, r.randint(1, 3), 1 << 20, r.getrandbits(32)))
                    ops.append(("fsync", tmp))
                    if what == "rename":
                        ops.append(("close", tmp))
                        ops.append(("rename", tmp, nm))
                        ops.append(("fsyncdir",))
        # then keep writing with no sync until the cut stops us
        for i in range(400):
            nm = r.choice(self.names)
            if r.random() < 0.6:
                ops.append(("seq", nm, 1, r.choice([1 << 20, 8192]), r.getrandbits(32)))
            else:
                ops.append(("pwrite", nm, r.random(), r.choice([4096, 65536]), r.getrandbits(32)))
        return ops


    def hole_delta(self):
        """how far a truncate extends a file: odd sizes (block sizes vary per cycle, 64 KiB
        to 1 MiB), some page-aligned (the writeback cache's requests start on a page, so an
        append reaches the daemon at the size itself only there, else at the size's page),
        some small (inside the same block)"""
        r = self.r
        k = r.random()
        if k < 0.3:
            return ("trunc", r.randint(1, 3 << 20) | 1)
        if k < 0.8:
            return ("trunca", 4096 * r.randint(1, 700))
        return (r.choice(["trunc", "trunca"]), r.randint(1, 20000))

    def trunc(self, nm):
        kind, delta = self.hole_delta()
        return (kind, nm, delta)

    def plan_holeappend(self):
        """ftruncate up to an odd size, then sequential appends at the size (1 MiB and
        8 KiB, some through O_APPEND): the write that starts exactly at size_set takes its
        block's bytes below as written zeros (docs/ENGINE.md, Write path, step 5); files
        truncated up again mid-stream or down into a stored block; files preallocated
        (posix_fallocate or ftruncate) and written from 0 in order; writes that come into a
        hole after all; syncs at random points, the cut armed before a close or fsync."""
        r = self.r
        ops = []
        names = list(self.names)
        for nm in names:
            if r.random() < 0.5:
                ops.append(("seq", nm, r.randint(1, 3), 1 << 20, r.getrandbits(32)))
                if r.random() < 0.5:
                    ops.append(("truncate", nm, 0.3 + 0.69 * r.random()))
                if r.random() < 0.6:
                    ops.append((r.choice(["fsync", "fdatasync"]), nm))
            ops.append(self.trunc(nm))
            if r.random() < 0.5:
                ops.append((r.choice(["fsync", "close", "fdatasync"]), nm))
        ops.append(("fsyncdir",))
        npre = 0

        def app(nm):
            big = r.random() < 0.5
            return ("app", nm, r.randint(1, 4) if big else r.randint(4, 160), (1 << 20) if big else 8192,
                    r.getrandbits(32), r.random() < 0.3)

        for _ in range(self.nops * 4):
            nm = r.choice(names)
            k = r.random()
            if k < 0.34:
                ops.append(app(nm))
            elif k < 0.44:
                # up again, mid-stream or after a sync (with the writeback cache, an
                # append's dirty pages from before the truncate reach the daemon after it:
                # they start below the size, so no hole is taken), then on at the new size
                if r.random() < 0.7:
                    ops.append((r.choice(["fsync", "fdatasync"]), nm))
                ops.append(self.trunc(nm))
                if r.random() < 0.7:
                    ops.append(app(nm))
            elif k < 0.48:
                # down into a stored block, to an odd size, then an append there
                ops.append(("trunc", nm, -r.randint(1, 1 << 20)))
                if r.random() < 0.7:
                    ops.append(app(nm))
            elif k < 0.52:
                ops.append(("holefill", nm, r.random(), r.choice([1, 512, 4096, 8192, 70000]), r.getrandbits(32)))
            elif k < 0.58:
                # a preallocated file written from 0 in order (past its end too, sometimes)
                pn = "p%d" % npre
                npre += 1
                names.append(pn)
                size = r.choice([r.randint(1, 6 << 20), 4096 * r.randint(1, 1500), (1 << 20) * r.randint(1, 5)])
                ops.append(("prealloc", pn, size, r.choice(["fallocate", "ftruncate"])))
                if r.random() < 0.5:
                    ops.append((r.choice(["fsync", "fdatasync", "close"]), pn))
                chunk = r.choice([1 << 20, 8192])
                total = size + r.choice([0, 0, -(size // 3), r.randint(1, 1 << 20)])
                nch = max(1, -(-total // chunk))
                while nch > 0:
                    m = min(nch, r.randint(1, 4) if chunk > 8192 else r.randint(8, 160))
                    ops.append(("wseq", pn, m, chunk, r.getrandbits(32)))
                    nch -= m
                    if r.random() < 0.3:
                        ops.append((r.choice(["fsync", "fdatasync", "close"]), pn))
            elif k < 0.66:
                ops.append(("fsync", nm))
            elif k < 0.74:
                ops.append(("fdatasync", nm))
            elif k < 0.84:
                ops.append(("close", nm))
            elif k < 0.87:
                ops.append(("fsyncdir",))
            else:
                ops.append(app(nm))
                ops.append(("arm", r.choice(["fsync", "fsync", "write"]), r.randint(1, 4)))
                ops.append((r.choice(["close", "fsync", "fdatasync"]), nm))
        for i in range(400):
            nm = r.choice(names)
            k = r.random()
            if k < 0.75:
                ops.append(("app", nm, 1, r.choice([1 << 20, 8192]), r.getrandbits(32), r.random() < 0.3))
            elif k < 0.9:
                ops.append(self.trunc(nm))
            else:
                ops.append(("holefill", nm, r.random(), r.choice([4096, 65536]), r.getrandbits(32)))
        return ops


# ---------------------------------------------------------------- model

class Inode:
    def __init__(self, ino):
        self.ino = ino
        self.data = bytearray()
        self.cur = 0  # wseq: where the next in-order write from 0 goes
        self.hole = None  # the last extending truncate's hole: (from, to)
        self.reset_ack()

    def reset_ack(self):
        """The current content is acknowledged."""
        self.vers = {}  # page -> {hash: bytes} of versions since the ack (absent: only current)
        self.sizes = {len(self.data)}
        self.acked = True
        self.ack_size = len(self.data)

    def page(self, p):
        b = bytes(self.data[p * PAGE:(p + 1) * PAGE])
        return b + bytes(PAGE - len(b))

    def touch(self, first, last):
        """pages first..last are about to change: remember their current version."""
        for p in range(first, last + 1):
            if p not in self.vers:
                b = self.page(p)
                self.vers[p] = {hashlib.blake2b(b, digest_size=16).digest(): b}

    def record(self, first, last):
        for p in range(first, last + 1):
            b = self.page(p)
            self.vers[p][hashlib.blake2b(b, digest_size=16).digest()] = b
        self.sizes.add(len(self.data))
        self.acked = False

    def write(self, off, buf):
        if not buf:
            return
        end = off + len(buf)
        first = min(off, len(self.data)) // PAGE
        last = (end - 1) // PAGE
        self.touch(first, last)
        if end > len(self.data):
            self.data.extend(bytes(end - len(self.data)))
        self.data[off:end] = buf
        self.record(first, last)

    def truncate(self, n):
        old = len(self.data)
        lo, hi = min(old, n), max(old, n)
        if hi > 0:
            self.touch(lo // PAGE, (hi - 1) // PAGE)
        if n < old:
            del self.data[n:]
        else:
            self.data.extend(bytes(n - old))
        if hi > 0:
            self.record(lo // PAGE, (hi - 1) // PAGE)
        else:
            self.sizes.add(n)


class Model:
    def __init__(self):
        self.inos = {}
        self.names = {}  # name -> Inode or None
        self.hist = {}  # name -> set of ino numbers (0 = absent) since the last dir ack
        self.nino = 0

    def ino_of(self, nm, create=True):
        i = self.names.get(nm)
        if i is None and create:
            self.nino += 1
            i = Inode(self.nino)
            self.inos[i.ino] = i
            self.set_name(nm, i)
        return i

    def set_name(self, nm, i):
        self.hist.setdefault(nm, {0} if nm not in self.names else {self.names[nm].ino if self.names[nm] else 0})
        self.names[nm] = i
        self.hist[nm].add(i.ino if i else 0)

    def dir_ack(self):
        self.hist = {nm: {i.ino if i else 0} for nm, i in self.names.items()}


def size_of(model, nm):
    i = model.names.get(nm)
    return len(i.data) if i else 0


def apply(model, op, fds=None, acked=None):
    """Applies op to the model (before it is issued); for write mode also performs it."""
    kind = op[0]
    if kind == "seq":
        _, nm, n, chunk, seed = op
        i = model.ino_of(nm)
        data = gen(seed, n * chunk)
        for j in range(n):
            off = len(i.data)
            piece = data[j * chunk:(j + 1) * chunk]
            i.write(off, piece)
            if fds is not None:
                fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
                os.pwrite(fd, piece, off)
    elif kind == "pwrite":
        _, nm, frac, n, seed = op
        i = model.ino_of(nm)
        off = int(len(i.data) * frac)
        data = gen(seed, n)
        i.write(off, data)
        if fds is not None:
            fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
            os.pwrite(fd, data, off)
    elif kind == "rewrite":
        _, nm, n, seed = op
        i = model.ino_of(nm)
        data = gen(seed, n << 20)
        for j in range(n):
            piece = data[j << 20:(j + 1) << 20]
            i.write(j << 20, piece)
            if fds is not None:
                fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
                os.pwrite(fd, piece, j << 20)
    elif kind == "otrunc":
        _, nm, n, seed = op
        i = model.ino_of(nm)
        if fds is not None and i.ino in fds:
            os.close(fds.pop(i.ino))  # not an ack in the model (close acks only via "close")
        i.truncate(0)
        if fds is not None:
            fds[i.ino] = os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        data = gen(seed, n << 20)
        for j in range(n):
            piece = data[j << 20:(j + 1) << 20]
            i.write(j << 20, piece)
            if fds is not None:
                os.pwrite(fds[i.ino], piece, j << 20)
    elif kind == "truncate":
        _, nm, frac = op
        i = model.ino_of(nm)
        n = int(len(i.data) * frac)
        i.truncate(n)
        if fds is not None:
            fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
            os.ftruncate(fd, n)
    elif kind == "app":
        # appends at the size, through the file's fd (pwrite) or an O_APPEND one
        _, nm, n, chunk, seed, oappend = op
        i = model.ino_of(nm)
        data = gen(seed, n * chunk)
        for j in range(n):
            off = len(i.data)
            piece = data[j * chunk:(j + 1) * chunk]
            i.write(off, piece)
            if fds is not None:
                if oappend:
                    fd = fds.get(("A", i.ino)) or fds.setdefault(("A", i.ino), os.open(
                        fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644))
                    mv = memoryview(piece)
                    while mv:
                        mv = mv[os.write(fd, mv):]
                else:
                    fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
                    os.pwrite(fd, piece, off)
    elif kind in ("trunc", "trunca"):
        # ftruncate by a delta (up: a hole the next append starts after); trunca: up to a
        # page (not a 64 KiB) multiple, where the writeback cache's requests start
        _, nm, delta = op
        i = model.ino_of(nm)
        old = len(i.data)
        n = max(0, old + delta)
        if kind == "trunca":
            n = -(-n // PAGE) * PAGE
            if n % 65536 == 0:
                n += PAGE
        i.truncate(n)
        if n > old:
            i.hole = (old, n)
        elif i.hole:
            i.hole = (min(i.hole[0], n), min(i.hole[1], n)) if i.hole[0] < n else None
        if fds is not None:
            fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
            os.ftruncate(fd, n)
    elif kind == "par":
        # nt threads append at once: thread t writes its page-aligned range in order
        # (1 MiB pieces) from where the one before ends; the model takes them in thread
        # order (the ranges share no page, so every page's versions are its thread's)
        _, nm, nt, n, seed = op
        i = model.ino_of(nm)
        base = len(i.data)
        ends = [base] + [-(-base // PAGE) * PAGE + t * (n << 20) for t in range(1, nt + 1)]
        work = []
        for t in range(nt):
            data = gen(seed + t, ends[t + 1] - ends[t])
            pieces = [(ends[t] + o, data[o:o + (1 << 20)]) for o in range(0, len(data), 1 << 20)]
            for off, piece in pieces:
                i.write(off, piece)
            work.append(pieces)
        if fds is not None:
            import threading
            fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
            errs = []

            def run(pieces):
                try:
                    for off, piece in pieces:
                        os.pwrite(fd, piece, off)
                except OSError as e:
                    errs.append(e)
            ths = [threading.Thread(target=run, args=(w,)) for w in work]
            for th in ths:
                th.start()
            for th in ths:
                th.join()
            if errs:
                raise errs[0]
    elif kind == "holefill":
        # a write that comes into the last truncate's hole after all
        _, nm, frac, n, seed = op
        i = model.ino_of(nm)
        if not i.hole or i.hole[1] <= i.hole[0]:
            return None
        lo, hi = i.hole
        off = lo + int((hi - lo) * frac)
        n = max(1, min(n, hi - off))
        data = gen(seed, n)
        i.write(off, data)
        if fds is not None:
            fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
            os.pwrite(fd, data, off)
    elif kind == "prealloc":
        _, nm, size, how = op
        i = model.ino_of(nm)
        if size > len(i.data) or how == "ftruncate":
            i.truncate(size)
        if fds is not None:
            fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
            if how == "fallocate":
                os.posix_fallocate(fd, 0, size)
            else:
                os.ftruncate(fd, size)
    elif kind == "wseq":
        # in order from 0 (a preallocated file), on from where the last wseq stopped
        _, nm, n, chunk, seed = op
        i = model.ino_of(nm)
        data = gen(seed, n * chunk)
        for j in range(n):
            off = i.cur
            piece = data[j * chunk:(j + 1) * chunk]
            i.write(off, piece)
            i.cur = off + len(piece)
            if fds is not None:
                fd = fds.get(i.ino) or fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY | os.O_CREAT, 0o644))
                os.pwrite(fd, piece, off)
    elif kind in ("fsync", "fdatasync", "close"):
        nm = op[1]
        i = model.names.get(nm)
        if i is None:
            return None
        if fds is not None:
            if kind == "close" and ("A", i.ino) in fds:
                os.close(fds.pop(("A", i.ino)))
                if i.ino not in fds:
                    return ("ack", i)
            fd = fds.get(i.ino)
            if fd is None:
                if kind == "close":
                    return None
                fd = fds.setdefault(i.ino, os.open(fds["dir"] + "/" + nm, os.O_WRONLY))
            if kind == "fsync":
                os.fsync(fd)
            elif kind == "fdatasync":
                os.fdatasync(fd)
            else:
                del fds[i.ino]
                os.close(fd)
        return ("ack", i)
    elif kind == "fsyncdir":
        if fds is not None:
            fd = os.open(fds["dir"], os.O_RDONLY | os.O_DIRECTORY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        return ("dirack",)
    elif kind == "rename":
        _, src, dst = op
        i = model.names.get(src)
        if i is None:
            return None
        if fds is not None:
            os.rename(fds["dir"] + "/" + src, fds["dir"] + "/" + dst)
        model.set_name(dst, i)
        model.set_name(src, None)
    elif kind == "unlink":
        nm = op[1]
        i = model.names.get(nm)
        if i is None:
            return None
        if fds is not None:
            if i.ino in fds:
                os.close(fds.pop(i.ino))
            os.unlink(fds["dir"] + "/" + nm)
        model.set_name(nm, None)
    elif kind == "arm":
        if fds is not None and fds.get("emu"):
            os.kill(fds["emu"], signal.SIGRTMIN + (0 if op[1] == "fsync" else 10) + op[2])
    return None


def names_for(seed):
    return ["f%d" % k for k in range(4)]


def cmd_write(mnt, d, log, seed, nops, emu=0, arm=0):
    seed = int(seed)
    ops = Ops(seed, int(nops), names_for(seed)).plan()
    path = os.path.join(mnt, d)
    os.makedirs(path, exist_ok=True)
    lf = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
    os.write(lf, ("P %d %s\n" % (seed, nops)).encode())
    model = Model()
    fds = {"dir": path, "emu": int(emu) if int(arm) else 0}
    if int(emu):
        os.kill(int(emu), signal.SIGRTMIN)  # the emulator's relative cut counts start now
    for n, op in enumerate(ops):
        os.write(lf, ("O %d %r\n" % (n, op)).encode())
        try:
            apply(model, op, fds)
        except OSError as e:
            os.write(lf, ("E %d %d\n" % (n, e.errno)).encode())
            print("stopped after op %d of %d: %s %s" % (n, len(ops), op[0], e))
            return 0
        os.write(lf, ("D %d\n" % n).encode())
    print("completed all %d ops" % len(ops))
    return 0


def cmd_check(mnt, d, log):
    plain = os.environ.get("PC_PLAIN") == "1"
    torn_pages = 0
    lines = open(log).read().splitlines()
    seed, nops = lines[0].split()[1:3]
    ops = Ops(int(seed), int(nops), names_for(int(seed))).plan()
    model = Model()
    issued = set()
    done = set()
    for ln in lines[1:]:
        t, n = ln.split()[:2]
        if t == "O":
            issued.add(int(n))
        elif t == "D":
            done.add(int(n))
    nacks = 0
    for n in sorted(issued):
        res = apply(model, ops[n])
        if n in done and res:
            nacks += 1
            if res[0] == "ack":
                res[1].reset_ack()
            elif res[0] == "dirack":
                model.dir_ack()
    path = os.path.join(mnt, d)
    probs = []
    nbytes = 0
    eio_pages = 0
    unacked_pages = 0
    eio_acked = []
    if not os.path.isdir(path):
        # never fsync'd: the mkdir may be lost (with ext4, any fsync after it commits it)
        if nacks == 0:
            print("checked 0 names 0 bytes, acks 0, eio-pages 0 (over acked data 0), unacked-pages 0 (directory never made durable)")
            return 0
        print("PROBLEM %s: directory missing after %d acknowledged syncs" % (d, nacks))
        return 1
    present = set(os.listdir(path))
    allnames = set(model.hist) | set(model.names)
    for nm in sorted(present - allnames):
        probs.append("%s: unexpected name" % nm)
    for nm in sorted(allnames):
        cands = model.hist.get(nm, {model.names[nm].ino if model.names.get(nm) else 0})
        if nm not in present:
            if 0 not in cands:
                probs.append("%s: missing, but the name was acknowledged (may hold inodes %s)" % (nm, sorted(cands)))
            continue
        try:
            fd = os.open(os.path.join(path, nm), os.O_RDONLY)
        except OSError as e:
            probs.append("%s: open: %s" % (nm, e))
            continue
        size = os.fstat(fd).st_size
        pages = {}
        p = 0
        while p * PAGE < size:
            try:
                b = os.pread(fd, 64 * PAGE, p * PAGE)
                for k in range(0, len(b), PAGE):
                    pages[p + k // PAGE] = b[k:k + PAGE]
                if len(b) < 64 * PAGE and (p * PAGE + len(b)) < size:
                    pages[p + len(b) // PAGE] = ("short", len(b))
                p += 64
            except OSError as e:
                for q in range(p, min(p + 64, (size + PAGE - 1) // PAGE)):
                    try:
                        pages[q] = os.pread(fd, PAGE, q * PAGE)
                    except OSError as e2:
                        pages[q] = ("err", e2.errno)
                p += 64
        os.close(fd)
        nbytes += size
        verdicts = []
        for ino in sorted(c for c in cands if c):
            i = model.inos[ino]
            bad = []
            lo, hi = min(i.sizes), max(i.sizes)
            if not lo <= size <= hi:
                bad.append("size %d outside [%d, %d] (acked %d)" % (size, lo, hi, i.ack_size))
            eio = 0
            unack = 0
            torn = 0
            for q in sorted(pages):
                got = pages[q]
                vers = i.vers.get(q)
                if vers is None:
                    cur = i.page(q)
                    vers = {hashlib.blake2b(cur, digest_size=16).digest(): cur}
                else:
                    unack += 1
                if isinstance(got, tuple):
                    if got[0] == "err" and got[1] == errno.EIO and i.vers.get(q) is not None:
                        # allowed (the brief): this page had unacknowledged writes; but say
                        # whether it held acknowledged data before them (docs/ENGINE.md known
                        # limit: a record durable before its frame)
                        eio += 1
                        if q * PAGE < i.ack_size:
                            eio_acked.append("%s page %d (offset %d, acked size %d)" % (nm, q, q * PAGE, i.ack_size))
                        continue
                    bad.append("page %d (offset %d): %s %s%s" % (q, q * PAGE, got[0], errno.errorcode.get(got[1], got[1]) if got[0] == "err" else got[1],
                               "" if i.vers.get(q) is not None else " (acknowledged data, no write since)"))
                    continue
                L = len(got)
                ok = False
                if L == PAGE:
                    ok = hashlib.blake2b(got, digest_size=16).digest() in vers
                else:
                    ok = any(v[:L] == got for v in vers.values())
                if not ok and plain and i.vers.get(q) is not None:
                    ok = all(got[x:x + SECTOR] == bytes(len(got[x:x + SECTOR])) or
                             any(v[x:x + SECTOR] == got[x:x + SECTOR] for v in vers.values())
                             for x in range(0, L, SECTOR))
                    torn += ok
                if not ok:
                    # which bytes differ from the newest version, for the report
                    cur = i.page(q)[:L]
                    diff = [x for x in range(L) if got[x] != cur[x]]
                    bad.append("page %d (offset %d): wrong bytes (%d of %d differ from newest, first at +%d; %s; %d versions allowed; got %s)" % (
                        q, q * PAGE, len(diff), L, diff[0] if diff else -1,
                        "unacked writes since ack" if i.vers.get(q) is not None else "ACKNOWLEDGED, not written since",
                        len(vers), "zeros" if got == bytes(L) else got[:16].hex()))
            verdicts.append((ino, bad, eio, unack, torn))
            if not bad:
                break
        good = [v for v in verdicts if not v[1]]
        if good:
            eio_pages += good[0][2]
            unacked_pages += good[0][3]
            torn_pages += good[0][4]
        else:
            if not verdicts:
                probs.append("%s: present (size %d) but may only be absent" % (nm, size))
            for ino, bad, _, _, _ in verdicts:
                probs.append("%s as inode %d (acked %s, size now %d): %s%s" % (
                    nm, ino, model.inos[ino].acked, size, "; ".join(bad[:4]), " (+%d more)" % (len(bad) - 4) if len(bad) > 4 else ""))
    if probs:
        for p in probs:
            print("PROBLEM " + p)
        print("checked %d names, %d bytes, %d acks; %d problems" % (len(allnames), nbytes, nacks, len(probs)))
        return 1
    for e in eio_acked[:5]:
        print("EIO-OVER-ACKED " + e)
    print("checked %d names %d bytes, acks %d, eio-pages %d (over acked data %d), unacked-pages %d%s" % (
        len(allnames), nbytes, nacks, eio_pages, len(eio_acked), unacked_pages,
        ", torn-pages %d (plain)" % torn_pages if plain else ""))
    return 0


if __name__ == "__main__":
    if sys.argv[1] == "write":
        sys.exit(cmd_write(*sys.argv[2:]))
    elif sys.argv[1] == "check":
        sys.exit(cmd_check(*sys.argv[2:]))
    sys.exit(2)

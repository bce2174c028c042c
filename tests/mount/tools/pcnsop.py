#!/usr/bin/env python3
"""One namespace operation of t_powercut_rename.sh, and what it was told.

pcnsop.py OP MNT TAGDIR MARK EMU_PID EMU_LOG
Sends the emulator (tools/volatile.c) SIGRTMIN (its --relative cut counts start now),
runs OP in MNT, then creates MARK.done (the call returned 0), fsyncs the directories OP
changed, and creates MARK.acked (every fsync returned 0: the operation is acknowledged),
or MARK.late where the emulator's log EMU_LOG already shows its cut by then: an fsync that
returned 0 from a dead disk (Linux 6.18's ext4 answers a directory's fsync with 0 once
another task's journal commit failed: jbd2_journal_force_commit finds nothing to commit),
no acknowledgement of cbfs's. MARK is outside the emulated disk. Exits 0, or 1 at the
first failed call (a power cut).
OP: over (rename a.bkp over c.bkp), over_there (a.bkp over d/e.bkp), over_fsync (over,
then an fsync of c.bkp, no directory's: never acknowledged; exchange_fsync, link_fsync
likewise, of c.bkp and l.bkp), exchange
(renameat2 RENAME_EXCHANGE of a.bkp and c.bkp), unlink (a.bkp), link (a.bkp to l.bkp),
link_there (a.bkp to d/l.bkp), create (n.bin: created, TAGDIR/A written in 1 MiB
writes, fsync'd, then its directory fsync'd).
"""
import ctypes
import os
import signal
import sys

RENAME_EXCHANGE = 2


def renameat2(a, b, flags):
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.renameat2(-100, a.encode(), -100, b.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"renameat2 {a} {b}: {os.strerror(e)}")


def fsync_dir(d):
    fd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def fsync_file(path):
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def create(mnt, tagdir):
    fd = os.open(os.path.join(mnt, "n.bin"), os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
    try:
        with open(os.path.join(tagdir, "A"), "rb") as f:
            data = f.read()
        for o in range(0, len(data), 1 << 20):
            os.write(fd, data[o:o + (1 << 20)])
        os.fsync(fd)
    finally:
        os.close(fd)


def main():
    op, mnt, tagdir, mark, emu, elog = sys.argv[1:7]
    p = lambda n: os.path.join(mnt, n)
    ops = {
        "over": (lambda: os.rename(p("a.bkp"), p("c.bkp")), [mnt]),
        "over_there": (lambda: os.rename(p("a.bkp"), p("d/e.bkp")), [mnt, p("d")]),
        # the file fsync'd at its new name, no directory: never acknowledged
        "over_fsync": (lambda: (os.rename(p("a.bkp"), p("c.bkp")), fsync_file(p("c.bkp"))), None),
        "exchange": (lambda: renameat2(p("a.bkp"), p("c.bkp"), RENAME_EXCHANGE), [mnt]),
        "exchange_fsync": (lambda: (renameat2(p("a.bkp"), p("c.bkp"), RENAME_EXCHANGE),
                                    fsync_file(p("c.bkp"))), None),
        "unlink": (lambda: os.unlink(p("a.bkp")), [mnt]),
        "link": (lambda: os.link(p("a.bkp"), p("l.bkp")), [mnt]),
        "link_fsync": (lambda: (os.link(p("a.bkp"), p("l.bkp")), fsync_file(p("l.bkp"))), None),
        "link_there": (lambda: os.link(p("a.bkp"), p("d/l.bkp")), [p("d")]),
        "create": (lambda: create(mnt, tagdir), [mnt]),
    }
    run, dirs = ops[op]
    os.kill(int(emu), signal.SIGRTMIN)
    try:
        run()
        open(mark + ".done", "w").close()
        if dirs is None:
            return 0
        for d in dirs:
            fsync_dir(d)
        with open(elog, "rb") as f:
            late = b"CUT" in f.read()
        open(mark + (".late" if late else ".acked"), "w").close()
    except OSError as e:
        print(f"pcnsop {op}: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""Many processes, each with a few threads, doing random operations on a few shared
names at once for a while: writes (some with O_APPEND), reads, truncates, stats,
chmods, utimes, renames, unlinks, links, fallocate, SEEK_DATA, xattrs, mmap, readdir,
fsync racing the close of a dup of the same descriptor, copy_file_range, the live
counters (user.cbfs.stats) and a directory's codec (user.cbfs.codec), and a directory
whose names come and go while it is listed with their attributes; renameat2's
RENAME_EXCHANGE and RENAME_NOREPLACE; file handles opened again by open_by_handle_at
(root only: CAP_DAC_READ_SEARCH). Nothing is checked against a model (names move under
every worker); the point is the daemon's concurrency (run it under ThreadSanitizer)
and that no operation fails other than as the races explain.

stress_mixed.py DIR SEED PROCS THREADS SECONDS

Exit status 0, or 1 with the unexpected errors listed (EIO, EBADF, ... : anything a
race between names cannot explain). STRESS_ALLOW_EMFILE=1 in the environment: EMFILE
and ENFILE are expected too (a daemon under a low fd limit). STRESS_OPS=k,k,...: only
those operations (the numbers in op()).
"""
import ctypes
import errno
import mmap
import os
import random
import struct
import sys
import threading
import time

# what the races explain: a name moved or went away under the call, a directory
# emptied or filled meanwhile, a descriptor's file truncated under a mapping
EXPECTED = {errno.ENOENT, errno.EEXIST, errno.ENOTEMPTY, errno.ENODATA, errno.ENXIO,
            errno.ESTALE, errno.EISDIR, errno.ENOTDIR}
# a daemon run under a low fd limit (CBFS_DAEMON_NOFILE) may run out of them
if os.environ.get("STRESS_ALLOW_EMFILE") == "1":
    EXPECTED |= {errno.EMFILE, errno.ENFILE}


def names(d):
    return [os.path.join(d, n) for n in ("a", "b", "c", "sub/d", "sub/e")]


LIBC = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_NOREPLACE, RENAME_EXCHANGE = -100, 1, 2

MAPPED = "m"  # never cut, moved or removed: a mapping past its end would be SIGBUS
MAPPED_SIZE = 65536


def data(rng, n):
    # compressible with some noise, so frames vary in size
    word = bytes(rng.randrange(97, 123) for _ in range(16))
    return (word * (n // 16 + 1))[:n]


# STRESS_OPS=k,k,...: only these operations (narrowing down a failure)
OPS = [int(k) for k in os.environ["STRESS_OPS"].split(",")] if os.environ.get("STRESS_OPS") \
    else list(range(30))


def op(rng, d, fds, lock):
    ns = names(d)
    k = rng.choice(OPS)
    # the calls that cut, move or remove pick from ns; the others may take MAPPED too
    p = rng.choice(ns) if k in (8, 12, 13, 14, 24, 28) or rng.random() < 0.8 else \
        os.path.join(d, MAPPED)
    try:
        do_op(rng, d, fds, lock, ns, k, p)
    except OSError as e:
        e.stress_op = k  # for the report
        raise


def do_op(rng, d, fds, lock, ns, k, p):
    if k < 5:  # write, sometimes appending, sometimes fsync'd
        fl = os.O_WRONLY | os.O_CREAT | (os.O_APPEND if rng.random() < 0.2 else 0)
        fd = os.open(p, fl, 0o644)
        try:
            os.pwrite(fd, data(rng, rng.choice((1, 100, 4096, 5000, 70000))),
                      rng.randrange(0, 300000))
            if rng.random() < 0.3:
                os.fsync(fd)
        finally:
            os.close(fd)
    elif k < 8:  # read
        fd = os.open(p, os.O_RDONLY)
        try:
            os.pread(fd, rng.choice((1, 4096, 65536, 200000)), rng.randrange(0, 300000))
        finally:
            os.close(fd)
    elif k == 8:
        os.truncate(p, rng.choice((0, 1, 4095, 65536, 100000, 250000)))
    elif k == 9:
        os.stat(p)
        os.lstat(d)
    elif k == 10:
        os.chmod(p, rng.choice((0o600, 0o644, 0o664)))
    elif k == 11:
        t = time.time() - rng.randrange(0, 100000)
        os.utime(p, (t, t))
    elif k == 12:
        os.rename(p, rng.choice(ns))
    elif k == 13:
        os.unlink(p)
    elif k == 14:
        os.link(p, rng.choice(ns))
    elif k == 15:
        os.listdir(d)
        os.listdir(os.path.join(d, "sub"))
    elif k == 16:  # fallocate and the holes it leaves
        fd = os.open(p, os.O_RDWR)
        try:
            os.posix_fallocate(fd, rng.randrange(0, 200000), rng.choice((1, 4096, 100000)))
            os.lseek(fd, rng.randrange(0, 300000), rng.choice((os.SEEK_DATA, os.SEEK_HOLE)))
        finally:
            os.close(fd)
    elif k == 17:
        os.setxattr(p, "user.stress", data(rng, 8))
        os.getxattr(p, "user.stress")
    elif k == 18:  # a shared mapping written and read
        fd = os.open(os.path.join(d, MAPPED), os.O_RDWR)
        try:
            m = mmap.mmap(fd, MAPPED_SIZE)
            try:
                at = rng.randrange(0, MAPPED_SIZE - 5000)
                m[at:at + 5000] = data(rng, 5000)
                _ = m[rng.randrange(0, MAPPED_SIZE - 100):][:100]
                if rng.random() < 0.5:
                    m.flush()
            finally:
                m.close()
        finally:
            os.close(fd)
    elif k == 19:  # fsync of one descriptor while another thread closes its dup
        fd = os.open(p, os.O_RDWR)
        dup = os.dup(fd)
        with lock:
            fds.append(dup)
        try:
            os.pwrite(fd, data(rng, 8192), rng.randrange(0, 100000))
            os.fsync(fd)
        finally:
            os.close(fd)
    elif k == 20:  # close what another thread left (the race with its fsync)
        with lock:
            fd = fds.pop() if fds else -1
        if fd >= 0:
            os.close(fd)
    elif k == 22:  # the mount's live counters (the root's virtual xattr)
        os.getxattr(d, "user.cbfs.stats")
    elif k == 23:  # the codec of new files below sub, set and taken away
        sub = os.path.join(d, "sub")
        if rng.random() < 0.7:
            os.setxattr(sub, "user.cbfs.codec", rng.choice((b"lz4", b"zstd:3", b"none")))
        else:
            os.removexattr(sub, "user.cbfs.codec")
    elif k == 24:  # a copy between two names (the kernel splices through the daemon)
        fi = os.open(p, os.O_RDONLY)
        try:
            fo = os.open(rng.choice(ns), os.O_WRONLY | os.O_CREAT, 0o644)
            try:
                os.copy_file_range(fi, fo, rng.choice((1, 4096, 100000)), 0,
                                   rng.randrange(0, 200000))
            finally:
                os.close(fo)
        finally:
            os.close(fi)
    elif k == 25:
        os.listxattr(p)
    elif k == 26:  # many names coming and going in one directory ...
        q = os.path.join(d, "many", f"n{rng.randrange(40)}")
        if rng.random() < 0.5:
            with open(q, "wb") as f:
                f.write(data(rng, rng.choice((0, 10, 5000))))
        else:
            os.unlink(q)
    elif k == 27:  # ... while it is listed with every entry's attributes (READDIRPLUS)
        for e in os.scandir(os.path.join(d, "many")):
            e.stat(follow_symlinks=False)
    elif k == 28:  # names exchanged, or moved only where none is
        flags = rng.choice((RENAME_EXCHANGE, RENAME_NOREPLACE))
        if LIBC.renameat2(AT_FDCWD, p.encode(), AT_FDCWD, rng.choice(ns).encode(), flags) != 0:
            err = ctypes.get_errno()
            if err != errno.EINVAL:  # same name twice with EXCHANGE: as on ext4
                raise OSError(err, os.strerror(err), p)
    elif k == 29 and os.geteuid() == 0:  # a file handle, as nfsd keeps them, opened again (after a drop of
        # the kernel's caches the daemon is asked for the node id: a lookup of ".")
        buf = ctypes.create_string_buffer(8 + 128)
        struct.pack_into("I", buf, 0, 128)
        mount_id = ctypes.c_int()
        if LIBC.name_to_handle_at(AT_FDCWD, p.encode(), buf, ctypes.byref(mount_id), 0) != 0:
            err = ctypes.get_errno()
            raise OSError(err, os.strerror(err), p)
        mfd = os.open(d, os.O_RDONLY | os.O_DIRECTORY)
        try:
            fd = LIBC.open_by_handle_at(mfd, buf, os.O_RDONLY | os.O_CLOEXEC)
            if fd < 0:
                err = ctypes.get_errno()
                raise OSError(err, os.strerror(err), p)
            try:
                os.fstat(fd)
                os.pread(fd, 4096, rng.randrange(0, 100000))
            finally:
                os.close(fd)
        finally:
            os.close(mfd)
    else:
        os.statvfs(d)
        fd = os.open(p, os.O_RDONLY)  # closed by another thread (k == 20) or at the end
        with lock:
            fds.append(fd)
            old = fds.pop(0) if len(fds) > 8 else -1  # a few held open, not all
        if old >= 0:
            os.close(old)


def worker(d, seed, seconds, bad, fds, lock):
    rng = random.Random(seed)
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            op(rng, d, fds, lock)
        except OSError as e:
            # a copy between two names of one file (a link, a rename since) that
            # overlaps itself: EINVAL, as on any filesystem
            if e.errno not in EXPECTED and not (e.stress_op == 24 and e.errno == errno.EINVAL):
                bad.append(f"operation {e.stress_op}: {e}")
        except (ValueError, BufferError):  # mmap of a file cut meanwhile
            pass


def proc(d, seed, nthreads, seconds):
    bad, fds, lock = [], [], threading.Lock()
    ts = [threading.Thread(target=worker, args=(d, seed * 100 + i, seconds, bad, fds, lock))
          for i in range(nthreads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    for fd in fds:
        os.close(fd)
    for b in bad[:10]:
        print(f"unexpected: {b}", file=sys.stderr)
    return 1 if bad else 0


def main():
    d, seed, nprocs, nthreads, seconds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), \
        int(sys.argv[4]), float(sys.argv[5])
    os.makedirs(os.path.join(d, "sub"), exist_ok=True)
    os.makedirs(os.path.join(d, "many"), exist_ok=True)
    with open(os.path.join(d, MAPPED), "wb") as f:
        f.write(bytes(MAPPED_SIZE))
    pids = []
    for i in range(nprocs):
        pid = os.fork()
        if pid == 0:
            rc = 1
            try:
                rc = proc(d, seed * 1000 + i, nthreads, seconds)
            except BaseException as e:  # noqa: told, then the child's exit status
                print(f"worker process {i}: {e!r}", file=sys.stderr)
            finally:
                sys.stderr.flush()
                os._exit(rc)
        pids.append(pid)
    rc = 0
    for pid in pids:
        _, st = os.waitpid(pid, 0)
        if not (os.WIFEXITED(st) and os.WEXITSTATUS(st) == 0):
            rc = 1
    sys.exit(rc)


if __name__ == "__main__":
    main()

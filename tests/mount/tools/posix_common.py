"""Shared helpers for the POSIX mount tests (tests/mount/t_posix_*.sh): deterministic data,
comparison against an in-memory model with the first differing offset, fallocate(2) via
ctypes, and page-cache dropping so that reads reach the daemon."""
import ctypes
import ctypes.util
import errno
import os
import sys

FALLOC_FL_KEEP_SIZE = 0x01
FALLOC_FL_PUNCH_HOLE = 0x02
FALLOC_FL_COLLAPSE_RANGE = 0x08
FALLOC_FL_ZERO_RANGE = 0x10
FALLOC_FL_INSERT_RANGE = 0x20

_libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
_libc.fallocate.argtypes = [ctypes.c_int, ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong]
_libc.fallocate.restype = ctypes.c_int


class Failure(Exception):
    """A checked property did not hold; the message says what and where."""


def fallocate(fd, mode, off, length):
    """fallocate(2); returns 0 or the errno (never raises)."""
    if _libc.fallocate(fd, mode, off, length) == 0:
        return 0
    return ctypes.get_errno()


def data(rng, n):
    """n bytes: random (incompressible) or text-like (compressible), chosen by rng."""
    if rng.random() < 0.5:
        return rng.randbytes(n)
    words = b"backup restore ledger invoice 2024-03-01 ACME 12345.67 PAID "
    rep = words * (n // len(words) + 2)
    start = rng.randrange(len(words))
    return rep[start:start + n]


def drop(fd):
    """Drop this file's clean cached pages, so the next read goes to the daemon."""
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)


def read_all(path):
    with open(path, "rb") as f:
        os.posix_fadvise(f.fileno(), 0, 0, os.POSIX_FADV_DONTNEED)
        return f.read()


def first_diff(a, b):
    n = min(len(a), len(b))
    step = 1 << 16
    for i in range(0, n, step):
        if a[i:i + step] != b[i:i + step]:
            for j in range(i, min(i + step, n)):
                if a[j] != b[j]:
                    return j
    return n if len(a) != len(b) else -1


def expect_bytes(what, expected, actual):
    """Raises Failure naming the first differing offset."""
    if expected == actual:
        return
    d = first_diff(expected, actual)
    raise Failure("%s: content differs at offset %d (expected size %d, got %d; "
                  "expected %r, got %r)" % (what, d, len(expected), len(actual),
                                            bytes(expected[d:d + 8]), bytes(actual[d:d + 8])))


def expect_eq(what, expected, actual):
    if expected != actual:
        raise Failure("%s: expected %r, got %r" % (what, expected, actual))


def check_fd(what, fd, model):
    """The file behind fd (re-read from the daemon) equals the bytearray model."""
    drop(fd)
    st = os.fstat(fd)
    expect_eq(what + ": st_size", len(model), st.st_size)
    expect_bytes(what, bytes(model), os.pread(fd, len(model) + 4096, 0))


def ename(e):
    return errno.errorcode.get(e, str(e)) if e else "0"


def write_model(path, model):
    with open(path, "wb") as f:
        f.write(model)


def run(main):
    """Runs main(); a Failure or OSError prints one line and exits 1."""
    try:
        main()
    except Failure as e:
        print("FAILED: %s" % e)
        sys.exit(1)
    except OSError as e:
        print("FAILED: unexpected %s" % e)
        sys.exit(1)


def model_write(model, off, buf):
    if off > len(model):
        model.extend(bytes(off - len(model)))
    end = off + len(buf)
    if end > len(model):
        model.extend(bytes(end - len(model)))
    model[off:end] = buf


def model_truncate(model, size):
    if size < len(model):
        del model[size:]
    else:
        model.extend(bytes(size - len(model)))


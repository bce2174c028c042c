#!/usr/bin/env python3
"""File handles through a mount, as nfsd uses them (root: open_by_handle_at
needs CAP_DAC_READ_SEARCH).

  fhandle.py save MNT OUT PATH...   name_to_handle_at of each PATH (relative to
                                    MNT) into OUT, one "HEX PATH" line each
  fhandle.py open MNT IN            open_by_handle_at of each handle in IN with a
                                    fd of MNT; prints "PATH RESULT": sha256:HEX for
                                    a file's contents, dir:PATH for a directory
                                    (where /proc says it is, relative to MNT),
                                    lnk:TARGET for a symlink, or err:ENAME
  fhandle.py append MNT IN PATH TEXT
                                    opens PATH's handle O_WRONLY|O_APPEND and
                                    writes TEXT; prints ok or err:ENAME
  fhandle.py link MNT IN PATH NEW   links PATH's handle (an O_PATH open) as NEW,
                                    as nfsd's LINK does; prints ok or err:ENAME
"""
import ctypes
import errno
import hashlib
import os
import struct
import sys

MAX_HANDLE_SZ = 128
AT_EMPTY_PATH = 0x1000
AT_FDCWD = -100
AT_SYMLINK_FOLLOW = 0x400
libc = ctypes.CDLL(None, use_errno=True)


def name_to_handle(mnt_fd, path):
    buf = ctypes.create_string_buffer(8 + MAX_HANDLE_SZ)
    struct.pack_into("I", buf, 0, MAX_HANDLE_SZ)
    mount_id = ctypes.c_int()
    if libc.name_to_handle_at(mnt_fd, path.encode(), buf, ctypes.byref(mount_id), 0) != 0:
        e = ctypes.get_errno()
        raise OSError(e, f"name_to_handle_at {path}: {os.strerror(e)}")
    nbytes, = struct.unpack_from("I", buf, 0)
    return buf.raw[:8 + nbytes]


def open_handle(mnt_fd, raw, flags):
    buf = ctypes.create_string_buffer(raw, len(raw))
    fd = libc.open_by_handle_at(mnt_fd, buf, flags | os.O_CLOEXEC)
    if fd < 0:
        raise OSError(ctypes.get_errno(), "open_by_handle_at")
    return fd


def load(path):
    with open(path) as f:
        return [(bytes.fromhex(h), p) for h, p in (line.split(" ", 1) for line in f.read().splitlines())]


def describe(mnt, fd):
    st = os.fstat(fd)
    if os.path.stat.S_ISLNK(st.st_mode):
        buf = ctypes.create_string_buffer(4096)
        n = libc.readlinkat(fd, b"", buf, len(buf))
        if n < 0:
            raise OSError(ctypes.get_errno(), "readlinkat")
        return "lnk:" + buf.raw[:n].decode()
    if os.path.stat.S_ISDIR(st.st_mode):
        where = os.readlink(f"/proc/self/fd/{fd}")
        return "dir:" + os.path.relpath(where, mnt)
    h = hashlib.sha256()
    while True:
        b = os.read(fd, 1 << 20)
        if not b:
            return "sha256:" + h.hexdigest()
        h.update(b)


def err(e):
    return "err:" + errno.errorcode.get(e.errno, str(e.errno))


def main():
    cmd, mnt = sys.argv[1], os.path.realpath(sys.argv[2])
    mnt_fd = os.open(mnt, os.O_RDONLY | os.O_DIRECTORY)
    if cmd == "save":
        with open(sys.argv[3], "w") as out:
            for p in sys.argv[4:]:
                out.write(f"{name_to_handle(mnt_fd, os.path.join(mnt, p)).hex()} {p}\n")
    elif cmd == "open":
        for raw, p in load(sys.argv[3]):
            try:
                try:
                    fd = open_handle(mnt_fd, raw, os.O_RDONLY)
                except OSError as e:
                    if e.errno != errno.ELOOP:
                        raise
                    fd = open_handle(mnt_fd, raw, os.O_PATH | os.O_NOFOLLOW)
            except OSError as e:
                print(p, err(e))
                continue
            try:
                print(p, describe(mnt, fd))
            except OSError as e:
                print(p, err(e))
            finally:
                os.close(fd)
    elif cmd == "append":
        raw = dict((p, r) for r, p in load(sys.argv[3]))[sys.argv[4]]
        try:
            fd = open_handle(mnt_fd, raw, os.O_WRONLY | os.O_APPEND)
            try:
                os.write(fd, sys.argv[5].encode())
            finally:
                os.close(fd)
            print("ok")
        except OSError as e:
            print(err(e))
    elif cmd == "link":
        raw = dict((p, r) for r, p in load(sys.argv[3]))[sys.argv[4]]
        try:
            fd = open_handle(mnt_fd, raw, os.O_PATH)
            try:
                # linkat with AT_SYMLINK_FOLLOW: os.link calls link(2), which
                # would link the /proc symlink itself
                if libc.linkat(AT_FDCWD, f"/proc/self/fd/{fd}".encode(), AT_FDCWD,
                               sys.argv[5].encode(), AT_SYMLINK_FOLLOW) != 0:
                    raise OSError(ctypes.get_errno(), "linkat")
            finally:
                os.close(fd)
            print("ok")
        except OSError as e:
            print(err(e))
    else:
        sys.exit(f"unknown command {cmd}")


main()

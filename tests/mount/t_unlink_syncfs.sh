#!/usr/bin/env bash
# With the writeback cache the kernel sends a SETATTR of times for every object it has
# just unlinked or removed (fuse_entry_unlinked -> fuse_update_ctime) and takes an error
# reply as a writeback error of the whole filesystem. Where the object's fd had left the
# daemon's fd cache, its handle no longer opens (ESTALE), and the next syncfs(2) on the
# mount (`sync -f`) failed with "Stale file handle" though every call had succeeded and
# nothing was lost (helper-41, stress-ng --dentry, eighteenth session). A daemon with an
# fd limit of 64 (a cache of 16 idle fds) meets it with 100 files. Also: a file unlinked
# while open (its fd evicted meanwhile) keeps its data, fsync and close.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
CBFS_DAEMON_NOFILE=64 cbfs_mount "$store" "$mnt" codec=lz4
python3 - "$mnt" <<'PY' || fail "a file unlinked while open"
import os, sys
mnt = sys.argv[1]
# a file open for writing whose name goes while 100 other files push its fd out
victim = os.path.join(mnt, "victim")
fd = os.open(victim, os.O_CREAT | os.O_RDWR, 0o644)
os.write(fd, b"precious data\n" * 1000)
os.fsync(fd)
os.mkdir(os.path.join(mnt, "d"))
for i in range(100):
    p = os.path.join(mnt, "d", f"f{i}")
    with open(p, "wb") as f:
        f.write(b"x" * (i * 997))
    os.mkdir(os.path.join(mnt, "d", f"sub{i}"))
    os.symlink("f0", os.path.join(mnt, "d", f"l{i}"))
os.unlink(victim)
os.write(fd, b"and more\n")
os.fsync(fd)
assert os.pread(fd, 14, 0) == b"precious data\n", "the open, unlinked file lost its data"
assert os.pread(fd, 9, 14000) == b"and more\n", "the open, unlinked file lost a write"
os.close(fd)
PY
sync -f "$mnt" || fail "syncfs before the removals"
# removed without a lookup or stat between (which would bring their fds back first)
python3 - "$mnt/d" <<'PY' || fail "removing the objects"
import os, sys
d = sys.argv[1]
for i in range(100):
    os.unlink(os.path.join(d, f"f{i}"))
    os.unlink(os.path.join(d, f"l{i}"))
    os.rmdir(os.path.join(d, f"sub{i}"))
os.rmdir(d)
PY
sync -f "$mnt" 2>"$T/sync.err" || fail "syncfs after the removals: $(cat "$T/sync.err")"

# The same where the data file's fd is still cached and only its sidecar's left the
# cache: small compressed files held by O_PATH fds (no handle: the daemon never hears
# of them), unlinked. The SETATTR's stat then met the sidecar's ESTALE (helper-45).
python3 - "$mnt" >"$T/held.out" 2>&1 <<'PY' || fail "$(cat "$T/held.out")"
import ctypes, os, sys
m = sys.argv[1]
d = os.path.join(m, "r")
os.mkdir(d)
held = []
for i in range(10):
    p = os.path.join(d, f"f{i}")
    with open(p, "wb") as f:
        f.write(b"x" * 150)
    held.append(os.open(p, os.O_PATH))
for i in range(10):
    os.unlink(os.path.join(d, f"f{i}"))
fd = os.open(m, os.O_RDONLY)
libc = ctypes.CDLL(None, use_errno=True)
if libc.syncfs(fd) != 0:
    sys.exit("syncfs after unlinking files held by O_PATH fds: " + os.strerror(ctypes.get_errno()))
PY

# A user can still name such an object without a handle: a working directory removed
# under its process (or an O_PATH fd). utimensat(".") there takes the same answer, and the
# kernel keeps the reply's attributes for its inode: the mode and owner the directory had,
# not mode 0 and root (helper-44).
python3 - "$mnt" >"$T/cwd.out" 2>&1 <<'PY' || fail "$(cat "$T/cwd.out")"
import ctypes, os, struct, sys
mnt = sys.argv[1]
libc = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH, AT_STATX_DONT_SYNC = 0x1000, 0x4000
def statx_cached(fd):
    buf = ctypes.create_string_buffer(256)
    if libc.statx(fd, b"", AT_EMPTY_PATH | AT_STATX_DONT_SYNC, 0x7ff, buf) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    nlink, uid, gid, mode = struct.unpack_from("<IIIH", buf.raw, 16)
    return mode, uid, gid
d = os.path.join(mnt, "cwd")
os.mkdir(d, 0o755)
os.chown(d, 1234, 1234)
os.chdir(d)
pfd = os.open(".", os.O_PATH)
before = statx_cached(pfd)
os.rmdir(d)
e = os.path.join(mnt, "e")  # push its fd out of the daemon's cache of 16
os.mkdir(e)
for i in range(60):
    os.mkdir(os.path.join(e, f"s{i}"))
    with open(os.path.join(e, f"f{i}"), "wb") as f:
        f.write(b"x")
try:
    os.utime(".", ns=(1_000_000_000, 2_000_000_000))
    r = "ok"
except OSError as ex:
    r = ex.strerror
after = statx_cached(pfd)
os.chdir("/")
print(f"utime(.) in the removed cwd: {r}; mode/uid/gid before {oct(before[0])}/{before[1]}/"
      f"{before[2]}, after {oct(after[0])}/{after[1]}/{after[2]}")
if r == "ok" and (after[0] & 0o7777, after[1], after[2]) != (0o755, 1234, 1234):
    sys.exit(1)
PY
note "$(cat "$T/cwd.out")"
cbfs_umount "$mnt"
pass "100 files, directories and symlinks removed, fd limit 64"

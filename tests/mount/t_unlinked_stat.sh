#!/usr/bin/env bash
# An object that lost its last name while a process still holds it (an O_PATH fd on an
# unlinked file, or on a file or directory a rename replaced; a removed working directory)
# stats as on ext4: no links, its old mode and size. The daemon let its O_PATH fd go from
# its fd cache like any other, and the store, which frees a nameless object once its last
# fd closes, then had nothing to open by handle: fstat answered ESTALE (helper-45's known
# limit, with a daemon fd limit of 64: a cache of 16 idle fds). Now the daemon keeps the
# fd of what it removes the last name of until the kernel forgets it, at most the fd
# cache's size of them at once (past that, ESTALE as before: checked here too, with the
# daemon still serving). A file that keeps another name (a hard link) is not kept: its
# handle opens. statx with AT_STATX_FORCE_SYNC makes the kernel ask the daemon (a plain
# fstat answers from the kernel's attribute cache for attr_timeout). Compressed and plain.
. "$(dirname "$0")/lib.sh"

cat >"$T/probe.py" <<'PY'
import ctypes, os, stat, struct, sys, time
root, pid, store = sys.argv[1:4]  # the daemon's pid and store, "-" for ext4
libc = ctypes.CDLL(None, use_errno=True)
AT_EMPTY_PATH, AT_STATX_FORCE_SYNC = 0x1000, 0x2000
nfill = 0
def fill():
    """Creates 40 new files: every older fd leaves a cache of 16."""
    global nfill
    nfill += 1
    d = os.path.join(root, f"fill{nfill}")
    os.mkdir(d)
    for i in range(40):
        with open(os.path.join(d, f"f{i}"), "wb") as f:
            f.write(b"y" * 10)
def statx(fd):
    buf = ctypes.create_string_buffer(256)
    if libc.statx(fd, b"", AT_EMPTY_PATH | AT_STATX_FORCE_SYNC, 0x7ff, buf) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e))
    nlink, _, _, mode = struct.unpack_from("<IIIH", buf.raw, 16)
    return nlink, mode, struct.unpack_from("<Q", buf.raw, 40)[0]
def show(what, fd):
    try:
        n, m, size = statx(fd)
        print(f"{what}: nlink {n} mode {oct(m)} size {size if stat.S_ISREG(m) else '-'}")
    except OSError as e:
        print(f"{what}: {e.strerror}")
def make(name, size, mode=0o644):
    p = os.path.join(root, name)
    with open(p, "wb") as f:
        f.write(bytes([65 + size % 26]) * size)
    os.chmod(p, mode)
    return p
def deleted():
    """The daemon's fds on objects without a name."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            n += os.readlink(f"/proc/{pid}/fd/{fd}").endswith(" (deleted)")
        except OSError:
            pass
    return n
def fds_on(inos):
    """The daemon's fds on the store objects of these inode numbers."""
    n = 0
    for fd in os.listdir(f"/proc/{pid}/fd"):
        try:
            st = os.stat(f"/proc/{pid}/fd/{fd}")
        except OSError:
            continue
        n += st.st_dev == sdev and st.st_ino in inos
    return n
def deleted_settles(want):
    """The count once the kernel's forgets have come (they follow the closes)."""
    for _ in range(100):
        n = deleted()
        if n == want:
            return n
        time.sleep(0.05)
    return n

# an unlinked file held by an O_PATH fd
p = make("victim", 12345, 0o640)
fd = os.open(p, os.O_PATH)
os.unlink(p)
# a removed working directory
d = os.path.join(root, "wd")
os.mkdir(d, 0o750)
os.chdir(d)
os.rmdir(d)
cwd = os.open(".", os.O_PATH)
os.chdir("/")
# a file replaced by a rename
b = make("b", 200)
fdb = os.open(b, os.O_PATH)
os.rename(make("a", 100), b)
# an empty directory replaced by a rename
os.mkdir(os.path.join(root, "x"), 0o700)
os.mkdir(os.path.join(root, "y"), 0o710)
fdy = os.open(os.path.join(root, "y"), os.O_PATH)
os.rename(os.path.join(root, "x"), os.path.join(root, "y"))
# a hard link: one of its two names removed
h = make("h", 300)
os.link(h, os.path.join(root, "h2"))
fdh = os.open(h, os.O_PATH)
os.unlink(h)
fill()
show("unlinked file, O_PATH fd", fd)
show("removed working directory", cwd)
show("file replaced by a rename, O_PATH fd", fdb)
show("directory replaced by a rename, O_PATH fd", fdy)
show("one of two names removed, O_PATH fd", fdh)
for x in (fd, cwd, fdb, fdy, fdh):
    os.close(x)
if pid == "-":
    sys.exit(0)

# the daemon's side: what it keeps, and for how long
base = deleted_settles(0)
print(f"kept once the O_PATH fds are closed: {base}", file=sys.stderr)
if base != 0:
    sys.exit(f"{base} fds of removed objects still open after the kernel forgot them")
sdev = os.stat(store).st_dev
held, inos = [], set()
for i in range(10):  # hard links: another name left, nothing to keep
    p = make(f"k{i}", 100 + i)
    os.link(p, os.path.join(root, f"k{i}.2"))
    held.append(os.open(p, os.O_PATH))
    os.unlink(p)
    inos.add(os.stat(os.path.join(store, f"k{i}.2")).st_ino)
fill()
n = fds_on(inos)
print(f"kept for 10 files with a name left: {n}", file=sys.stderr)
if n != 0:
    sys.exit(f"{n} fds kept on files that still have a name")
for x in held:
    os.close(x)
held = []
for i in range(40):  # more than the daemon keeps at once
    p = make(f"u{i}", 1000 + i)
    held.append(os.open(p, os.O_PATH))
    os.unlink(p)
fill()
n = deleted()
ok = 0
for x in held:
    try:
        statx(x)
        ok += 1
    except OSError:
        pass
print(f"40 unlinked files held: {n} fds kept, {ok} stat", file=sys.stderr)
if not 8 <= ok <= 16 or n > 16:
    sys.exit("the daemon keeps at most 16 fds (its fd cache's size) of removed objects, "
             "8 to 16 objects (a compressed file's sidecar is one too)")
with open(os.path.join(root, "after"), "wb") as f:  # and still serves
    f.write(b"z" * 70000)
with open(os.path.join(root, "after"), "rb") as f:
    if f.read() != b"z" * 70000:
        sys.exit("a new file reads back wrong")
for x in held:
    os.close(x)
n = deleted_settles(0)
if n != 0:
    sys.exit(f"{n} fds of removed objects still open after the kernel forgot them")
PY

mkdir -p "$T/ref"
python3 "$T/probe.py" "$T/ref" - - >"$T/ref.out" 2>&1 || fail "on ext4: $(cat "$T/ref.out")"
for opts in codec=lz4 codec=none; do
    CBFS_DAEMON_NOFILE=64 cbfs_mount_fresh "$opts"
    python3 "$T/probe.py" "$mnt" "${CBFS_PID[$mnt]}" "$(realpath "$store")" >"$T/got.out" 2>"$T/got.err" ||
        fail "$opts: $(tail -n 2 "$T/got.err" | tr '\n' '|') answers: $(tr '\n' '|' <"$T/got.out")"
    same_answers "$opts: answers differ from ext4" "$T/ref.out" "$T/got.out"
    note "$opts: $(tr '\n' ';' <"$T/got.err")"
    cbfs_umount "$mnt"
done
pass "$(tr '\n' ';' <"$T/ref.out")"

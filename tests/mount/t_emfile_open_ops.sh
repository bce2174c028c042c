#!/usr/bin/env bash
# A daemon out of descriptors (every one held by other open files and directories) still
# serves what the programs already have open: write, fstat, futimens, fsync and pread
# of an open file need no new descriptor. They failed with EMFILE (the writeback cache's
# GETATTR before a write; an fsync after setting times). And ftruncate either cuts and
# says so, or fails and cuts nothing: it answered EMFILE for a cut it had made (the stat
# for its reply), and with the writeback cache a later append then landed past the cut,
# zeros where the program's bytes were (helper-51, twentieth session). Compressed with
# and without the writeback cache, and plain.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
for opts in codec=lz4 codec=lz4,writeback_cache=off codec=none; do
    rm -rf "$store"
    mkdir -p "$store"
    CBFS_DAEMON_NOFILE=32 cbfs_mount "$store" "$mnt" "$opts"
    out=$(python3 - "$mnt" <<'PY'
import errno, os, random, sys, time
m = sys.argv[1]
data = random.Random(2).randbytes(100000)
a = os.open(m + "/a", os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(a, data, 0)
os.fsync(a)
for i in range(60):
    with open("%s/o%d" % (m, i), "wb") as f:
        f.write(b"x" * 1000)
os.mkdir(m + "/dir")
fds, fails, i = [], 0, 0
while fails < 6 and i < 60:  # distinct files until even the retries fail
    try:
        fds.append(os.open("%s/o%d" % (m, i), os.O_RDWR))
        fails = 0
    except OSError:
        fails += 1
    i += 1
while True:  # directories take the last single descriptors
    try:
        fds.append(os.open(m + "/dir", os.O_RDONLY | os.O_DIRECTORY))
    except OSError:
        break
if fails < 6:
    print("SETUP: the daemon never ran out of descriptors")
time.sleep(1.5)  # attr_timeout (1 s): the kernel asks GETATTR again
bad = []
for name, fn in (("pwrite", lambda: os.pwrite(a, b"B" * 10, 5)),
                 ("fstat", lambda: os.fstat(a)),
                 ("futimens", lambda: os.utime(a, (1000000000, 1000000000))),
                 ("fsync", lambda: os.fsync(a)),
                 ("pread", lambda: os.pread(a, 10, 0))):
    try:
        fn()
    except OSError as e:
        bad.append("%s %s" % (name, errno.errorcode[e.errno]))
data = data[:5] + b"B" * 10 + data[15:]
try:
    os.ftruncate(a, 1262)
    cut = True
except OSError as e:
    cut = False
    print("ftruncate refused:", errno.errorcode[e.errno])
for fd in fds:
    os.close(fd)
app = os.open(m + "/a", os.O_WRONLY | os.O_APPEND)
os.write(app, b"Z" * 100)
os.close(app)
os.close(a)
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3\n")
got = open(m + "/a", "rb").read()
exp = (data[:1262] if cut else data) + b"Z" * 100
print("open-file operations that failed:", ", ".join(bad) or "none")
print("file after the truncate and an append:", "as the program was told" if got == exp else
      "WRONG: %d bytes, %d zeros, truncate said %s" % (len(got), got.count(0), "done" if cut else "refused"))
PY
)
    note "$opts: $(tr '\n' '|' <<<"$out")"
    grep -q '^SETUP' <<<"$out" && fail "$opts: $out"
    grep -q '^open-file operations that failed: none' <<<"$out" || fail "$opts: $out"
    grep -q 'as the program was told' <<<"$out" || fail "$opts: $out"
    cbfs_umount "$mnt"
done
pass

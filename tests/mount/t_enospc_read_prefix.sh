#!/usr/bin/env bash
# After a block could not be stored (the store full) and before the writer's fsync or
# close has heard of it, the part of the file the store holds still reads: another open
# file's read of the first MiB (fsync'd long before) and a mapping of it. Both
# failed with ENOSPC (the mapping with SIGBUS) until the writer's flush (helper-51,
# twentieth session). A read past that part fails with the error or finds the end of the
# file (the size may already show that part), never other bytes; after the writer's fsync
# (ENOSPC) the file is that part.
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 32m
cbfs_expect_log_errors 'no space left on the store'
cbfs_mount "$store" "$mnt" codec=lz4,writeback_cache=off,block_size=64K
out=$(PYTHONPATH=$CBFS_TOOLS python3 - "$mnt/f" "$fs" <<'PY'
import mmap, os, sys, time
from errcheck import fill_store
path, fs = sys.argv[1], sys.argv[2]
durable = os.urandom(1 << 20)
w = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(w, durable, 0)
os.fsync(w)
fill_store(fs, 256 << 10)
more = os.urandom(600000)  # one WRITE (max_write 1 MiB): no write of its own hears it
try:  # taken into memory (all or a part), cannot be stored
    os.pwrite(w, more, 1 << 20)
except OSError:
    pass
time.sleep(1)  # the background store fails meanwhile
# another open file, as a verifier's or a restore's would be (not a child: its exec
# would close a copy of w, a FLUSH of w's open file, which hears the failure first)
with open("/proc/sys/vm/drop_caches", "w") as f:  # the reads reach the daemon
    f.write("3\n")
fd = os.open(path, os.O_RDONLY)
res = []
try:
    a = os.pread(fd, 4096, 0)
    m = mmap.mmap(fd, 4096, mmap.MAP_SHARED, mmap.PROT_READ)  # a failure: SIGBUS here
    b = m[:4096]
    m.close()
    res.append("right bytes" if a == durable[:4096] and b == a else "WRONG bytes")
except OSError as e:
    res.append(e.strerror)
print("prefix read and mapped:", res[0])
try:
    t = os.pread(fd, 4096, (1 << 20) + 409600)
    print("tail: read %d bytes" % len(t))
except OSError as e:
    print("tail:", e.strerror)
os.close(fd)
try:
    os.fsync(w)
    print("fsync: ok")
except OSError as e:
    print("fsync:", e.strerror)
os.close(w)
got = open(path, "rb").read()
print("after: %d bytes, a prefix of what was written: %s" % (len(got), got == (durable + more)[:len(got)] and len(got) >= (1 << 20)))
PY
)
note "$(tr '\n' '|' <<<"$out")"
grep -q '^prefix read and mapped: right bytes' <<<"$out" || fail "the stored prefix during the failure: $out"
grep -q '^fsync: No space left on device' <<<"$out" || fail "the writer's fsync: $out"
grep -q 'a prefix of what was written: True' <<<"$out" || fail "the file after: $out"
tail=$(sed -n 's/^tail: //p' <<<"$out")
[[ $tail == "No space left on device" || $tail == "Input/output error" || $tail == "read 0 bytes" ]] ||
    fail "a read past the stored part during the failure: $tail"
cbfs_umount "$mnt"
pass

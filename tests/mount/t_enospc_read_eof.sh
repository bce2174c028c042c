#!/usr/bin/env bash
# After a block could not be stored (the store full) and before the writer's fsync or close
# has heard of it, a read of the part the store holds is served (cbfs_file_read_kept).
# Here the failed store is a rewrite inside the file, so the size does not move: the last
# page of the file (its size not page aligned), a read that asks for more than the file
# holds (cat, cp, readahead) and a mapping of that page read as they will after the reset.
# They failed with ENOSPC (the mapping with SIGBUS) because the kept check looked at the
# length asked for, not at the part of it below the file's size.
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 32m
cbfs_expect_log_errors 'no space left on the store'
cbfs_mount "$store" "$mnt" codec=lz4,writeback_cache=off,block_size=64K
out=$(PYTHONPATH=$CBFS_TOOLS python3 - "$mnt/f" "$fs" <<'PY'
import mmap, os, sys, time
from errcheck import fill_store
path, fs = sys.argv[1], sys.argv[2]
size = (1 << 20) + 100
durable = os.urandom(size)
w = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(w, durable, 0)
os.fsync(w)
os.close(w)  # the writer below holds none of the file's blocks in memory (a tail block open)
w = os.open(path, os.O_RDWR)
fill_store(fs, 256 << 10)
try:  # a rewrite of the first MiB: more than the store has left
    os.pwrite(w, os.urandom(1 << 20), 0)
except OSError:
    pass
time.sleep(1)  # the background store fails meanwhile
with open("/proc/sys/vm/drop_caches", "w") as f:
    f.write("3\n")
fd = os.open(path, os.O_RDONLY)
print("size %d" % os.fstat(fd).st_size)
for what, fn in (("last page", lambda: os.pread(fd, 4096, 1 << 20)),
                 ("read past the end", lambda: os.pread(fd, 8192, (1 << 20) - 4096)),
                 ("read at the end", lambda: os.pread(fd, 4096, size))):
    try:
        got = fn()
        print("%s: %d bytes" % (what, len(got)))
    except OSError as e:
        print("%s: %s" % (what, e.strerror))
os.close(fd)
try:
    os.fsync(w)
    print("fsync: ok")
except OSError as e:
    print("fsync:", e.strerror)
os.close(w)
got = open(path, "rb").read()
print("after: %d bytes, tail as before: %s" % (len(got), got[1 << 20:] == durable[1 << 20:]))
PY
)
note "$(tr '\n' '|' <<<"$out")"
grep -q '^fsync: No space left on device' <<<"$out" || fail "the writer's fsync: $out"
grep -q '^last page: 100 bytes' <<<"$out" || fail "the last page (kept) during the failure: $out"
grep -q '^read past the end: 4196 bytes' <<<"$out" || fail "a read past the end during the failure: $out"
grep -q '^read at the end: 0 bytes' <<<"$out" || fail "a read at the end during the failure: $out"
cbfs_umount "$mnt"
pass

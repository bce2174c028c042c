#!/usr/bin/env bash
# A storing failure reaches every descriptor that was open when it happened,
# as the kernel's errseq does: an fsync(2) on a read-only descriptor (`sync
# FILE` during a backup) hears of it and leaves it for the writer, whose
# close(2) still reports ENOSPC. (The reader's fsync took it for both: the
# writer's close returned 0 with nothing stored.)
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 48m
cbfs_expect_log_errors 'no space left on the store'
cbfs_mount "$store" "$mnt" codec=zstd,block_size=256K
avail=$(df -B1 --output=avail "$fs" | tail -n 1)
fallocate -l $((avail - (64 << 10))) "$fs/filler" || fail "fallocate filler"
res=$(python3 - "$mnt/late" <<'PY'
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
libc.sync_file_range.argtypes = [ctypes.c_int, ctypes.c_longlong, ctypes.c_longlong, ctypes.c_uint]
path = sys.argv[1]
out = []
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
try:
    os.write(fd, os.urandom(256 << 10))  # one block, incompressible; 64 KiB free
    # push the page to the daemon (a WRITE, no FSYNC): it is accepted into memory
    r = libc.sync_file_range(fd, 0, 0, 1 | 2 | 4)
    out.append("write ok, sync_file_range %d" % r)
except OSError as e:
    out.append("write: " + e.strerror)
ro = os.open(path, os.O_RDONLY)
try:
    os.fsync(ro)
    out.append("ro-fsync ok")
except OSError as e:
    out.append("ro-fsync: " + e.strerror)
os.close(ro)
try:
    os.close(fd)
    out.append("writer close ok")
except OSError as e:
    out.append("writer close: " + e.strerror)
print("; ".join(out))
PY
)
note "$res"
size=$(stat -c %s "$mnt/late")
note "size after close: $size (written: $((256 << 10)))"
rm -f "$mnt/late" "$fs/filler"
cbfs_umount "$mnt"
umount "$fs" || true
[[ $res == *"writer close: No space left on device"* || $res == "write: "* ]] ||
    fail "the writer was never told: $res"
[[ $res == *"ro-fsync: No space left on device"* || $res == "write: "* ]] ||
    fail "the reader's fsync was not told: $res"
pass

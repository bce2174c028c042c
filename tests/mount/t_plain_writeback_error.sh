#!/usr/bin/env bash
# A plain file's (codec=none) page that the kernel writes back and the store cannot take
# (a full store here) must reach its writer at the writer's own close or fsync, whatever
# another descriptor of the file did first. The kernel keeps a writeback error for the
# first descriptor that asks: a reader's close, an fsync of a read-only descriptor, an
# O_DIRECT read, another writer's close each took it, and the writer's close returned 0
# with its bytes never stored (helper-27's fault injection). The daemon now keeps it per
# inode and every handle hears it once (cbfs/errseq.h), as for a compressed file.
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 16m
# each run of failures nobody has heard of yet is logged once, naming the file
cbfs_expect_log_errors "a page written back at offset [0-9]+ could not be stored: no space left"
cbfs_mount "$store" "$mnt" codec=none
# the store full to its last byte, behind the daemon
head -c $((16 << 20)) /dev/zero >"$fs/filler" 2>/dev/null || true
[[ $(df -B1 --output=avail "$fs" | tail -n 1) -lt 4096 ]] || fail "the store is not full: $(df -B1 "$fs" | tail -n 1)"

# other: what a second descriptor does between the writer's write and its close
python3 - "$mnt" <<'PY' >"$T/out" 2>&1 || fail "$(cat "$T/out")"
import errno, mmap, os, sys
mnt = sys.argv[1]
bad = 0
for other in ("reader-close", "reader-fsync", "direct-read", "writer-close", "none"):
    p = os.path.join(mnt, other)
    a = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    b = None
    if other != "none":
        fl = os.O_WRONLY if other == "writer-close" else os.O_RDONLY
        if other == "direct-read":
            fl |= os.O_DIRECT
        b = os.open(p, fl)
    os.write(a, b"x" * 65536)  # into the kernel's page cache: no error yet
    said = "-"
    if b is not None:
        try:
            if other == "reader-fsync":
                os.fsync(b)
            elif other == "direct-read":
                os.preadv(b, [mmap.mmap(-1, 65536)], 0)
            else:
                fd, b = b, None
                os.close(fd)
            said = "0"
        except OSError as e:
            said = errno.errorcode[e.errno]
    try:
        os.close(a)
        got = "0"
    except OSError as e:
        got = errno.errorcode[e.errno]
    if b is not None:
        os.close(b)
    ok = got in ("ENOSPC", "EIO")
    bad += not ok
    print(f"{other}: the other descriptor got {said}, the writer's close {got}"
          f"{'' if ok else '  <- the failure was lost'}")
sys.exit(1 if bad else 0)
PY
while read -r line; do note "$line"; done <"$T/out"

# once heard, it is not heard again: a new writer of the file, with room, closes cleanly
rm "$fs/filler"
printf 'fresh' >"$mnt/none" || fail "a new writer of the file after the failure was told of it again"
check_eq "fresh" "$(cat "$mnt/none")" "the new writer's bytes"
# the Prometheus errors alert sees them: one failed WRITE at least per file
werr=$(getfattr --only-values -n user.cbfs.stats "$mnt" 2>/dev/null | sed -n 's/^write_errors=//p')
((${werr:-0} >= 5)) || fail "write_errors is '${werr}' after five files' failed writebacks"
cbfs_umount "$mnt"
nlog=$(grep -c "could not be stored" "$(cbfs_log_of "$mnt")" || true)
check_eq 5 "$nlog" "log lines: one per file (each failure was heard before the next file's)"
grep -q "'reader-close': a page written back" "$(cbfs_log_of "$mnt")" ||
    fail "the log does not name the file: $(grep 'could not be stored' "$(cbfs_log_of "$mnt")" | head -n 2)"
pass

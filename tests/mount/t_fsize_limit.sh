#!/usr/bin/env bash
# A daemon started under a file size limit (a shell's `ulimit -f`, RLIMIT_FSIZE):
# a store write past it raises SIGXFSZ, whose default action killed the daemon
# (status 153, the mount left dead, every open file unflushed). The write must
# fail with EFBIG instead, seen by the writer (write, fsync or close), what
# was stored reads back as a prefix of what was written, the same mount goes
# on serving, and the daemon exits 0. Plain files (codec=none) and compressed
# ones, with and without the writeback cache. The cbfs tool likewise: fsck
# --repair of a lost sidecar larger than the limit was killed mid-write (153)
# with no word of which file; it must report the failed repair (exit 4).
. "$(dirname "$0")/lib.sh"

LIMIT=$((4 << 20))
head -c $((8 << 20)) /dev/urandom >"$T/big"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/small" 7

cbfs_expect_log_errors 'file too large'
for v in codec=none codec=lz4 codec=zstd,writeback_cache=off codec=none,writeback_cache=off; do
    store=$T/s.${v//[=,]/_}
    mkdir -p "$store"
    CBFS_DAEMON_FSIZE=$LIMIT cbfs_mount "$store" "$T/mnt" "$v"
    check_fails dd if="$T/big" of="$T/mnt/big" bs=1M conv=fsync status=none
    grep -q 'File too large' "$T/last.err" || fail "$v: expected EFBIG from dd, got: $(cat "$T/last.err")"
    kill -0 "${CBFS_PID[$T/mnt]}" 2>/dev/null || fail "$v: the daemon died on a write past its file size limit"
    # what was stored is a prefix of what was written, never other bytes
    drop_caches
    cat "$T/mnt/big" >"$T/part" 2>"$T/part.err" || fail "$v: cannot read the cut file: $(cat "$T/part.err")"
    psize=$(stat -c %s "$T/part")
    ((psize <= LIMIT)) || fail "$v: $psize bytes read back, more than the limit $LIMIT"
    cmp -n "$psize" "$T/part" "$T/big" >/dev/null || fail "$v: the cut file reads wrong bytes"
    # the mount goes on
    cp "$T/small" "$T/mnt/small" || fail "$v: a small file after EFBIG"
    drop_caches
    same_file "$T/small" "$T/mnt/small"
    cbfs_umount "$T/mnt"
    cbfs_mount "$store" "$T/mnt" "$v"
    same_file "$T/small" "$T/mnt/small"
    cmp -n "$psize" "$T/mnt/big" "$T/big" >/dev/null || fail "$v: after a remount the cut file reads wrong bytes"
    check_eq "$psize" "$(stat -c %s "$T/mnt/big")" "$v: the cut file's size after a remount"
    cbfs_umount "$T/mnt"
    note "$v: dd: $(head -n 1 "$T/last.err"); $psize bytes kept"
done

cbfs_tool
store=$T/s.tool
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 2M "$T/two" 8
cbfs_mount "$store" "$T/mnt" codec=lz4,block_size=64K
cp "$T/two" "$T/mnt/two"
cbfs_umount "$T/mnt"
rm "$store/.cbfsidx/two" # its rebuild needs 64 + 32 * 64 bytes
rc=0
prlimit --fsize=1024:1024 -- "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
note "fsck --repair under a 1 KiB limit: status $rc: $(grep -m1 'repair failed' "$T/fsck.out")"
check_eq 4 "$rc" "exit status of cbfs fsck --repair under a file size limit ($(tail -n 2 "$T/fsck.out" | tr '\n' '|'))"
grep -q 'two: repair failed: file too large' "$T/fsck.out" || fail "fsck --repair: $(cat "$T/fsck.out")"
fsck_rc 1 --repair "$store"
cbfs_mount "$store" "$T/mnt" codec=lz4,block_size=64K
same_file "$T/two" "$T/mnt/two"
cbfs_umount "$T/mnt"
pass

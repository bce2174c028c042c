#!/usr/bin/env bash
# A daemon started under a file size limit (a shell's `ulimit -f`, RLIMIT_FSIZE):
# a store write past it raises SIGXFSZ, whose default action killed the daemon
# (status 153, the mount left dead, every open file unflushed). The write must
# fail with EFBIG instead, seen by the writer (write, fsync or close), what
# was stored reads back as a prefix of what was written, the same mount goes
# on serving, and the daemon exits 0. Plain files (codec=none) and compressed
# ones, with and without the writeback cache.
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
pass

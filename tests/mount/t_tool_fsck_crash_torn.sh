#!/usr/bin/env bash
# cbfs fsck --repair killed (SIGKILL) at each of its calls that change the store, in turn
# (tools/crashpoint.c), on a file whose sidecar is lost and whose frames hold a crash's
# torn write in the middle (kept: it holds frame magic), a later writer's acknowledged
# frames behind it, and a zero tail. After each kill the mount reads the file as before
# the repair; fsck --repair run again to the end leaves a store fsck and verify call
# clean, with the same bytes. The rebuild wrote its sidecar's header first: killed
# before the records, the header alone made a sidecar of no record, from which the next
# load stopped at the torn write, and the acknowledged blocks behind it were gone from the
# file, for the mount and for every later fsck (helper-64's crash-point campaign).
# The store is made by the daemon itself: killed inside the pwrite of a frame, half of
# it written (CBFS_CRASH_TEAR), then the next mount appends behind the kept tail.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload crashpoint
# the crash and the loads after it log what they recover; nothing else may be logged
cbfs_expect_log_errors 'torn|tail|repair|rescan|lags|not indexed|dropped|recover|kept|passed over'
mnt=$T/mnt daemon=$CBFS_MOUNT_BIN

# 9 blocks of 64K random bytes (lz4 cannot shrink them) with frame magic every 4 KiB
python3 - "$T/data" <<'PY'
import random, sys
rnd = bytearray(random.Random(64).randbytes(64 * 1024 * 9))
for o in range(100, len(rnd) - 8, 4096):
    rnd[o:o + 8] = bytes.fromhex("5c2a4d1838000000")
open(sys.argv[1], "wb").write(rnd)
PY
# crash_mount STORE AT: mounts STORE with the daemon killed at its counted call AT (0: never),
# a write there torn after 32 KiB; its calls listed in STORE.calls
crash_mount() {
    printf '#!/bin/sh\nASAN_OPTIONS=%s:verify_asan_link_order=0 CBFS_CRASH_AT=%s CBFS_CRASH_TEAR=32768 CBFS_CRASH_LOG=%s LD_PRELOAD=%s exec %s "$@"\n' \
        "$ASAN_OPTIONS" "$2" "$1.calls" "$T/crashpoint.so" "$daemon" >"$T/daemon.sh"
    chmod +x "$T/daemon.sh"
    mkdir -p "$1"
    CBFS_MOUNT_BIN=$T/daemon.sh cbfs_mount "$1" "$mnt" codec=lz4,block_size=64K
}
# write STORE AT: blocks 0-4 acknowledged (fsync), then block 5 appended
write5() {
    crash_mount "$1" "$2"
    dd if="$T/data" of="$mnt/x.bin" bs=64K count=5 conv=fsync status=none
    dd if="$T/data" of="$mnt/x.bin" bs=64K skip=5 seek=5 count=1 conv=notrunc,fsync status=none 2>/dev/null || true
}
write5 "$T/dry" 0
cbfs_umount "$mnt"
at=$(awk '$2 == "pwrite" && $5 > 60000 && ++c == 6 {print $1; exit}' "$T/dry.calls")
[[ -n $at ]] || fail "no pwrite of a sixth frame among the daemon's calls"
store=$T/store
write5 "$store" "$at"
pid=${CBFS_PID[$mnt]}
for ((i = 0; i < 50; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
kill -0 "$pid" 2>/dev/null && fail "the daemon was not killed at its call $at"
wait "$pid" 2>/dev/null || true
unset "CBFS_PID[$mnt]"
fusermount3 -uz "$mnt" || fail "fusermount3 -uz $mnt after the crash"
grep -q "^$at pwrite .* KILL\$" "$store.calls" || fail "the daemon died elsewhere: $(tail -n 2 "$store.calls")"
# the next writer: blocks 6 and 7 behind the kept torn frame, acknowledged
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
dd if="$T/data" of="$mnt/x.bin" bs=64K skip=6 seek=6 count=2 conv=notrunc,fsync status=none
cbfs_umount "$mnt"
rm "$store/.cbfsidx/x.bin"
head -c 4096 /dev/zero >>"$store/x.bin"
fsck_rc 4 "$store"
grep -q 'torn by a crash passed over' "$T/fsck.out" || fail "the store is not the case: $(cat "$T/fsck.out")"
# what the file holds: blocks 0-4, block 5 a hole (never acknowledged), blocks 6-7
# (dd, not tail | head: under pipefail, tail's SIGPIPE when head has had enough ended the
# test with status 141 now and then)
{ head -c $((5 * 65536)) "$T/data"; head -c 65536 /dev/zero; dd if="$T/data" bs=64K skip=6 count=2 status=none; } >"$T/want"

# read_x STORE WHEN: the mount reads x.bin as $T/want (of a copy: an open through the mount
# repairs what it loads, and the store is to be left as the tool left it)
read_x() {
    rm -rf "$T/r"
    cp -a "$1" "$T/r"
    cbfs_mount "$T/r" "$mnt"
    cmp -s "$T/want" "$mnt/x.bin" ||
        fail "$2: x.bin reads $(stat -c %s "$mnt/x.bin" 2>&1) bytes, not the $(stat -c %s "$T/want") acknowledged"
    cbfs_umount "$mnt"
}
read_x "$store" "before the repair"
cp -a "$store" "$store.copy"
CBFS_CRASH_LOG=$T/fsck.calls ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/crashpoint.so "$CBFS" fsck --repair "$store.copy" >"$T/full.out" 2>&1 || true
n=$(wc -l <"$T/fsck.calls")
((n > 5)) || fail "fsck --repair made $n counted calls: $(cat "$T/full.out")"
for ((k = 1; k <= n; k++)); do
    rm -rf "$T/w"
    cp -a "$store" "$T/w"
    rc=0
    (CBFS_CRASH_AT=$k ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/crashpoint.so "$CBFS" fsck --repair "$T/w" >"$T/kill.out" 2>&1 || exit $?) 2>/dev/null || rc=$?
    check_eq 137 "$rc" "fsck --repair killed at its call $k"
    read_x "$T/w" "fsck --repair killed at its call $k ($(sed -n "${k}p" "$T/fsck.calls"))"
    rc=0
    "$CBFS" fsck --repair "$T/w" >"$T/rerun.out" 2>&1 || rc=$?
    ((rc <= 1)) || fail "killed at $k: fsck --repair again exited $rc: $(tail -n 3 "$T/rerun.out" | tr '\n' '|')"
    fsck_rc 0 "$T/w"
    check "$CBFS" verify "$T/w"
    read_x "$T/w" "fsck --repair killed at its call $k, then run again"
done
pass "$n kill points"

#!/usr/bin/env bash
# The FUSE channel's tuning options (for measuring on many cores, docs/PERF.md):
# clone_fd (a /dev/fuse queue per serving thread), fuse_threads=N, max_background=N
# and fuse_readahead=SIZE mount, serve four parallel writers bit-exact, and take
# effect: the kernel's max_background (fusectl) and the mount's read_ahead_kb
# (the bdi's, 2M by default) are the ones asked for; bad values are refused.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
for i in 1 2 3 4; do python3 "$CBFS_TOOLS/gendata.py" csv 6M "$T/src$i" "$i"; done
cbfs_mount "$store" "$mnt" codec=lz4,clone_fd,fuse_threads=4,max_background=48
pids=()
for i in 1 2 3 4; do
    dd if="$T/src$i" of="$mnt/f$i" bs=1M conv=fsync status=none &
    pids+=($!)
done
wait "${pids[@]}" || fail "a writer failed" # not a bare wait: the daemon is a job too
# fusectl shows the connection's settings (mounted here if the system has not)
ctl=/sys/fs/fuse/connections
if [[ -z $(ls -A "$ctl" 2>/dev/null) ]] && mount -t fusectl fusectl "$ctl" 2>/dev/null; then
    mounted_ctl=1
fi
dev=$(awk -v m="$(realpath "$mnt")" '$5 == m {print $3}' /proc/self/mountinfo)
if [[ -r $ctl/${dev#*:}/max_background ]]; then
    check_eq 48 "$(cat "$ctl/${dev#*:}/max_background")" "kernel max_background"
else
    note "fusectl not available: max_background not checked"
fi
[[ -n ${mounted_ctl:-} ]] && umount "$ctl"
# read_ahead_kb: what the daemon set after INIT, which caps it at the kernel's
read_ahead() { cat "/sys/class/bdi/$(mountpoint -d "$mnt")/read_ahead_kb"; }
check_eq 2048 "$(read_ahead)" "read_ahead_kb by default"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt" codec=lz4,clone_fd=off,fuse_threads=1,fuse_readahead=4M
check_eq 4096 "$(read_ahead)" "read_ahead_kb with fuse_readahead=4M"
for i in 1 2 3 4; do same_file "$T/src$i" "$mnt/f$i"; done
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt" fuse_readahead=0
check_eq 128 "$(read_ahead)" "read_ahead_kb with fuse_readahead=0 (the kernel's own)"
same_file "$T/src1" "$mnt/f1"
cbfs_umount "$mnt"
check_fails "$CBFS_MOUNT_BIN" -f -o fuse_readahead=1K "$store" "$mnt"
grep -q "fuse_readahead=1K: give 0 or a multiple of 4K up to 1G" "$T/last.err" || fail "fuse_readahead=1K: $(cat "$T/last.err")"
check_fails "$CBFS_MOUNT_BIN" -f -o fuse_threads=257 "$store" "$mnt"
grep -q "fuse_threads=257: give a whole number from 0 to 256" "$T/last.err" || fail "fuse_threads=257: $(cat "$T/last.err")"
pass

#!/usr/bin/env bash
# A user who writes the store directly can put a FIFO where the tools open a
# regular file: at a sidecar's name (DIR/.cbfsidx/NAME, or NAME.cbfsidx in
# layout 1), or at a data file's name between the walk's stat and its open
# (a rename loop). open(2) of a FIFO for reading waits for a writer: cbfs
# verify from cron, cbfs stat, cat and fsck (--repair holding the store lock,
# so the daemon could not mount the store) hung until the user let them go.
# Every tool must finish, and report the file instead.
. "$(dirname "$0")/lib.sh"
cbfs_tool
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4
echo data >"$mnt/f"
echo more >"$mnt/g"
cbfs_umount "$mnt"
[[ -f $store/.cbfsidx/f ]] || fail "setup: no sidecar"
rm "$store/.cbfsidx/f"
mkfifo "$store/.cbfsidx/f"
for args in "verify $store" "stat $store" "cat $store/f" "fsck $store" "fsck --repair $store"; do
    rc=0
    timeout 20 "$CBFS" $args >"$T/out" 2>&1 || rc=$?
    [[ $rc != 124 ]] || fail "cbfs $args hung on a FIFO at a sidecar's name"
    ((rc != 0)) || fail "cbfs $args: exit 0 with a FIFO at a sidecar's name: $(cat "$T/out")"
    grep -q "store/f: its sidecar .*/\.cbfsidx/f: not a regular file where cbfs keeps one" "$T/out" ||
        fail "cbfs $args does not name the sidecar and why: $(cat "$T/out")"
done
[[ -p $store/.cbfsidx/f ]] || fail "fsck --repair replaced the FIFO"
pass

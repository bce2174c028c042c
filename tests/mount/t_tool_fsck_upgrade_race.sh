#!/usr/bin/env bash
# `cbfs fsck --repair` reads the store's layout when it resolves its path, before it takes
# the store lock; an `fsck --upgrade` (layout 1 -> 2) that finishes between the two moves
# every sidecar. The repair then worked by the layout it had read: every file's sidecar
# "missing", and a NAME.cbfsidx rebuilt beside each file of a layout-2 store, which the
# mount then refused. It reads the layout again under the lock (43f0b86). The window is
# held open by tools/flockpause.c, which stops the repair at its first flock of the
# store's root until the upgrade has run.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload flockpause

cbfs_layout1_two_files 7
[[ -f $store/a.csv.cbfsidx && -f $store/d/b.csv.cbfsidx ]] || fail "layout 1: sidecars are not NAME.cbfsidx"

mkdir "$T/pause"
# (an ASan build wants its runtime first among the preloaded; the shim does not mind)
CBFS_FLOCKPAUSE_PATH=$(realpath "$store") CBFS_FLOCKPAUSE_DIR=$T/pause \
    ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/flockpause.so \
    "$CBFS" fsck --repair "$store" >"$T/repair.out" 2>&1 &
repair=$!
for _ in $(seq 500); do [[ -e $T/pause/paused ]] && break; sleep 0.02; done
if [[ ! -e $T/pause/paused ]]; then
    kill "$repair" 2>/dev/null || true
    fail "fsck --repair did not reach its lock: $(cat "$T/repair.out")"
fi
# the repair has read the layout (1) and waits before its lock: the upgrade runs now
rc=0; "$CBFS" fsck --upgrade "$store" >"$T/up.out" 2>&1 || rc=$?
touch "$T/pause/go"
rc2=0; wait "$repair" || rc2=$?
check_eq 0 "$rc" "exit status of fsck --upgrade ($(cat "$T/up.out"))"
grep -qx 'layout=2' "$store/.cbfs/store.conf" || fail "store.conf does not record layout 2"
left=$(find "$store" -name '*.cbfsidx' ! -name .cbfsidx ! -path '*/.cbfsidx/*')
[[ -z $left ]] || fail "fsck --repair wrote layout-1 sidecars into a layout-2 store: $left"
check_eq 0 "$rc2" "exit status of fsck --repair ($(tail -n 3 "$T/repair.out" | tr '\n' '|'))"
grep -q ' 0 problem(s)' "$T/repair.out" || fail "fsck --repair said: $(cat "$T/repair.out")"
fsck_rc 0 "$store"
cbfs_mount "$store" "$mnt"
same_file "$T/data.csv" "$mnt/a.csv"
same_file "$T/data.csv" "$mnt/d/b.csv"
cbfs_umount "$mnt"
pass

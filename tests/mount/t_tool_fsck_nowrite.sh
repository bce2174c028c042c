#!/usr/bin/env bash
# `cbfs fsck` without --repair writes nothing to the store. In a tree without .cbfs/ (a
# layout-1 store that lost it) it made .cbfs/ and .cbfs/lock and removed them again: the
# root's mtime changed, and a store it may not write could not be checked ("cannot lock
# the store"); in a store with .cbfs/lock it wrote its pid there and truncated it. It
# still refuses a mounted store (8), also one whose .cbfs/lock was removed under the
# daemon (the root's flock), and a mount beside a running check names it.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload flockpause

# stamp DIR: every entry's type, size, mtime and ctime, then every file's bytes
stamp() {
    (cd "$1" && find . -printf '%y %s %T@ %C@ %p\n' | LC_ALL=C sort &&
        find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum)
}
# unchanged_by_fsck DIR [AS]: `cbfs fsck AS` (AS defaults to DIR) is clean and leaves DIR
# as it was, to the nanosecond (the times set back first, so a coarse clock shows it too)
unchanged_by_fsck() {
    local dir=$1 as=${2:-$1}
    find "$dir" -exec touch -h -d '2001-02-03 04:05:06' {} +
    stamp "$dir" >"$T/stamp.before"
    fsck_rc 0 "$as"
    grep -q ' 0 problem(s)' "$T/fsck.out" || fail "fsck $as: $(cat "$T/fsck.out")"
    stamp "$dir" >"$T/stamp.after"
    diff -u "$T/stamp.before" "$T/stamp.after" >"$T/stamp.diff" ||
        fail "cbfs fsck $as changed the store: $(grep '^[-+][^-+]' "$T/stamp.diff" | head -n 6 | tr '\n' '|')"
}
# read-only DIR: a read-only bind mount of DIR on $T/ro (root only; the EXIT trap
# unmounts it if the test stops first)
ro_bind() {
    mkdir -p "$T/ro"
    mount --bind "$1" "$T/ro" || fail "mount --bind $1"
    mount -o remount,bind,ro "$T/ro" || fail "remount $T/ro read-only"
}

cbfs_layout1_two_files 5

# layout 1 without .cbfs/ (cp -a STORE/* leaves it behind)
mv "$store/.cbfs" "$T/cbfs.saved"
unchanged_by_fsck "$store"
[[ ! -e $store/.cbfs ]] || fail "fsck made .cbfs/"
if [[ $(id -u) == 0 ]]; then
    ro_bind "$store"
    unchanged_by_fsck "$store" "$T/ro"
    umount "$T/ro"
else
    note "not root: no read-only bind mount"
fi
mv "$T/cbfs.saved" "$store/.cbfs"

# layout 2, with the .cbfs/lock a mount leaves
"$CBFS" fsck --upgrade "$store" >"$T/up.out" 2>&1 || fail "fsck --upgrade: $(cat "$T/up.out")"
cbfs_mount "$store" "$mnt"
cbfs_umount "$mnt"
[[ -f $store/.cbfs/lock ]] || fail "no .cbfs/lock after a mount"
unchanged_by_fsck "$store"
if [[ $(id -u) == 0 ]]; then
    ro_bind "$store"
    unchanged_by_fsck "$store" "$T/ro"
    umount "$T/ro"
fi

# a mounted store is refused, also where .cbfs/lock went (the root's flock holds it out)
cbfs_mount "$store" "$mnt"
fsck_rc 8 "$store"
grep -q 'mounted' "$T/fsck.out" || fail "no 'mounted' message: $(cat "$T/fsck.out")"
rm "$store/.cbfs/lock"
fsck_rc 8 "$store"
grep -q 'mounted' "$T/fsck.out" || fail "no 'mounted' message without .cbfs/lock: $(cat "$T/fsck.out")"
cbfs_umount "$mnt"
unchanged_by_fsck "$store"
[[ ! -e $store/.cbfs/lock ]] || fail "fsck made .cbfs/lock"

# a check holds the store while it runs (here stopped right after its root's flock): a
# mount beside it is refused and names it, though it wrote no pid
mkdir "$T/pause"
# (an ASan build wants its runtime first among the preloaded; the shim does not mind)
CBFS_FLOCKPAUSE_PATH=$(realpath "$store") CBFS_FLOCKPAUSE_WHEN=after CBFS_FLOCKPAUSE_DIR=$T/pause \
    ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/flockpause.so \
    "$CBFS" fsck "$store" >"$T/held.out" 2>&1 &
checker=$!
for _ in $(seq 500); do [[ -e $T/pause/paused ]] && break; sleep 0.02; done
[[ -e $T/pause/paused ]] || fail "the check did not reach its lock: $(cat "$T/held.out")"
rc=0; timeout 20 "$CBFS_MOUNT_BIN" -f "$store" "$mnt" >"$T/m.out" 2>&1 || rc=$?
touch "$T/pause/go"
rc2=0; wait "$checker" || rc2=$?
[[ $rc != 0 ]] || fail "a mount beside a running check did not fail"
grep -q "in use by cbfs fsck (pid $checker)" "$T/m.out" || fail "a mount beside a running check: $(cat "$T/m.out")"
check_eq 0 "$rc2" "exit status of the paused check ($(cat "$T/held.out"))"
pass

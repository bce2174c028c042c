#!/usr/bin/env bash
# A store whose file system is read-only (an ext4 that went read-only after an
# I/O error, errors=remount-ro; a read-only bind mount here): a read-write
# mount must be refused with a message that says the store is read-only and
# how to read it (-o ro), not that it "was never mounted" (it was: its .cbfs/
# is there), and -o ro must serve it. A store that really was never mounted
# keeps its own message. Root only (bind mounts).
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || pass "not root: no read-only bind mount, nothing checked"
store=$T/store mnt=$T/mnt ro=$T/ro
mkdir -p "$store" "$ro" "$T/fresh"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/a.csv" 3
cbfs_mount "$store" "$mnt" codec=zstd
cp "$T/a.csv" "$mnt/a.csv"
cbfs_umount "$mnt"

# ro_mount DIR: a read-only bind mount of DIR on $ro (the EXIT trap unmounts it)
ro_mount() {
    mount --bind "$1" "$ro" || fail "mount --bind $1"
    mount -o remount,bind,ro "$ro" || fail "remount $ro read-only"
}
# refused: a read-write mount of $ro must fail; its stderr in $T/rw.err
refused() {
    local rc=0
    timeout 20 "$CBFS_MOUNT_BIN" -f "$ro" "$mnt" </dev/null >"$T/rw.err" 2>&1 || rc=$?
    ((rc != 0 && rc != 124)) || fail "a read-write mount of a read-only store: status $rc"
    grep -qs " $(realpath "$mnt") fuse" /proc/mounts && fail "mounted after all"
    return 0
}

ro_mount "$store"
refused
note "written store: $(head -n 1 "$T/rw.err")"
grep -q 'never mounted' "$T/rw.err" && fail "a store mounted before is said never mounted: $(cat "$T/rw.err")"
grep -q 'is read-only; mount it with -o ro' "$T/rw.err" || fail "unexpected refusal: $(cat "$T/rw.err")"
cbfs_mount "$ro" "$mnt" ro
same_file "$T/a.csv" "$mnt/a.csv"
cbfs_umount "$mnt"
umount "$ro"

ro_mount "$T/fresh"
refused
note "new store: $(head -n 1 "$T/rw.err")"
grep -q 'read-only and was never mounted' "$T/rw.err" || fail "new store: unexpected refusal: $(cat "$T/rw.err")"
umount "$ro"
pass

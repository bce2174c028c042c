#!/usr/bin/env bash
# mount(8) and fstab types: `mount -t cbfs` runs /sbin/mount.cbfs and `mount -t fuse.cbfs`
# runs /sbin/mount.fuse.cbfs, both with the mount(8) calling convention (SOURCE DIR -o
# OPTS, maybe -t). The helper symlinks are created for the test and removed afterwards
# (only if they were not there before); `umount` reaps the background daemon.
. "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || fail "needs root (mount(8) helpers)"
made=()
cleanup_links() { for l in "${made[@]}"; do rm -f "$l"; done; }
# our links first, then the harness's cleanup with the exit status it expects
trap 'rc=$?; cleanup_links; set +e; (exit $rc); cbfs_cleanup' EXIT  # set +e: a failing (exit rc) must not skip the cleanup
for l in /sbin/mount.cbfs /sbin/mount.fuse.cbfs; do
    if [[ ! -e $l ]]; then ln -s "$CBFS_MOUNT_BIN" "$l" && made+=("$l"); fi
done

store=$T/store mnt=$T/mnt
mkdir -p "$store" "$mnt"
python3 "$CBFS_TOOLS/gendata.py" csv 2M "$T/a.csv" 7
for type in cbfs fuse.cbfs; do
    mount -t "$type" "$store" "$mnt" -o codec=zstd:1 2>"$T/mount.err" ||
        fail "mount -t $type: $(cat "$T/mount.err")"
    grep -q " $mnt fuse.cbfs " /proc/mounts || fail "mount -t $type: not in /proc/mounts"
    cp "$T/a.csv" "$mnt/$type.csv"
    cmp "$T/a.csv" "$mnt/$type.csv" || fail "mount -t $type: read-back differs"
    umount "$mnt" || fail "umount after mount -t $type"
    for _ in $(seq 50); do pgrep -f "mount.cbfs.* $store " >/dev/null || break; sleep 0.1; done
    pgrep -f "mount.cbfs.* $store " >/dev/null && fail "daemon still running after umount ($type)"
    [[ -s $store/.cbfsidx/$type.csv ]] || fail "mount -t $type: no compressed file in the store"
    note "mount -t $type: ok"
done
pass

#!/usr/bin/env bash
# fallocate(2) through the mount, mirrored on a local ext4 file (tools/posix_fallocate.py):
# default mode extends, KEEP_SIZE keeps, PUNCH_HOLE|KEEP_SIZE and ZERO_RANGE zero,
# COLLAPSE/INSERT_RANGE fail with EOPNOTSUPP; content compared again after a remount;
# every codec, and zstd without the writeback cache.
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/shadow"
for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    python3 "$CBFS_TOOLS/posix_fallocate.py" "$mnt/f" "$T/shadow/$tag" 65536 7 \
        >"$T/out" 2>&1 || fail "$tag: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    same_file "$T/shadow/$tag" "$mnt/f"
    check_eq "$(stat -c %s "$T/shadow/$tag")" "$(stat -c %s "$mnt/f")" "$tag: size after remount"
    cbfs_umount "$mnt"
    note "$opts ok"
done
pass

#!/usr/bin/env bash
# fallocate(2) through the mount, mirrored on a local ext4 file (tools/posix_fallocate.py):
# default mode extends, KEEP_SIZE keeps, PUNCH_HOLE|KEEP_SIZE and ZERO_RANGE zero,
# COLLAPSE/INSERT_RANGE fail with EOPNOTSUPP; content compared again after a remount;
# every codec, and zstd with writeback_cache.
. "$(dirname "$0")/lib.sh"

mkdir -p "$T/shadow"
for opts in codec=lz4 codec=zstd codec=xz codec=bzip2 codec=zstd,writeback_cache; do
    codec=${opts//[=,]/_}
    store=$T/store-$codec mnt=$T/mnt
    mkdir -p "$store"
    cbfs_mount "$store" "$mnt" "$opts,block_size=64K"
    python3 "$CBFS_TOOLS/posix_fallocate.py" "$mnt/f" "$T/shadow/$codec" 65536 7 \
        >"$T/out" 2>&1 || fail "$codec: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    same_file "$T/shadow/$codec" "$mnt/f"
    check_eq "$(stat -c %s "$T/shadow/$codec")" "$(stat -c %s "$mnt/f")" "$codec: size after remount"
    cbfs_umount "$mnt"
    note "$opts ok"
done
pass

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

# ZERO_RANGE to a size past what a file can hold (2^26 blocks: 256 GiB of 4K blocks)
# fails with EFBIG and zeroes nothing; it zeroed the file's bytes from the offset on and
# then failed (helper-55). Compressed, with and without the writeback cache.
for wb in on off; do
    cbfs_mount_fresh codec=lz4 "block_size=4K,writeback_cache=$wb" # (z: a new file, 4K blocks)
    head -c 8192 /dev/zero | tr '\0' x >"$mnt/z"
    check_fails fallocate -z -o 4096 -l 300GiB "$mnt/z"
    grep -q 'File too large' "$T/last.err" || fail "writeback_cache=$wb: zero range past the limit: $(cat "$T/last.err")"
    drop_caches
    check_eq 0 "$(tr -d x <"$mnt/z" | wc -c)" "writeback_cache=$wb: bytes zeroed by the refused zero range"
    check_eq 8192 "$(stat -c %s "$mnt/z")" "writeback_cache=$wb: size after the refused zero range"
    cbfs_umount "$mnt"
done
pass

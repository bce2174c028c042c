#!/usr/bin/env bash
# copy_file_range(2) (tools/posix_copy.py): mount -> mount, within one file, local <-> mount,
# unaligned ranges, into data and past EOF; compared again after a remount; every codec,
# and zstd without the writeback cache. Across filesystems the kernel answers EXDEV (since 5.19);
# the helper then falls back to read/write as cp does, and cp itself is checked too.
. "$(dirname "$0")/lib.sh"

for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    mkdir -p "$T/local-$tag" "$T/shadow-$tag"
    python3 "$CBFS_TOOLS/posix_copy.py" "$mnt" "$T/local-$tag" "$T/shadow-$tag" 65536 3 \
        >"$T/out" 2>&1 || fail "$tag: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    for f in src dst self from_local; do same_file "$T/shadow-$tag/$f" "$mnt/$f"; done
    # cp (copy_file_range with its own fallback) out of and back into the mount
    check cp "$mnt/dst" "$T/local-$tag/dst.cp"
    check cp "$T/local-$tag/dst.cp" "$mnt/dst.cp"
    same_file "$T/shadow-$tag/dst" "$T/local-$tag/dst.cp"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    same_file "$T/shadow-$tag/dst" "$mnt/dst.cp"
    cbfs_umount "$mnt"
    note "$opts ok: $(cat "$T/out")"
done
pass

#!/usr/bin/env bash
# lseek SEEK_DATA/SEEK_HOLE (tools/posix_seek.py): block-granular holes (never written,
# written as zeros, punched, extended by truncate), ENXIO at/after EOF; checked while the
# file is open, after close, and after a remount; every codec, and zstd with writeback_cache.
. "$(dirname "$0")/lib.sh"

for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    python3 "$CBFS_TOOLS/posix_seek.py" make "$mnt" 65536 >"$T/out" 2>&1 ||
        fail "$tag: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    python3 "$CBFS_TOOLS/posix_seek.py" check "$mnt" 65536 >"$T/out" 2>&1 ||
        fail "$tag after remount: $(cat "$T/out")"
    cbfs_umount "$mnt"
    note "$opts ok"
done
pass

#!/usr/bin/env bash
# mmap (tools/posix_mmap.py): shared writable mappings of a closed file and of a file being
# written, msync(MS_SYNC) + munmap, then after a remount the content is right and read-only
# and private mappings read it; every codec, and once without the writeback cache.
. "$(dirname "$0")/lib.sh"

for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    mkdir -p "$T/shadow-$tag"
    python3 "$CBFS_TOOLS/posix_mmap.py" write "$mnt" "$T/shadow-$tag" 65536 5 >"$T/out" 2>&1 ||
        fail "$opts: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt" "$opts"
    for f in closed open; do same_file "$T/shadow-$tag/$f" "$mnt/$f"; done
    python3 "$CBFS_TOOLS/posix_mmap.py" read "$mnt" "$T/shadow-$tag" >"$T/out" 2>&1 ||
        fail "$opts after remount: $(cat "$T/out")"
    cbfs_umount "$mnt"
    note "$opts ok"
done
pass

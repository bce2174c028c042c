#!/usr/bin/env bash
# lseek SEEK_DATA/SEEK_HOLE (tools/posix_seek.py): block-granular holes (never written,
# written as zeros, punched, extended by truncate), ENXIO at/after EOF; checked while the
# file is open, after close, and after a remount; every codec, and zstd without the
# writeback cache. With it (the default) the daemon declines FUSE_LSEEK, because the
# kernel asks without writing back first (data not yet flushed would be a hole): the
# kernel's own answers then, all data up to the hole at EOF, also while another handle
# writes (the last case of posix_seek.py's model: "whole").
. "$(dirname "$0")/lib.sh"

for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    mode=whole
    [[ $opts == *writeback_cache=off* ]] && mode=
    python3 "$CBFS_TOOLS/posix_seek.py" make "$mnt" 65536 $mode >"$T/out" 2>&1 ||
        fail "$tag: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt" "$opts"
    python3 "$CBFS_TOOLS/posix_seek.py" check "$mnt" 65536 $mode >"$T/out" 2>&1 ||
        fail "$tag after remount: $(cat "$T/out")"
    cbfs_umount "$mnt"
    note "$opts ok"
done
pass

#!/usr/bin/env bash
# Restores start anywhere: after a remount, 200 reads at random offsets and lengths
# (unaligned, across blocks, across EOF) equal the source, for two block sizes.
. "$(dirname "$0")/lib.sh"

python3 "$CBFS_TOOLS/gendata.py" mixed $((9 * 1024 * 1024 + 4321)) "$T/src.bin" 31
for opts in codec=zstd,block_size=64K codec=lz4; do
    store=$T/store-${opts//[=,]/_}
    mkdir -p "$store"
    cbfs_mount "$store" "$T/mnt" "$opts"
    cp "$T/src.bin" "$T/mnt/f.bin"
    cbfs_umount "$T/mnt"
    drop_caches
    cbfs_mount "$store" "$T/mnt" "$opts"
    python3 "$CBFS_TOOLS/randread.py" "$T/mnt/f.bin" "$T/src.bin" 200 32 >"$T/rr.out" 2>&1 ||
        fail "$opts: $(cat "$T/rr.out")"
    cbfs_umount "$T/mnt"
done
pass

#!/usr/bin/env bash
# Random writes against a model (tools/posix_random.py): partial-block overwrites anywhere,
# writes past EOF leaving holes, truncate/ftruncate shrinking and growing, through two
# handles; per codec (and once without the writeback cache), checked live, after a cache drop,
# and after a remount.
. "$(dirname "$0")/lib.sh"

for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    seed=0
    for f in a b; do
        seed=$((seed + 1))
        python3 "$CBFS_TOOLS/posix_random.py" "$mnt/$f" "$T/$tag.$f" "$seed" 120 65536 \
            >"$T/out" 2>&1 || fail "$tag/$f: $(cat "$T/out")"
    done
    drop_caches
    for f in a b; do same_file "$T/$tag.$f" "$mnt/$f"; done
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt" "$opts,block_size=64K"
    for f in a b; do same_file "$T/$tag.$f" "$mnt/$f"; done
    cbfs_umount "$mnt"
    note "$opts ok ($(tail -n1 "$T/out"))"
done
pass

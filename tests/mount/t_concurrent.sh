#!/usr/bin/env bash
# 2 and then 4 writers at once (dd and cp in the background) to different files;
# every file compares after a remount.
. "$(dirname "$0")/lib.sh"

for i in 1 2 3 4; do
    python3 "$CBFS_TOOLS/gendata.py" mixed $((6 * 1024 * 1024 + i * 1001)) "$T/src$i.bin" $((40 + i))
done
store=$T/store mnt=$T/mnt
mkdir -p "$store"
for n in 2 4; do
    cbfs_mount "$store" "$mnt" codec=zstd,block_size=256K
    mkdir "$mnt/w$n"
    pids=()
    for ((i = 1; i <= n; i++)); do
        if ((i % 2)); then
            dd if="$T/src$i.bin" of="$mnt/w$n/f$i" bs=128K status=none &
        else
            cp "$T/src$i.bin" "$mnt/w$n/f$i" &
        fi
        pids+=($!)
    done
    for p in "${pids[@]}"; do wait "$p" || fail "$n writers: a writer failed (status $?)"; done
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    for ((i = 1; i <= n; i++)); do same_file "$T/src$i.bin" "$mnt/w$n/f$i"; done
    cbfs_umount "$mnt"
    note "$n concurrent writers ok"
done
pass

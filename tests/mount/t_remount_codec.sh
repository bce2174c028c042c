#!/usr/bin/env bash
# A store mixes codecs: write with lz4, remount with zstd and write, remount with xz:
# every file reads back and each file's frames name the codec it was written with.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
for i in 1 2 3; do python3 "$CBFS_TOOLS/gendata.py" mixed $((2 * 1024 * 1024 + i)) "$T/src$i" $((90 + i)); done
i=0
for codec in lz4 zstd xz; do
    i=$((i + 1))
    cbfs_mount "$store" "$mnt" codec=$codec,block_size=128K
    for ((j = 1; j < i; j++)); do same_file "$T/src$j" "$mnt/f$j"; done
    cp "$T/src$i" "$mnt/f$i"
    cbfs_umount "$mnt"
done
check_eq 1 "$(frame_codecs "$store/f1")" "frame codecs of f1 (lz4)"
check_eq 2 "$(frame_codecs "$store/f2")" "frame codecs of f2 (zstd)"
check_eq 3 "$(frame_codecs "$store/f3")" "frame codecs of f3 (xz)"
cbfs_mount "$store" "$mnt" codec=bzip2
for j in 1 2 3; do same_file "$T/src$j" "$mnt/f$j"; done
cbfs_umount "$mnt"
pass

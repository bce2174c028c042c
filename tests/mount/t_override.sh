#!/usr/bin/env bash
# Per-directory codec: `setfattr -n user.cbfs.codec -v zstd:19 DIR` makes new files
# below DIR zstd (codec byte at offset 13 of the data file = 2) while the mount's
# codec (lz4 = 1) applies elsewhere; subdirectories made inside inherit it.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/src.csv" 81
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
mkdir "$mnt/z"
check setfattr -n user.cbfs.codec -v zstd:19 "$mnt/z"
check_eq zstd:19 "$(getfattr --only-values -n user.cbfs.codec "$mnt/z" 2>/dev/null)" "getfattr user.cbfs.codec"
check_fails setfattr -n user.cbfs.codec -v zip "$mnt/z"
check_eq zstd:19 "$(getfattr --only-values -n user.cbfs.codec "$mnt/z" 2>/dev/null)" "xattr after a refused value"
mkdir "$mnt/z/sub"
cp "$T/src.csv" "$mnt/z/f"
cp "$T/src.csv" "$mnt/z/sub/h"
cp "$T/src.csv" "$mnt/g"
cbfs_umount "$mnt"

codec_at13() { od -An -tu1 -j13 -N1 "$1" | tr -d ' \n'; }
check_eq 2 "$(codec_at13 "$store/z/f")" "codec byte of z/f"
check_eq 2 "$(codec_at13 "$store/z/sub/h")" "codec byte of z/sub/h (inherited)"
check_eq 1 "$(codec_at13 "$store/g")" "codec byte of g"
check_eq 2 "$(frame_codecs "$store/z/f")" "codecs of all frames of z/f"
check_eq 1 "$(frame_codecs "$store/g")" "codecs of all frames of g"

cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
for f in z/f z/sub/h g; do same_file "$T/src.csv" "$mnt/$f"; done
cbfs_umount "$mnt"

# values the mount refuses, set in the store directly: ignored with a warning (the
# mount's codec), a short one and one longer than any codec alike; creates and mkdirs
# there still work (the long one failed them all with ERANGE: helper-28)
mkdir "$store/bad-short" "$store/bad-long"
setfattr -n user.cbfs.codec -v zip "$store/bad-short"
setfattr -n user.cbfs.codec -v "zstd:$(printf '1%.0s' {1..80})" "$store/bad-long"
cbfs_expect_log_errors "ignoring the directory's user.cbfs.codec"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
for d in bad-short bad-long; do
    cp "$T/src.csv" "$mnt/$d/f" || fail "create in $d"
    mkdir "$mnt/$d/sub" || fail "mkdir in $d"
    cp "$T/src.csv" "$mnt/$d/sub/f" || fail "create in $d/sub"
done
cbfs_umount "$mnt"
for f in bad-short/f bad-long/f bad-long/sub/f; do
    check_eq 1 "$(codec_at13 "$store/$f")" "codec byte of $f (the mount's lz4)"
done
pass

#!/usr/bin/env bash
# One-argument (in-place) mount over a directory that already holds files: they stay
# readable through the mount; files written through it are in the directory afterwards.
. "$(dirname "$0")/lib.sh"

d=$T/backups ref=$T/ref
mkdir -p "$d/old/sub" "$ref"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$d/old/export.csv" 21
head -c 100000 /dev/urandom >"$d/old/sub/random.bin"
echo "hello from before the mount" >"$d/readme.txt"
ln -s old/export.csv "$d/link"
cp -a "$d/." "$ref/"
python3 "$CBFS_TOOLS/gendata.py" mixed 3M "$T/new.bin" 22

cbfs_mount "$d" "$d" codec=zstd,block_size=64K
same_tree "$ref" "$d"       # pre-existing files read back through the mount
check_eq "hello from before the mount" "$(cat "$d/readme.txt")" "old file via the mount"
cp "$T/new.bin" "$d/new.bin"
mkdir "$d/newdir"
dd if="$T/new.bin" of="$d/newdir/dd.bin" bs=1M status=none
echo appended >>"$d/readme.txt"
cbfs_umount "$d"

# unmounted: the directory itself is the store
[[ -d $d/.cbfs ]] || fail "no .cbfs/ in the in-place store"
for f in new.bin newdir/dd.bin; do
    [[ -f $d/$f ]] || fail "$f missing from the store after unmount"
    [[ -f $(dirname "$d/$f")/.cbfsidx/$(basename "$f") ]] || fail "$f has no sidecar in the store"
done
same_file "$ref/old/export.csv" "$d/old/export.csv"   # untouched files stay plain
same_file "$ref/old/sub/random.bin" "$d/old/sub/random.bin"

cbfs_mount "$d" "$d"
same_file "$T/new.bin" "$d/new.bin"
same_file "$T/new.bin" "$d/newdir/dd.bin"
check_eq "$(printf 'hello from before the mount\nappended')" "$(cat "$d/readme.txt")" "appended old file"
same_file "$ref/old/export.csv" "$d/link"
cbfs_umount "$d"
pass

#!/usr/bin/env bash
# A rename on a full store whose sidecar's new name needs a block the target's
# index directory does not have: the rename fails with ENOSPC and nothing
# moves. (Before, the data file moved, the sidecar's rename failed, and the
# rename still succeeded: the file was left without its index, EIO where its
# frames do not prove its block size, and fsck found an orphan sidecar.) A
# 1 KiB-block ext4 on a loop device, so that a few long names fill a block.
. "$(dirname "$0")/lib.sh"
img=$T/ext4.img fs=$T/fs mnt=$T/mnt
mkdir -p "$fs"
truncate -s 16M "$img"
mkfs.ext4 -q -F -b 1024 -m 0 "$img" >"$T/mkfs.out" 2>&1 || fail "mkfs.ext4: $(cat "$T/mkfs.out")"
mount -o loop "$img" "$fs" || fail "cannot mount a loop ext4 (needs root)"
store=$fs/store
mkdir "$store"
long() { printf "%s%0240d" "$1" 0; } # a 250-byte-ish name: 4 entries fill a 1 KiB block

cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
mkdir "$mnt/A" "$mnt/B"
check setfattr -n user.cbfs.codec -v none "$mnt/B"
# B: one plain file's entry (a slot the data file's rename takes later) and
# three compressed files', whose sidecars fill B/.cbfsidx's one block
: >"$mnt/B/$(long p)"
for i in 1 2 3; do
    head -c 5000 /dev/urandom >"$mnt/A/$(long c$i)"
    mv "$mnt/A/$(long c$i)" "$mnt/B/"
done
rm "$mnt/B/$(long p)"
[[ -f $store/B/.cbfsidx/$(long c3) ]] || fail "setup: no sidecars in B"
check_eq 1024 "$(stat -c %s "$store/B/.cbfsidx")" "setup: B's index directory is one block"
# the file to rename: more than one 64 KiB block, written with the mount's
# block size (its frames then prove it)
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/x" 5
cp "$T/x" "$mnt/A/x"
sync -f "$mnt"
# fill the store to the last block
dd if=/dev/zero of="$fs/filler" bs=64K status=none 2>/dev/null || true
dd if=/dev/zero of="$fs/filler2" bs=1K status=none 2>/dev/null || true
sync -f "$fs"

cbfs_expect_log_errors 'rename|sidecar'
new=$(long n)
if mv "$mnt/A/x" "$mnt/B/$new" 2>"$T/mv.err"; then
    # allowed only where both moved
    [[ -f $store/B/.cbfsidx/$new && ! -e $store/A/.cbfsidx/x ]] ||
        fail "the rename succeeded with the sidecar left behind"
    note "the rename found room (the filesystem had it)"
    where=B/$new
else
    grep -q "No space left on device" "$T/mv.err" || fail "mv: $(cat "$T/mv.err")"
    [[ -f $store/A/x && -f $store/A/.cbfsidx/x && ! -e $store/B/$new ]] ||
        fail "the failed rename moved something: $(ls "$store/A" "$store/A/.cbfsidx" "$store/B" | tr '\n' ' ')"
    note "mv: $(cat "$T/mv.err")"
    where=A/x
fi
cbfs_umount "$mnt"
rm "$fs/filler" "$fs/filler2"
cbfs_tool
fsck_rc 0 "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
drop_caches
same_file "$T/x" "$mnt/$where"
cbfs_umount "$mnt"
umount "$fs" || fail "cannot unmount the ext4 store"
pass

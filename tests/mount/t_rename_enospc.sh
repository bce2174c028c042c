#!/usr/bin/env bash
# A rename on a full store whose sidecar's new name needs a block the target's
# index directory does not have: the rename fails with ENOSPC and nothing
# moves; to a free name, over a plain file, and exchanged with a plain file
# (RENAME_EXCHANGE). (Before, the data file moved, the sidecar's rename
# failed, and the rename still succeeded: the file was left without its
# index, EIO where its frames do not prove its block size, and fsck found an
# orphan sidecar.) A 1 KiB-block ext4 on a loop device, so that a few long
# names fill a block.
. "$(dirname "$0")/lib.sh"
img=$T/ext4.img fs=$T/fs mnt=$T/mnt
mkdir -p "$fs"
truncate -s 16M "$img"
mkfs.ext4 -q -F -b 1024 -m 0 "$img" >"$T/mkfs.out" 2>&1 || fail "mkfs.ext4: $(cat "$T/mkfs.out")"
mount -o loop "$img" "$fs" || fail "cannot mount a loop ext4 (needs root)"
store=$fs/store
mkdir "$store"
long() { printf "%s%0240d" "$1" 0; } # a 241-byte name: 3 of them and . and .. fill 1 KiB

cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
mkdir "$mnt/A" "$mnt/B"
check setfattr -n user.cbfs.codec -v none "$mnt/B"
# B: two plain files (targets) and three compressed files, whose sidecars fill
# B/.cbfsidx's one block
: >"$mnt/B/$(long p)"
: >"$mnt/B/$(long q)"
# and two placeholders, removed once the store is full: B itself keeps room
# for a data file's new entry (a directory does not shrink; an empty file
# frees no block), its index directory does not
: >"$mnt/B/$(long r1)"
: >"$mnt/B/$(long r2)"
for i in 1 2 3; do
    head -c 5000 /dev/urandom >"$mnt/A/$(long c$i)"
    mv "$mnt/A/$(long c$i)" "$mnt/B/"
done
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
rm "$mnt/B/$(long r1)" "$mnt/B/$(long r2)"

cbfs_expect_log_errors 'rename|sidecar'
unchanged() { # WHAT: nothing moved
    [[ -f $store/A/x && -f $store/A/.cbfsidx/x && -f $store/B/$(long p) && -f $store/B/$(long q) ]] ||
        fail "$1: the failed rename moved something: $(ls "$store/A" "$store/A/.cbfsidx" "$store/B" | tr '\n' ' ')"
    [[ -z $(find "$store/B/.cbfsidx" -name 'x*' -o -name 'n0*' -o -name 'p0*' -o -name 'q0*') ]] ||
        fail "$1: a sidecar was left in B/.cbfsidx"
}
mv "$mnt/A/x" "$mnt/B/$(long n)" 2>"$T/mv.err" && fail "a rename to a free name succeeded on a full store"
grep -q "No space left on device" "$T/mv.err" || fail "mv to a free name: $(cat "$T/mv.err")"
unchanged "to a free name"
mv -f "$mnt/A/x" "$mnt/B/$(long p)" 2>"$T/mv.err" && fail "a rename over a plain file succeeded on a full store"
grep -q "No space left on device" "$T/mv.err" || fail "mv over a plain file: $(cat "$T/mv.err")"
unchanged "over a plain file"
r=$(python3 - "$mnt/A/x" "$mnt/B/$(long q)" <<'PY'
import ctypes, errno, os, sys
libc = ctypes.CDLL(None, use_errno=True)
AT_FDCWD, RENAME_EXCHANGE = -100, 2
if libc.renameat2(AT_FDCWD, sys.argv[1].encode(), AT_FDCWD, sys.argv[2].encode(), RENAME_EXCHANGE):
    print(errno.errorcode[ctypes.get_errno()])
else:
    print("ok")
PY
)
check_eq ENOSPC "$r" "an exchange with a plain file on a full store"
unchanged "exchanged"
cbfs_umount "$mnt"
rm "$fs/filler" "$fs/filler2"
cbfs_tool
fsck_rc 0 "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
drop_caches
same_file "$T/x" "$mnt/A/x"
# with room again, each works
mv "$mnt/A/x" "$mnt/B/$(long n)"
same_file "$T/x" "$mnt/B/$(long n)"
cbfs_umount "$mnt"
fsck_rc 0 "$store"
umount "$fs" || fail "cannot unmount the ext4 store"
pass

#!/usr/bin/env bash
# A compressed file renamed over another is two renames in the store: the data file, then the
# sidecar. A crash between them left the target's name with the moved file's frames and the
# replaced file's sidecar, which the open refuses as a leftover: EIO until cbfs fsck --repair.
# The replaced file's sidecar now goes first, so that state is the moved file's frames with no
# sidecar, rebuilt from them at the next open. The crash is stood in for by making the
# sidecar's rename fail (the moved file's sidecar is immutable): the store is then as a crash
# between the two renames leaves it. Then the other failure: the data file's rename fails
# after the target's sidecar went out of the way.
. "$(dirname "$0")/lib.sh"

cbfs_expect_log_errors 'the data file moved but its sidecar did not|a rename or unlink cut short by a crash'
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
head -c 300000 /dev/urandom | base64 >"$T/a"  # compressible, several blocks
head -c 200000 /dev/urandom | base64 >"$T/b"
cp "$T/a" "$mnt/a" && cp "$T/b" "$mnt/b" || fail "writing the two files"
sc=$store/.cbfsidx/a
[ -f "$sc" ] || fail "no sidecar at $sc"
chattr +i "$sc" || fail "chattr +i on the store ($(stat -f -c %T "$store")) is needed to stand in for the crash"
rc=0
mv -f "$mnt/a" "$mnt/b" 2>"$T/mv.err" || rc=$?
chattr -i "$sc"
# the rename has happened: it succeeds (t_rename_store_leftovers), and the log says why the
# file is read from its frames
check_eq 0 "$rc" "mv whose data file moved: $(cat "$T/mv.err")"
grep -q "the data file moved but its sidecar did not" "$(cbfs_log_of "$mnt")" ||
    fail "the sidecar's rename did not fail: the test does not reach its case"
[ -e "$store/a" ] && fail "the data file did not move"
cbfs_umount "$mnt"
# what a restart after the crash finds
cbfs_mount "$store" "$mnt"
cmp -s "$mnt/b" "$T/a" || fail "b after the interrupted rename: $(head -c 200 "$mnt/b" 2>&1 | head -c 200)"
[ -e "$mnt/a" ] && fail "a still shows"
cbfs_umount "$mnt"
ls "$store/.cbfs" | grep -q rename-aside && fail "the moved-aside sidecar was left in .cbfs"

# The data file's rename fails (the target is immutable) after the target's
# sidecar was moved out of the way: it must be put back, byte for byte. It was
# removed, and a file its frames alone cannot index lost its index for good.
cbfs_mount "$store" "$mnt"
cp "$T/a" "$mnt/c" || fail "writing c"
cp "$store/.cbfsidx/b" "$T/b.sc"
chattr +i "$store/b" || fail "chattr +i on b's data file"
mv -f "$mnt/c" "$mnt/b" 2>"$T/mv.err" && fail "mv over an immutable file succeeded"
chattr -i "$store/b"
cmp -s "$store/.cbfsidx/b" "$T/b.sc" || fail "b's sidecar was not put back after the failed rename"
cmp -s "$mnt/c" "$T/a" || fail "c after the failed rename"
cbfs_umount "$mnt"
ls "$store/.cbfs" | grep -q rename-aside && fail "the moved-aside sidecar was left in .cbfs"

# An unlink moves the sidecar aside too, and puts it back when the data file's unlink fails:
# it removed it, and a file its frames alone cannot index lost its index.
cbfs_mount "$store" "$mnt"
cp "$store/.cbfsidx/b" "$T/b.sc"
chattr +i "$store/b" || fail "chattr +i on b's data file"
rm -f "$mnt/b" 2>"$T/rm.err" && fail "rm of an immutable file succeeded"
chattr -i "$store/b"
cmp -s "$store/.cbfsidx/b" "$T/b.sc" || fail "b's sidecar was not put back after the failed unlink"
cp "$T/a" "$mnt/e" && rm "$mnt/e" || fail "writing and removing e"
[ -e "$store/e" ] || [ -e "$store/.cbfsidx/e" ] && fail "e or its sidecar left behind"
cbfs_umount "$mnt"
ls "$store/.cbfs" | grep -q rename-aside && fail "a moved-aside sidecar was left in .cbfs"

# What a crash between moving the sidecar aside and the data file's rename leaves is
# named at the next mount, and no later rename overwrites it.
cp "$store/.cbfsidx/b" "$store/.cbfs/rename-aside-00000000000000aa"
cbfs_mount "$store" "$mnt"
grep -q "rename-aside-00000000000000aa: 1 index file(s) a rename or unlink cut short by a crash" \
    "$(cbfs_log_of "$mnt")" || fail "no warning at mount of the file a crash left in .cbfs"
cp "$T/a" "$mnt/d" && mv -f "$mnt/d" "$mnt/b" || fail "rename over b"
cmp -s "$store/.cbfs/rename-aside-00000000000000aa" "$T/b.sc" || fail "the crash's file was overwritten"
cbfs_umount "$mnt"
cbfs_tool
rc=0
"$CBFS" fsck "$store" >"$T/fsck.out" 2>&1 || rc=$?
# 4: the first part's orphan sidecar (.cbfsidx/a, the stand-in crash's), left for --repair
check_eq 4 "$rc" "fsck exit status: $(cat "$T/fsck.out")"
grep -q "rename-aside-00000000000000aa: 1 index file(s) a rename or unlink cut short" "$T/fsck.out" ||
    fail "fsck does not name the file a crash left: $(cat "$T/fsck.out")"
pass

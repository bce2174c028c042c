#!/usr/bin/env bash
# Renames where what the store holds beside the names differs from what the mount shows:
#  1. a directory over one that lists as empty but keeps its index directory (.cbfsidx, left
#     when its last compressed file went): ext4 replaces an empty directory; cbfs said
#     ENOTEMPTY (rmdir of it already worked);
#  2. the data file moved but its sidecar's rename failed (ENOSPC in the target's index
#     directory; chattr +i stands in): the rename has happened, so it must succeed; it failed,
#     and mv then found both names the same file. The file is read from its frames;
#  3. RENAME_EXCHANGE of a plain file with a symlink that has a leftover sidecar beside it
#     (a crash's): the plain file was served with that sidecar as compressed (EIO).
. "$(dirname "$0")/lib.sh"

cbfs_expect_log_errors 'the data file moved but its sidecar did not|removed a leftover sidecar|no usable sidecar|index sidecar of .* is missing'
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
head -c 300000 /dev/urandom | base64 >"$T/a"

# 1
mkdir "$mnt/d1" "$mnt/d2"
cp "$T/a" "$mnt/d1/f" && cp "$T/a" "$mnt/d2/gone" || fail "writing"
rm "$mnt/d2/gone"
[ -d "$store/d2/.cbfsidx" ] || note "d2 kept no index directory (nothing to test in part 1)"
mv -T "$mnt/d1" "$mnt/d2" 2>"$T/mv.err" || fail "mv -T over an emptied directory: $(cat "$T/mv.err")"
[ -e "$mnt/d1" ] && fail "d1 still there"
cmp -s "$mnt/d2/f" "$T/a" || fail "d2/f after the rename"
# a directory that is not empty is still refused, its files kept
mkdir "$mnt/d3"
cp "$T/a" "$mnt/d3/keep" || fail "writing d3/keep"
mv -T "$mnt/d3" "$mnt/d2" 2>/dev/null && fail "a directory replaced a non-empty one"
cmp -s "$mnt/d2/f" "$T/a" && cmp -s "$mnt/d3/keep" "$T/a" || fail "files after the refused rename"

# 2
mkdir "$mnt/src" "$mnt/dst"
cp "$T/a" "$mnt/src/f" && cp "$T/a" "$mnt/dst/g" || fail "writing"
chattr +i "$store/dst/.cbfsidx" || fail "chattr +i on the store is needed to stand in for ENOSPC"
rc=0
mv "$mnt/src/f" "$mnt/dst/f" 2>"$T/mv.err" || rc=$?
chattr -i "$store/dst/.cbfsidx"
check_eq 0 "$rc" "mv whose data file moved: $(cat "$T/mv.err")"
[ -e "$mnt/src/f" ] && fail "src/f still shows"
cmp -s "$mnt/dst/f" "$T/a" || fail "dst/f after the rename"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt"
cmp -s "$mnt/dst/f" "$T/a" || fail "dst/f after a remount (read from its frames)"
[ -e "$mnt/src/f" ] && fail "src/f shows after a remount"

# 3
mkdir "$mnt/n"
setfattr -n user.cbfs.codec -v none "$mnt/n" || fail "setting the directory's codec"
echo "plain data" >"$mnt/n/p"
ln -s target "$mnt/s"
cp "$T/a" "$mnt/q" || fail "writing q"
cbfs_umount "$mnt"
cp "$store/.cbfsidx/q" "$store/.cbfsidx/s"  # a leftover beside the symlink
cbfs_mount "$store" "$mnt"
python3 - "$mnt/n/p" "$mnt/s" <<'EOF' || fail "RENAME_EXCHANGE"
import ctypes, os, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    sys.exit("renameat2: " + os.strerror(ctypes.get_errno()))
EOF
check_eq "plain data" "$(cat "$mnt/s" 2>&1)" "the plain file exchanged to s"
[ "$(readlink "$mnt/n/p")" = target ] || fail "the symlink exchanged to n/p"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt"
check_eq "plain data" "$(cat "$mnt/s" 2>&1)" "s after a remount"
cmp -s "$mnt/q" "$T/a" || fail "q"
cbfs_umount "$mnt"
pass

#!/usr/bin/env bash
# A rename over a compressed file first moves the target's sidecar aside into the store's
# .cbfs (t_rename_sidecar_order). A directory on another filesystem inside the store keeps
# its sidecars there too (layout 2: sub/.cbfsidx), so that move is EXDEV. Then a compressed
# source keeps the old order (its own sidecar's rename replaces the target's) and a plain
# source's target sidecar is removed: either way the target must read as the source, before
# and after a remount, with no sidecar left of the replaced file, nothing left in .cbfs, and
# the rename not refused. An unlink there removes the sidecar, as before there was an aside.
# An exchange of two compressed files there exchanges their sidecars in place, after the
# data files, as before it moved them aside (t_crash_exchange).
. "$(dirname "$0")/lib.sh"

# the plain source's case logs that the sidecar was removed, not moved aside
cbfs_expect_log_errors 'its sidecar was removed, not moved aside'
store=$T/store mnt=$T/mnt
mkdir -p "$store/sub"
mount -t tmpfs -o size=64m tmpfs "$store/sub" || fail "cannot mount a tmpfs (needs root)"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
head -c 300000 /dev/urandom | base64 >"$T/a"
head -c 200000 /dev/urandom | base64 >"$T/b"
head -c 100000 /dev/urandom | base64 >"$T/p"
cp "$T/a" "$mnt/sub/a" && cp "$T/b" "$mnt/sub/b" && cp "$T/b" "$mnt/sub/c" &&
    cp "$T/a" "$mnt/sub/x" && cp "$T/b" "$mnt/sub/y" || fail "writing the files"
[ -f "$store/sub/.cbfsidx/b" ] || fail "no sidecar of sub/b in its own directory"

# a compressed source over a compressed target
mv -f "$mnt/sub/a" "$mnt/sub/b" 2>"$T/mv.err" || fail "rename over sub/b: $(cat "$T/mv.err")"
cmp -s "$mnt/sub/b" "$T/a" || fail "sub/b after the rename does not read as a"
[ -e "$store/sub/.cbfsidx/a" ] && fail "a's sidecar was left behind"

# two compressed files exchanged (renameat2 RENAME_EXCHANGE)
python3 - "$mnt/sub/x" "$mnt/sub/y" <<'PY' || fail "exchange of sub/x and sub/y"
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    raise OSError(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)")
PY
cmp -s "$mnt/sub/x" "$T/b" && cmp -s "$mnt/sub/y" "$T/a" || fail "sub/x and sub/y after the exchange"

# a plain source (the directory asks for no compression) over a compressed target
setfattr -n user.cbfs.codec -v none "$mnt/sub" || fail "setting the directory's codec"
cp "$T/p" "$mnt/sub/p" || fail "writing the plain file"
[ -e "$store/sub/.cbfsidx/p" ] && fail "the plain file got a sidecar"
mv -f "$mnt/sub/p" "$mnt/sub/c" 2>"$T/mv.err" || fail "rename over sub/c: $(cat "$T/mv.err")"
cmp -s "$mnt/sub/c" "$T/p" || fail "sub/c after the rename does not read as p"
[ -e "$store/sub/.cbfsidx/c" ] && fail "the replaced file's sidecar was left beside a plain file"
cmp -s "$store/sub/c" "$T/p" || fail "sub/c is not stored as the plain file"
grep -q "'c': its sidecar was removed, not moved aside" "$(cbfs_log_of "$mnt")" ||
    fail "the move aside was not refused with EXDEV (the test does not reach its case)"
cbfs_umount "$mnt"

ls -A "$store/.cbfs" | grep rename-aside && fail "a sidecar was left in .cbfs"
cbfs_mount "$store" "$mnt"
cmp -s "$mnt/sub/b" "$T/a" || fail "sub/b after a remount"
cmp -s "$mnt/sub/c" "$T/p" || fail "sub/c after a remount"
cmp -s "$mnt/sub/x" "$T/b" && cmp -s "$mnt/sub/y" "$T/a" || fail "sub/x and sub/y after a remount"
# an unlink moves the sidecar aside too; here it is removed, as before
rm "$mnt/sub/b" || fail "rm sub/b"
[ -e "$store/sub/b" ] || [ -e "$store/sub/.cbfsidx/b" ] && fail "sub/b or its sidecar left behind"
cbfs_umount "$mnt"
ls -A "$store/.cbfs" | grep rename-aside && fail "a sidecar was left in .cbfs by the unlink"
umount "$store/sub" || fail "unmounting the tmpfs"
pass

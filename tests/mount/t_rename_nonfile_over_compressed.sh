#!/usr/bin/env bash
# A symlink or a fifo renamed over a compressed file takes its name and the
# replaced file's sidecar goes with it (a review found it left behind in
# .cbfsidx, where fsck did not see it, once plain files took care of theirs).
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4
head -c 200000 /dev/urandom >"$mnt/c"
head -c 200000 /dev/urandom >"$mnt/d"
[[ -e $store/.cbfsidx/c && -e $store/.cbfsidx/d ]] || fail "no sidecars where expected"
ln -s somewhere "$mnt/s"
mv -T "$mnt/s" "$mnt/c"
mkfifo "$mnt/p"
mv -T "$mnt/p" "$mnt/d"
[[ -L $mnt/c ]] || fail "c is not the symlink"
[[ -p $mnt/d ]] || fail "d is not the fifo"
cbfs_umount "$mnt"
[[ ! -e $store/.cbfsidx/c ]] || fail "the sidecar of the replaced c is still in the store"
[[ ! -e $store/.cbfsidx/d ]] || fail "the sidecar of the replaced d is still in the store"
pass

#!/usr/bin/env bash
# A sidecar left where its data file is gone (a crash inside an unlink of
# older daemons, or a store edited by hand) must never make a plain file of
# that name look compressed: plain create, rename and link remove it before
# the data file takes the name. A plain file that sits beside one anyway is
# refused (EIO, one log line) rather than served as compressed, and fsck
# reports the pair without "repairing" the plain data away. Unlink removes the
# sidecar first: a crash after it leaves a data file that is rebuilt from its
# frames.
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
CBFS=$(dirname "$CBFS_MOUNT_BIN")/cbfs

# compressed files, then their data files lost behind the daemon's back
cbfs_mount "$store" "$mnt" "codec=lz4"
for f in c r l p; do head -c 200000 /dev/urandom >"$mnt/$f"; done
head -c 300000 /dev/urandom >"$T/keep"
cp "$T/keep" "$mnt/k"
cbfs_umount "$mnt"
sc=$(find "$store" -path '*/.cbfsidx/c' -o -name 'c.cbfsidx' | head -n 1)
[[ -f $sc ]] || fail "no sidecar of c in the store"
scdir=$(dirname "$sc")
rm "$store/c" "$store/r" "$store/l" "$store/p"

cbfs_mount "$store" "$mnt" "codec=none"
# create: three times, as each used to fail with EIO
for i in 1 2 3; do
    echo "hello create" >"$mnt/c" || fail "create of a plain c over a leftover sidecar, try $i"
done
# rename onto a name that does not exist but has a leftover sidecar
echo "hello rename" >"$mnt/y"
mv "$mnt/y" "$mnt/r"
# link likewise
echo "hello link" >"$mnt/z"
ln "$mnt/z" "$mnt/l"
# unlink of a compressed file: sidecar first. A crash after that step leaves
# the data file only; simulated by removing the sidecar behind the daemon.
cbfs_umount "$mnt"
for f in c r l; do [[ ! -e $scdir/$f ]] || fail "the leftover sidecar of $f is still there"; done
rm "$scdir/k"
cbfs_mount "$store" "$mnt" "codec=none"
check_eq "hello create" "$(cat "$mnt/c")" "plain c after a remount"
check_eq "hello rename" "$(cat "$mnt/r")" "renamed plain r after a remount"
check_eq "hello link" "$(cat "$mnt/l")" "linked plain l after a remount"
same_file "$T/keep" "$mnt/k"
cbfs_umount "$mnt"

# a plain file beside a leftover sidecar (placed behind the daemon): refused
printf 'plain bytes that matter\n' >"$store/p"
cbfs_expect_log_errors "sidecar looks like a leftover"
cbfs_mount "$store" "$mnt" "codec=none"
out=$(cat "$mnt/p" 2>&1) && fail "p beside a leftover sidecar was served: '$out'"
[[ $out == *"Input/output error"* ]] || fail "p: expected EIO, got '$out'"
cbfs_umount "$mnt"
grep -q "'p' has an index sidecar but its data is not compressed" "$(cbfs_log_of "$mnt")" ||
    fail "no log line names p and its leftover sidecar"
check_eq "plain bytes that matter" "$(cat "$store/p")" "p's data in the store"

# fsck reports it and leaves it alone, also with --repair
rc=0
"$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq 4 "$rc" "fsck --repair exit status (left uncorrected)"
grep -q "p: has an index sidecar .* but its data is not compressed" "$T/fsck.out" ||
    fail "fsck: $(cat "$T/fsck.out")"
check_eq "plain bytes that matter" "$(cat "$store/p")" "p's data after fsck --repair"
pass

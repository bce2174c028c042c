#!/usr/bin/env bash
# A sidecar left where its data file is gone (a crash inside an unlink of
# older daemons, or a store edited by hand) must never make a plain file of
# that name look compressed: plain create, rename and link remove it before
# the data file takes the name. A plain file that sits beside one anyway is
# refused by the loader (EIO, one log line) rather than served as compressed;
# fsck reports the pair, and --repair removes the sidecar, never the data. Unlink removes the
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

# a plain file beside a leftover sidecar (placed behind the daemon): the
# loader finds nothing of the sidecar's file in it and refuses it (EIO, one
# log line naming it) rather than serving it as compressed
printf 'plain bytes that matter\n' >"$store/p"
cbfs_expect_log_errors "sidecar looks like a leftover of a lost file"
cbfs_mount "$store" "$mnt" "codec=none"
out=$(cat "$mnt/p" 2>&1) && fail "p beside a leftover sidecar was served: '$out'"
[[ $out == *"Input/output error"* ]] || fail "p: expected EIO, got '$out'"
cbfs_umount "$mnt"
grep -q "'p': index sidecar belongs to another data file (the sidecar looks like a leftover of a lost file.*cbfs fsck" \
    "$(cbfs_log_of "$mnt")" || fail "no log line names p and its leftover sidecar"
check_eq "plain bytes that matter" "$(cat "$store/p")" "p's data in the store"

# fsck reports it; --repair removes the sidecar (provably not p's: none of its
# records has a frame in p, and p holds none), never p's bytes
rc=0
"$CBFS" fsck "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq 4 "$rc" "fsck exit status (left uncorrected)"
grep -q "p: leftover sidecar: .* belongs to another file" "$T/fsck.out" ||
    fail "fsck: $(cat "$T/fsck.out")"
[[ -e $scdir/p ]] || fail "fsck without --repair removed the sidecar"
rc=0
"$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq 1 "$rc" "fsck --repair exit status (corrected)"
grep -q "p: leftover sidecar: .*(removed" "$T/fsck.out" || fail "fsck --repair: $(cat "$T/fsck.out")"
[[ ! -e $scdir/p ]] || fail "fsck --repair left the leftover sidecar"
check_eq "plain bytes that matter" "$(cat "$store/p")" "p's data after fsck --repair"
rc=0
"$CBFS" fsck "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq 0 "$rc" "fsck after the repair: $(cat "$T/fsck.out")"
CBFS_LOG_ALLOW= # the plain p is served without a word
cbfs_mount "$store" "$mnt" "codec=none"
check_eq "plain bytes that matter" "$(cat "$mnt/p")" "p through the mount after fsck --repair"
cbfs_umount "$mnt"
pass

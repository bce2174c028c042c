#!/usr/bin/env bash
# A lost sidecar whose frames do not tell the block size (docs/FORMAT.md 3.3): 64K
# blocks, only block 5 written (11 bytes), so no frame holds a whole block. cat refuses
# (exit 2, no bytes), fsck --repair refuses (4) and writes nothing, the mount refuses the
# file (EIO, a log line pointing at cbfs fsck --block-size); with --block-size 64K cat
# prints the exact bytes and fsck --repair rebuilds it (1), after which the mount reads
# them. A lost sidecar of a file with full blocks is still rebuilt with no help, by
# fsck and by the daemon; fsck's --block-size is not taken for a file whose frames
# contradict it (written with 32K blocks).
. "$(dirname "$0")/lib.sh"
cbfs_tool

cbfs_mount_fresh codec=zstd block_size=64K
truncate -s 320K "$mnt/f"          # a SIZE frame: 5 blocks of 64K, no data
echo hello-cbfs >>"$mnt/f"         # 11 bytes at 327680: block 5, ulen 11
cp "$mnt/f" "$T/want"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/full" 41 # 4 full blocks and a partial one
cp "$T/full" "$mnt/full"
cbfs_umount "$mnt"
rm "$store/.cbfsidx/f" "$store/.cbfsidx/full" # both sidecars are lost
cp "$store/f" "$T/f.data"

# cat: no bytes at a guessed offset
rc=0
"$CBFS" cat "$store/f" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
check_eq 2 "$rc" "exit status of cat of f ($(cat "$T/cat.err"))"
[[ ! -s $T/cat.out ]] || fail "cat printed $(stat -c %s "$T/cat.out") bytes of f"
grep -q 'cannot be told from its frames.*--block-size' "$T/cat.err" ||
    fail "cat does not say how to go on: $(cat "$T/cat.err")"
"$CBFS" cat --block-size 64K "$store/f" >"$T/cat.out" || fail "cat --block-size 64K f"
same_file "$T/want" "$T/cat.out"
"$CBFS" cat "$store/full" >"$T/cat.out" || fail "cat of full (full blocks prove 64K)"
same_file "$T/full" "$T/cat.out"
rc=0
"$CBFS" cat --block-size 32K "$store/full" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
check_eq 2 "$rc" "cat --block-size 32K of 64K blocks ($(cat "$T/cat.err"))"

# fsck --repair: rebuilds full, refuses f and leaves its data alone
fsck_rc 4 --repair "$store"
grep -q '/f: not repaired: .*--repair --block-size' "$T/fsck.out" ||
    fail "fsck does not say how to go on: $(tr '\n' '|' <"$T/fsck.out")"
grep -q '/full: repaired' "$T/fsck.out" || fail "full not repaired: $(tr '\n' '|' <"$T/fsck.out")"
cmp -s "$T/f.data" "$store/f" || fail "fsck changed f's data file"
[[ ! -e $store/.cbfsidx/f ]] || fail "fsck wrote a sidecar for f"

# the daemon: refuses f (EIO), rebuilds a lost full-block sidecar on its own
rm "$store/.cbfsidx/full"
cbfs_expect_log_errors "'f': block size of a lost index cannot be told from its frames \(.*cbfs fsck --repair --block-size SIZE\)"
cbfs_mount "$store" "$mnt"
same_file "$T/full" "$mnt/full"
rc=0
cat "$mnt/f" >"$T/mnt.out" 2>"$T/mnt.err" || rc=$?
[[ $rc != 0 ]] && grep -q 'Input/output error' "$T/mnt.err" ||
    fail "the mount served f (rc $rc, $(stat -c %s "$T/mnt.out") bytes): $(cat "$T/mnt.err")"
cbfs_umount "$mnt"
check_eq 1 "$(grep -c "'f': block size of a lost index.*--block-size" "$(cbfs_log_of "$mnt")")" \
    "log lines about f ($(grep -E "'f'" "$(cbfs_log_of "$mnt")" | tr '\n' '|'))"
CBFS_LOG_ALLOW= # no more expected

# A file written with 32K blocks by another mount loses its sidecar too. fsck's
# --block-size is for the files whose frames tell no size: 64K (meant for f) was taken
# for every file, so at32 was rebuilt with its blocks moved and called clean.
cbfs_mount "$store" "$mnt" block_size=32K
python3 "$CBFS_TOOLS/gendata.py" csv 150K "$T/at32" 43 # 4 full blocks of 32K and a partial one
cp "$T/at32" "$mnt/at32"
cbfs_umount "$mnt"
rm "$store/.cbfsidx/at32"

# fsck --repair --block-size 64K: the user's word (checked against the frames above), for f
fsck_rc 4 --repair --block-size 64K "$store"
grep -q '/f: repaired' "$T/fsck.out" || fail "f not repaired: $(tr '\n' '|' <"$T/fsck.out")"
grep -q '/at32: not repaired: its frames contradict --block-size' "$T/fsck.out" ||
    fail "at32 not refused: $(tr '\n' '|' <"$T/fsck.out")"
[[ ! -e $store/.cbfsidx/at32 ]] || fail "fsck wrote a sidecar for at32"
fsck_rc 1 --repair --block-size 32K "$store"
grep -q '/at32: repaired' "$T/fsck.out" || fail "at32 not repaired: $(tr '\n' '|' <"$T/fsck.out")"
fsck_rc 0 "$store"
cbfs_mount "$store" "$mnt"
same_file "$T/want" "$mnt/f"
same_file "$T/full" "$mnt/full"
same_file "$T/at32" "$mnt/at32"
cbfs_umount "$mnt"
pass

#!/usr/bin/env bash
# `cbfs cat` of a file whose index cannot reach all its frames (from the rev3
# review's t_rev3_cat_tail): the sidecar is lost and a frame header in the
# middle is damaged, so the rebuild stops there. cat must not print the first
# blocks as if they were the file and exit 0: it names the unreachable bytes
# on stderr and exits 1, printing nothing without --keep-going and what it
# can reach with it. verify calls that tail what it is (kept, unreachable
# frames), not a torn tail. The daemon does not serve the file at all (it read
# blocks 0..4 as the whole file, and its first writable open wrote a sidecar
# of them, which made that for good). Also a file without sidecar whose data file ends
# inside a frame: its end cannot be told either.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_expect_log_errors 'frames past damage cannot be reached|not served' 
cbfs_mount_fresh codec=zstd block_size=64K
python3 "$CBFS_TOOLS/gendata.py" mixed $((10 * 65536)) "$T/want" 31
cp "$T/want" "$mnt/f"
cbfs_umount "$mnt"
rm "$store/.cbfsidx/f" # the sidecar is lost
read -r _ off _ < <(python3 "$CBFS_TOOLS/frames.py" "$store/f" | awk '$3 == 5')
[[ -n $off ]] || fail "no frame of block 5 in f"
python3 - "$store/f" $((off + 20)) <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0x01]), pos); os.close(fd)
PY
rc=0
"$CBFS" cat "$store/f" >"$T/got" 2>"$T/cat.err" || rc=$?
check_eq 1 "$rc" "cat exit status (frames unreachable)"
grep -q "f: offset $off: .*cannot be reached" "$T/cat.err" || fail "cat stderr: $(cat "$T/cat.err")"
check_eq 0 "$(stat -c %s "$T/got")" "bytes cat printed without --keep-going"
rc=0
"$CBFS" cat --keep-going "$store/f" >"$T/got" 2>"$T/cat.err" || rc=$?
check_eq 1 "$rc" "cat --keep-going exit status"
grep -q "cannot be reached" "$T/cat.err" || fail "cat --keep-going stderr: $(cat "$T/cat.err")"
check_eq $((5 * 65536)) "$(stat -c %s "$T/got")" "bytes cat --keep-going printed (blocks 0..4)"
cmp -s "$T/got" <(head -c $((5 * 65536)) "$T/want") || fail "cat --keep-going: blocks 0..4 differ"
vrc=0
"$CBFS" verify "$store/f" >"$T/v.out" 2>&1 || vrc=$?
check_eq 1 "$vrc" "verify exit status"
grep -q "f: offset $off: .*kept, never cut" "$T/v.out" || fail "verify: $(cat "$T/v.out")"
! grep -q "torn tail" "$T/v.out" || fail "verify calls frames past a damaged header a torn tail"
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
if cat "$mnt/f" >"$T/m.out" 2>"$T/m.err"; then
    fail "the daemon served f as $(stat -c %s "$T/m.out") bytes, its frames past the damage unreachable"
fi
grep -q "Input/output error" "$T/m.err" || fail "cat through the mount: $(cat "$T/m.err")"
if echo x 2>/dev/null >>"$mnt/f"; then fail "an append to f was taken"; fi
[[ ! -e $store/.cbfsidx/f ]] || fail "the daemon wrote a sidecar for f"
cbfs_umount "$mnt"
# an undamaged file still cats whole with exit 0 and nothing on stderr
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/want" "$mnt/g"
cbfs_umount "$mnt"
"$CBFS" cat "$store/g" >"$T/got" 2>"$T/cat.err" || fail "cat of a whole file: $(cat "$T/cat.err")"
[[ ! -s $T/cat.err ]] || fail "cat of a whole file wrote to stderr: $(cat "$T/cat.err")"
same_file "$T/want" "$T/got"
# Its sidecar lost and its data file cut inside a frame: nothing tells where it ended.
# cat printed the frames before the cut and exited 0, silent (helper-47's F4).
rm "$store/.cbfsidx/g"
truncate -s $((4 * 65536)) "$store/g"
rc=0; "$CBFS" cat "$store/g" >"$T/got2" 2>"$T/cut.err" || rc=$?
check_eq 1 "$rc" "cat of a file without sidecar cut inside a frame ($(cat "$T/cut.err"))"
[[ ! -s $T/got2 ]] || fail "it printed $(stat -c %s "$T/got2") bytes without --keep-going"
grep -q 'where the file ended cannot be told' "$T/cut.err" || fail "message: $(cat "$T/cut.err")"
rc=0; "$CBFS" cat --keep-going "$store/g" >"$T/got2" 2>/dev/null || rc=$?
check_eq 1 "$rc" "cat --keep-going of it"
n=$(stat -c %s "$T/got2")
((n > 0)) && cmp -s -n "$n" "$T/want" "$T/got2" || fail "--keep-going printed $n bytes, not a prefix of the file"
pass

#!/usr/bin/env bash
# A flipped byte in the store is an error, never wrong data: reading the damaged
# block fails with EIO, another block still reads correctly, and the daemon's log
# names the file.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv $((16 * 65536)) "$T/src.csv" 101
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/src.csv" "$mnt/victim.csv"
cbfs_umount "$mnt"

# damage the payload of block 8 (of 16) in the middle
python3 "$CBFS_TOOLS/frames.py" "$store/victim.csv" >"$T/frames" || fail "frames: $(cat "$T/frames")"
read -r _ off blk codec flags ulen plen < <(awk '$3 == 8' "$T/frames")
[[ ${blk:-} == 8 && $flags == 0 && $plen -gt 16 ]] || fail "block 8 is not a compressed frame: $(awk '$3 == 8' "$T/frames")"
pos=$((off + 64 + plen / 2))
python3 - "$store/victim.csv" "$pos" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0xFF]), pos); os.close(fd)
PY
note "flipped byte at $pos (block 8 frame at $off, plen $plen)"

cbfs_expect_log_errors 'victim'
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
drop_caches
check_fails dd if="$mnt/victim.csv" of="$T/bad.out" bs=64K skip=8 count=1 status=none
grep -q 'Input/output error' "$T/last.err" || fail "damaged block: expected EIO, got: $(cat "$T/last.err")"
check_fails cat "$mnt/victim.csv"
grep -q 'Input/output error' "$T/last.err" || fail "cat of damaged file: expected EIO, got: $(cat "$T/last.err")"
# other blocks are fine (before and after the damage), read from the daemon, not the page cache
drop_caches
for b in 14 2; do
    dd if="$mnt/victim.csv" of="$T/good.$b" bs=64K skip=$b count=1 status=none 2>"$T/good.err" ||
        fail "block $b unreadable: $(cat "$T/good.err")"
    dd if="$T/src.csv" of="$T/want.$b" bs=64K skip=$b count=1 status=none
    same_file "$T/want.$b" "$T/good.$b"
done
grep -Ei 'error|warning' "$(cbfs_log_of "$mnt")" | grep -q 'victim' ||
    fail "daemon log does not name the damaged file: $(grep -Ei 'error|warning' "$(cbfs_log_of "$mnt")" | head -n 2 | tr '\n' '|')"
rerr=$(getfattr --only-values -n user.cbfs.stats "$mnt" 2>/dev/null | sed -n 's/^read_errors=//p')
((${rerr:-0} >= 1)) || fail "read_errors is '${rerr}' after EIO reads, expected >= 1"
cbfs_umount "$mnt"
pass

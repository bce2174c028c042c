#!/usr/bin/env bash
# `cbfs cat` decodes stored files without a mount: for every codec, equal to the
# original after overwrites, a sparse extension (holes read as zeros) and a partial
# last block; --range gives the same bytes as dd; plain (codec=none) files are copied;
# errors of the output are named and outrank damage; a range past the end prints nothing.
. "$(dirname "$0")/lib.sh"
cbfs_tool

python3 "$CBFS_TOOLS/gendata.py" mixed $((1536 * 1024 + 4321)) "$T/src.bin" 21
python3 "$CBFS_TOOLS/gendata.py" csv 200K "$T/patch.csv" 22
# the expected result of the same operations on a local file
cp "$T/src.bin" "$T/want.bin"
dd if="$T/patch.csv" of="$T/want.bin" bs=64K oflag=seek_bytes seek=100000 conv=notrunc status=none
truncate -s $((3 * 1024 * 1024 + 99)) "$T/want.bin"
echo tail >>"$T/want.bin"

for codec in $(cbfs_codecs none); do
    cbfs_mount_fresh "codec=$codec" block_size=64K
    cp "$T/src.bin" "$mnt/f.bin"
    cp "$T/src.bin" "$mnt/orig.bin"
    dd if="$T/patch.csv" of="$mnt/f.bin" bs=64K oflag=seek_bytes seek=100000 conv=notrunc status=none
    truncate -s $((3 * 1024 * 1024 + 99)) "$mnt/f.bin"
    echo tail >>"$mnt/f.bin"
    cbfs_umount "$mnt"
    "$CBFS" cat "$store/orig.bin" >"$T/out.orig" 2>"$T/cat.err" || fail "$codec: cat orig.bin: $(cat "$T/cat.err")"
    same_file "$T/src.bin" "$T/out.orig"
    "$CBFS" cat "$store/f.bin" >"$T/out.f" 2>"$T/cat.err" || fail "$codec: cat f.bin: $(cat "$T/cat.err")"
    same_file "$T/want.bin" "$T/out.f"
    for r in 0:1 65535:2 100000:200K 1M:64K 3M: 999999:0; do
        off=${r%%:*} len=${r#*:}
        "$CBFS" cat --range "$r" "$store/f.bin" >"$T/out.r" 2>"$T/cat.err" || fail "$codec: cat --range $r: $(cat "$T/cat.err")"
        python3 - "$T/want.bin" "$T/out.r" "$off" "$len" <<'PY' || fail "$codec: --range $r differs"
import sys
def size(s):
    m = {"K": 1 << 10, "M": 1 << 20}
    return int(s[:-1]) * m[s[-1]] if s and s[-1] in m else int(s)
want = open(sys.argv[1], "rb").read(); got = open(sys.argv[2], "rb").read()
off = size(sys.argv[3]); n = size(sys.argv[4]) if sys.argv[4] else len(want)
assert got == want[off:off + n], (len(got), len(want[off:off + n]))
PY
    done
    note "$codec ok"
done
# errors: a directory, a bad range, a damaged block (exit 1, --keep-going writes zeros)
rc=0; "$CBFS" cat "$T/store-zstd" >/dev/null 2>&1 || rc=$?
check_eq 2 "$rc" "cat of a directory"
rc=0; "$CBFS" cat --range 12 "$T/store-zstd/f.bin" >/dev/null 2>&1 || rc=$?
check_eq 2 "$rc" "cat with a bad --range"
read -r _ off _ _ _ _ plen < <(python3 "$CBFS_TOOLS/frames.py" "$T/store-zstd/orig.bin" | awk '$3 == 1 && $5 == 0')
python3 - "$T/store-zstd/orig.bin" $((off + 64 + plen / 2)) <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0xFF]), pos); os.close(fd)
PY
rc=0; "$CBFS" cat "$T/store-zstd/orig.bin" >/dev/null 2>"$T/cat.err" || rc=$?
check_eq 1 "$rc" "cat of a damaged block"
grep -q "orig.bin: offset $off: block 1" "$T/cat.err" || fail "damage not named: $(cat "$T/cat.err")"
rc=0; "$CBFS" cat --keep-going "$T/store-zstd/orig.bin" >"$T/kg.out" 2>/dev/null || rc=$?
check_eq 1 "$rc" "cat --keep-going of a damaged block"
check_eq "$(stat -c %s "$T/src.bin")" "$(stat -c %s "$T/kg.out")" "--keep-going output size"

# Output errors are named as such and outrank damage (the output is short): one after a
# damaged block exited 1 without a word, and one alone blamed the store ("no space left
# on the store" for a full stdout).
rc=0; "$CBFS" cat "$T/store-zstd/f.bin" >/dev/full 2>"$T/cat.err" || rc=$?
check_eq 2 "$rc" "cat to a full device"
grep -q 'writing to stdout: No space left on device' "$T/cat.err" || fail "message: $(cat "$T/cat.err")"
rc=0
(trap '' XFSZ; ulimit -f 96; "$CBFS" cat --keep-going "$T/store-zstd/orig.bin" >"$T/kg2.out" 2>"$T/cat.err") || rc=$?
check_eq 2 "$rc" "cat --keep-going whose output fails after a damaged block ($(cat "$T/cat.err"))"
grep -q 'writing to stdout: File too large' "$T/cat.err" || fail "message: $(cat "$T/cat.err")"
# a range from past the end prints nothing (a read there returns nothing); an offset near
# 2^64 wrapped the block arithmetic and wrote from past cat's buffer
for r in 5G: 18446744073709551615:5; do
    rc=0; "$CBFS" cat --range "$r" "$T/store-zstd/f.bin" >"$T/out.r" 2>"$T/cat.err" || rc=$?
    check_eq 0 "$rc" "cat --range $r ($(cat "$T/cat.err"))"
    check_eq 0 "$(stat -c %s "$T/out.r")" "bytes printed by cat --range $r"
done
rc=0; "$CBFS" cat --range ' -1:5' "$T/store-zstd/f.bin" >/dev/null 2>&1 || rc=$?
check_eq 2 "$rc" "cat --range ' -1:5' (strtoull took it as 2^64 - 1)"
# a path through a mount reads the store behind it, and says so: a file open for writing
# came out short and stale with nothing said
cbfs_mount_fresh codec=lz4 block_size=64K
cp "$T/src.bin" "$mnt/m.bin"
"$CBFS" cat "$mnt/m.bin" >"$T/out.m" 2>"$T/cat.err" || fail "cat through the mount: $(cat "$T/cat.err")"
same_file "$T/src.bin" "$T/out.m"
grep -q 'read from the store behind its mount' "$T/cat.err" || fail "no word of it: $(cat "$T/cat.err")"
cbfs_umount "$mnt"
pass

#!/usr/bin/env bash
# `cbfs verify`: passes on a good store; on each injected corruption (payload byte,
# frame header byte, sidecar record byte, truncated data file) exits 1 and names the
# damaged file and the byte offset of the damage; records lost with a torn tail behind
# them are reported as such.
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/v.csv" 5
python3 "$CBFS_TOOLS/gendata.py" mixed 3M "$T/m.bin" 6
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
cp "$T/v.csv" "$mnt/victim.csv"
mkdir "$mnt/d" && cp "$T/m.bin" "$mnt/d/other.bin"
cbfs_umount "$mnt"

check "$CBFS" verify "$store"
grep -q '0 problem' "$T/check.out" || fail "good store: $(cat "$T/check.out")"
check "$CBFS" verify --json "$store"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["files"]==2 and d["problems"]==[] and d["logical_bytes"]>0, d' "$T/check.out" ||
    fail "verify --json: $(cat "$T/check.out")"
# --workers as bench and the settings take numbers: a negative one strtoul wrapped to 1
for bad in -18446744073709551615 " 4" 0 1025; do
    rc=0; "$CBFS" verify --workers "$bad" "$store" >/dev/null 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "verify --workers '$bad'"
done
check "$CBFS" verify --workers 3 "$store"

python3 "$CBFS_TOOLS/frames.py" "$store/victim.csv" >"$T/frames" || fail "frames: $(cat "$T/frames")"
read -r _ off blk _ flags _ plen < <(awk '$3 == 3' "$T/frames")
[[ ${blk:-} == 3 && $flags == 0 ]] || fail "block 3 is not a compressed frame: $(awk '$3 == 3' "$T/frames")"

flip() { # FILE POS
    python3 - "$1" "$2" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0x5A]), pos); os.close(fd)
PY
}

# expect_damage NAME WHERE OFFSET: verify of copy NAME exits 1 naming WHERE and OFFSET
expect_damage() {
    local rc=0
    "$CBFS" verify "$T/$1" >"$T/$1.out" 2>"$T/$1.err" || rc=$?
    check_eq 1 "$rc" "$1: exit status of verify"
    grep -q "^$T/$1/$2: offset $3: " "$T/$1.out" ||
        fail "$1: expected a problem '$2: offset $3:', got: $(cat "$T/$1.out" "$T/$1.err" | head -n 4 | tr '\n' '|')"
    note "$1: $(grep -m1 "offset $3:" "$T/$1.out" | sed "s|$T/||")"
}

cp -a "$store" "$T/payload"
flip "$T/payload/victim.csv" $((off + 64 + plen / 2))
expect_damage payload victim.csv "$off"

cp -a "$store" "$T/header"
flip "$T/header/victim.csv" $((off + 20))
expect_damage header victim.csv "$off"

# sidecar: record 0 is the header, then one 64-byte record per frame in file order
cp -a "$store" "$T/sidecar"
flip "$T/sidecar/.cbfsidx/victim.csv" $((64 * (1 + 3) + 20))
expect_damage sidecar .cbfsidx/victim.csv $((64 * 4))

cp -a "$store" "$T/trunc"
truncate -s $((off + 30)) "$T/trunc/victim.csv"
expect_damage trunc victim.csv "$off"

# Records lost in the middle of the sidecar (a zeroed slot, records behind it) and a frame
# a crash cut short at the end of the data: every frame the records name is there, so the
# tail is torn, not damage that records point into (helper-23's power-cut runs: every such
# cut was reported as "N index record(s) point into them", N being the records dropped)
cp -a "$store" "$T/lostrec"
python3 - "$T/lostrec/.cbfsidx/victim.csv" "$T/lostrec/victim.csv" "$off" <<'PY'
import os, sys
side, data, off = sys.argv[1], sys.argv[2], int(sys.argv[3])
fd = os.open(side, os.O_RDWR); os.pwrite(fd, bytes(64), 64 * 6); os.close(fd)
fd = os.open(data, os.O_RDWR); head = os.pread(fd, 100, off)
os.pwrite(fd, head, os.fstat(fd).st_size); os.close(fd)
PY
rc=0
"$CBFS" verify "$T/lostrec" >"$T/lostrec.out" 2>&1 || rc=$?
check_eq 1 "$rc" "lostrec: exit status of verify"
grep -q 'victim.csv: offset [0-9]*: .*torn tail of 100 byte' "$T/lostrec.out" ||
    fail "lostrec: the torn tail is not called torn: $(cat "$T/lostrec.out")"
! grep -q 'unreachable' "$T/lostrec.out" || fail "lostrec: the tail called unreachable: $(cat "$T/lostrec.out")"

# the untouched file is never blamed
for c in payload header sidecar trunc lostrec; do
    if grep -q other.bin "$T/$c.out"; then fail "$c: other.bin blamed: $(cat "$T/$c.out")"; fi
done
# a deleted sidecar is a problem too (exit 1), and --json lists it
cp -a "$store" "$T/nosidecar"
rm "$T/nosidecar/d/.cbfsidx/other.bin"
rc=0
"$CBFS" verify --json "$T/nosidecar" >"$T/ns.json" || rc=$?
check_eq 1 "$rc" "missing sidecar: exit status"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert any("d/.cbfsidx/other.bin" in p["file"] and "missing" in p["what"] for p in d["problems"]), d' "$T/ns.json" ||
    fail "missing sidecar not reported: $(cat "$T/ns.json")"
# A name with a newline cannot fake another file's line: it is printed escaped.
# (A damaged file in a directory whose name holds a line that reads as the
# result of $store/d/other.bin.)
fake=$'n\n'"$store/d/other.bin: offset 0: block 0: corrupt"$'\nx'
mkdir -p "$T/named"
cbfs_mount "$T/named" "$mnt" codec=lz4
mkdir -p "$mnt/$fake"
seq 1 2000 >"$mnt/$fake/f"
cbfs_umount "$mnt"
printf Q | dd of="$T/named/$fake/f" bs=1 seek=200 conv=notrunc status=none
rc=0
"$CBFS" verify "$T/named" >"$T/named.out" 2>&1 || rc=$?
check_eq 1 "$rc" "verify of a damaged file in a directory with a newline in its name"
grep -qF 'n\n' "$T/named.out" || fail "the name is not printed escaped: $(cat "$T/named.out")"
! grep -q "^$store/d/other.bin" "$T/named.out" || fail "a name made a line of its own: $(cat "$T/named.out")"
# --json keeps the name's own bytes (escaped for JSON, not for the terminal)
"$CBFS" verify --json "$T/named" >"$T/named.json" 2>&1 || true
python3 -c 'import json, os, sys
d = json.load(open(sys.argv[1]))
want = os.path.join(sys.argv[2], sys.argv[3], "f")
got = [p["file"] for p in d["problems"]]
assert want in got, (want, got)' "$T/named.json" "$T/named" "$fake" ||
    fail "verify --json does not give the name as it is: $(cat "$T/named.json")"
# A file that cannot be checked at all (its sidecar a dangling symlink) is an error:
# the summary and --json say so, never "0 problem(s)" alone.
mv "$T/named/$fake/.cbfsidx/f" "$T/f.side"
ln -s /nonexistent "$T/named/$fake/.cbfsidx/f"
rc=0
"$CBFS" verify --json "$T/named" >"$T/err.json" 2>"$T/err.log" || rc=$?
check_eq 2 "$rc" "verify of a file whose sidecar is a dangling symlink"
python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); assert d["errors"] == 1, d' \
    "$T/err.json" || fail "verify --json does not count the error: $(cat "$T/err.json")"
rc=0
"$CBFS" verify "$T/named" >"$T/err.out" 2>&1 || rc=$?
check_eq 2 "$rc" "verify (text) of the same"
grep -q '0 problem(s), 1 error(s): not all was checked' "$T/err.out" ||
    fail "the summary does not say that a file was not checked: $(cat "$T/err.out")"
grep -q 'f: its sidecar .*/.cbfsidx/f: not a regular file' "$T/err.out" ||
    fail "the error does not name the sidecar: $(cat "$T/err.out")"
rm "$T/named/$fake/.cbfsidx/f" && mv "$T/f.side" "$T/named/$fake/.cbfsidx/f"
# not a store
mkdir -p "$T/plain" && echo x >"$T/plain/f"
rc=0
"$CBFS" verify "$T/plain" >/dev/null 2>&1 || rc=$?
check_eq 2 "$rc" "verify of a non-store: exit status"
pass

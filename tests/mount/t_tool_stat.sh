#!/usr/bin/env bash
# `cbfs stat`: logical sizes match what was written, physical = data file + sidecar
# bytes on disk, ratio = logical/physical, codec and block kinds are right, a codec=none
# file is "plain", a path inside the mount maps to its store, bad paths are errors (2).
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 3M "$T/a.csv" 1
python3 "$CBFS_TOOLS/gendata.py" mixed $((2 * 1024 * 1024 + 777)) "$T/b.bin" 2
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/a.csv" "$mnt/a.csv"
mkdir "$mnt/sub"
cp "$T/b.bin" "$mnt/sub/b.bin"
# through the mount: the path is mapped to the store
check "$CBFS" stat --json "$mnt/sub/b.bin"
python3 - "$T/check.out" "$(stat -c %s "$T/b.bin")" <<'PY' || fail "stat via the mount: $(cat "$T/check.out")"
import json, sys
d = json.load(open(sys.argv[1]))
f = d["files"][0]
assert f["kind"] == "cbfs" and f["logical"] == int(sys.argv[2]), f
assert f["codecs"] == "zstd:3" and f["block_size"] == 65536, f
PY
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt" codec=none
cp "$T/a.csv" "$mnt/plain.csv"
cbfs_umount "$mnt"

check "$CBFS" stat --json "$store"
cp "$T/check.out" "$T/stat.json"
python3 - "$T/stat.json" "$store" "$(stat -c %s "$T/a.csv")" "$(stat -c %s "$T/b.bin")" <<'PY' || fail "stat --json: $(head -c 600 "$T/stat.json")"
import json, os, sys
d = json.load(open(sys.argv[1]))
store, a_len, b_len = sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
files = {os.path.relpath(f["path"], store): f for f in d["files"]}
assert sorted(files) == ["a.csv", "plain.csv", "sub/b.bin"], sorted(files)
for name, want in (("a.csv", a_len), ("sub/b.bin", b_len)):
    f = files[name]
    data = os.path.getsize(os.path.join(store, name))
    side = os.path.getsize(os.path.join(store, os.path.dirname(name), ".cbfsidx", os.path.basename(name)))
    assert f["kind"] == "cbfs" and f["logical"] == want, f
    assert f["data_bytes"] == data and f["index_bytes"] == side and f["physical"] == data + side, f
    assert abs(f["ratio"] - want / (data + side)) < 1e-3, f
    b = f["blocks"]
    assert b["total"] == (want + 65535) // 65536, b
    assert b["compressed"] + b["raw"] + b["hole"] == b["total"], b
assert files["a.csv"]["ratio"] > 2, files["a.csv"]        # CSV compresses well
assert files["sub/b.bin"]["blocks"]["hole"] >= 1, files["sub/b.bin"]  # mixed has a zero run
p = files["plain.csv"]
assert p["kind"] == "plain" and p["logical"] == a_len and p["physical"] == a_len, p
t = d["total"]
assert t["logical"] == 2 * a_len + b_len, t
assert t["physical"] == sum(f["physical"] for f in files.values()), t
assert d["files_count"] == 3
PY
# a file name that is not UTF-8 keeps --json valid, as \udcXX escapes that give the bytes
# back (Python's surrogateescape)
printf 'x' >"$store/"$'n\xffme.bin'
check "$CBFS" stat --json "$store/"$'n\xffme.bin'
python3 - "$T/check.out" "$store" <<'PY' || fail "--json with a non-UTF-8 name: $(cat "$T/check.out")"
import json, os, sys
d = json.load(open(sys.argv[1], encoding="utf-8"))
assert os.fsencode(d["files"][0]["path"]) == os.fsencode(sys.argv[2]) + b"/n\xffme.bin", d
PY
rm -f "$store/"$'n\xffme.bin'

# the human table has a TOTAL row
check "$CBFS" stat "$store"
grep -q 'TOTAL' "$T/check.out" || fail "no TOTAL row: $(cat "$T/check.out")"
grep -q 'zstd:3' "$T/check.out" || fail "codec not shown: $(cat "$T/check.out")"

# --plot: a PNG with one bar per file (few files), per directory (more than 24 files),
# at most 24 bars (more directories). The image width tells how many bars it has:
# 900 px up to 12 bars, 50 px more per bar beyond.
png_size() { # FILE -> "WIDTH HEIGHT" from a valid PNG header, or the test fails
    python3 - "$1" <<'PY' || fail "$1: not a PNG"
import struct, sys
b = open(sys.argv[1], "rb").read(24)
assert b[:8] == b"\x89PNG\r\n\x1a\n" and b[12:16] == b"IHDR", b
print(*struct.unpack(">II", b[16:24]))
PY
}
cbfs_mount "$store" "$mnt" codec=lz4
mkdir "$mnt/lz4" "$mnt/many"
cp "$T/a.csv" "$mnt/lz4/a.csv"
for i in $(seq 0 29); do
    mkdir -p "$mnt/many/d$((i % 6))"
    head -c $((100000 + i * 5000)) "$T/a.csv" >"$mnt/many/d$((i % 6))/f$i.csv"
done
cbfs_umount "$mnt"
check "$CBFS" stat --plot "$T/files.png" "$store/a.csv" "$store/plain.csv" "$store/sub" "$store/lz4"
check_eq "900 1000" "$(png_size "$T/files.png")" "--plot of 4 files: size"
check "$CBFS" stat --plot "$T/dirs.png" "$store"
grep -q 'many/d5/f29.csv' "$T/check.out" || fail "--plot: the table lost its rows"
check_eq "900 1000" "$(png_size "$T/dirs.png")" "--plot of 34 files in 9 directories: size"
check "$CBFS" stat --plot "$T/flat.png" "$store/many/d0"
(($(grep -c 'f[0-9]*.csv' "$T/check.out") == 5)) || fail "d0: $(cat "$T/check.out")"
check_eq "900 1000" "$(png_size "$T/flat.png")" "--plot of 5 files"
for i in $(seq 0 29); do mkdir -p "$store/wide/x$i" && cp "$T/b.bin" "$store/wide/x$i/"; done
check "$CBFS" stat --plot "$T/wide.png" "$store/wide"  # plain files, put in the store directly
check_eq "$((900 + 50 * 12)) 1000" "$(png_size "$T/wide.png")" "--plot of 30 directories (24 bars)"
rc=0
"$CBFS" stat --plot "$T/nowhere/x.png" "$store/a.csv" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "--plot into a missing directory"
grep -q 'gnuplot failed' "$T/err" || fail "--plot into a missing directory: $(cat "$T/err")"
# names from the store reach gnuplot (the title): a backquote or a newline in one must
# stay text, never run as a shell command
evil='q`touch evil1`'$'\n''system "touch evil2"'
mkdir -p "$store/$evil" && cp "$T/b.bin" "$store/$evil/f.bin"
(cd "$T" && "$CBFS" stat --plot "$T/evil.png" "$store/$evil/") >/dev/null 2>"$T/err" ||
    fail "--plot of a directory with a backquote in its name: $(cat "$T/err")"
[[ ! -e $T/evil1 && ! -e $T/evil2 && ! -e evil1 && ! -e evil2 ]] ||
    fail "--plot ran a command from a file name"
png_size "$T/evil.png" >/dev/null
rm -rf "${store:?}/$evil"

# errors: not a store, a sidecar, a missing path -> exit 2 with a message
mkdir -p "$T/notastore" && echo hello >"$T/notastore/x"
for bad in "$T/notastore" "$store/.cbfsidx/a.csv" "$T/missing"; do
    rc=0
    "$CBFS" stat "$bad" >"$T/out" 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "exit status of cbfs stat $bad"
    [[ -s $T/err ]] || fail "cbfs stat $bad: no message"
done
grep -q 'not a cbfs store' < <("$CBFS" stat "$T/notastore" 2>&1) || fail "no 'not a cbfs store' message"
check "$CBFS" stat --help

# stat reads sidecars, not data files: for a file of 2048 frames it makes a few
# read calls (the sidecar in chunks, the first and last frame headers), not one
# per frame header (syscr: read calls, whatever the page cache holds)
mkdir -p "$T/big"
cbfs_mount "$T/big" "$mnt" codec=lz4,block_size=64K
python3 "$CBFS_TOOLS/gendata.py" csv 128M "$mnt/big.csv" 21
cbfs_umount "$mnt"
reads=$(bash -c '"$1" stat "$2" >/dev/null && sed -n "s/^syscr: //p" /proc/$$/io' _ "$CBFS" "$T/big/big.csv")
((reads < 512)) || fail "cbfs stat of a file of 2048 frames made $reads read calls"
note "stat of a file of 2048 frames: $reads read calls"

# A damaged header of frame 0 tells no level: the next frame's is shown, never a made-up
# 0 ("zstd:0" for a zstd:3 file).
cp -a "$store" "$T/dmg"
printf '\xff' | dd of="$T/dmg/sub/b.bin" bs=1 seek=20 conv=notrunc status=none
check "$CBFS" stat --json "$T/dmg/sub/b.bin"
python3 -c 'import json, sys; f = json.load(open(sys.argv[1]))["files"][0]; assert f["codecs"] == "zstd:3", f' \
    "$T/check.out" || fail "stat with frame 0's header damaged: $(cat "$T/check.out")"
# A file that lost its sidecar and starts with a damaged frame envelope is a damaged
# file for stat too (exit 1), as for verify and cat: not a plain file of ratio 1.00.
rm "$T/dmg/.cbfsidx/a.csv"
printf '\xff' | dd of="$T/dmg/a.csv" bs=1 seek=9 conv=notrunc status=none
rc=0; "$CBFS" stat "$T/dmg/a.csv" >"$T/env.out" 2>&1 || rc=$?
check_eq 1 "$rc" "stat of a file with a damaged envelope and no sidecar ($(cat "$T/env.out"))"
grep -q 'damaged cbfs frame envelope' "$T/env.out" || fail "stat message: $(cat "$T/env.out")"
pass

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
    side = os.path.getsize(os.path.join(store, name + ".cbfsidx"))
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
# the human table has a TOTAL row
check "$CBFS" stat "$store"
grep -q 'TOTAL' "$T/check.out" || fail "no TOTAL row: $(cat "$T/check.out")"
grep -q 'zstd:3' "$T/check.out" || fail "codec not shown: $(cat "$T/check.out")"

# errors: not a store, a sidecar, a missing path -> exit 2 with a message
mkdir -p "$T/notastore" && echo hello >"$T/notastore/x"
for bad in "$T/notastore" "$store/a.csv.cbfsidx" "$T/missing"; do
    rc=0
    "$CBFS" stat "$bad" >"$T/out" 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "exit status of cbfs stat $bad"
    [[ -s $T/err ]] || fail "cbfs stat $bad: no message"
done
grep -q 'not a cbfs store' < <("$CBFS" stat "$T/notastore" 2>&1) || fail "no 'not a cbfs store' message"
check "$CBFS" stat --help
pass

#!/usr/bin/env bash
# `cbfs bench` on a small sample: a table row per requested codec (x level x block
# size), Pareto marks, recommendations, valid --json; an invalid level or codec is a
# usage error with the codec layer's message; --plot writes a PNG or says why not.
. "$(dirname "$0")/lib.sh"
cbfs_tool

python3 "$CBFS_TOOLS/gendata.py" csv 3M "$T/sample.csv" 41
codecs=$(cbfs_codecs)
check "$CBFS" bench --codecs "${codecs// /,}" --block-sizes 64K,256K --sample 1M "$T/sample.csv"
cp "$T/check.out" "$T/table"
for c in $codecs; do
    for bs in 64K 256K; do
        grep -Eq "^$c +[0-9]+ +$bs +[0-9.]+ +[0-9.]+ +[0-9.]+ +[0-9.]+" "$T/table" ||
            fail "no row for $c $bs: $(cat "$T/table")"
    done
done
grep -q '\*' "$T/table" || fail "no Pareto-optimal row: $(cat "$T/table")"
grep -q '^smallest: -o codec=' "$T/table" || fail "no 'smallest' recommendation: $(cat "$T/table")"
grep -q '^smallest that keeps up with 500 MB/s' "$T/table" || fail "no disk recommendation"

check "$CBFS" bench --json --codecs zstd --levels 1,5 --sample 512K --disk-mbps 1 "$T/sample.csv"
python3 - "$T/check.out" <<'PY' || fail "bench --json: $(cat "$T/check.out")"
import json, sys
d = json.load(open(sys.argv[1]))
rows = d["rows"]
assert [(r["codec"], r["level"]) for r in rows] == [("zstd", 1), ("zstd", 5)], rows
assert all(r["ratio"] > 1.5 and r["compress_mbps"] > 0 and r["decompress_mbps"] > 0 for r in rows), rows
assert any(r["pareto"] for r in rows)
assert d["keeps_up"].startswith("-o codec=zstd,level="), d   # 1 MB/s: everything keeps up
best = max(rows, key=lambda r: (r["ratio"], r["compress_mbps"]))
assert d["smallest"] == "-o codec=zstd,level=%d,block_size=256K" % best["level"], d   # default block size
PY
# pinned level
check "$CBFS" bench --codecs zstd:7,lz4 --levels 1 --sample 256K "$T/sample.csv"
grep -Eq '^zstd +7 ' "$T/check.out" || fail "zstd:7 not pinned: $(cat "$T/check.out")"

rc=0; "$CBFS" bench --codecs zstd --levels 99 "$T/sample.csv" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "invalid level"
grep -q 'out of range' "$T/err" || fail "level message: $(cat "$T/err")"
rc=0; "$CBFS" bench --codecs zip "$T/sample.csv" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "unknown codec"
grep -q "unknown codec 'zip'" "$T/err" || fail "codec message: $(cat "$T/err")"

if command -v gnuplot >/dev/null; then
    check "$CBFS" bench --codecs lz4,zstd --sample 256K --plot "$T/plot.png" "$T/sample.csv"
    [[ $(head -c 4 "$T/plot.png" | od -An -c | tr -d ' ') == *PNG* ]] || fail "--plot: no PNG written"
    # the --plot path reaches gnuplot: its backquotes stay text
    (cd "$T" && "$CBFS" bench --codecs lz4 --sample 64K --plot "$T/p\`touch evil\`.png" \
        "$T/sample.csv") >/dev/null 2>&1 || fail "--plot with a backquote in the path"
    [[ ! -e $T/evil && -s "$T/p\`touch evil\`.png" ]] || fail "--plot ran a command from its path"
fi
# a plot that is not written is a failure (exit 2), as in cbfs stat
rc=0; "$CBFS" bench --codecs lz4 --sample 64K --plot "$T/nowhere/x.png" "$T/sample.csv" \
    >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "--plot into a missing directory"
grep -Eq 'gnuplot (failed|is not installed)' "$T/err" || fail "--plot failure: $(cat "$T/err")"

# values that would be cut or printed as invalid JSON are refused
# (-18446744073709551615 wraps to 1 through strtoul, which accepted it)
for bad in "--disk-mbps inf" "--disk-mbps nan" "--workers 4294967297" \
    "--workers -18446744073709551615" "--levels 4294967299"; do
    rc=0; "$CBFS" bench --codecs zstd $bad --sample 64K "$T/sample.csv" >/dev/null 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "bench $bad"
    [[ -s $T/err ]] || fail "bench $bad: no message"
done
# more combinations than the table holds: refused up front, not silently cut
rc=0; "$CBFS" bench --codecs zstd --levels 1,2,3,4,5,6,7,8,9,10,11,12,13,14,15,16,17 \
    --block-sizes 4K,8K,16K,32K,64K,128K,256K,512K,1M,2M,4M,8M,16M,64K,32K,8K \
    "$T/sample.csv" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "272 combinations"
grep -q '272 combinations' "$T/err" || fail "combinations: $(cat "$T/err")"
# a sample larger than the file: the file (not an allocation of the sample's size, which
# no machine has: it failed with "out of memory")
check "$CBFS" bench --codecs lz4 --sample 1000T "$T/sample.csv"
pass

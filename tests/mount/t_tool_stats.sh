#!/usr/bin/env bash
# `cbfs stats`: parses the daemon's user.cbfs.stats text (from a file with --input,
# and live from a mount when the daemon exposes it), shows totals, stage times and a
# bottleneck verdict; --json is valid JSON; --watch redraws until interrupted.
. "$(dirname "$0")/lib.sh"
cbfs_tool

# A writer limited by compression: 2 workers busy ~90% of 10 s.
cat >"$T/cpu.txt" <<'S'
logical_written=2000000000
physical_written=500000000
logical_read=0
physical_read=0
blocks_compressed=1900
blocks_raw=0
blocks_hole=100
ns_compress=18000000000
ns_store_write=1000000000
ns_wait_slots=7000000000
ns_decompress=0
ns_store_read=0
cache_hits=0
cache_misses=0
readahead_hits=0
write_errors=0
read_errors=2
stream_gaps=0
inflight_bytes=8388608
uptime_ns=10000000000
workers=2
codec=zstd
level=3
block_size=1048576
some_future_key=1
S
check "$CBFS" stats --input "$T/cpu.txt" /nonexistent
grep -q 'bottleneck: compression (CPU)' "$T/check.out" || fail "cpu verdict: $(cat "$T/check.out")"
grep -q 'average 4.00' "$T/check.out" || fail "ratio: $(cat "$T/check.out")"
grep -Eq 'compress +18.00 +90.0%' "$T/check.out" || fail "stage line: $(cat "$T/check.out")"
grep -q '^errors: 0 write, 2 read (journalctl' "$T/check.out" || fail "errors line: $(cat "$T/check.out")"
# no lookups: no rate (it once printed "0.0%" beside the totals of a finished restore)
grep -q '^cache hit rate - (total 0 hits, 0 misses)' "$T/check.out" ||
    fail "hit rate without lookups: $(grep 'cache hit' "$T/check.out")"
sed -e 's/^cache_hits=.*/cache_hits=1738/' -e 's/^cache_misses=.*/cache_misses=6/' \
    "$T/cpu.txt" >"$T/hits.txt"
check "$CBFS" stats --input "$T/hits.txt" /nonexistent
grep -q '^cache hit rate 99.7% (total 1738 hits, 6 misses)' "$T/check.out" ||
    fail "hit rate: $(grep 'cache hit' "$T/check.out")"
check "$CBFS" stats --json --input "$T/cpu.txt" /nonexistent
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["cache_hit_rate"] is None, d
' "$T/check.out" || fail "stats --json without lookups: $(cat "$T/check.out")"

# disk-bound writer: little compress time, store writes busy most of the wall
sed -e 's/^ns_compress=.*/ns_compress=2000000000/' -e 's/^ns_store_write=.*/ns_store_write=8000000000/' \
    "$T/cpu.txt" >"$T/disk.txt"
check "$CBFS" stats --json --input "$T/disk.txt" /nonexistent
python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
assert d["bottleneck"] == "store writes (disk)", d
assert d["codec"] == "zstd" and d["workers"] == 2 and d["logical_written"] == 2000000000, d
assert abs(d["ratio_average"] - 4.0) < 1e-6 and abs(d["stages"]["compress"]["pct"] - 10.0) < 1e-6, d
' "$T/check.out" || fail "stats --json: $(cat "$T/check.out")"

# nothing busy while data flows: the application is the bottleneck
sed -e 's/^ns_compress=.*/ns_compress=200000000/' -e 's/^ns_store_write=.*/ns_store_write=100000000/' \
    -e 's/^ns_wait_slots=.*/ns_wait_slots=0/' "$T/cpu.txt" >"$T/idle.txt"
check "$CBFS" stats --input "$T/idle.txt" /nonexistent
grep -q 'bottleneck: the writer (cbfs is idle)' "$T/check.out" || fail "idle verdict: $(cat "$T/check.out")"

# --watch redraws (ANSI clear) until SIGINT
"$CBFS" stats --watch 0.2 --input "$T/cpu.txt" /nonexistent >"$T/watch.out" 2>&1 &
wpid=$!
sleep 1
kill -INT $wpid
rc=0
wait $wpid || rc=$?
check_eq 0 "$rc" "stats --watch exit status after Ctrl-C"
(($(grep -c 'bottleneck:' "$T/watch.out") >= 2)) || fail "--watch did not redraw: $(head -c 300 "$T/watch.out")"
grep -q $'\033\[2J' "$T/watch.out" || fail "--watch does not clear the screen"

# --input of a directory says so (not "no uptime_ns line")
rc=0; "$CBFS" stats --input "$T" /nonexistent >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "--input of a directory"
grep -q 'is a directory' "$T/err" || fail "--input DIR: $(cat "$T/err")"

# --watch N after the mount point as well as before it
"$CBFS" stats --input "$T/cpu.txt" /nonexistent --watch 0.2 >"$T/w2.out" 2>&1 &
wpid=$!
sleep 0.7
kill -INT $wpid
rc=0; wait $wpid || rc=$?
check_eq 0 "$rc" "stats MNT --watch 0.2"
(($(grep -c 'bottleneck:' "$T/w2.out") >= 2)) || fail "MNT --watch 0.2: $(head -c 300 "$T/w2.out")"

# --watch takes a number of seconds, never NaN
for bad in nan 0x1 1e1 inf; do
    rc=0; "$CBFS" stats --watch=$bad --input "$T/cpu.txt" /nonexistent >/dev/null 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "--watch=$bad"
done

# output that cannot be written is an error, not exit 0 (cron: > x.tmp && mv x.tmp x)
for mode in "--prometheus" "--json"; do
    rc=0; "$CBFS" stats $mode --input "$T/cpu.txt" /backups >/dev/full 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "stats $mode into a full device"
    grep -q 'writing to stdout: No space left on device' "$T/err" || fail "stats $mode >/dev/full: $(cat "$T/err")"
done
# --watch into a pipe whose reader went (SIGPIPE ignored, as under some supervisors): it
# redrew into nothing until killed
rc=$( (trap '' PIPE; timeout 20 "$CBFS" stats --watch 0.1 --input "$T/cpu.txt" /backups 2>"$T/err" |
    head -c 10 >/dev/null; echo "${PIPESTATUS[0]}") )
check_eq 2 "$rc" "stats --watch into a closed pipe ($(cat "$T/err"))"
grep -q 'writing to stdout: Broken pipe' "$T/err" || fail "stats --watch: $(cat "$T/err")"

# counters that go back between two samples (a remount whose uptime passed the old one)
# are a new run: the view shows totals since the mount, never a wrapped difference
cp "$T/cpu.txt" "$T/w.txt"
"$CBFS" stats --watch 0.3 --json --input "$T/w.txt" /nonexistent >"$T/wj.out" 2>&1 &
wpid=$!
sleep 0.5
sed -e 's/^uptime_ns=.*/uptime_ns=20000000000/' -e 's/^logical_written=.*/logical_written=1000/' \
    -e 's/^ns_compress=.*/ns_compress=1000/' "$T/cpu.txt" >"$T/w2.txt"
mv "$T/w2.txt" "$T/w.txt"
sleep 0.8
kill -INT $wpid
wait $wpid || fail "stats --watch --json exit status after Ctrl-C"
python3 - "$T/wj.out" <<'PY' || fail "counters going back: $(tail -c 600 "$T/wj.out")"
import json, sys
docs = [json.loads(l) for l in open(sys.argv[1]) if l.startswith("{")]
assert any(d["logical_written"] == 1000 for d in docs), "the second file was never read"
for d in docs:
    assert d["logical_write_mbps"] < 1e6, d["logical_write_mbps"]
    assert all(0 <= s["pct"] <= 1000 for s in d["stages"].values()), d["stages"]
PY

# not a mount: exit 2 with a message
rc=0
"$CBFS" stats "$T" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "stats on a plain directory"
grep -q 'user.cbfs.stats' "$T/err" || fail "message: $(cat "$T/err")"

# live: counters move while a writer runs, and the time the workers spend
# compressing and writing frames fits in wall time x workers
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=zstd:3,workers=2
python3 "$CBFS_TOOLS/gendata.py" csv 64M "$T/src.csv" 3
# a paced writer (1 MiB every 30 ms), so the first sample lands mid-write
python3 -c '
import sys, time
with open(sys.argv[1], "rb") as src, open(sys.argv[2], "wb") as dst:
    while True:
        b = src.read(1 << 20)
        if not b:
            break
        dst.write(b)
        dst.flush()
        time.sleep(0.03)
' "$T/src.csv" "$mnt/x.csv" &
dpid=$!
sleep 0.7
check "$CBFS" stats --json "$mnt"
cp "$T/check.out" "$T/s1.json"
wait $dpid || fail "writer failed"
check "$CBFS" stats --json "$mnt"
python3 -c '
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:3])
assert b["logical_written"] >= 64 << 20, b
assert b["logical_written"] > a["logical_written"], (a, b)
assert b["codec"] == "zstd" and b["workers"] == 2, b
busy = b["ns_compress"] + b["ns_store_write"]
assert 0 < busy <= b["uptime_ns"] * b["workers"] * 1.02, (busy, b["uptime_ns"])
' "$T/s1.json" "$T/check.out" || fail "live stats: $(cat "$T/check.out")"
note "live counters move; worker stage time within wall x workers"
# a plain codec=none file's bytes count as logical and physical, written and read (they
# did not count at all: a codec=none directory's backups were missing from throughput)
mkdir "$mnt/plain"
check setfattr -n user.cbfs.codec -v none "$mnt/plain"
check "$CBFS" stats --json "$mnt"
cp "$T/check.out" "$T/p0.json"
head -c 3000000 "$T/src.csv" >"$mnt/plain/p.csv" # its close waits for the written-back pages
check "$CBFS" stats --json "$mnt"
cp "$T/check.out" "$T/p1.json"
cbfs_umount "$mnt"
cmp <(head -c 3000000 "$T/src.csv") "$store/plain/p.csv" || fail "the plain file is not stored as it is"
drop_caches
cbfs_mount "$store" "$mnt" codec=zstd:3,workers=2
check cmp <(head -c 3000000 "$T/src.csv") "$mnt/plain/p.csv"
check "$CBFS" stats --json "$mnt"
python3 -c '
import json, sys
w0, w1, r = (json.load(open(p)) for p in sys.argv[1:4])
for k in ("logical_written", "physical_written"):
    assert w1[k] - w0[k] == 3000000, (k, w0[k], w1[k])
for k in ("logical_read", "physical_read"):  # the kernel may read a page twice, never less
    assert 3000000 <= r[k] < 2 * 3000000, (k, r[k])
' "$T/p0.json" "$T/p1.json" "$T/check.out" || fail "plain file counters: $(cat "$T/p0.json" "$T/p1.json" "$T/check.out")"
note "a plain file's bytes count as logical and physical, written and read"
# read-only: neither set nor remove reaches the store's root directory
setfattr -n user.cbfs.stats -v x "$mnt" 2>"$T/err" && fail "setting user.cbfs.stats succeeded"
grep -q 'not permitted' "$T/err" || fail "set: $(cat "$T/err")"
setfattr -x user.cbfs.stats "$mnt" 2>"$T/err" && fail "removing user.cbfs.stats succeeded"
# EPERM, not the store's ENODATA (nothing is set there to remove)
grep -q 'not permitted' "$T/err" || fail "remove: $(cat "$T/err")"
cbfs_umount "$mnt"
getfattr -n user.cbfs.stats "$store" >/dev/null 2>&1 && fail "user.cbfs.stats stored on the store's root"
pass

#!/usr/bin/env bash
# The tools on a store that a backup is writing through its mount (a cron job's
# `cbfs verify`, a restore test's `cbfs cat`): a block the daemon rewrote (its old
# frame punched once the new record is down), a partial block an fsync stored and the
# next write replaced, or a frame still being appended must not be called damage
# (tool_file_look_again). Before, verify and cat said "corrupt data: checksum mismatch"
# or "torn tail" (exit 1) for healthy files, several times a run. A damaged file beside
# them is still found, and cat never prints a mix of two versions of a file as one.
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" mixed 16M "$T/src1" 71
python3 "$CBFS_TOOLS/gendata.py" mixed 16M "$T/src2" 73
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/bad.csv" 72
cbfs_mount "$store" "$mnt" codec=zstd:1,block_size=64K
cp "$T/src1" "$mnt/db.bkp"
cp "$T/bad.csv" "$mnt/bad.csv"
cbfs_umount "$mnt"
# one payload byte of bad.csv's block 2 flipped: real damage
read -r _ off _ _ _ _ plen < <(python3 "$CBFS_TOOLS/frames.py" "$store/bad.csv" | awk '$3 == 2')
python3 - "$store/bad.csv" $((off + 64 + plen / 2)) <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0xFF]), pos); os.close(fd)
PY
changed="it changed while it was printed"

cbfs_mount "$store" "$mnt"
# writers: db.bkp rewritten in place with one source and then the other, a block-aligned
# MiB at a time (so each of its blocks is, at any time, one source's or the other's); a
# new file appended and fsync'd every 1000000 bytes (not a block multiple: each fsync
# stores a partial block); small files written to a temporary name and renamed over
touch "$T/run"
(while [[ -e $T/run ]]; do
    for s in src2 src1; do dd if="$T/$s" of="$mnt/db.bkp" bs=1M conv=notrunc,fsync status=none; done
done) &
rw=$!
python3 - "$mnt/new.bkp" "$T/src1" "$T/run" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
src = open(sys.argv[2], "rb").read()
while os.path.exists(sys.argv[3]):
    for i in range(0, len(src), 1000000):
        os.write(fd, src[i:i + 1000000])
        os.fsync(fd)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
os.close(fd)
PY
aw=$!
head -c 300000 "$T/src2" >"$T/small"
(i=0; while [[ -e $T/run ]]; do
    i=$((i + 1)); cp "$T/small" "$mnt/.s$i.tmp" && mv "$mnt/.s$i.tmp" "$mnt/s$i"; rm -f "$mnt/s$((i - 3))"
done) &
cw=$!
end=$((SECONDS + 10)) rounds=0 bad=
while ((SECONDS < end)); do
    rounds=$((rounds + 1))
    rc=0; "$CBFS" verify "$store" >"$T/v.out" 2>&1 || rc=$?
    grep -v '^verified' "$T/v.out" | grep -v "^$store/bad.csv: offset [0-9]*: block 2 " >"$T/v.other" || true
    [[ $rc == 1 && ! -s $T/v.other ]] || bad+="verify (rc $rc): $(head -n 2 "$T/v.other" | tr '\n' '|') "
    grep -q "^$store/bad.csv: offset [0-9]*: block 2 " "$T/v.out" || bad+="verify missed bad.csv's damage "
    rc=0; "$CBFS" cat "$store/db.bkp" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
    if [[ $rc == 0 ]]; then
        python3 - "$T/cat.out" "$T/src1" "$T/src2" <<'PY' || bad+="cat printed a block of neither source "
import sys
out, a, b = (open(p, "rb").read() for p in sys.argv[1:4])
B = 64 << 10
sys.exit(len(out) != len(a) or any(out[i:i + B] not in (a[i:i + B], b[i:i + B]) for i in range(0, len(a), B)))
PY
    elif [[ $rc != 1 || $(grep -vc "$changed" "$T/cat.err") != 0 ]]; then
        bad+="cat (rc $rc): $(head -n 1 "$T/cat.err") "
    fi
    [[ -z $bad ]] || break
done
rm -f "$T/run"
wait "$rw" "$aw" "$cw"
[[ -z $bad ]] || fail "round $rounds: $bad"
note "$rounds rounds of verify and cat while three writers ran"

# cat stalled between two windows (its output pipe full, nobody reading) while the file
# is rewritten with other bytes, or cut short: the rest of the file is no longer the
# one whose start it printed. It says so (exit 1); it printed the two versions glued
# together, or zeros past the new end, with exit 0 (the first look-again), or called
# the file damaged (before)
for mode in rewrite shrink; do
    cp "$T/src1" "$mnt/f.$mode" && sync "$mnt/f.$mode"
    python3 - "$CBFS" "$store/f.$mode" "$mnt/f.$mode" "$T/src1" "$T/src2" "$mode" >"$T/stall.out" <<'PY' ||
import os, subprocess, sys, time
cbfs, sf, mf, a_path, b_path, mode = sys.argv[1:7]
a, b = open(a_path, "rb").read(), open(b_path, "rb").read()
p = subprocess.Popen([cbfs, "cat", sf], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
head = p.stdout.read(64 << 10)  # cat has printed from the old index; its first window
time.sleep(0.5)                 # (2 MiB) is decoded and waits on the full pipe
fd = os.open(mf, os.O_WRONLY)
if mode == "rewrite":
    os.write(fd, b)
else:
    os.ftruncate(fd, 1 << 20)
os.fsync(fd)
os.close(fd)
out, err = p.communicate()
out, err = head + out, err.decode()
if p.returncode == 0 and out == a:
    print("whole (the old version: no block of it was punched yet)")
elif p.returncode == 1 and "it changed while it was printed" in err and "mismatch" not in err:
    print("changed")
else:
    print("rc %d, %d bytes (old start %s), stderr: %s" % (p.returncode, len(out), out[:1 << 20] == a[:1 << 20], err.strip()))
    sys.exit(1)
PY
        fail "cat during a $mode: $(cat "$T/stall.out")"
    note "cat during a $mode: $(cat "$T/stall.out")"
done
# a damaged backup rotated (renamed) while verify checks it: the rename changes it under
# the check, and the name verify found it at names nothing now; it is still reported
# (the first look-again called a file no longer at its name gone and dropped its damage,
# exit 0). verify on one worker, so that the rename lands inside its check.
python3 "$CBFS_TOOLS/gendata.py" mixed 48M "$T/big" 74
cp "$T/big" "$mnt/big.bkp" && sync "$mnt/big.bkp"
cbfs_umount "$mnt"
read -r _ off _ _ _ _ plen < <(python3 "$CBFS_TOOLS/frames.py" "$store/big.bkp" | awk '$3 == 150')
python3 - "$store/big.bkp" $((off + 64 + plen / 2)) <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0xFF]), pos); os.close(fd)
PY
cbfs_mount "$store" "$mnt"
rc=0
"$CBFS" verify --workers 1 "$store" >"$T/rot.out" 2>&1 &
vpid=$!
sleep 0.05
mv "$mnt/big.bkp" "$mnt/big.bkp.1"
wait "$vpid" || rc=$?
check_eq 1 "$rc" "verify of a damaged file renamed while it was checked ($(tr '\n' '|' <"$T/rot.out"))"
# Reported under the name verify found it at; on a busy machine verify may list the
# directory only after the rename, and then finds it at its new name (the suite once ran
# so beside other work): either is right, a report under neither is the bug.
grep -Eq "big\.bkp(\.1)?: offset [0-9]*: block 150 " "$T/rot.out" ||
    fail "the damage of a file renamed during verify was not reported: $(tr '\n' '|' <"$T/rot.out")"
grep -q "big.bkp: offset" "$T/rot.out" || note "verify listed the directory after the rename"
cbfs_umount "$mnt"

# cat of a file whose writer is mid-append: its sidecar holds the first two records and
# frame 2's payload has not landed (zeros), frames 3 and 4 behind it have: a load sees a tail that
# looks like a damaged frame header. Alone (nothing changes) that is reported as damage;
# while the writer finishes, cat loads again and prints the whole file (it called the
# healthy file damaged, helper-34: 28 of 61 cats beside a busy writer).
cstore=$T/cstore
mkdir -p "$cstore"
cbfs_mount "$cstore" "$mnt" codec=zstd,block_size=64K
python3 "$CBFS_TOOLS/gendata.py" mixed 320K "$T/five" 75
cp "$T/five" "$mnt/five"
cbfs_umount "$mnt"
side=$cstore/.cbfsidx/five # layout 2: a new store
read -r _ offm _ _ flm _ plenm < <(python3 "$CBFS_TOOLS/frames.py" "$cstore/five" | awk '$3 == 2')
check_eq 0 "$flm" "frame 2's flags (a compressed block)"
cp "$cstore/five" "$T/five.data"
cp "$side" "$T/five.side"
# live STATE [READY]: 'mid' (frame 2's payload zeros, two records) or 'done' (as
# written); with READY, it makes that file, then waits 30 ms before it writes
live() {
    python3 - "$cstore/five" "$side" "$T/five.data" "$T/five.side" "$offm" "$plenm" "$@" <<'PY'
import os, sys, time
data, side, full_data, full_side = sys.argv[1:5]
off, plen, state = int(sys.argv[5]) + 64, int(sys.argv[6]), sys.argv[7]
d, s = open(full_data, "rb").read(), open(full_side, "rb").read()
if len(sys.argv) > 8:
    open(sys.argv[8], "w").close()
    time.sleep(0.03)
fd = os.open(data, os.O_WRONLY)  # in place: the files cat holds open change
os.pwrite(fd, d[off:off + plen] if state == "done" else bytes(plen), off)
os.close(fd)
fd = os.open(side, os.O_WRONLY)
if state == "done":
    os.pwrite(fd, s[64 + 2 * 64:], 64 + 2 * 64)
else:
    os.ftruncate(fd, 64 + 2 * 64)
os.close(fd)
PY
}
live mid
rc=0; "$CBFS" cat "$cstore/five" >"$T/five.out" 2>"$T/five.err" || rc=$?
check_eq 1 "$rc" "cat of a file left mid-append ($(tr '\n' '|' <"$T/five.err"))"
grep -q "damaged frame header" "$T/five.err" || fail "mid-append, alone: $(cat "$T/five.err")"
# the writer's last 30 ms of work start just before cat; cat's first load meets 'mid'
# (unless a busy machine delays it past them: then it meets 'done', right as well)
live done "$T/ready" &
lpid=$!
for _ in $(seq 200); do [[ -e $T/ready ]] && break; sleep 0.01; done
rc=0; "$CBFS" cat "$cstore/five" >"$T/five.out" 2>"$T/five.err" || rc=$?
wait "$lpid" || fail "the writer's last step failed"
check_eq 0 "$rc" "cat while the writer finished its append ($(tr '\n' '|' <"$T/five.err"))"
same_file "$T/five" "$T/five.out"
note "cat beside a writer finishing an append loads again and prints the whole file"
pass

#!/usr/bin/env bash
# Damaged or foreign store contents, injected while unmounted into a store written through
# the mount: a flipped byte in a frame payload, a frame header or a sidecar record, a
# truncated data file, a sidecar of another file, a sidecar of format version 2, plain
# files dropped into the store, a sidecar that is a symlink out of the store. Whatever is
# read back must be the original bytes; damage shows as EIO, a refused open or a short
# file, with a log line. Prints "injected N, detected N, recovered N".
. "$(dirname "$0")/lib.sh"

BS=65536
OPTS=codec=zstd,block_size=64K
pristine=$T/pristine store=$T/store mnt=$T/mnt out=$T/outside
mkdir -p "$pristine" "$out"
cc -O1 -Wall -Wextra -o "$T/xxh3seal" "$CBFS_TOOLS/xxh3seal.c" -lxxhash || fail "cannot build xxh3seal"
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/v.csv" 51
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/w.csv" 52
python3 "$CBFS_TOOLS/gendata.py" mixed 1M "$T/m.bin" 53
cbfs_mount "$pristine" "$mnt" "$OPTS"
for f in v.csv w.csv m.bin; do cp "$T/$f" "$mnt/$f"; done
cbfs_umount "$mnt"
python3 "$CBFS_TOOLS/frames.py" "$pristine/v.csv" >"$T/v.frames" || fail "frames: $(cat "$T/v.frames")"
check_eq 16 "$(wc -l <"$T/v.frames")" "frames of v.csv"

# Damage is reported: errors naming the file are expected in the daemon logs.
cbfs_expect_log_errors 'v\.csv|w\.csv|m\.bin|junk|version|index|sidecar|frame|block'

injected=0 detected=0 recovered=0 silent=0
# problem MSG: a failed expectation; the test goes on with the next case and fails at the end
PROBLEMS=()
problem() { PROBLEMS+=("$CASE: $*"); echo "  $TEST_NAME: PROBLEM $CASE: $*"; }
# flip FILE POS: inverts one byte
flip() {
    python3 - "$1" "$2" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); assert len(b) == 1, "flip past the end"
os.pwrite(fd, bytes([b[0] ^ 0x5A]), pos); os.close(fd)
PY
}
# frame BLOCK: "offset plen" of v.csv's frame of BLOCK
frame() { awk -v b="$1" '$3 == b {print $2, $7}' "$T/v.frames"; }
# begin CASE: a fresh copy of the pristine store
begin() {
    CASE=$1
    rm -rf "$store"
    cp -a "$pristine" "$store"
    injected=$((injected + 1))
}
# blocks NAME [ORIGINAL]: reads MNT/NAME block by block against the original; sets RES
blocks() {
    drop_caches
    RES=$(python3 "$CBFS_TOOLS/blockcheck.py" "$mnt/$1" "${2:-$T/$1}" $BS) || problem "WRONG BYTES read from $1: $RES"
    note "$CASE: $1: $RES"
}
# logged NAME: the current daemon log has an error/warning line naming NAME
logged() { grep -Ei 'error|warning' "$(cbfs_log_of "$mnt")" | grep -qF "$1"; }
# unchanged STOREFILE: the store file is still identical to the pristine one
unchanged() { cmp -s "$pristine/$1" "$store/$1" || problem "the daemon modified $1 in the store"; }
# refused CMD...: the command must fail (a write to a file the daemon cannot trust)
refused() { if "$@" >/dev/null 2>&1; then problem "accepted: $*"; fi; }

# (1) a flipped byte in the payload of block 8: that block EIO, the others correct
begin payload
read -r off plen < <(frame 8)
flip "$store/v.csv" $((off + 64 + plen / 2))
cbfs_mount "$store" "$mnt" "$OPTS"
blocks v.csv
[[ $RES == "ok 15 eio 1 short 0 wrong 0 eio_blocks 8" ]] || problem "expected only block 8 to fail: $RES"
logged v.csv || problem "no log line names v.csv"
detected=$((detected + 1))
cbfs_umount "$mnt"

# (2) a flipped byte in a frame header (its hash field, then its magic): EIO for that
# block or the file ends before it; every byte read is right
for pos in 40 9; do
    begin "header+$pos"
    read -r off plen < <(frame 5)
    flip "$store/v.csv" $((off + pos))
    cbfs_mount "$store" "$mnt" "$OPTS"
    blocks v.csv
    [[ $RES != "ok 16 "* ]] || problem "damage to block 5's header went unnoticed: $RES"
    [[ $RES == *eio_blocks*5* || $RES == *"short "[1-9]* ]] || problem "block 5 neither EIO nor cut: $RES"
    if logged v.csv || [[ $RES == *eio_blocks*5* ]]; then
        detected=$((detected + 1))
    else
        silent=$((silent + 1))
        problem "no error line names v.csv (the file silently reads as $(stat -c %s "$mnt/v.csv") bytes)"
    fi
    # opening for writing must not cut away the good frames after the damaged one
    head -c "$(stat -c %s "$mnt/v.csv")" "$T/v.csv" >"$T/v.appended"
    if sh -c "echo appended >>'$mnt/v.csv'" 2>"$T/append.err"; then
        note "$CASE: append accepted"
        echo appended >>"$T/v.appended"
    else
        cp "$T/v.csv" "$T/v.appended"
        note "$CASE: append refused: $(cat "$T/append.err")"
    fi
    cbfs_umount "$mnt"
    read -r off6 plen6 < <(frame 15)
    if (($(stat -c %s "$store/v.csv") < off6 + 64 + plen6)); then
        problem "opening the file for writing truncated the data file from $(stat -c %s "$pristine/v.csv") to $(stat -c %s "$store/v.csv") bytes: the intact frames of blocks 6-15 are destroyed"
    fi
    cbfs_mount "$store" "$mnt" "$OPTS"
    blocks v.csv "$T/v.appended"
    cbfs_umount "$mnt"
done

# (3) a flipped byte in a sidecar record (block 3's, then the header record's file id):
# replay stops there and the frames are rescanned, or EIO; never wrong bytes
for pos in $((64 * 4 + 20)) 20; do
    begin "record+$pos"
    flip "$store/.cbfsidx/v.csv" "$pos"
    cbfs_mount "$store" "$mnt" "$OPTS"
    blocks v.csv
    if [[ $RES == "ok 16 "* ]]; then recovered=$((recovered + 1)); else detected=$((detected + 1)); fi
    cbfs_umount "$mnt"
done

# (4) a truncated data file (in the middle of block 10's frame, then at a frame
# boundary): blocks 0-9 correct, the rest EIO or short
for cut in mid edge; do
    begin "truncate-$cut"
    read -r off plen < <(frame 10)
    [[ $cut == mid ]] && off=$((off + 64 + plen / 2))
    truncate -s "$off" "$store/v.csv"
    cbfs_mount "$store" "$mnt" "$OPTS"
    blocks v.csv
    [[ $RES == "ok 10 "* ]] || problem "expected blocks 0-9 intact, the rest EIO or short: $RES"
    detected=$((detected + 1))
    cbfs_umount "$mnt"
done

# (5) the sidecar of another file: refused on open (EIO) with a log line; opening it
# for writing does not "repair" either file
begin wrong-sidecar
cp "$pristine/.cbfsidx/w.csv" "$store/.cbfsidx/v.csv"
cbfs_mount "$store" "$mnt" "$OPTS"
blocks v.csv
[[ $RES == "open EIO" ]] || problem "expected EIO on open: $RES"
logged v.csv || problem "no log line names v.csv"
refused sh -c "echo x >>'$mnt/v.csv'"
cbfs_umount "$mnt"
unchanged v.csv
cmp -s "$pristine/.cbfsidx/w.csv" "$store/.cbfsidx/v.csv" || problem "the foreign sidecar was modified"
detected=$((detected + 1))

# (6) a sidecar of format version 2 (header record byte 8, re-sealed): refused, the log
# names the version, nothing in the store is touched
begin version2
printf '\x02' | dd of="$store/.cbfsidx/v.csv" bs=1 seek=8 conv=notrunc status=none
"$T/xxh3seal" "$store/.cbfsidx/v.csv" 0 || fail "xxh3seal failed"
cp "$store/.cbfsidx/v.csv" "$T/v2.cbfsidx"
cbfs_mount "$store" "$mnt" "$OPTS"
blocks v.csv
[[ $RES == "open EIO" ]] || problem "expected EIO on open: $RES"
grep -Ei 'error|warning' "$(cbfs_log_of "$mnt")" | grep -F v.csv | grep -qi version ||
    problem "no log line names the file and the version: $(grep -Ei 'error|warning' "$(cbfs_log_of "$mnt")" | head -n 2 | tr '\n' '|')"
note "$CASE: log: $(grep -Ei 'error|warning' "$(cbfs_log_of "$mnt")" | grep -F v.csv | head -n 1)"
refused sh -c "echo x >>'$mnt/v.csv'"
refused truncate -s 0 "$mnt/v.csv"
cbfs_umount "$mnt"
unchanged v.csv
cmp -s "$T/v2.cbfsidx" "$store/.cbfsidx/v.csv" || problem "the version-2 sidecar was modified"
detected=$((detected + 1))

# (7) files that are not cbfs files, put directly into the store: served byte-exact
begin foreign-files
head -c 300000 /dev/urandom >"$T/plain.rnd"
cp "$T/plain.rnd" "$store/plain.rnd"
cp "$T/v.csv" "$store/plain.csv"
: >"$store/empty"
# a zstd file made by the stock tool (starts like a cbfs data file: a zstd frame)
zstd -q -c "$T/w.csv" >"$T/w.csv.zst"
cp "$T/w.csv.zst" "$store/w.csv.zst"
# junk with a junk sidecar: whatever the daemon decides, it never invents bytes
head -c 100000 /dev/urandom >"$T/junk"
cp "$T/junk" "$store/junk"
head -c 640 /dev/urandom >"$store/.cbfsidx/junk"
cbfs_mount "$store" "$mnt" "$OPTS"
drop_caches
same_file "$T/plain.rnd" "$mnt/plain.rnd"
same_file "$T/v.csv" "$mnt/plain.csv"
same_file "$T/w.csv.zst" "$mnt/w.csv.zst"
check_eq 0 "$(stat -c %s "$mnt/empty")" "size of an empty foreign file"
[[ -z $(cat "$mnt/empty") ]] || problem "the empty file reads non-empty"
blocks junk
[[ $RES == "ok 2 "* || $RES == "open EIO" || $RES == *"wrong 0"* ]] || problem "junk: $RES"
# and the store's own data still reads (the lone copies did not confuse anything)
blocks v.csv
[[ $RES == "ok 16 "* ]] || problem "v.csv: $RES"
cbfs_umount "$mnt"
cmp -s "$T/plain.rnd" "$store/plain.rnd" || problem "plain.rnd modified in the store"
detected=$((detected + 1))

# (8) a sidecar that is a symlink out of the store: the daemon must not read or write
# through it (O_NOFOLLOW): the target stays untouched, reads are right or EIO
begin sidecar-symlink
cp "$pristine/.cbfsidx/w.csv" "$out/w.idx"
rm "$store/.cbfsidx/w.csv"
ln -s "$out/w.idx" "$store/.cbfsidx/w.csv"
cbfs_mount "$store" "$mnt" "$OPTS"
blocks w.csv
if sh -c "echo appended >>'$mnt/w.csv'" 2>"$T/append.err"; then note "$CASE: append accepted"; else note "$CASE: append refused: $(cat "$T/append.err")"; fi
truncate -s 100 "$mnt/w.csv" 2>/dev/null || true
cbfs_umount "$mnt"
cmp -s "$pristine/.cbfsidx/w.csv" "$out/w.idx" || problem "the daemon wrote through the sidecar symlink into $out"
[[ -L $store/.cbfsidx/w.csv ]] || note "$CASE: the symlink was replaced by the daemon"
detected=$((detected + 1))

note "corruptions injected $injected, detected $detected, recovered exactly $recovered, silently cut short $silent, wrong bytes 0"
((${#PROBLEMS[@]} == 0)) || fail "${#PROBLEMS[@]} problem(s): $(printf '%s | ' "${PROBLEMS[@]}")"
pass "injected $injected, detected $detected, recovered $recovered, silent $silent"

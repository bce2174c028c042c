#!/usr/bin/env bash
# A compressed file whose FIRST frame header is damaged (bit rot, or zeros a
# crash left on ext4 data=writeback or XFS) is still a compressed file with
# one bad block, like a damaged header anywhere else (t_corrupt): lookup
# works, block 0 fails with EIO, every other block reads back, and fsck calls
# it a damaged block 0 — never a leftover sidecar to remove (removing it
# would serve the raw frames as the file's bytes). From the rev4 review's
# repro (t_rev4_first_frame).
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
CBFS=$(dirname "$CBFS_MOUNT_BIN")/cbfs
python3 "$CBFS_TOOLS/gendata.py" csv $((16 * 65536)) "$T/src.csv" 101
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/src.csv" "$mnt/victim.csv"
cp "$T/src.csv" "$mnt/zeroed.csv"
cbfs_umount "$mnt"
# victim: the first byte of its first frame (the envelope) flipped;
# zeroed: its first frame's 64-byte header zeroed
python3 - "$store/victim.csv" "$store/zeroed.csv" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
b = os.pread(fd, 1, 0); os.pwrite(fd, bytes([b[0] ^ 0xFF]), 0); os.close(fd)
fd = os.open(sys.argv[2], os.O_RDWR)
os.pwrite(fd, bytes(64), 0); os.close(fd)
PY
for f in victim zeroed; do
    rc=0
    "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
    note "fsck ($f): $(grep -v "^fsck " "$T/fsck.out" | grep "$f" | tr "\n" "|")"
    check_eq 4 "$rc" "fsck --repair exit status (a damaged block is left uncorrected)"
    grep -q "$f.csv: .*offset 0" "$T/fsck.out" || fail "fsck names no damage at offset 0 of $f: $(cat "$T/fsck.out")"
    ! grep -qi "leftover" "$T/fsck.out" || fail "fsck calls $f's sidecar a leftover: $(cat "$T/fsck.out")"
    [[ -n $(find "$store" -path "*/.cbfsidx/$f.csv" -o -name "$f.csv.cbfsidx") ]] ||
        fail "fsck --repair removed $f's sidecar"
done
cbfs_expect_log_errors 'frame header\(s\) damaged|Input/output|checksum|corrupt|damaged'
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
drop_caches
for f in victim zeroed; do
    ls -l "$mnt/$f.csv" >"$T/ls.out" 2>&1 || fail "lookup of $f.csv fails: $(cat "$T/ls.out")"
    check_eq $((16 * 65536)) "$(stat -c %s "$mnt/$f.csv")" "$f's logical size"
    dd if="$mnt/$f.csv" of="$T/b0" bs=64K count=1 status=none 2>"$T/dd.err" &&
        fail "block 0 of $f (damaged header) was served"
    grep -q "Input/output error" "$T/dd.err" || fail "block 0 of $f: expected EIO: $(cat "$T/dd.err")"
    dd if="$mnt/$f.csv" of="$T/rest" bs=64K skip=1 status=none 2>"$T/dd.err" ||
        fail "blocks 1.. of $f (undamaged) unreadable: $(cat "$T/dd.err")"
    tail -c +$((65536 + 1)) "$T/src.csv" >"$T/want"
    same_file "$T/want" "$T/rest"
done
cbfs_umount "$mnt"

# With its sidecar lost as well, the store's rule (FORMAT.md 1: no sidecar, no envelope)
# makes victim a plain file, and the tools called it so: cat printed its raw frames with
# exit 0, verify and fsck found nothing. They still take it as plain, but say what it is.
rm "$store/.cbfsidx/victim.csv"
cbfs_tool
rc=0; "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || rc=$?
check_eq 1 "$rc" "verify of a file whose sidecar and envelope are damaged ($(cat "$T/verify.out"))"
grep -q 'victim.csv.*damaged cbfs frame envelope' "$T/verify.out" || fail "verify: $(cat "$T/verify.out")"
rc=0; "$CBFS" cat "$store/victim.csv" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
check_eq 1 "$rc" "cat of it ($(cat "$T/cat.err"))"
check_eq 0 "$(stat -c %s "$T/cat.out")" "bytes cat printed without --keep-going"
rc=0; "$CBFS" cat --keep-going "$store/victim.csv" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
check_eq 1 "$rc" "cat --keep-going of it"
cmp -s "$T/cat.out" "$store/victim.csv" || fail "cat --keep-going did not copy it as it is"
fsck_rc 4 "$store"
grep -q 'victim.csv.*damaged cbfs frame envelope' "$T/fsck.out" || fail "fsck: $(cat "$T/fsck.out")"

# zeroed.csv with its sidecar lost too: its envelope is zeros, no damaged envelope to
# see, and verify and fsck said "0 problem(s)" (helper-47's F1). The frame behind the
# zeros tells what it most likely is; cat still prints it (a plain file can hold frames)
# but says so.
mv "$store/victim.csv" "$T/victim.csv"
rm "$store/.cbfsidx/zeroed.csv"
rc=0; "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || rc=$?
check_eq 1 "$rc" "verify of a file whose sidecar is lost and first header zeroed ($(cat "$T/verify.out"))"
grep -q 'zeroed.csv.*starts with zeros where a cbfs frame envelope would be' "$T/verify.out" ||
    fail "verify: $(cat "$T/verify.out")"
fsck_rc 4 "$store"
grep -q 'zeroed.csv.*starts with zeros' "$T/fsck.out" || fail "fsck: $(cat "$T/fsck.out")"
rc=0; "$CBFS" cat "$store/zeroed.csv" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
check_eq 0 "$rc" "cat of it"
grep -q 'starts with zeros.*printed as it is' "$T/cat.err" || fail "cat said: $(cat "$T/cat.err")"
cmp -s "$T/cat.out" "$store/zeroed.csv" || fail "cat did not copy it as it is"
# a plain file that starts with zeros and holds no frame is no problem
head -c 100000 /dev/zero >"$store/zeros.bin"
rm "$store/zeroed.csv"
check "$CBFS" verify "$store"
# nor is a disk image that holds a data file (it starts with zeros, and frames follow,
# but it does not end with them; helper-48 saw verify call it damaged before)
mkdir -p "$T/img"
cp "$T/victim.csv" "$T/img/"
mkfs.ext4 -q -F -d "$T/img" "$store/disk.img" 16M >"$T/mkfs.out" 2>&1 || fail "mkfs.ext4 -d: $(cat "$T/mkfs.out")"
check "$CBFS" verify "$store"
grep -q ' 0 problem(s)' "$T/check.out" || fail "verify of a disk image that holds a data file: $(cat "$T/check.out")"
pass

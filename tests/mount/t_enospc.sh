#!/usr/bin/env bash
# A full store: the store lives on a 48 MiB tmpfs; a backup bigger than the space (dd of
# compressible + incompressible data) must fail with ENOSPC seen by dd itself (from
# write, fsync or close), files completed before stay intact, and after deleting the
# broken backup the same mount keeps working (a new file writes and reads back).
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 48m

# completed files: compressible, mixed, incompressible (about 14 MiB stored)
python3 "$CBFS_TOOLS/gendata.py" csv 6M "$T/a.csv" 41
python3 "$CBFS_TOOLS/gendata.py" mixed 6M "$T/b.bin" 42
head -c $((8 << 20)) /dev/urandom >"$T/c.rnd"
# the backup: 8 MiB of rows, then 56 MiB of random bytes (cannot compress): > 48 MiB
python3 "$CBFS_TOOLS/gendata.py" csv 8M "$T/backup.src" 43
head -c $((56 << 20)) /dev/urandom >>"$T/backup.src"

cbfs_expect_log_errors 'no space left on the store'
cbfs_mount "$store" "$mnt" codec=zstd,block_size=256K
for f in a.csv b.bin c.rnd; do cp "$T/$f" "$mnt/$f"; done
sync

# (1) dd ... conv=fsync: ENOSPC from write or from fsync
check_fails dd if="$T/backup.src" of="$mnt/backup1" bs=1M conv=fsync status=none
grep -q 'No space left on device' "$T/last.err" || fail "dd conv=fsync: expected ENOSPC, got: $(cat "$T/last.err")"
note "dd conv=fsync: $(head -n 1 "$T/last.err")"
# (2) the same without fsync: the error must still reach dd, at the latest from close()
rm -f "$mnt/backup1"
check_fails dd if="$T/backup.src" of="$mnt/backup2" bs=1M status=none
grep -q 'No space left on device' "$T/last.err" || fail "dd (no fsync): expected ENOSPC, got: $(cat "$T/last.err")"
note "dd without fsync: $(head -n 1 "$T/last.err")"
# the daemon counted what it could not store (cbfs stats, the Prometheus errors alert)
werr=$(getfattr --only-values -n user.cbfs.stats "$mnt" 2>/dev/null | sed -n 's/^write_errors=//p')
((${werr:-0} >= 2)) || fail "write_errors is '${werr}' after two failed backups, expected >= 2"

# what reads back of the broken backup is a prefix of the source, never other bytes
drop_caches
dd if="$mnt/backup2" of="$T/partial" bs=1M status=none 2>"$T/partial.err" || true
psize=$(stat -c %s "$T/partial")
cmp -n "$psize" "$T/partial" "$T/backup.src" >/dev/null ||
    fail "the broken backup reads back wrong bytes ($psize bytes read: $(cat "$T/partial.err"))"
note "broken backup: $psize bytes read back, all correct ($(stat -c %s "$mnt/backup2") logical)"

# files completed before are intact (from the daemon, not the page cache)
drop_caches
for f in a.csv b.bin c.rnd; do same_file "$T/$f" "$mnt/$f"; done

# (3) a write that the daemon accepts into memory before the store is full: the error
# must still reach the program, from a later write, fsync or close (never only release)
rm "$mnt/backup2"
# release(2) reaches the daemon asynchronously after close: the unlinked file's space
# comes back once the daemon has closed its store fds, so wait for it (up to 10 s)
for _ in $(seq 100); do
    avail=$(df -B1 --output=avail "$fs" | tail -n 1)
    ((avail > (16 << 20))) && break
    sleep 0.1
done
fallocate -l $((avail - (4 << 20))) "$fs/filler" 2>"$T/falloc.err" || fail "fallocate on the tmpfs failed (avail $avail: $(cat "$T/falloc.err"); $(df -B1 "$fs" | tail -n 1))"
note "store filled up to 4 MiB free: $(df -B1 --output=avail "$fs" | tail -n 1) bytes available"
for how in close fsync; do
    where=$(python3 - "$mnt/late.$how" "$how" <<'PY'
import os, sys
path, how = sys.argv[1], sys.argv[2]
step = "open"
try:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    step = "write"
    os.write(fd, os.urandom(8 << 20))  # one write(2): 8 MiB, incompressible, 4 MiB free
    if how == "fsync":
        step = "fsync"
        os.fsync(fd)
    step = "close"
    os.close(fd)
    print("no error")
except OSError as e:
    print("%s: %s" % (step, e.strerror))
PY
    )
    note "8 MiB in one write(2) then $how, 4 MiB free: $where"
    [[ $where == @(write|fsync|close)": No space left on device" ]] || fail "late ENOSPC ($how): expected an ENOSPC from write, fsync or close, got: $where"
    rm -f "$mnt/late.$how"
done
rm "$fs/filler"

# delete the broken backups: the same mount takes a new file again
[[ -z $(ls -A "$mnt" | grep -v -E '^(a\.csv|b\.bin|c\.rnd)$' || true) ]] || fail "left over: $(ls -A "$mnt" | tr '\n' ' ')"
head -c $((12 << 20)) "$T/backup.src" >"$T/new.src"
dd if="$T/new.src" of="$mnt/new" bs=1M conv=fsync status=none 2>"$T/new.err" ||
    fail "after deleting, a new file does not write: $(cat "$T/new.err")"
drop_caches
same_file "$T/new.src" "$mnt/new"
echo "small" >"$mnt/small" && check_eq small "$(cat "$mnt/small")" "small file after ENOSPC"
cbfs_umount "$mnt"

# the store survives a remount as it is
cbfs_mount "$store" "$mnt"
drop_caches
for f in a.csv b.bin c.rnd; do same_file "$T/$f" "$mnt/$f"; done
same_file "$T/new.src" "$mnt/new"

# (4) a frame that ENOSPC cut short is cut off the data file again: after a
# clean unmount the store holds only what was stored, and verify finds no torn
# tail (which only a crash may leave; before, every fill level left one)
head -c 300000 /dev/urandom >"$T/k1"
head -c 748576 /dev/urandom >"$T/k2"
cp "$T/k1" "$mnt/kept"
sync "$mnt/kept"
avail=$(df -B1 --output=avail "$fs" | tail -n 1)
fallocate -l $((avail - (120 << 10))) "$fs/filler" || fail "cannot fill the tmpfs"
where=$(python3 - "$mnt/kept" "$T/k2" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)
step = "write"
try:
    os.write(fd, open(sys.argv[2], "rb").read())
    step = "fsync"
    os.fsync(fd)
    print("no error")
except OSError as e:
    print("%s: %s" % (step, e.strerror))
finally:
    os.close(fd)
PY
)
note "append of 748576 bytes with 120 KiB free: $where"
[[ $where == @(write|fsync)": No space left on device" ]] || fail "append on a full store: $where"
cbfs_umount "$mnt"
rm "$fs/filler"
cbfs_tool
"$CBFS" verify "$store" >"$T/verify.out" 2>&1 || fail "verify after ENOSPC and a clean unmount: $(cat "$T/verify.out")"
cbfs_mount "$store" "$mnt"
drop_caches
cmp -n 300000 "$T/k1" "$mnt/kept" >/dev/null || fail "what an fsync acknowledged before the store filled is lost"
cbfs_umount "$mnt"

# write_open FILE: what an O_WRONLY|O_APPEND open of FILE says ("no error" or the errno text)
write_open() {
    python3 -c 'import os, sys
try:
    os.close(os.open(sys.argv[1], os.O_WRONLY | os.O_APPEND)); print("no error")
except OSError as e:
    print(e.strerror)' "$1"
}

# (5) a full store does not make a file unreadable whose index its open must
# repair (here: rebuild a lost sidecar); a write open says ENOSPC, not EROFS
rm "$store/.cbfsidx/kept"
avail=$(df -B1 --output=avail "$fs" | tail -n 1)
fallocate -l "$avail" "$fs/filler" || fail "cannot fill the tmpfs"
cbfs_mount "$store" "$mnt"
drop_caches
cmp -n 300000 "$T/k1" "$mnt/kept" >/dev/null || fail "a file whose sidecar is lost, on a full store: $(cmp -n 300000 "$T/k1" "$mnt/kept" 2>&1)"
check_eq "No space left on device" "$(write_open "$mnt/kept")" "a write open of it"
cbfs_umount "$mnt"
rm "$fs/filler"

# (6) the same with space but no free inode: creating the missing sidecar itself
# fails (ENOSPC from the create, where (5) fails writing the rebuilt records)
rm -f "$store/.cbfsidx/kept" # (5) made it empty on the tmpfs, then found no room for its records
used=$(df --output=iused "$fs" | tail -n 1)
mount -o remount,nr_inodes=$((used + 0)) "$fs" || fail "cannot take the tmpfs's free inodes"
(: >"$fs/one-more") 2>/dev/null && fail "setup: the tmpfs still has a free inode"
cbfs_mount "$store" "$mnt"
drop_caches
cmp -n 300000 "$T/k1" "$mnt/kept" >/dev/null || fail "a file whose sidecar is lost, no inode free: $(cmp -n 300000 "$T/k1" "$mnt/kept" 2>&1)"
check_eq "No space left on device" "$(write_open "$mnt/kept")" "a write open of it, no inode free"
[[ ! -e $store/.cbfsidx/kept ]] || fail "a sidecar appeared with no inode free"
cbfs_umount "$mnt"
umount "$fs" || fail "cannot unmount the tmpfs"

# (7) plain files (codec=none) go to the store as they are: a write the store takes only
# part of (pwrite returns short, then ENOSPC) must fail at write, fsync or close. Under
# the writeback cache the kernel ignores the count of a page's WRITE reply, and a short
# reply once dropped the rest: write, fsync and close all returned 0 and the file came
# back 512 KiB long. Without the cache the caller's own write may be short, as write(2).
fs=$T/fs7 store=$T/fs7/store
mkdir -p "$fs"
mount -t tmpfs -o size=4m tmpfs "$fs" || fail "cannot mount a tmpfs (needs root)"
mkdir "$store"
head -c $((1 << 20)) /dev/urandom >"$T/plain.src"
for wbc in on off; do
    cbfs_mount "$store" "$mnt" codec=none,writeback_cache=$wbc
    rm -f "$fs/filler"
    avail=$(df -B1 --output=avail "$fs" | tail -n 1)
    head -c $((avail - (512 << 10))) /dev/zero >"$fs/filler" 2>/dev/null || true
    python3 - "$T/plain.src" "$mnt/plain-$wbc" >"$T/plain.out" 2>&1 <<'PY' ||
import errno, os, sys
data = open(sys.argv[1], "rb").read()
fd = os.open(sys.argv[2], os.O_CREAT | os.O_WRONLY | os.O_TRUNC, 0o644)
done, err = 0, None
try:
    while done < len(data):
        done += os.write(fd, data[done:])
except OSError as e:
    err = e
try:
    os.fsync(fd)
except OSError as e:
    err = err or e
try:
    os.close(fd)
except OSError as e:
    err = err or e
if err is None:
    sys.exit(f"all {done} bytes acknowledged (write, fsync, close) by a store with 512 KiB free")
print(f"wrote {done}, then {errno.errorcode[err.errno]}")
sys.exit(0 if err.errno == errno.ENOSPC else f"expected ENOSPC, got {err}")
PY
        fail "plain file, writeback_cache=$wbc: $(cat "$T/plain.out")"
    note "plain file on a full store, writeback_cache=$wbc: $(cat "$T/plain.out")"
    cbfs_umount "$mnt"
    # what the store kept is a prefix of what was written, never other bytes
    psize=$(stat -c %s "$store/plain-$wbc")
    cmp -n "$psize" "$store/plain-$wbc" "$T/plain.src" >/dev/null ||
        fail "plain file, writeback_cache=$wbc: the store holds other bytes than were written"
    rm -f "$store/plain-$wbc"
done
umount "$fs" || fail "cannot unmount the tmpfs"
pass

#!/usr/bin/env bash
# `cbfs fsck` (e2fsck exit codes): clean store 0; refuses a mounted store (8) and a
# directory inside a store (8: the lock is the root's); finds a
# deleted sidecar, a torn tail (partial frame, zeros) and an orphan sidecar (4), repairs
# them with --repair (1), is clean afterwards (0) and the mount reads every file back;
# a damaged payload is reported with file and offset and left uncorrected (4).
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 700K "$T/a.csv" 31
python3 "$CBFS_TOOLS/gendata.py" mixed 2M "$T/b.bin" 32
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/c.csv" 33
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
cp "$T/a.csv" "$mnt/a.csv"
mkdir "$mnt/sub" && cp "$T/b.bin" "$mnt/sub/b.bin"
cp "$T/c.csv" "$mnt/c.csv"
fsck_rc 8 "$store"   # mounted: the daemon holds .cbfs/lock
grep -q 'mounted' "$T/fsck.out" || fail "no 'mounted' message: $(cat "$T/fsck.out")"
# a directory inside the store: its .cbfs/ is a user's name, not the store's lock. fsck
# took "sub/.cbfs/lock" for one (truncating a user's file there) and ran on a mounted store
mkdir "$mnt/sub/.cbfs" && cp "$T/c.csv" "$mnt/sub/.cbfs/lock"
fsck_rc 8 "$store/sub"
grep -q 'inside a store' "$T/fsck.out" || fail "fsck of a directory inside a mounted store: $(cat "$T/fsck.out")"
cbfs_umount "$mnt"
fsck_rc 8 --repair "$store/sub"
cbfs_mount "$store" "$mnt"
cmp -s "$mnt/sub/.cbfs/lock" "$T/c.csv" || fail "fsck of sub changed the user's sub/.cbfs/lock"
rm -r "$mnt/sub/.cbfs"
cbfs_umount "$mnt"
fsck_rc 0 "$store"
cp -a "$store" "$T/pristine"

# damage: deleted sidecar, torn tail (first 100 bytes of a frame), zero tail, orphan
rm "$store/.cbfsidx/a.csv"
bsize=$(stat -c %s "$store/sub/b.bin")
read -r _ off _ _ _ _ _ < <(python3 "$CBFS_TOOLS/frames.py" "$store/sub/b.bin" | awk '$3 == 2')
head -c $((off + 100)) "$store/sub/b.bin" | tail -c 100 >>"$store/sub/b.bin"
csize=$(stat -c %s "$store/c.csv")
head -c 4096 /dev/zero >>"$store/c.csv"
cp "$store/.cbfsidx/c.csv" "$store/.cbfsidx/gone"
# orphans that index nothing, as a power cut leaves a file never flushed on btrfs
# (helper-26): empty, and a header alone
: >"$store/.cbfsidx/new0"
head -c 64 "$store/.cbfsidx/c.csv" >"$store/.cbfsidx/new1"

fsck_rc 4 "$store"
for want in '.cbfsidx/a.csv: missing' "sub/b.bin: offset $bsize: " "c.csv: offset $csize: " \
    '.cbfsidx/gone: orphan sidecar: its data file is missing' \
    '.cbfsidx/new0: orphan sidecar: its data file is missing, and it indexes nothing' \
    '.cbfsidx/new1: orphan sidecar: its data file is missing, and it indexes nothing'; do
    grep -qF "$want" "$T/fsck.out" || fail "fsck did not report '$want': $(cat "$T/fsck.out")"
done
grep -F '.cbfsidx/gone: ' "$T/fsck.out" | grep -qF 'indexes nothing' &&
    fail "an orphan with records was called empty: $(cat "$T/fsck.out")"
fsck_rc 1 --repair "$store"
fsck_rc 0 "$store"
[[ -s $store/.cbfsidx/a.csv ]] || fail "sidecar not rebuilt"
for o in gone new0 new1; do [[ ! -e $store/.cbfsidx/$o ]] || fail "orphan sidecar $o not removed"; done
check_eq "$bsize" "$(stat -c %s "$store/sub/b.bin")" "b.bin size after cutting the torn tail"
check_eq "$csize" "$(stat -c %s "$store/c.csv")" "c.csv size after cutting the zero tail"
check "$CBFS" verify "$store"

cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
drop_caches
same_file "$T/a.csv" "$mnt/a.csv"
same_file "$T/b.bin" "$mnt/sub/b.bin"
same_file "$T/c.csv" "$mnt/c.csv"
echo more >>"$mnt/a.csv"   # the rebuilt sidecar takes appends
cbfs_umount "$mnt"
fsck_rc 0 "$store"

# a damaged payload cannot be repaired: reported with file and offset, exit 4
read -r _ off _ _ _ _ plen < <(python3 "$CBFS_TOOLS/frames.py" "$T/pristine/c.csv" | awk '$3 == 1')
python3 - "$T/pristine/c.csv" $((off + 64 + plen / 2)) <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0xFF]), pos); os.close(fd)
PY
fsck_rc 4 --repair "$T/pristine"
grep -q "c.csv: offset $off: block 1" "$T/fsck.out" || fail "damaged block not named: $(cat "$T/fsck.out")"
# a file whose first flush never completed (a crash right after its create: an empty
# data file and a sidecar without its header, as the mount serves it, empty) is clean:
# fsck --repair stayed at 4 for ever ("damaged frame inside the file"), verify and stat
# said "cannot load the index", cat failed
mkdir -p "$T/unborn" && "$CBFS" mkfs "$T/unborn" >/dev/null
mkdir "$T/unborn/.cbfsidx" && : >"$T/unborn/new.bkp" && : >"$T/unborn/.cbfsidx/new.bkp"
fsck_rc 0 "$T/unborn"
fsck_rc 0 --repair "$T/unborn"
[[ ! -s $T/unborn/.cbfsidx/new.bkp ]] || fail "fsck --repair wrote into an unborn file's sidecar"
"$CBFS" verify "$T/unborn" >"$T/unborn.out" 2>&1 || fail "verify of an unborn file: $(cat "$T/unborn.out")"
"$CBFS" stat "$T/unborn/new.bkp" >"$T/unborn.out" 2>&1 || fail "stat of an unborn file: $(cat "$T/unborn.out")"
check_eq "" "$("$CBFS" cat "$T/unborn/new.bkp")" "cat of an unborn file"
cbfs_mount "$T/unborn" "$mnt"
check_eq 0 "$(stat -c %s "$mnt/new.bkp")" "the unborn file's size through the mount"
cbfs_umount "$mnt"
# the lock held by a tool, not a daemon (here a stand-in whose argv is "cbfs fsck", as
# fsck --repair's is; Debian's python3, which a pyenv shim would not keep so): fsck and a
# mount name it and say to wait, not to unmount
cat >"$T/fsck" <<'PY'
import fcntl, os, sys, time
fd = os.open(sys.argv[1], os.O_RDWR)
fcntl.flock(fd, fcntl.LOCK_EX)
os.ftruncate(fd, 0)
os.write(fd, b"%d\n" % os.getpid())
open(sys.argv[2], "w").close()
time.sleep(60)
PY
(cd "$T" && exec -a cbfs /usr/bin/python3 fsck "$T/pristine/.cbfs/lock" "$T/held") &
holder=$!
for _ in $(seq 100); do [[ -e $T/held ]] && break; sleep 0.05; done
fsck_rc 8 "$T/pristine"
grep -q "in use by cbfs fsck (pid $holder): run fsck when that has finished" "$T/fsck.out" ||
    fail "fsck beside a running fsck: $(cat "$T/fsck.out")"
rc=0; timeout 20 "$CBFS_MOUNT_BIN" -f "$T/pristine" "$mnt" >"$T/m.out" 2>&1 || rc=$?
kill "$holder"; wait "$holder" 2>/dev/null || true
[[ $rc != 0 ]] || fail "a mount beside a running fsck did not fail"
grep -q "in use by cbfs fsck (pid $holder); mount it when that has finished" "$T/m.out" ||
    fail "a mount beside a running fsck: $(cat "$T/m.out")"
# usage errors
fsck_rc 8 "$T/pristine/c.csv"
fsck_rc 8 --bogus "$T/pristine"
# an upgrade repairs nothing: --repair (or -y, or --block-size) with it is refused, not
# dropped in silence
for extra in --repair -y "--block-size 64K"; do
    # shellcheck disable=SC2086 # --block-size and its value are two words
    fsck_rc 8 --upgrade $extra "$T/pristine"
    grep -q -- "--upgrade takes no --" "$T/fsck.out" || fail "fsck --upgrade $extra: $(cat "$T/fsck.out")"
done
pass

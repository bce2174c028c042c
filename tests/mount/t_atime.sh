#!/usr/bin/env bash
# atime options. A FUSE file's atime is the store's: with noatime, reading or executing a
# file (compressed or plain) and listing a directory leave every atime as it was, through
# the mount and in the store; nodiratime spares directories only; without them the
# store's relatime applies as on ext4 (an atime a day old or older than the mtime moves
# on a read, a fresh one stays), and a write, even one that makes the daemon read the
# stored block, moves none. relatime, strictatime and lazytime are accepted. The
# store is a tmpfs mounted relatime, so the store's own policy is known.
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 64m relatime
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/a.csv" 21

cbfs_mount "$store" "$mnt" codec=zstd
cp "$T/a.csv" "$mnt/c.csv"
mkdir "$mnt/plain" "$mnt/d"
check setfattr -n user.cbfs.codec -v none "$mnt/plain"
cp "$T/a.csv" "$mnt/plain/p.csv"
printf '#!/bin/sh\necho ran\n' >"$mnt/run.sh"
chmod 755 "$mnt/run.sh"
touch "$mnt/d/x"
cbfs_umount "$mnt"
[[ -e $store/.cbfsidx/c.csv && ! -e $store/plain/.cbfsidx/p.csv ]] || fail "c.csv should be compressed, plain/p.csv plain"

files=(c.csv plain/p.csv run.sh)
# age: every atime in the store two days back, one instant for all (each touch taking
# '2 days ago' for itself moved d a second past c.csv once, under load)
age() {
    local f t
    t=$(($(date +%s) - 2 * 86400))
    for f in "${files[@]}" d; do touch -a -d "@$t" "$store/$f"; done
    aged=$(stat -c %X "$store/c.csv")
}
# use: read the files, run the script, list the directory, all through the mount
use() {
    local f
    for f in "${files[@]}"; do cat "$mnt/$f" >/dev/null; done
    check_eq ran "$("$mnt/run.sh")" "running run.sh"
    ls "$mnt/d" >/dev/null
}
# atime_is WHAT OBJ WANT: WANT is "aged" (unchanged) or "new" (moved to about now), both
# through the mount and in the store
atime_is() {
    local what=$1 obj=$2 want=$3 m s now
    m=$(stat -c %X "$mnt/$obj")
    s=$(stat -c %X "$store/$obj")
    now=$(date +%s)
    check_eq "$s" "$m" "$what: $obj atime through the mount vs. in the store"
    if [[ $want == aged ]]; then
        check_eq "$aged" "$s" "$what: $obj atime (the read must not update it)"
    else
        ((s > now - 60)) || fail "$what: $obj atime $s not updated by the read (now $now)"
    fi
}

# (1) noatime: nothing moves
age
cbfs_mount "$store" "$mnt" noatime,attr_timeout=0
grep -F " $(realpath "$mnt") " /proc/mounts | grep -q noatime || fail "noatime not shown in /proc/mounts"
use
for f in "${files[@]}" d; do atime_is noatime "$f" aged; done
cbfs_umount "$mnt"
note "noatime: reading, running and listing left every atime"

# (2) nodiratime (with strictatime, which changes nothing here): directories stay
age
cbfs_mount "$store" "$mnt" strictatime,nodiratime,attr_timeout=0
use
atime_is nodiratime d aged
for f in "${files[@]}"; do atime_is nodiratime "$f" new; done
cbfs_umount "$mnt"
note "nodiratime: files moved, the directory did not"

# (3) the default (relatime; the words relatime and lazytime are accepted): an old atime
# moves on a read, a fresh one does not move again
age
cbfs_mount "$store" "$mnt" relatime,lazytime,attr_timeout=0
use
for f in "${files[@]}" d; do atime_is relatime "$f" new; done
declare -A first=()
for f in "${files[@]}" d; do first[$f]=$(stat -c %x "$store/$f"); done
sleep 1.1
use
for f in "${files[@]}" d; do
    check_eq "${first[$f]}" "$(stat -c %x "$store/$f")" "relatime: $f atime after a second read"
done
cbfs_umount "$mnt"
note "relatime: an old atime moved once, as on ext4"

# (4) writes are no reads: a rewrite inside a block and a truncate into one make the daemon
# read the stored block (read-modify-write), which must not move the atime, as on ext4
# (it moved: helper-22)
age
cbfs_mount "$store" "$mnt" attr_timeout=0
dd if=/dev/urandom of="$mnt/c.csv" bs=4096 seek=1 count=1 conv=notrunc status=none
truncate -s 300000 "$mnt/c.csv"
sync "$mnt/c.csv"
atime_is write c.csv aged
cbfs_umount "$mnt"
note "a rewrite inside a block and a truncate into one left the atime"
pass

#!/usr/bin/env bash
# fallocate(2) in the default mode says ENOSPC when the store cannot hold the
# preallocation (RMAN and other tools preallocate and rely on that answer). On a 32 MiB
# tmpfs store: for a compressed file the bytes a preallocation adds past the size count
# uncompressed against the free space (KEEP_SIZE too), and a refused one changes nothing;
# a plain file passes through to the store, which answers the same. Preallocations that
# fit still work; the content is intact after a remount.
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 32m
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/a.csv" 31

avail() { df -B1 --output=avail "$fs" | tail -n 1; }
# enospc WHAT FILE FALLOCATE_ARGS...: must fail with ENOSPC and leave FILE's size
enospc() {
    local what=$1 file=$2 size
    shift 2
    size=$(stat -c %s "$file" 2>/dev/null || echo 0) # fallocate(1) creates a missing FILE
    check_fails fallocate "$@" "$file"
    grep -q 'No space left on device' "$T/last.err" || fail "$what: expected ENOSPC, got: $(cat "$T/last.err")"
    check_eq "$size" "$(stat -c %s "$file")" "$what: size after the refused preallocation"
}

cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/a.csv" "$mnt/c"
mkdir "$mnt/plain"
check setfattr -n user.cbfs.codec -v none "$mnt/plain"
cp "$T/a.csv" "$mnt/plain/p"
sync
[[ -e $store/.cbfsidx/c && ! -e $store/plain/.cbfsidx/p ]] || fail "c should be compressed, plain/p plain"
free=$(avail)
note "store free: $free bytes"

for f in c plain/p; do
    enospc "$f: twice the free space" "$mnt/$f" -l $((2 * free))
    enospc "$f: past the size by more than the free space" "$mnt/$f" -o $((1 << 20)) -l $((free + (1 << 20)))
    enospc "$f: KEEP_SIZE beyond the free space" "$mnt/$f" -n -o 0 -l $((2 * free))
    python3 -c 'import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
try:
    os.posix_fallocate(fd, 0, int(sys.argv[2]))
    sys.exit("posix_fallocate succeeded")
except OSError as e:
    sys.exit(0 if e.errno == 28 else f"posix_fallocate: {e}")' "$mnt/$f" $((2 * free)) ||
        fail "$f: posix_fallocate beyond the free space did not say ENOSPC"
    same_file "$T/a.csv" "$mnt/$f"
    # one that fits
    check fallocate -l $((4 << 20)) "$mnt/$f"
    check_eq $((4 << 20)) "$(stat -c %s "$mnt/$f")" "$f: size after a preallocation that fits"
    note "$f: ENOSPC beyond the free space, fits below it"
done
enospc "new file" "$mnt/new" -l $((2 * free))

cbfs_umount "$mnt"
drop_caches
cbfs_mount "$store" "$mnt"
for f in c plain/p; do
    check_eq $((4 << 20)) "$(stat -c %s "$mnt/$f")" "$f: size after a remount"
    cmp -n $((1 << 20)) "$T/a.csv" "$mnt/$f" >/dev/null || fail "$f: data differs after a remount"
    check_eq 0 "$(tail -c +$(((1 << 20) + 1)) "$mnt/$f" | tr -d '\0' | wc -c)" "$f: preallocated range reads as zeros"
done
check_eq 0 "$(stat -c %s "$mnt/new")" "new file: size after a refused preallocation"
cbfs_umount "$mnt"
pass

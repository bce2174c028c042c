#!/usr/bin/env bash
# A plain file (codec=none) may not start with a cbfs frame envelope: the
# store's rule (FORMAT.md 1) takes a file without a sidecar that starts with
# one for a compressed file whose sidecar was lost, so after a remount its
# bytes read back decoded — another file's contents under this one's name,
# and a sidecar written for it at the first open. A DBA copying a cbfs data
# file (a backup of the store) into a codec=none directory met exactly that.
# The write that would make such a start is refused (EINVAL; with the writeback
# cache at close or fsync), whichever way the 12 bytes arrive:
# whole, in pieces, or by O_APPEND; a start that only resembles one is taken.
. "$(dirname "$0")/lib.sh"
python3 "$CBFS_TOOLS/gendata.py" csv $((256 * 1024)) "$T/src.csv" 7
# a real cbfs data file: the bytes a DBA would copy
mkdir -p "$T/zs" "$T/s-on" "$T/s-off"
cbfs_mount "$T/zs" "$T/zm" codec=zstd
cp "$T/src.csv" "$T/zm/db.csv"
cbfs_umount "$T/zm"
framed=$T/zs/db.csv
check_eq "5c2a4d1838000000" "$(head -c 8 "$framed" | od -An -tx1 | tr -d ' \n')" "the source's envelope"
cbfs_expect_log_errors 'refused a write'

for wbc in on off; do
    store=$T/s-$wbc mnt=$T/m-$wbc
    opts=codec=none
    [[ $wbc == off ]] && opts+=,writeback_cache=off
    cbfs_mount "$store" "$mnt" "$opts"
    # whole: cp of the data file
    cp "$framed" "$mnt/copy" 2>"$T/cp.err" && fail "$wbc: cp of a framed file into a plain one succeeded"
    note "$wbc: cp: $(cat "$T/cp.err")"
    # in pieces: bytes 3.. first, then 0..2 (the write that completes it)
    dd if="$framed" of="$mnt/pieces" bs=1 skip=3 seek=3 count=61 status=none
    dd if="$framed" of="$mnt/pieces" bs=1 count=3 conv=notrunc,fsync status=none 2>"$T/dd.err" &&
        fail "$wbc: the write completing an envelope at the start succeeded"
    # appended: 11 bytes, then the rest with O_APPEND
    head -c 11 "$framed" >"$mnt/appended"
    { tail -c +12 "$framed" >>"$mnt/appended"; } 2>/dev/null && sync "$mnt/appended" 2>/dev/null &&
        fail "$wbc: an append completing an envelope at the start succeeded"
    # allowed: the same bytes anywhere but at the start, and a start that
    # differs in one byte
    { printf 'x'; cat "$framed"; } >"$mnt/shifted"
    { printf '\x5d'; tail -c +2 "$framed"; } >"$mnt/near"
    dd if="$framed" of="$mnt/late" bs=1 skip=4 seek=4 count=60 status=none
    printf 'ZZZZ' | dd of="$mnt/late" bs=1 conv=notrunc status=none
    cbfs_umount "$mnt"
    cbfs_mount "$store" "$mnt" "$opts"
    drop_caches
    same_file <({ printf 'x'; cat "$framed"; }) "$mnt/shifted"
    same_file <({ printf '\x5d'; tail -c +2 "$framed"; }) "$mnt/near"
    same_file <({ printf 'ZZZZ'; head -c 64 "$framed" | tail -c +5; }) "$mnt/late"
    # (the stored bytes: through the mount such a file would read decoded)
    for f in copy pieces appended; do
        if [[ -e $store/$f ]]; then
            [[ $(head -c 12 "$store/$f" | od -An -tx1) != $(head -c 12 "$framed" | od -An -tx1) ]] ||
                fail "$wbc: $f starts with the envelope"
        fi
    done
    # nothing of this mount was taken for a compressed file
    [[ -z $(find "$store" -path '*/.cbfsidx/*' -type f) ]] ||
        fail "$wbc: sidecars appeared in a codec=none store: $(find "$store" -path '*/.cbfsidx/*' -type f)"
    cbfs_umount "$mnt"
done
pass

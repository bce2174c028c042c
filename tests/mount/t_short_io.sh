#!/usr/bin/env bash
# A store that moves part of a read or a write in one call (NFS, CIFS or a FUSE store may,
# at any offset; tools/shortio.c makes every pread and pwrite of the store move half of
# what was asked): every byte written through the mount must be stored and read back,
# for plain files (codec=none, stored as they are) and compressed ones. Before, a plain
# file's short store write was answered short to the kernel's writeback, which ignores
# the count (the rest was dropped: write, fsync and close returned 0), and a short store
# read was answered short, which the kernel takes for the file's end (zeros after it under
# the writeback cache; an early EOF without it). libfuse's fd buffers read on after a
# short read, but answer what they have when a later read fails: a bad sector's EIO
# became zeros or an early end (helper-10).
. "$(dirname "$0")/lib.sh"

cbfs_preload shortio
store=$T/store mnt=$T/mnt
mkdir -p "$store"
head -c $((3 << 20)) /dev/urandom >"$T/rnd"
python3 "$CBFS_TOOLS/gendata.py" csv 3M "$T/csv" 7
export CBFS_SHORTIO_DIR=$store

for wbc in on off; do
    LD_PRELOAD=$T/shortio.so cbfs_mount "$store" "$mnt" codec=none,writeback_cache=$wbc
    mkdir "$mnt/z-$wbc"
    setfattr -n user.cbfs.codec -v lz4 "$mnt/z-$wbc" || fail "cannot set the directory's codec"
    for f in rnd csv; do
        dd if="$T/$f" of="$mnt/plain-$wbc-$f" bs=1M conv=fsync status=none ||
            fail "writing plain-$wbc-$f"
        dd if="$T/$f" of="$mnt/z-$wbc/$f" bs=1M conv=fsync status=none || fail "writing z-$wbc/$f"
    done
    cbfs_umount "$mnt"
    for f in rnd csv; do
        cmp "$T/$f" "$store/plain-$wbc-$f" >/dev/null ||
            fail "writeback_cache=$wbc: the store holds other bytes for plain $f: $(cmp "$T/$f" "$store/plain-$wbc-$f" 2>&1)"
    done
    check_eq 1 "$(frame_codecs "$store/z-$wbc/csv")" "codec id of z-$wbc/csv's frames (lz4)"
    drop_caches
    LD_PRELOAD=$T/shortio.so cbfs_mount "$store" "$mnt" codec=none,writeback_cache=$wbc
    for f in rnd csv; do
        cmp "$T/$f" "$mnt/plain-$wbc-$f" >/dev/null ||
            fail "writeback_cache=$wbc: plain $f reads back otherwise: $(cmp "$T/$f" "$mnt/plain-$wbc-$f" 2>&1)"
        cmp "$T/$f" "$mnt/z-$wbc/$f" >/dev/null ||
            fail "writeback_cache=$wbc: compressed $f reads back otherwise: $(cmp "$T/$f" "$mnt/z-$wbc/$f" 2>&1)"
    done
    cbfs_umount "$mnt"
done
# a bad sector in a plain file's store data: the store's read ends short before it and
# fails at it. The reader must get EIO there, never zeros or an early end of file (a
# short reply, which is what the error after part of a read became)
bad=$(((3 << 19) + 4097))
CBFS_SHORTIO_BAD=$bad LD_PRELOAD=$T/shortio.so cbfs_mount "$store" "$mnt" codec=none
drop_caches
rc=0
dd if="$mnt/plain-on-rnd" of="$T/got" bs=64K status=none 2>"$T/dd.err" || rc=$?
((rc != 0)) || fail "a plain file read across a store read error: no error ($(stat -c %s "$T/got") bytes)"
grep -q 'Input/output error' "$T/dd.err" || fail "a plain file read across a store read error: $(cat "$T/dd.err")"
got=$(stat -c %s "$T/got")
((got <= bad)) || fail "$got bytes read across a store read error at byte $bad"
cmp -n "$got" "$T/got" "$T/rnd" >/dev/null || fail "the bytes read before the store read error differ"
note "plain file, store read error at byte $bad: EIO after $got bytes"
cbfs_umount "$mnt"
pass "plain and compressed files through a store that moves half of each read and write"


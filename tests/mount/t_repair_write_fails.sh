#!/usr/bin/env bash
# A store that still reads but fails its writes (a failing disk, an SSD gone
# read-only at the end of its life, a thin pool out of room; tools/writefail.c)
# holding a file whose open must repair its index: a crash's torn frame past
# the last record, or records the sidecar lost. A full store serves such a file
# read-only; this one answered every open, reads included, with EIO (or EROFS)
# until the store was fixed, so a restore through the mount could not read it.
# It must read back whole, refuse writes, leave the store untouched, and be
# repaired at its first open once the store takes writes again.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_preload writefail
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/src" 12
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
cp "$T/src" "$mnt/torn"
cp "$T/src" "$mnt/lost"
cbfs_umount "$mnt"
# torn: half of a copy of its last frame past the end, as a crash mid-append leaves it
read -r _ off _ _ _ _ plen <<<"$(python3 "$CBFS_TOOLS/frames.py" "$store/torn" | tail -n 1)"
head -c $((off + 64 + plen / 2)) "$store/torn" | tail -c $((64 + plen / 2)) >>"$store/torn"
# lost: its sidecar lost its last four records (frames past them: the rescan finds them)
truncate -s $(($(stat -c %s "$store/.cbfsidx/lost") - 256)) "$store/.cbfsidx/lost"
cp -a "$store" "$T/before"

cbfs_expect_log_errors 'refused the repair of its index'
export CBFS_WRITEFAIL_DIR=$store CBFS_WRITEFAIL_TRIGGER=$T/failing
touch "$T/failing"
for eno in 5 30; do # EIO, EROFS
    CBFS_WRITEFAIL_ERRNO=$eno LD_PRELOAD=$T/writefail.so cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
    for f in torn lost; do
        drop_caches
        cmp "$T/src" "$mnt/$f" >"$T/cmp.out" 2>&1 ||
            fail "errno $eno: $f does not read back while the store fails writes: $(cat "$T/cmp.out")"
        check_fails sh -c "echo more >>'$mnt/$f'"
    done
    cbfs_umount "$mnt"
    grep -q "'torn': the store refused the repair" "$(cbfs_log_of "$mnt")" || fail "errno $eno: not logged"
    for f in torn .cbfsidx/torn lost .cbfsidx/lost; do
        cmp -s "$T/before/$f" "$store/$f" || fail "errno $eno: the store's $f changed"
    done
    note "errno $eno: both files read back, writes refused ($(sed -n "\$s/.*: //p" "$T/last.err"))"
done

rm "$T/failing" # the store takes writes again: the first open repairs
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
for f in torn lost; do
    echo more >>"$mnt/$f" || fail "$f: append after the store recovered"
    cat "$T/src" - <<<more >"$T/want"
    drop_caches
    same_file "$T/want" "$mnt/$f"
done
cbfs_umount "$mnt"
cbfs_tool
"$CBFS" verify "$store" >"$T/verify.out" 2>&1 || fail "verify: $(cat "$T/verify.out")"
pass

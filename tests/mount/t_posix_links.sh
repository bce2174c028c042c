#!/usr/bin/env bash
# Hard links (tools/posix_links.py): one inode state behind every name while open, link
# counts, unlink of one name; in the store the data file and its sidecar are shared by the
# remaining names and the removed name is gone; content after a remount; every codec.
. "$(dirname "$0")/lib.sh"

for codec in $(cbfs_codecs); do
    cbfs_mount_fresh "codec=$codec" block_size=64K
    python3 "$CBFS_TOOLS/posix_links.py" write "$mnt" "$T/shadow-$codec" 65536 >"$T/out" 2>&1 ||
        fail "$codec: $(cat "$T/out")"
    cbfs_umount "$mnt"
    # store: b and sub/c are one data file, each name has the (shared) sidecar, a is gone
    [[ ! -e $store/a && ! -e $store/.cbfsidx/a ]] || fail "$codec: store still has a or .cbfsidx/a"
    for f in b sub/c .cbfsidx/b sub/.cbfsidx/c; do
        [[ -f $store/$f ]] || fail "$codec: store lacks $f"
    done
    check_eq "$(stat -c %i "$store/b")" "$(stat -c %i "$store/sub/c")" "$codec: store inode of b vs sub/c"
    check_eq 2 "$(stat -c %h "$store/b")" "$codec: store link count of b"
    drop_caches
    cbfs_mount "$store" "$mnt"
    same_file "$T/shadow-$codec" "$mnt/b"
    same_file "$T/shadow-$codec" "$mnt/sub/c"
    python3 "$CBFS_TOOLS/posix_links.py" check "$mnt" "$T/shadow-$codec" >"$T/out" 2>&1 ||
        fail "$codec: $(cat "$T/out")"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    same_file "$T/shadow-$codec" "$mnt/b"
    same_file "$T/shadow-$codec" "$mnt/sub/c"
    cbfs_umount "$mnt"
    note "$codec ok"
done
pass

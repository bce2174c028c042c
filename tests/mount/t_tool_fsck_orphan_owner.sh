#!/usr/bin/env bash
# cbfs fsck --repair, run as root over a store whose directories users write themselves
# (each team its own), moved an orphan sidecar to the one file of the store without a
# sidecar whose frames carry its file id, whoever owned that file. A file id is no secret:
# a sidecar has its data file's mode (0644 by default), and the id is in every frame of
# the data file. So user A could
#  - copy B's file into A's directory: when B's unlink was cut short by a crash, root moved
#    B's sidecar (owned by B) into A's directory;
#  - write an orphan sidecar of A's own with the id of B's file whose rename into another
#    directory a crash cut short: root moved A's file into B's directory as the index of
#    B's file (A can rewrite it at will), and B's real sidecar, which could then not be
#    moved, was removed as nobody's by the next fsck --repair.
# A sidecar has its data file's owner (the store's rule, cbfs_store_sidecar_owned): a file
# of another owner is never the one an orphan is moved to; where only such files carry
# the id, the orphan is kept and fsck says why.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_two_users
cc -O1 -o "$T/xxh3seal" "$CBFS_TOOLS/xxh3seal.c" -lxxhash || fail "cannot build xxh3seal"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/a.csv" 11
mnt=$T/mnt

# owned_by DIR USER: every file below DIR (sidecars and index directories too) is USER's
owned_by() {
    local bad
    bad=$(find "$1" ! -user "$2" -printf '%u %p\n')
    [[ -z $bad ]] || fail "layout $layout: fsck --repair gave $1 a file of another user: $bad ($(cat "$T/fsck.out"))"
}

for layout in 1 2; do
    store=$T/store$layout
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$mnt" codec=zstd
    mkdir "$mnt/A" "$mnt/B"
    cp "$T/a.csv" "$mnt/B/x.bkp"
    cp "$T/a.csv" "$mnt/B/gone.bkp"
    cp "$T/a.csv" "$mnt/A/mine.bkp"
    cbfs_umount "$mnt"
    chown -R "$A:" "$store/A"
    chown -R "$B:" "$store/B"
    gone=$(cbfs_sidecar_of "$store" B/gone.bkp "$layout")
    old=$(cbfs_sidecar_of "$store" B/x.bkp "$layout")
    new=$(cbfs_sidecar_of "$store" B/sub/y.bkp "$layout")
    ghost=$(cbfs_sidecar_of "$store" A/ghost.bkp "$layout")
    # B's unlink of gone.bkp cut short (its sidecar left); A had copied the file (0644)
    as_user "$A" cp "$store/B/gone.bkp" "$store/A/copy.bkp"
    rm "$store/B/gone.bkp"
    # B's rename of x.bkp to sub/y.bkp cut short (the data file moved, its sidecar not)
    as_user "$B" mkdir "$store/B/sub"
    mv "$store/B/x.bkp" "$store/B/sub/y.bkp"
    # A's orphan sidecar that carries y.bkp's file id: A's own sidecar's header, its
    # file id (bytes 16..23) the one of y.bkp's first frame (bytes 48..55), sealed again
    as_user "$A" sh -c "head -c 64 '$(cbfs_sidecar_of "$store" A/mine.bkp "$layout")' >'$ghost' &&
        dd if='$store/B/sub/y.bkp' bs=1 skip=48 count=8 of='$ghost' seek=16 conv=notrunc status=none &&
        '$T/xxh3seal' '$ghost' 0" || fail "A cannot write the sidecar"

    rc=0
    "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
    owned_by "$store/A" "$A"
    owned_by "$store/B" "$B"
    [[ -f $gone ]] || fail "layout $layout: B's orphan sidecar, whose data file only A's copy carries the id of, was not kept: $(cat "$T/fsck.out")"
    grep -qF "$gone: orphan sidecar: its data file is missing; the frames of $store/A/copy.bkp carry its file id, but the sidecar does not have that file's owner (a sidecar has its data file's owner): not moved there, nor removed; left as it is" \
        "$T/fsck.out" || fail "layout $layout: fsck does not say why B's orphan is kept: $(cat "$T/fsck.out")"
    [[ -f $new && ! -e $old ]] || fail "layout $layout: B's sidecar was not moved to its file (exit $rc): $(cat "$T/fsck.out")"
    [[ -f $ghost ]] || fail "layout $layout: A's sidecar was not kept: $(cat "$T/fsck.out")"
    grep -qF "$ghost: orphan sidecar: its data file is missing, and it indexes nothing" "$T/fsck.out" &&
        grep -qF "the frames of $store/B/sub/y.bkp carry its file id, but the sidecar does not have that file's owner" "$T/fsck.out" ||
        fail "layout $layout: fsck does not say why A's orphan is kept: $(cat "$T/fsck.out")"
    check_eq 4 "$rc" "layout $layout: exit status of fsck --repair ($(cat "$T/fsck.out"))"
    cbfs_mount "$store" "$mnt"
    same_file "$T/a.csv" "$mnt/B/sub/y.bkp"
    cbfs_umount "$mnt"
done
pass

#!/usr/bin/env bash
# cbfs fsck --repair, run as root, removed the sidecar beside a data file when the loader
# found it another file's (a leftover sidecar beside a plain file, or the sidecar of
# another file id beside a compressed one, replaced by one rebuilt from the frames),
# whoever owned that sidecar. In a directory every user may make names in (a shared one,
# sticky: nobody can remove another's files there), user A could make a file at the
# name of user B's data file that B had renamed away, a rename a crash cut short: B's
# sidecar, still under the old name and the only record of the block size of B's file,
# was removed by root. A sidecar has its data file's owner (the store's rule): one of
# another owner is left where it is, and fsck says why.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_two_users
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/a.csv" 14
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/plain.csv" 15
mnt=$T/mnt
for layout in 1 2; do
    store=$T/store$layout
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$mnt" codec=zstd
    mkdir "$mnt/S" "$mnt/A" "$mnt/B"
    cp "$T/a.csv" "$mnt/S/y.bkp"
    cp "$T/a.csv" "$mnt/S/w.bkp"
    cp "$T/a.csv" "$mnt/A/mine.bkp"
    cbfs_umount "$mnt"
    chmod 1777 "$store/S" # shared, sticky
    cp "$T/plain.csv" "$store/A/mine.txt" # a plain file of A's
    chown -R "$A:" "$store/A"
    chown -R "$B:" "$store/B"
    y=$(cbfs_sidecar_of "$store" S/y.bkp "$layout") w=$(cbfs_sidecar_of "$store" S/w.bkp "$layout")
    chown "$B:" "$store/S/y.bkp" "$store/S/w.bkp" "$y" "$w"
    # B's renames of S/y.bkp and S/w.bkp into B's directory cut short (their sidecars left)
    mv "$store/S/y.bkp" "$store/B/z.bkp"
    mv "$store/S/w.bkp" "$store/B/v.bkp"
    # A makes the old names: a plain file, and a copy of A's own compressed file
    as_user "$A" cp "$store/A/mine.txt" "$store/S/y.bkp" || fail "A cannot write S"
    as_user "$A" cp "$store/A/mine.bkp" "$store/S/w.bkp" || fail "A cannot write S"
    rc=0
    "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
    for s in "$y" "$w"; do
        [[ -f $s && $(stat -c %U "$s") == "$B" ]] ||
            fail "layout $layout: fsck --repair removed B's sidecar $s beside A's file (exit $rc): $(cat "$T/fsck.out")"
    done
    grep -qF "$store/S/y.bkp: leftover sidecar: $y belongs to another file (none of its records has a frame in this data file, and the data holds no frame); not removed: it does not have the data file's owner" \
        "$T/fsck.out" || fail "layout $layout: fsck does not say why it kept the leftover: $(cat "$T/fsck.out")"
    grep -qF "$store/S/w.bkp: repair failed: its sidecar is not owned as the file is" "$T/fsck.out" ||
        fail "layout $layout: fsck does not say why it kept the sidecar of another file: $(cat "$T/fsck.out")"
    check_eq 4 "$rc" "layout $layout: exit status of fsck --repair ($(cat "$T/fsck.out"))"
    # A's files are as A made them
    same_file "$store/A/mine.txt" "$store/S/y.bkp"
    same_file "$store/A/mine.bkp" "$store/S/w.bkp"
done
pass

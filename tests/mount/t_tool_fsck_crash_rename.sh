#!/usr/bin/env bash
# cbfs fsck --repair after a crash between a rename's two steps: the data file moved to
# the new name, its sidecar is still under the old one (docs/OPERATIONS.md: move it to
# the new name; ENGINE.md: two system calls wide). That sidecar is the only record of the
# block size of a file whose frames do not prove it (written with another block_size=
# than store.conf's). fsck --repair removed it as an orphan, then left the file
# uncorrected, "restore the sidecar from a copy": the mount refused it (EIO) from then on
# (helper-64's crash-point campaign). It moves it to the file whose frames carry its file
# id, in both layouts; fsck without --repair says so; an orphan of no file is still removed.
# The crash is stood in for by making the sidecar's rename fail (t_rename_sidecar_order).
# Then two renames fsck got wrong until the orphans were settled before the files were
# checked: one to a name that sorts before the old one's sidecar (the file was reported
# "sidecar lost, not repaired" first, and the exit status said errors were left) and one
# into another directory (its sidecar, the only record of its block size, was removed
# as nobody's); where two files of the store carry the id, or a file of the store cannot
# be read, the orphan is kept.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_expect_log_errors 'the data file moved but its sidecar did not|block size of a lost index'

mnt=$T/mnt
cbfs_preload openfail
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/a.csv" 64 # 3 blocks of 1M: no 256K frame

# crashed_rename STORE SIDECAR SIDECAR_C FROM TO: FROM (1M blocks in a store of 256K)
# renamed to TO through the mount, its sidecar SIDECAR left where it was, as a crash leaves
# it; and $T/gone.side, the sidecar (SIDECAR_C) of c.bkp, a file since deleted
crashed_rename() {
    local from=$4 to=$5
    cbfs_mount "$1" "$mnt" block_size=1M
    mkdir -p "$(dirname "$mnt/$from")" "$(dirname "$mnt/$to")"
    cp "$T/a.csv" "$mnt/$from"
    cp "$T/a.csv" "$mnt/c.bkp" && cp "$3" "$T/gone.side" && rm "$mnt/c.bkp"
    chattr +i "$2" || fail "chattr +i on the store ($(stat -f -c %T "$1")) stands in for the crash"
    mv "$mnt/$from" "$mnt/$to" || { chattr -i "$2"; fail "mv"; }
    chattr -i "$2"
    cbfs_umount "$mnt"
    [[ -f $2 && ! -e $1/$from ]] || fail "the rename did not stop half-way"
    cbfs_mount "$1" "$mnt"
    stat "$mnt/$to" >/dev/null 2>&1 && fail "$to reads without its sidecar: the test does not reach its case"
    cbfs_umount "$mnt"
}

# checked COPY OLD SHOWN TO: fsck without --repair of COPY (a copy of the store) names the
# file SHOWN as the owner of the orphan OLD, says TO is not checked, and moves nothing
checked() {
    fsck_rc 4 "$1"
    grep -qF "it is the sidecar of $3, whose frames carry its file id (a rename cut short by a crash): --repair moves it there" \
        "$T/fsck.out" || fail "$1: fsck does not name the sidecar's file: $(cat "$T/fsck.out")"
    grep -qF "$4: not checked: its sidecar is the orphan sidecar said above" "$T/fsck.out" ||
        fail "$1: fsck says the file's sidecar is lost: $(cat "$T/fsck.out")"
    [[ -f $2 ]] || fail "$1: fsck without --repair moved the sidecar"
}

# unreadable COPY OLD NAME WHERE: fsck --repair of COPY where every open of a name ending in
# NAME fails (EMFILE) keeps the orphan OLD, says whose it is cannot be told (a file of
# WHERE), and exits with an error
unreadable() {
    local rc=0
    touch "$T/openfail.on"
    CBFS_OPENFAIL_TRIGGER=$T/openfail.on CBFS_OPENFAIL_NAME=$3 LD_PRELOAD=$T/openfail.so \
        "$CBFS" fsck --repair "$1" >"$T/fsck.out" 2>&1 || rc=$?
    [[ -f $2 ]] || fail "$1: fsck --repair that could not open $3 removed its sidecar (exit $rc): $(cat "$T/fsck.out")"
    grep -qF "cannot tell whether a file of $4 is its" "$T/fsck.out" ||
        fail "$1: fsck --repair without $3: $(cat "$T/fsck.out")"
    check_eq 8 "$rc" "$1: exit status of fsck --repair that could not open $3 ($(cat "$T/fsck.out"))"
}

# repaired STORE OLD NEW SHOWN TO: fsck --repair moves the orphan OLD to NEW, the sidecar of
# TO (SHOWN as fsck shows it), exits 1, reports no file unrepaired; then fsck is clean and
# TO reads back
repaired() {
    local rc=0
    "$CBFS" fsck --repair "$1" >"$T/fsck.out" 2>&1 || rc=$?
    [[ -f $3 && ! -e $2 ]] ||
        fail "$1: the sidecar was not moved to $5's (fsck --repair exit $rc): $(cat "$T/fsck.out")"
    check_eq 1 "$rc" "$1: exit status of fsck --repair ($(cat "$T/fsck.out"))"
    grep -qF "it is the sidecar of $4, whose frames carry its file id (a rename cut short by a crash) (moved there)" \
        "$T/fsck.out" || fail "$1: fsck --repair: $(cat "$T/fsck.out")"
    ! grep -q "not repaired" "$T/fsck.out" || fail "$1: fsck --repair: $(cat "$T/fsck.out")"
    [[ ! -e ${orphan:-/nonexistent} ]] || fail "$1: the orphan of no file was not removed"
    fsck_rc 0 "$1"
    cbfs_mount "$1" "$mnt"
    same_file "$T/a.csv" "$mnt/$5"
    cbfs_umount "$mnt"
}

# a.bkp renamed to b.bkp beside it (and the sidecar of c.bkp, deleted, left as an orphan of
# no file); z.bkp renamed to a.bkp (a.bkp is checked before z.bkp's sidecar in layout 1); and
# x/y.bkp renamed to d/e/w.bkp, two directories away
for layout in 2 1; do
    for case in next first far; do
        store=$T/store$layout$case
        cbfs_layout_store "$store" "$layout"
        if ((layout == 1)); then
            sed -i 's/^block_size=.*/block_size=262144/' "$store/.cbfs/store.conf"
        else
            "$CBFS" mkfs -o codec=lz4 "$store" >/dev/null
        fi
        case $case in
        next) from=a.bkp to=b.bkp ;;
        first) from=z.bkp to=a.bkp ;;
        far) from=x/y.bkp to=d/e/w.bkp ;;
        esac
        old=$(cbfs_sidecar_of "$store" "$from" "$layout") new=$(cbfs_sidecar_of "$store" "$to" "$layout")
        crashed_rename "$store" "$old" "$(cbfs_sidecar_of "$store" c.bkp "$layout")" "$from" "$to"
        orphan=
        if [[ $case == next ]]; then
            orphan=$(cbfs_sidecar_of "$store" gone.bkp "$layout")
            cp "$T/gone.side" "$orphan"
        fi
        shown=$to
        [[ $case == far ]] && shown=$store/$to
        cp -a "$store" "$T/copy$layout$case"
        checked "$T/copy$layout$case" "${old/$store/$T/copy$layout$case}" "${shown/$store/$T/copy$layout$case}" "$to"
        # where a file that may be its cannot be looked at, whose the orphan is cannot be
        # told: it is kept, and the error said, never taken for "no one's"
        cp -a "$store" "$T/nofd$layout$case"
        if [[ $case == far ]]; then
            unreadable "$T/nofd$layout$case" "${old/$store/$T/nofd$layout$case}" w.bkp "the store"
            # a raw copy of the data file elsewhere carries the same id: whose it is is
            # not told, nothing moved
            cp -a "$store" "$T/two$layout"
            mkdir "$T/two$layout/f" && cp "$store/$to" "$T/two$layout/f/"
            fsck_rc 4 --repair "$T/two$layout"
            grep -qF "the frames of 2 files without a sidecar carry its file id" "$T/fsck.out" ||
                fail "layout $layout: two files of the id: $(cat "$T/fsck.out")"
            [[ -f ${old/$store/$T/two$layout} ]] || fail "layout $layout: fsck --repair moved the sidecar one of two files carry the id of"
        else
            unreadable "$T/nofd$layout$case" "${old/$store/$T/nofd$layout$case}" "$to" "its directory"
        fi
        repaired "$store" "$old" "$new" "$shown" "$to"
    done
done
pass

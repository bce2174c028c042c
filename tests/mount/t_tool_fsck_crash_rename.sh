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

# crashed_rename STORE SIDECAR SIDECAR_C [FROM TO]: FROM (a.bkp; 1M blocks in a store of
# 256K) renamed to TO (b.bkp) through the mount, its sidecar SIDECAR left where it was, as
# a crash leaves it; and $T/gone.side, the sidecar (SIDECAR_C) of c.bkp, a file since deleted
crashed_rename() {
    local from=${4:-a.bkp} to=${5:-b.bkp}
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

for layout in 2 1; do
    store=$T/store$layout
    if ((layout == 2)); then
        mkdir -p "$store" && "$CBFS" mkfs -o codec=lz4 "$store" >/dev/null
        old=$store/.cbfsidx/a.bkp new=$store/.cbfsidx/b.bkp orphan=$store/.cbfsidx/gone.bkp
        csc=$store/.cbfsidx/c.bkp
    else
        cbfs_layout1_store "$store"
        sed -i 's/^block_size=.*/block_size=262144/' "$store/.cbfs/store.conf"
        old=$store/a.bkp.cbfsidx new=$store/b.bkp.cbfsidx orphan=$store/gone.bkp.cbfsidx
        csc=$store/c.bkp.cbfsidx
    fi
    crashed_rename "$store" "$old" "$csc"
    cp "$T/gone.side" "$orphan"
    cp -a "$store" "$T/copy$layout"
    # where a file of the directory cannot be looked at (b.bkp's opens fail with EMFILE),
    # whose the orphan is cannot be told: it is kept, and the error said, never taken for
    # "no one's"
    cp -a "$store" "$T/nofd$layout"
    touch "$T/openfail.on"
    rc=0
    CBFS_OPENFAIL_TRIGGER=$T/openfail.on CBFS_OPENFAIL_NAME=b.bkp LD_PRELOAD=$T/openfail.so \
        "$CBFS" fsck --repair "$T/nofd$layout" >"$T/fsck.out" 2>&1 || rc=$?
    [[ -f ${old/$store/$T/nofd$layout} ]] ||
        fail "layout $layout: fsck --repair that could not open b.bkp removed its sidecar (exit $rc): $(cat "$T/fsck.out")"
    grep -qF "cannot tell whether a file of its directory is its" "$T/fsck.out" ||
        fail "layout $layout: fsck --repair without b.bkp: $(cat "$T/fsck.out")"
    ((rc != 0 && rc != 1)) || fail "layout $layout: fsck --repair exit $rc with an error: $(cat "$T/fsck.out")"
    rc=0
    "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
    [[ -f $new && ! -e $old ]] ||
        fail "layout $layout: the sidecar was not moved to b.bkp's (fsck --repair exit $rc): $(cat "$T/fsck.out")"
    check_eq 1 "$rc" "layout $layout: exit status of fsck --repair ($(cat "$T/fsck.out"))"
    grep -qF "it is the sidecar of b.bkp, whose frames carry its file id (a rename cut short by a crash) (moved there)" \
        "$T/fsck.out" || fail "layout $layout: fsck --repair: $(cat "$T/fsck.out")"
    [[ ! -e $orphan ]] || fail "layout $layout: the orphan of no file was not removed"
    # without --repair: said, not done
    fsck_rc 4 "$T/copy$layout"
    grep -qF "it is the sidecar of b.bkp, whose frames carry its file id (a rename cut short by a crash): --repair moves it there" \
        "$T/fsck.out" || fail "layout $layout: fsck does not name the sidecar's file: $(cat "$T/fsck.out")"
    [[ -f ${old/$store/$T/copy$layout} ]] || fail "layout $layout: fsck without --repair moved the sidecar"
    fsck_rc 0 "$store"
    cbfs_mount "$store" "$mnt"
    same_file "$T/a.csv" "$mnt/b.bkp"
    cbfs_umount "$mnt"

    # z.bkp renamed to a.bkp (a.bkp is checked before z.bkp's sidecar in layout 1), and
    # x/y.bkp renamed to d/e/w.bkp, two directories away
    for case in first far; do
        store=$T/store$layout$case
        cbfs_layout_store "$store" "$layout"
        if ((layout == 1)); then
            sed -i 's/^block_size=.*/block_size=262144/' "$store/.cbfs/store.conf"
            csc=$store/c.bkp.cbfsidx
        else
            "$CBFS" mkfs -o codec=lz4 "$store" >/dev/null
            csc=$store/.cbfsidx/c.bkp
        fi
        if [[ $case == first ]]; then
            from=z.bkp to=a.bkp
        else
            from=x/y.bkp to=d/e/w.bkp
        fi
        old=$(cbfs_sidecar_of "$store" "$from" "$layout") new=$(cbfs_sidecar_of "$store" "$to" "$layout")
        crashed_rename "$store" "$old" "$csc" "$from" "$to"
        shown=$to
        [[ $case == far ]] && shown=$store/$to
        cp -a "$store" "$T/copy$layout$case"
        fsck_rc 4 "$T/copy$layout$case"
        grep -qF "it is the sidecar of ${shown/$store/$T/copy$layout$case}, whose frames carry its file id (a rename cut short by a crash): --repair moves it there" \
            "$T/fsck.out" || fail "layout $layout $case: fsck does not name the sidecar's file: $(cat "$T/fsck.out")"
        grep -qF "$to: not checked: its sidecar is the orphan sidecar said above" "$T/fsck.out" ||
            fail "layout $layout $case: fsck says the file's sidecar is lost: $(cat "$T/fsck.out")"
        if [[ $case == far ]]; then
            # a raw copy of the data file elsewhere carries the same id: whose it is is
            # not told, nothing moved
            cp -a "$store" "$T/two$layout"
            mkdir "$T/two$layout/f" && cp "$store/$to" "$T/two$layout/f/"
            fsck_rc 4 --repair "$T/two$layout"
            grep -qF "the frames of 2 files without a sidecar carry its file id" "$T/fsck.out" ||
                fail "layout $layout: two files of the id: $(cat "$T/fsck.out")"
            [[ -f ${old/$store/$T/two$layout} ]] || fail "layout $layout: fsck --repair moved the sidecar one of two files carry the id of"
            # a file of the store that cannot be read may be its: kept, the error said
            cp -a "$store" "$T/nofd$layout$case"
            touch "$T/openfail.on"
            rc=0
            CBFS_OPENFAIL_TRIGGER=$T/openfail.on CBFS_OPENFAIL_NAME=w.bkp LD_PRELOAD=$T/openfail.so \
                "$CBFS" fsck --repair "$T/nofd$layout$case" >"$T/fsck.out" 2>&1 || rc=$?
            [[ -f ${old/$store/$T/nofd$layout$case} ]] ||
                fail "layout $layout: fsck --repair that could not open d/e/w.bkp removed its sidecar (exit $rc): $(cat "$T/fsck.out")"
            grep -qF "cannot tell whether a file of the store is its" "$T/fsck.out" ||
                fail "layout $layout: fsck --repair without d/e/w.bkp: $(cat "$T/fsck.out")"
            check_eq 8 "$rc" "layout $layout: exit status of fsck --repair that could not open a file ($(cat "$T/fsck.out"))"
        fi
        rc=0
        "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
        [[ -f $new && ! -e $old ]] ||
            fail "layout $layout $case: the sidecar was not moved to $to's (fsck --repair exit $rc): $(cat "$T/fsck.out")"
        check_eq 1 "$rc" "layout $layout $case: exit status of fsck --repair ($(cat "$T/fsck.out"))"
        grep -qF "it is the sidecar of $shown, whose frames carry its file id (a rename cut short by a crash) (moved there)" \
            "$T/fsck.out" || fail "layout $layout $case: fsck --repair: $(cat "$T/fsck.out")"
        ! grep -q "not repaired" "$T/fsck.out" || fail "layout $layout $case: fsck --repair: $(cat "$T/fsck.out")"
        fsck_rc 0 "$store"
        cbfs_mount "$store" "$mnt"
        same_file "$T/a.csv" "$mnt/$to"
        cbfs_umount "$mnt"
    done
done
pass

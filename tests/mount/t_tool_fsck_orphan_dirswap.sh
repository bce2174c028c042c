#!/usr/bin/env bash
# cbfs fsck --repair settles an orphan sidecar that no file of its own directory is the
# sidecar of after its walk of the whole store, reopening the orphan's directory by the
# path it had: a user who writes the store may have moved it, or put a symlink to
# another directory there, meanwhile (a shim does so at that open). The directory found
# is checked to be the same one, and nothing is removed elsewhere; fsck said only "the
# object is gone from the store", of a directory that is there. It says what happened.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload dirswap
python3 "$CBFS_TOOLS/gendata.py" csv 100K "$T/a.csv" 16
mnt=$T/mnt
for layout in 1 2; do
    store=$T/store$layout
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$mnt" codec=zstd
    mkdir "$mnt/A" "$mnt/B"
    cp "$T/a.csv" "$mnt/A/gone.bkp"
    cp "$T/a.csv" "$mnt/B/b.bkp"
    cbfs_umount "$mnt"
    # gone.bkp's unlink cut short: its sidecar, whose file id no file carries
    rm "$store/A/gone.bkp"
    orphan=$(cbfs_sidecar_of "$store" A/gone.bkp "$layout")
    # the directory fsck reopens: the orphan's (layout 2: its index directory)
    dir=$(realpath "$(dirname "$orphan")")
    mkdir -p "$T/other$layout"
    cp "$orphan" "$T/other$layout/$(basename "$orphan")" # a file of the orphan's name there
    rc=0
    CBFS_DIRSWAP_PATH=$dir CBFS_DIRSWAP_TO=$T/other$layout LD_PRELOAD=$T/dirswap.so \
        "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
    [[ -L $dir && -d $dir.aside ]] || fail "layout $layout: the shim did not swap $dir: $(cat "$T/fsck.out")"
    [[ -f $dir.aside/$(basename "$orphan") && -f $T/other$layout/$(basename "$orphan") ]] ||
        fail "layout $layout: fsck removed a file through the swapped directory: $(cat "$T/fsck.out")"
    grep -qF "$orphan: cannot remove it: its directory was moved or replaced while fsck ran (a user writing the store); nothing removed, run fsck again" \
        "$T/fsck.out" || fail "layout $layout: fsck does not say why it removed nothing: $(cat "$T/fsck.out")"
    check_eq 4 "$rc" "layout $layout: exit status of fsck --repair ($(cat "$T/fsck.out"))"
    rm "$dir" && mv "$dir.aside" "$dir"
    fsck_rc 1 --repair "$store"
    [[ ! -e $orphan ]] || fail "layout $layout: the orphan was not removed by the next fsck --repair: $(cat "$T/fsck.out")"
done
pass

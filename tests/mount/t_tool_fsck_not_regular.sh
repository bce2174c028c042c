#!/usr/bin/env bash
# Not a regular file where cbfs keeps only regular ones, and no data file of its name: a
# directory, a symlink or a FIFO at an orphan sidecar's name (layout 1 NAME.cbfsidx,
# layout 2 DIR/.cbfsidx/NAME), or at a .cbfs/rename-aside-* name. fsck's orphan pass
# skipped the first in silence (exit 0) and took the second for "cannot tell whose it
# is" (an operational error, exit 8). cbfs makes none of them, so none indexes anything:
# each is a problem line, counted, left (exit 4, with and without --repair), never opened
# (the FIFO would block fsck: it runs under a timeout), followed (the symlink's target,
# outside the store, stays as it is) or removed (the directory keeps what it holds).
# verify reports the orphans too (exit 1); the asides are fsck's alone.
. "$(dirname "$0")/lib.sh"
cbfs_tool
python3 "$CBFS_TOOLS/gendata.py" csv 100K "$T/a.csv" 9
echo outside >"$T/target"

for layout in 1 2; do
    store=$T/s$layout
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$T/m" codec=lz4
    cp "$T/a.csv" "$T/m/keep"
    mkdir "$T/m/sub"
    cp "$T/a.csv" "$T/m/sub/keep"
    cbfs_umount "$T/m"
    d=$(cbfs_sidecar_of "$store" dirorph "$layout")
    l=$(cbfs_sidecar_of "$store" sub/lnorph "$layout")
    p=$(cbfs_sidecar_of "$store" fifoorph "$layout")
    mkdir "$d" && echo inside >"$d/inner"
    ln -s "$T/target" "$l"
    mkfifo "$p"
    mkdir "$store/.cbfs/rename-aside-d" && echo inside >"$store/.cbfs/rename-aside-d/inner"
    ln -s "$T/target" "$store/.cbfs/rename-aside-l"
    mkfifo "$store/.cbfs/rename-aside-p"
    for repair in "" --repair; do
        rc=0
        timeout 60 "$CBFS" fsck $repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
        check_eq 4 "$rc" "layout $layout: fsck $repair ($(tail -n 3 "$T/fsck.out" | tr '\n' '|'))"
        for want in "$d: a directory at a sidecar's name" "$l: a symbolic link at a sidecar's name" \
            "$p: a FIFO at a sidecar's name" \
            "$store/.cbfs/rename-aside-d: a directory at a name where a rename or unlink puts" \
            "$store/.cbfs/rename-aside-l: a symbolic link at a name where" \
            "$store/.cbfs/rename-aside-p: a FIFO at a name where"; do
            grep -qF "$want" "$T/fsck.out" || fail "layout $layout: fsck $repair does not say '$want': $(cat "$T/fsck.out")"
        done
        grep -q " 2 file(s), 6 problem(s), 0 repaired, 6 left uncorrected" "$T/fsck.out" ||
            fail "layout $layout: fsck $repair summary: $(tail -n 1 "$T/fsck.out")"
        grep -q "index file(s) a rename or unlink cut short" "$T/fsck.out" &&
            fail "layout $layout: fsck $repair calls them sidecars put aside: $(cat "$T/fsck.out")"
        [[ -d $d && $(cat "$d/inner") == inside && -L $l && -p $p && -d $store/.cbfs/rename-aside-d &&
            -L $store/.cbfs/rename-aside-l && -p $store/.cbfs/rename-aside-p &&
            $(cat "$store/.cbfs/rename-aside-d/inner") == inside ]] ||
            fail "layout $layout: fsck $repair removed or changed one: $(ls -lR "$store")"
        [[ $(cat "$T/target") == outside ]] || fail "layout $layout: fsck $repair wrote through the symlink"
    done
    rc=0
    timeout 60 "$CBFS" verify "$store" >"$T/v.out" 2>&1 || rc=$?
    check_eq 1 "$rc" "layout $layout: verify ($(cat "$T/v.out"))"
    for o in "$d" "$l" "$p"; do
        grep -qF "$o: not a regular file where cbfs keeps a sidecar" "$T/v.out" || fail "layout $layout: verify of $o: $(cat "$T/v.out")"
    done
    grep -q ': 3 problem(s)$' "$T/v.out" || fail "layout $layout: verify: $(tail -n 1 "$T/v.out")"
    # the mount serves the store as before, and its log says nothing of the asides
    cbfs_mount "$store" "$T/m" codec=lz4
    cmp -s "$T/a.csv" "$T/m/sub/keep" || fail "layout $layout: sub/keep through the mount"
    cbfs_umount "$T/m"
    grep -q "moved aside" "$(cbfs_log_of "$T/m")" && fail "layout $layout: the daemon's log: $(cat "$(cbfs_log_of "$T/m")")"
done
pass

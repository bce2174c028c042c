#!/usr/bin/env bash
# A walk beside a live mount pauses (TOOL_SETTLE_MS) for each orphan sidecar changed in
# the last seconds and looks again: a rename through the mount moves the data file, then
# its sidecar. cbfs fsck holds .cbfs/lock, which every daemon takes before it serves, so
# no mount is live: its two or three walks paused for nothing, each recent orphan in each
# walk (2.8 s for 10 orphans in a store of 2000 files, 0.1 s without). Seen by its sleeps
# (strace), not by a timer: fsck under .cbfs/lock sleeps not once, with and without
# --repair, and finds the same; a check of a store without .cbfs/lock (no daemon lock to
# take: a mount may start meanwhile) still pauses, and so does verify.
. "$(dirname "$0")/lib.sh"
cbfs_tool
command -v strace >/dev/null || fail "strace is needed (scripts/deps.sh --test installs it)"
python3 "$CBFS_TOOLS/gendata.py" csv 100K "$T/a.csv" 7

# sleeps LOG CMD...: CMD under strace, its output in $T/cmd.out; prints how many sleeps
sleeps() {
    local log=$1
    shift
    strace -f -qq -e trace=nanosleep,clock_nanosleep -o "$log" "$@" >"$T/cmd.out" 2>&1 || true
    grep -c 'nanosleep(' "$log" || true
}
for layout in 1 2; do
    store=$T/s$layout
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$T/m" codec=lz4
    for f in a b c keep; do cp "$T/a.csv" "$T/m/$f"; done
    cbfs_umount "$T/m"
    rm "$store/a" "$store/b" "$store/c"
    orphans=("$(cbfs_sidecar_of "$store" a "$layout")" "$(cbfs_sidecar_of "$store" b "$layout")" \
        "$(cbfs_sidecar_of "$store" c "$layout")")
    [[ -e $store/.cbfs/lock ]] || fail "layout $layout: the mount left no .cbfs/lock"
    touch "${orphans[@]}" # recent: each would be looked at again after a pause
    n=$(sleeps "$T/check.strace" "$CBFS" fsck "$store")
    check_eq 0 "$n" "layout $layout: sleeps of fsck under .cbfs/lock ($(tail -n 2 "$T/cmd.out" | tr '\n' '|'))"
    grep -q ' 3 problem(s), 0 repaired, 3 left uncorrected' "$T/cmd.out" || fail "layout $layout: fsck: $(cat "$T/cmd.out")"
    # verify, which a mount may run beside, still looks again
    touch "${orphans[@]}"
    n=$(sleeps "$T/verify.strace" "$CBFS" verify "$store")
    ((n >= 3)) || fail "layout $layout: verify slept $n times for 3 recent orphans"
    grep -c 'orphan sidecar' "$T/cmd.out" | grep -qx 3 || fail "layout $layout: verify: $(cat "$T/cmd.out")"
    # no .cbfs/lock to take (only the root's flock, which a daemon that cannot read the
    # root goes without): the check still pauses
    mv "$store/.cbfs/lock" "$T/lock.saved"
    touch "${orphans[@]}"
    n=$(sleeps "$T/nolock.strace" "$CBFS" fsck "$store")
    ((n >= 3)) || fail "layout $layout: fsck without .cbfs/lock slept $n times for 3 recent orphans"
    grep -q ' 3 problem(s), 0 repaired, 3 left uncorrected' "$T/cmd.out" || fail "layout $layout: fsck without .cbfs/lock: $(cat "$T/cmd.out")"
    mv "$T/lock.saved" "$store/.cbfs/lock"
    touch "${orphans[@]}"
    n=$(sleeps "$T/repair.strace" "$CBFS" fsck --repair "$store")
    check_eq 0 "$n" "layout $layout: sleeps of fsck --repair ($(tail -n 2 "$T/cmd.out" | tr '\n' '|'))"
    grep -q ' 3 problem(s), 3 repaired, 0 left uncorrected' "$T/cmd.out" || fail "layout $layout: fsck --repair: $(cat "$T/cmd.out")"
    for o in "${orphans[@]}"; do [[ ! -e $o ]] || fail "layout $layout: $o not removed"; done
    fsck_rc 0 "$store"
done
pass

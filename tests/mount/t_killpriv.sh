#!/usr/bin/env bash
# Set-user-ID and set-group-ID bits as ext4 clears them: when a user without
# CAP_FSETID appends to, truncates, opens with O_TRUNC or fallocates a 06777
# file, both bits go (setgid only with group execute, as here); root keeps
# them; and a chown(f, -1, -1) by a user who does not own the file leaves them
# (ext4: EPERM; helper-25 found that a fix for root's chown(f, -1, -1), which
# clears them on ext4 but not here, let any user clear them: docs/ENGINE.md,
# known limits). The daemon negotiates FUSE_HANDLE_KILLPRIV_V2
# (src/fuse/channel.c), which makes this its job, so the expected modes are
# taken from the same operations on a directory of the local filesystem, for
# compressed and plain files, with and without the writeback cache. The mode
# must be right at once (no stale attribute cache), and again after a remount.
. "$(dirname "$0")/lib.sh"

id nobody >/dev/null 2>&1 || fail "needs the user nobody"
as_nobody() { setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- "$@"; }
ops=(append trunc otrunc falloc rootwrite otherchown)
# run_ops DIR: one file per operation; prints "op mode" lines
run_ops() {
    local d=$1 op f
    for op in "${ops[@]}"; do
        f=$d/k_$op
        rm -f "$f"
        echo hello >"$f"
        chmod 06777 "$f"
        case $op in
        append) as_nobody sh -c "echo x >>'$f'" ;;
        trunc) as_nobody truncate -s 1 "$f" ;;
        otrunc) as_nobody sh -c ": >'$f'" ;;
        falloc) as_nobody fallocate -l 65536 "$f" ;;
        rootwrite) echo x >>"$f" ;;
        otherchown) # EPERM on ext4, 0 here: only the mode is compared
            as_nobody /usr/bin/python3 -c 'import os, sys; os.chown(sys.argv[1], -1, -1)' "$f" 2>/dev/null || : ;;
        esac || fail "$op on $f failed"
        echo "$op $(stat -c %a "$f")"
    done
}
ref=$T/ref
mkdir -p "$ref"
chmod 777 "$T" "$ref"
run_ops "$ref" >"$T/ref.modes"
grep -q '^append 777$' "$T/ref.modes" || fail "the local filesystem did not clear the bits: $(tr '\n' ' ' <"$T/ref.modes")"

for opts in codec=lz4 codec=lz4,writeback_cache=off codec=none codec=none,writeback_cache=off; do
    store=$T/s.${opts//[=,]/_} mnt=$T/m.${opts//[=,]/_}
    mkdir -p "$store"
    cbfs_mount "$store" "$mnt" "$opts,allow_other"
    chmod 777 "$mnt"
    run_ops "$mnt" >"$T/got.modes"
    diff -u "$T/ref.modes" "$T/got.modes" >"$T/diff" || fail "$opts: modes differ from ext4: $(tr '\n' ' ' <"$T/diff")"
    cbfs_umount "$mnt"
    cbfs_mount "$store" "$mnt" "$opts,allow_other"
    for op in "${ops[@]}"; do echo "$op $(stat -c %a "$mnt/k_$op")"; done >"$T/again.modes"
    diff -u "$T/ref.modes" "$T/again.modes" >"$T/diff" || fail "$opts: after a remount: $(tr '\n' ' ' <"$T/diff")"
    cbfs_umount "$mnt"
done
pass "$(tr '\n' ' ' <"$T/ref.modes")"

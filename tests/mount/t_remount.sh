#!/usr/bin/env bash
# mount -o remount,ro and back to rw on a running cbfs mount, both ways mount(8) can do
# it: through the helper (mount(8) runs /sbin/mount.fuse.cbfs SOURCE DIR -o <the mount
# table's options>,remount,ro, which must do the MS_REMOUNT itself) and with -i (the
# kernel alone). After ro, changes fail with EROFS and reads work; ro is refused while a
# file is open for writing; after rw, changes work again; the data is intact after a
# fresh mount and the daemon unmounts cleanly. A mount started ro stays read-only in the
# daemon after remount,rw (EROFS). The test runs in its own mount namespace with the
# helper links in an overlay over /sbin, so nothing outside it changes.
if [[ ${CBFS_T_REMOUNT_NS:-0} != 1 ]]; then
    if ! unshare -m --propagation private true 2>/dev/null; then
        echo "FAIL t_remount: cannot create a mount namespace (needs root)"
        exit 1
    fi
    CBFS_T_REMOUNT_NS=1 exec unshare -m --propagation private -- bash "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
cbfs_ns_leave_others

# the helper links: a logging wrapper (absolute paths: mount(8) gives helpers no PATH)
sbin=$(realpath /sbin)
mkdir -p "$T/sbin.up" "$T/sbin.work"
printf '#!/bin/sh\necho "$*" >>%q\nexec %q "$@"\n' "$T/helper.log" "$CBFS_MOUNT_BIN" >"$T/helper"
chmod +x "$T/helper"
mount -t overlay overlay -o "lowerdir=$sbin,upperdir=$T/sbin.up,workdir=$T/sbin.work" "$sbin" ||
    fail "cannot put an overlay over $sbin"
trap 'rc=$?; umount -l "$sbin" 2>/dev/null; set +e; (exit $rc); cbfs_cleanup' EXIT
for l in mount.cbfs mount.fuse.cbfs; do ln -sf "$T/helper" "$sbin/$l"; done

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 3M "$T/a.csv" 11
python3 "$CBFS_TOOLS/gendata.py" mixed 2M "$T/b.bin" 12

# mount_flags: the per-mount flags /proc/mounts shows for $mnt
mount_flags() { awk -v m="$(realpath "$mnt")" '$2 == m { f = $4 } END { print f }' /proc/mounts; }

# expect_erofs WHAT CMD...: CMD must fail with "Read-only file system"
expect_erofs() {
    local what=$1
    shift
    check_fails "$@"
    grep -q 'Read-only file system' "$T/last.err" || fail "$what: expected EROFS, got: $(cat "$T/last.err")"
}

# readonly_now WHEN: every kind of change fails with EROFS, reads work
readonly_now() {
    local when=$1
    expect_erofs "$when: create" sh -c "echo x >'$mnt/new'"
    expect_erofs "$when: append" sh -c "echo x >>'$mnt/d/small'"
    expect_erofs "$when: truncate" truncate -s 0 "$mnt/a.csv"
    expect_erofs "$when: mkdir" mkdir "$mnt/newdir"
    expect_erofs "$when: rm" rm "$mnt/d/small"
    expect_erofs "$when: rename" mv "$mnt/a.csv" "$mnt/a2.csv"
    expect_erofs "$when: chmod" chmod 600 "$mnt/a.csv"
    expect_erofs "$when: touch" touch "$mnt/a.csv"
    [[ ! -e $mnt/new && ! -e $mnt/newdir && -e $mnt/d/small ]] || fail "$when: a refused change happened"
    drop_caches
    same_file "$T/a.csv" "$mnt/a.csv"
    check_eq small "$(cat "$mnt/d/small")" "$when: read"
}

cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/a.csv" "$mnt/a.csv"
mkdir "$mnt/d"
echo small >"$mnt/d/small"
for way in helper kernel; do
    iflag=()
    [[ $way == kernel ]] && iflag=(-i)
    : >"$T/helper.log"
    mount "${iflag[@]}" -o remount,ro "$mnt" 2>"$T/remount.err" ||
        fail "$way: mount -o remount,ro: $(cat "$T/remount.err")"
    [[ $(mount_flags) == ro,* ]] || fail "$way: /proc/mounts shows '$(mount_flags)' after remount,ro"
    if [[ $way == helper ]]; then
        grep -q 'remount' "$T/helper.log" || fail "mount(8) did not run the helper for remount"
        note "helper got: $(head -n 1 "$T/helper.log")"
    else
        [[ ! -s $T/helper.log ]] || fail "mount -i ran the helper: $(cat "$T/helper.log")"
    fi
    readonly_now "$way ro"

    mount "${iflag[@]}" -o remount,rw "$mnt" 2>"$T/remount.err" ||
        fail "$way: mount -o remount,rw: $(cat "$T/remount.err")"
    [[ $(mount_flags) == rw,* ]] || fail "$way: /proc/mounts shows '$(mount_flags)' after remount,rw"
    cp "$T/b.bin" "$mnt/b-$way.bin"
    echo more >>"$mnt/d/small"
    mkdir "$mnt/dir-$way"
    echo small >"$mnt/d/small"

    # ro while a file is open for writing: refused, the mount stays rw
    exec 7>>"$mnt/d/small"
    check_fails mount "${iflag[@]}" -o remount,ro "$mnt"
    exec 7>&-
    [[ $(mount_flags) == rw,* ]] || fail "$way: refused remount,ro left '$(mount_flags)'"
    [[ $way == kernel ]] || grep -q 'open for writing' "$T/last.err" ||
        fail "helper: refusal does not say why: $(cat "$T/last.err")"
    note "$way: ro, rw and a refused ro ($(head -n 1 "$T/last.err")) ok"
done
cbfs_umount "$mnt"

# everything intact from the store
drop_caches
cbfs_mount "$store" "$mnt"
same_file "$T/a.csv" "$mnt/a.csv"
for way in helper kernel; do
    same_file "$T/b.bin" "$mnt/b-$way.bin"
    [[ -d $mnt/dir-$way ]] || fail "dir-$way missing"
done
check_eq small "$(cat "$mnt/d/small")" "d/small after a fresh mount"
cbfs_umount "$mnt"

# started ro: the kernel lets writes through after remount,rw, the daemon refuses them
cbfs_mount "$store" "$mnt" ro
[[ $(mount_flags) == ro,* ]] || fail "ro mount shows '$(mount_flags)'"
mount -o remount,rw "$mnt" 2>"$T/remount.err" || fail "remount,rw of an ro mount: $(cat "$T/remount.err")"
[[ $(mount_flags) == rw,* ]] || fail "remount,rw of an ro mount shows '$(mount_flags)'"
readonly_now "started ro, remounted rw"
note "started ro: stays read-only in the daemon after remount,rw"
cbfs_umount "$mnt"
pass

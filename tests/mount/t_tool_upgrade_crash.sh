#!/usr/bin/env bash
# cbfs fsck --upgrade (layout 1 -> 2) and cbfs mkfs killed (SIGKILL) at each of their calls
# that change the store, in turn (tools/crashpoint.c). After each kill of the upgrade the
# mount either refuses the store as an upgrade cut short (docs/FORMAT.md) or serves every
# file as before; run again to the end, the upgrade leaves a layout-2 store, no sidecar of
# layout 1, the same files through the mount, and fsck and verify clean. After each kill
# of mkfs, mkfs again (or, once store.conf is in place, nothing) leaves the store it was
# asked for. No kill point failed when helper-64 wrote this (its crash-point campaign):
# it keeps it so.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload crashpoint
mnt=$T/mnt

# a layout-1 store: files in the root and two levels down, a hard link, a symlink, a plain
# file, a sidecar sorted before the orphan named .cbfsidx (layout 2's name, in its way)
tmpl=$T/tmpl
cbfs_layout1_store "$tmpl"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/a.csv" 65
python3 "$CBFS_TOOLS/gendata.py" mixed 400K "$T/b.bin" 66
cbfs_mount "$tmpl" "$mnt" codec=zstd,block_size=64K
mkdir -p "$mnt/d/e" "$mnt/raw"
setfattr -n user.cbfs.codec -v none "$mnt/raw"
cp "$T/a.csv" "$mnt/a.csv"
cp "$T/a.csv" "$mnt/-dump"
cp "$T/b.bin" "$mnt/d/b.bin"
cp "$T/a.csv" "$mnt/d/e/deep.csv"
cp "$T/b.bin" "$mnt/raw/plain"
ln "$mnt/a.csv" "$mnt/d/hard"
ln -s a.csv "$mnt/link"
tree_manifest "$mnt" >"$T/want"
cbfs_umount "$mnt"
: >"$tmpl/.cbfsidx"

# served STORE WHEN: the mount serves STORE's files as before (on a copy: an open through
# the mount may repair what it loads)
served() {
    rm -rf "$T/r"
    cp -a "$1" "$T/r"
    cbfs_mount "$T/r" "$mnt"
    tree_manifest "$mnt" >"$T/got" || fail "$2: cannot list the mount"
    cbfs_umount "$mnt"
    diff -u "$T/want" "$T/got" >"$T/diff" || fail "$2: the files differ: $(head -n 8 "$T/diff" | tr '\n' '|')"
}

cp -a "$tmpl" "$T/full"
CBFS_CRASH_LOG=$T/up.calls ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/crashpoint.so "$CBFS" fsck --upgrade "$T/full" >"$T/full.out" 2>&1 ||
    fail "fsck --upgrade: $(cat "$T/full.out")"
n=$(wc -l <"$T/up.calls")
((n > 10)) || fail "fsck --upgrade made $n counted calls"
for ((k = 1; k <= n; k++)); do
    w=$T/w
    rm -rf "$w"
    cp -a "$tmpl" "$w"
    when="fsck --upgrade killed at its call $k ($(sed -n "${k}p" "$T/up.calls"))"
    rc=0
    (CBFS_CRASH_AT=$k ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/crashpoint.so "$CBFS" fsck --upgrade "$w" >"$T/kill.out" 2>&1 || exit $?) 2>/dev/null || rc=$?
    check_eq 137 "$rc" "$when: exit status"
    if ! grep -q '^layout=2' "$w/.cbfs/store.conf" && [[ -n $(find "$w" -name .cbfsidx -type d) ]]; then
        rc=0
        timeout 20 "$CBFS_MOUNT_BIN" -f "$w" "$mnt" >"$T/cut.out" 2>&1 || rc=$?
        check_eq 1 "$rc" "$when: the mount of an upgrade cut short ($(cat "$T/cut.out"))"
        grep -q 'upgrade to layout 2 was cut short' "$T/cut.out" || fail "$when: $(cat "$T/cut.out")"
    else
        served "$w" "$when"
    fi
    rc=0
    "$CBFS" fsck --upgrade "$w" >"$T/rerun.out" 2>&1 || rc=$?
    check_eq 0 "$rc" "$when: fsck --upgrade again ($(cat "$T/rerun.out"))"
    grep -q '^layout=2$' "$w/.cbfs/store.conf" || fail "$when, run again: store.conf: $(cat "$w/.cbfs/store.conf")"
    left=$(find "$w" -name '*.cbfsidx' -type f)
    [[ -z $left ]] || fail "$when, run again: sidecars of layout 1 left: $left"
    fsck_rc 0 "$w"
    check "$CBFS" verify "$w"
    served "$w" "$when, run again"
done
nup=$n

# mkfs
CBFS_CRASH_LOG=$T/mkfs.calls ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/crashpoint.so "$CBFS" mkfs -o codec=zstd,block_size=128K "$T/m0" >/dev/null ||
    fail "mkfs"
n=$(wc -l <"$T/mkfs.calls")
((n > 5)) || fail "mkfs made $n counted calls"
for ((k = 1; k <= n; k++)); do
    w=$T/mk$k
    when="mkfs killed at its call $k ($(sed -n "${k}p" "$T/mkfs.calls"))"
    rc=0
    (CBFS_CRASH_AT=$k ASAN_OPTIONS=$ASAN_OPTIONS:verify_asan_link_order=0 LD_PRELOAD=$T/crashpoint.so "$CBFS" mkfs -o codec=zstd,block_size=128K "$w" >/dev/null 2>&1 || exit $?) 2>/dev/null || rc=$?
    check_eq 137 "$rc" "$when: exit status"
    rc=0
    "$CBFS" mkfs -o codec=zstd,block_size=128K "$w" >"$T/mkfs.out" 2>&1 || rc=$?
    [[ $rc == 0 ]] || { [[ $rc == 1 ]] && grep -q 'already a cbfs store' "$T/mkfs.out"; } ||
        fail "$when: mkfs again exited $rc: $(cat "$T/mkfs.out")"
    grep -q '^block_size=131072$' "$w/.cbfs/store.conf" || fail "$when: store.conf: $(cat "$w/.cbfs/store.conf")"
    cbfs_mount "$w" "$mnt"
    cp "$T/b.bin" "$mnt/f"
    cbfs_umount "$mnt"
    check_eq 2 "$(frame_codecs "$w/f")" "$when: the codec (zstd: 2) of a file written after"
done
pass "fsck --upgrade $nup kill points, mkfs $n"

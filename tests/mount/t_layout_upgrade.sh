#!/usr/bin/env bash
# A store in layout 1 (NAME.cbfsidx beside NAME, store.conf without layout=) is served
# as it is: its sidecars stay where they are, f_namemax stays 247. `cbfs fsck --upgrade`
# converts it offline to layout 2 with every byte intact (each sidecar moves unchanged
# to DIR/.cbfsidx/NAME), also when an earlier run was cut short, and a rerun is a no-op.
. "$(dirname "$0")/lib.sh"
CBFS=${CBFS_TOOL_BIN:-$(dirname "$CBFS_MOUNT_BIN")/cbfs}
[[ -x $CBFS ]] || fail "tool not built: $CBFS"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_layout1_store "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/data.csv" 9
n247=$(printf 'n%.0s' {1..247})

cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
check_eq 247 "$(stat -f -c %l "$mnt")" "f_namemax of a layout-1 store"
mkdir -p "$mnt/d/e" "$mnt/raw"
setfattr -n user.cbfs.codec -v none "$mnt/raw"
cp "$T/data.csv" "$mnt/a.csv"
cp "$T/data.csv" "$mnt/-dump" # its sidecar sorts before the orphan .cbfsidx below: the
                              # upgrade stopped there (EEXIST), on every rerun again
cp "$T/data.csv" "$mnt/d/e/$n247"
cp "$T/data.csv" "$mnt/raw/plain"
ln "$mnt/a.csv" "$mnt/d/hard"
ln -s a.csv "$mnt/link"
check_fails touch "$mnt/x.cbfsidx"
before=$(tree_manifest "$mnt")
cbfs_umount "$mnt"
grep -q '^layout=' "$store/.cbfs/store.conf" && fail "a mount added layout= to a layout-1 store"
[[ -f $store/a.csv.cbfsidx && -f $store/d/e/$n247.cbfsidx && -f $store/d/hard.cbfsidx ]] ||
    fail "layout 1: sidecars are not NAME.cbfsidx"
[[ -z $(find "$store" -name .cbfsidx) ]] || fail "layout 1: an index directory appeared"

# A layout-1 store that lost its .cbfs/ (cp -a STORE/* skips it) was taken for a new
# store: layout=2 written, every compressed file EIO, its sidecars shown as files. The
# mount refuses it, before writing anything, and says how to go on.
mv "$store/.cbfs" "$T/cbfs.saved"
rc=0; timeout 20 "$CBFS_MOUNT_BIN" -f "$store" "$mnt" >"$T/lost.out" 2>&1 || rc=$?
check_eq 1 "$rc" "mount of a layout-1 store without store.conf ($(cat "$T/lost.out"))"
grep -q "holds index sidecars of layout 1" "$T/lost.out" || fail "message: $(cat "$T/lost.out")"
[[ -e $store/.cbfs/store.conf ]] && fail "the refused mount wrote a store.conf"
rm -rf "$store/.cbfs" && mv "$T/cbfs.saved" "$store/.cbfs"

# every store file's bytes, keyed by where layout 2 puts it
digest() {
    (cd "$store" && find . -path ./.cbfs -prune -o -type f -print0 | xargs -0r sha256sum |
        sed -E "s#  \\./(.*/)?([^/]*)\\.cbfsidx\$#  \\1.cbfsidx/\\2#; s#  \\./#  #" | LC_ALL=C sort)
}
want=$(digest)

# an earlier upgrade cut short: one sidecar already moved
mkdir -m 711 "$store/d/.cbfsidx"
mv "$store/d/hard.cbfsidx" "$store/d/.cbfsidx/hard"
: >"$store/.cbfsidx" # layout 1's sidecar of no file: an orphan, in layout 2's way
# A mount in between would misplace sidecars for good (a rename, a new file of a moved
# sidecar's name): it is refused until the upgrade has been run again.
rc=0; timeout 20 "$CBFS_MOUNT_BIN" -f "$store" "$mnt" >"$T/cut.out" 2>&1 || rc=$?
check_eq 1 "$rc" "mount of a store whose upgrade was cut short ($(cat "$T/cut.out"))"
grep -q "upgrade to layout 2 was cut short (d/.cbfsidx" "$T/cut.out" || fail "message: $(cat "$T/cut.out")"
cbfs_tool
"$CBFS" fsck --upgrade "$store" >"$T/up.out" 2>&1 || fail "fsck --upgrade: $(cat "$T/up.out")"
grep -q 'sidecar(s) moved' "$T/up.out" || fail "fsck --upgrade said: $(cat "$T/up.out")"
grep -qx 'layout=2' "$store/.cbfs/store.conf" || fail "store.conf does not record layout 2"
check_eq "$want" "$(digest)" "every store byte after the upgrade (sidecars at their new homes)"
left=$(find "$store" -name '*.cbfsidx' ! -name .cbfsidx ! -path '*/.cbfsidx/*')
[[ -z $left ]] || fail "layout-1 sidecars left: $left"
"$CBFS" fsck --upgrade "$store" >"$T/up2.out" 2>&1 || fail "rerun: $(cat "$T/up2.out")"
grep -q ' 0 sidecar(s) moved' "$T/up2.out" || fail "rerun moved something: $(cat "$T/up2.out")"
check "$CBFS" fsck "$store"
check "$CBFS" verify "$store"

cbfs_mount "$store" "$mnt"
check_eq 255 "$(stat -f -c %l "$mnt")" "f_namemax after the upgrade"
check_eq "$before" "$(tree_manifest "$mnt")" "the tree after the upgrade"
echo more >>"$mnt/d/hard"
echo user >"$mnt/x.cbfsidx"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt"
check_eq user "$(cat "$mnt/x.cbfsidx")" "a user's x.cbfsidx after the upgrade"
check_eq "$(cat "$T/data.csv"; echo more)" "$(cat "$mnt/a.csv")" "a hard-linked file written after the upgrade"
cbfs_umount "$mnt"
pass

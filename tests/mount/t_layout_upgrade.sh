#!/usr/bin/env bash
# A store in layout 1 (NAME.cbfsidx beside NAME, store.conf without layout=) is served
# as it is: its sidecars stay where they are, f_namemax stays 247. `cbfs fsck --upgrade`
# converts it offline to layout 2 with every byte intact (each sidecar moves unchanged
# to DIR/.cbfsidx/NAME), also when an earlier run was cut short, and a rerun is a no-op.
# The tools take the mount's layout rules (cbfs_store_layout_of): mkfs refuses a layout-1
# store that lost .cbfs/, verify and fsck --repair refuse an upgrade cut short, and a
# layout-2 store that lost .cbfs/ is read (and repaired) as layout 2.
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
# mkfs takes the same rule (cbfs_store_layout_of): it wrote layout=2 over such a store
rc=0; "$CBFS" mkfs "$store" >"$T/mkfs.out" 2>&1 || rc=$?
check_eq 1 "$rc" "mkfs of a layout-1 store without store.conf ($(cat "$T/mkfs.out"))"
grep -q "holds index sidecars of layout 1" "$T/mkfs.out" || fail "mkfs message: $(cat "$T/mkfs.out")"
[[ -e $store/.cbfs/store.conf ]] && fail "the refused mkfs wrote a store.conf"
# the tools read it as the layout its sidecars are in
check "$CBFS" verify "$store"
grep -q ' 0 problem(s)' "$T/check.out" || fail "verify of the store that lost .cbfs/: $(cat "$T/check.out")"
# Its advice, followed to the letter: a store.conf of one line (no uuid). The upgrade
# below writes it back, and wrote "uuid=", which no reader takes: the store then mounted
# nowhere (helper-46's fuzz_store_conf).
rm -rf "$store/.cbfs" "$T/cbfs.saved"
mkdir "$store/.cbfs"
echo 'format_version=1' >"$store/.cbfs/store.conf"

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
# The tools take the same rule: read as layout 1, the moved sidecar's file had no
# sidecar, and fsck --repair rebuilt one beside it (both homes then held one).
cut=$(digest)
rc=0; "$CBFS" verify "$store" >"$T/cutv.out" 2>&1 || rc=$?
check_eq 2 "$rc" "verify of a store whose upgrade was cut short ($(cat "$T/cutv.out"))"
grep -q "cut short (d/.cbfsidx" "$T/cutv.out" || fail "verify message: $(cat "$T/cutv.out")"
rc=0; "$CBFS" fsck --repair "$store" >"$T/cutf.out" 2>&1 || rc=$?
check_eq 8 "$rc" "fsck --repair of a store whose upgrade was cut short ($(cat "$T/cutf.out"))"
grep -q "cut short (d/.cbfsidx" "$T/cutf.out" || fail "fsck message: $(cat "$T/cutf.out")"
check_eq "$cut" "$(digest)" "every store byte after the refused fsck --repair"
# cat salvages: it reads the store as layout 1 (a moved sidecar as a lost one, whose block
# size the hand-written store.conf no longer gives), and says so
"$CBFS" cat --block-size 64K "$store/d/hard" >"$T/cut.cat" 2>"$T/cutc.err" || fail "cat in a store cut short: $(cat "$T/cutc.err")"
cmp -s "$T/cut.cat" "$T/data.csv" || fail "cat of d/hard (its sidecar moved) in a store cut short"
grep -q 'upgrade to layout 2 was cut short' "$T/cutc.err" || fail "cat did not warn: $(cat "$T/cutc.err")"
# no store may be made inside it either
rc=0; "$CBFS" mkfs "$store/d/new" >/dev/null 2>&1 || rc=$?
check_eq 2 "$rc" "mkfs inside a store whose upgrade was cut short"
[[ ! -e $store/d/new ]] || fail "the refused mkfs left $store/d/new"
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

# A store of layout 2 that lost its .cbfs/ is served as one (a first mount writes
# layout=2). The tools took such a tree for layout 1: every sidecar "missing", and
# fsck --repair wrote NAME.cbfsidx beside each file, after which the mount refused it.
mv "$store/.cbfs" "$T/cbfs.saved2"
check "$CBFS" verify "$store"
grep -q ' 0 problem(s)' "$T/check.out" || fail "verify of a layout-2 store without .cbfs/: $(cat "$T/check.out")"
"$CBFS" fsck --repair "$store" >"$T/rep.out" 2>&1 || fail "fsck --repair: $(cat "$T/rep.out")"
grep -q ' 0 problem(s)' "$T/rep.out" || fail "fsck --repair said: $(cat "$T/rep.out")"
left=$(find "$store" -name '*.cbfsidx' ! -name .cbfsidx ! -name x.cbfsidx ! -path '*/.cbfsidx/*')
[[ -z $left ]] || fail "fsck --repair wrote layout-1 sidecars into a layout-2 store: $left"
# ... and a data file's path through an index directory, or in .cbfs/, names no file
rc=0; "$CBFS" verify "$store/d/.cbfsidx" >"$T/idx.out" 2>&1 || rc=$?
check_eq 2 "$rc" "verify of an index directory ($(cat "$T/idx.out"))"
rm -rf "$store/.cbfs" && mv "$T/cbfs.saved2" "$store/.cbfs"
for inner in d/.cbfsidx/inner .cbfs/inner; do # no store inside a store's own directories
    rc=0; "$CBFS" mkfs "$store/$inner" >/dev/null 2>&1 || rc=$?
    check_eq 2 "$rc" "mkfs of $inner"
    [[ ! -e $store/$inner ]] || fail "the refused mkfs left $store/$inner"
done
rc=0; "$CBFS" cat "$store/.cbfs/store.conf" >/dev/null 2>"$T/conf.out" || rc=$?
check_eq 2 "$rc" "cat of store.conf ($(cat "$T/conf.out"))"
cbfs_mount "$store" "$mnt"
check_eq "$(cat "$T/data.csv"; echo more)" "$(cat "$mnt/a.csv")" "a.csv after the tools ran on the store without .cbfs/"
cbfs_umount "$mnt"
pass

#!/usr/bin/env bash
# The store's bookkeeping is invisible and its names are reserved (layout 1, the
# NAME.cbfsidx layout; layout 2 is t_long_names): no .cbfs in the
# root or *.cbfsidx anywhere through the mount, creating such names fails;
# compressed files have a sidecar in the store, codec=none files do not. Below the
# root ".cbfs" is an ordinary name, and the cbfs tool walks what the mount shows.
# Directories' link counts leave out the hidden ones (layout 2).
. "$(dirname "$0")/lib.sh"
CBFS=${CBFS_TOOL_BIN:-$(dirname "$CBFS_MOUNT_BIN")/cbfs}
[[ -x $CBFS ]] || fail "tool not built: $CBFS"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_layout1_store "$store" # the rules of layout 1 (t_long_names: layout 2)
python3 "$CBFS_TOOLS/gendata.py" csv 200K "$T/a.csv" 71
cbfs_mount "$store" "$mnt" codec=lz4
cp "$T/a.csv" "$mnt/a"
mkdir "$mnt/sub"
cp "$T/a.csv" "$mnt/sub/b"
ls -a "$mnt" "$mnt/sub" >"$T/ls.out"
grep -q '^a$' "$T/ls.out" || fail "ls -a does not show a: $(tr '\n' ' ' <"$T/ls.out")"
! grep -Eq '^\.cbfs$|\.cbfsidx$' "$T/ls.out" || fail "ls -a shows hidden names: $(grep -E 'cbfs' "$T/ls.out" | tr '\n' ' ')"
! find "$mnt" -name '*.cbfsidx' -o -name .cbfs | grep -q . || fail "find sees hidden names"
check_fails cat "$mnt/.cbfs/store.conf"
check_fails stat "$mnt/.cbfs"
check_fails stat "$mnt/a.cbfsidx"
check_fails touch "$mnt/x.cbfsidx"
check_fails touch "$mnt/sub/.cbfsidx"
grep -qi 'not permitted' "$T/last.err" || fail "touch x.cbfsidx: expected EPERM, got: $(cat "$T/last.err")"
[[ ! -e $store/x.cbfsidx ]] || fail "touch x.cbfsidx created it in the store"
check_fails mv "$mnt/a" "$mnt/a.cbfsidx"
[[ -f $mnt/a ]] || fail "a vanished after a refused rename"
check_fails mv "$mnt/sub/b" "$mnt/sub/other.cbfsidx"
check_fails mkdir "$mnt/d.cbfsidx"
check_fails mkdir "$mnt/.cbfs"
check_fails ln -s a "$mnt/l.cbfsidx"
check_fails ln "$mnt/a" "$mnt/h.cbfsidx"
check_fails sh -c "echo x > '$mnt/sub/y.cbfsidx'"
mkdir "$mnt/sub/.cbfs"
cp "$T/a.csv" "$mnt/sub/.cbfs/f"
ls -a "$mnt/sub" | grep -qx .cbfs || fail "sub/.cbfs is not listed"
same_file "$T/a.csv" "$mnt/sub/.cbfs/f"
# the sidecar of a renamed file moves with it and stays hidden
mv "$mnt/sub/b" "$mnt/sub/c"
same_file "$T/a.csv" "$mnt/sub/c"
cbfs_umount "$mnt"

[[ -f $store/a.cbfsidx ]] || fail "no sidecar for a compressed file in the store"
[[ -f $store/sub/c.cbfsidx && ! -e $store/sub/b.cbfsidx ]] || fail "sidecar did not follow rename b -> c"
[[ -f $store/.cbfs/store.conf ]] || fail "no .cbfs/store.conf in the store"
[[ -f $store/sub/.cbfs/f.cbfsidx ]] || fail "sub/.cbfs/f is not a compressed file"
# the tool follows the same rules: the root's .cbfs skipped, sub/.cbfs walked...
for dir in "$store" "$store/sub"; do
    check "$CBFS" verify "$dir"
    grep -q '0 problem' "$T/check.out" || fail "verify $dir: $(cat "$T/check.out")"
done
check "$CBFS" verify --json "$store"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); assert d["files"]==3, d' "$T/check.out" ||
    fail "verify does not count a, sub/c and sub/.cbfs/f: $(cat "$T/check.out")"
# ...and a stray ".cbfsidx", hidden by the mount, is an orphan sidecar to it
: >"$store/sub/.cbfsidx"
check_fails "$CBFS" verify "$store"
grep -q 'sub/.cbfsidx.*orphan' "$T/last.out" "$T/last.err" ||
    fail "verify does not report sub/.cbfsidx as an orphan: $(cat "$T/last.out" "$T/last.err")"
rm "$store/sub/.cbfsidx"

cbfs_mount "$store" "$mnt" codec=none
cp "$T/a.csv" "$mnt/p"
same_file "$T/a.csv" "$mnt/a"   # old lz4 file still reads under codec=none
cbfs_umount "$mnt"
[[ ! -e $store/p.cbfsidx ]] || fail "codec=none file has a sidecar"
same_file "$T/a.csv" "$store/p"  # and is stored as plain bytes

# a directory's link count counts its subdirectories: the hidden ones (.cbfsidx in each
# directory of layout 2, .cbfs in the root) are not the mount's; they were counted
# (helper-9, pjdfstest)
store2=$T/store2 ref=$T/ref
mkdir -p "$store2" "$ref"
cbfs_mount "$store2" "$mnt" codec=lz4
for d in "$mnt" "$ref"; do
    mkdir "$d/d" "$d/e" "$d/e/sub"
    for f in d/f e/f top; do cp "$T/a.csv" "$d/$f"; done
done
[[ -d $store2/d/.cbfsidx && -d $store2/.cbfs ]] || fail "layout 2 store without .cbfsidx or .cbfs"
links() { (cd "$1" && stat -c '%n %h' . d e e/sub); }
check_eq "$(links "$ref")" "$(links "$mnt")" "link counts of directories"
rm "$mnt/d/f" "$ref/d/f"
check_eq "$(links "$ref")" "$(links "$mnt")" "link counts after an unlink"
cbfs_umount "$mnt"
drop_caches
cbfs_mount "$store2" "$mnt"
check_eq "$(links "$ref")" "$(links "$mnt")" "link counts after a remount (lookups)"
cbfs_umount "$mnt"
pass

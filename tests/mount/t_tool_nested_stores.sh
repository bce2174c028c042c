#!/usr/bin/env bash
# A directory in no store that holds stores (/srv of /srv/db1 and /srv/db2): the walk of
# cbfs stat and cbfs verify reads each store met below by that store's own layout and
# store.conf's block size, and skips its .cbfs/ as a root's (cbfs_store_nested_root);
# the tree's own layout probe does not look into them. A stray layout-1 sidecar in the
# tree (a copy of part of a layout-1 store) made the tree layout 1, and every compressed
# file of a layout-2 store below it failed to load, its .cbfs/lock and store.conf listed
# as plain files. fsck checks one store under its lock: a store below is an error, never
# repaired by the tree's rules. Symlinks are not followed into a store; the mount point
# of a cbfs is not walked (an in-place mount hides its store: an error).
. "$(dirname "$0")/lib.sh"
cbfs_tool

par=$T/srv mnt=$T/mnt
mkdir -p "$par/s2" "$par/s1"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/data.csv" 7
# layout 2, block size 128K in its store.conf
cbfs_mount "$par/s2" "$mnt" codec=zstd,block_size=128K
mkdir "$mnt/d"
cp "$T/data.csv" "$mnt/a.csv"
cp "$T/data.csv" "$mnt/d/b.csv"
cbfs_umount "$mnt"
# layout 1 (store.conf without layout=, block size 64K)
cbfs_layout1_store "$par/s1"
cbfs_mount "$par/s1" "$mnt" codec=zstd
cp "$T/data.csv" "$mnt/c.csv"
cbfs_umount "$mnt"
[[ -d $par/s2/.cbfsidx && -f $par/s1/c.csv.cbfsidx ]] || fail "layouts: $(find "$par" | sort)"
# the tree's own files: a plain one, and a copy of part of the layout-1 store (a sidecar
# of layout 1 beside its file: the tree reads as layout 1)
echo hello >"$par/plain.txt"
mkdir "$par/loose"
cp "$par/s1/c.csv" "$par/s1/c.csv.cbfsidx" "$par/loose/"

# verify_rc RC ARGS...: cbfs verify ARGS exits RC, its output (both streams) in $T/v.out
verify_rc() {
    local want=$1 rc=0
    shift
    "$CBFS" verify "$@" >"$T/v.out" 2>&1 || rc=$?
    check_eq "$want" "$rc" "exit status of cbfs verify $* ($(tail -n 3 "$T/v.out" | tr '\n' '|'))"
}

verify_rc 0 "$par"
grep -q '^verified 5 file(s) (1 plain), .*: 0 problem(s)$' "$T/v.out" || fail "verify: $(cat "$T/v.out")"
check "$CBFS" stat "$par"
grep -q '\.cbfs/' "$T/check.out" && fail "stat lists a store's .cbfs/: $(cat "$T/check.out")"
grep -q "128K .* $par/s2/d/b.csv\$" "$T/check.out" || fail "stat of s2/d/b.csv: $(cat "$T/check.out")"
grep -q " 64K .* $par/s1/c.csv\$" "$T/check.out" || fail "stat of s1/c.csv: $(cat "$T/check.out")"
check "$CBFS" stat --json "$par"
python3 -c 'import json,sys; d=json.load(open(sys.argv[1])); p=[f["path"] for f in d["files"]]; assert len(p)==5 and not any("/.cbfs/" in x for x in p), p' \
    "$T/check.out" || fail "stat --json: $(cat "$T/check.out")"

# the same lines as verify of the store alone: a lost sidecar rebuilt with the store's
# own block size (the tree has none)
rm "$par/s2/.cbfsidx/a.csv"
verify_rc 1 "$par/s2"
grep -v '^verified' "$T/v.out" >"$T/alone"
verify_rc 1 "$par"
grep -q '^verified 5 file(s) (1 plain), .*: 1 problem(s)$' "$T/v.out" || fail "lost sidecar: $(cat "$T/v.out")"
grep -v '^verified' "$T/v.out" >"$T/nested"
diff "$T/alone" "$T/nested" >"$T/diff" || fail "s2 in the tree is not s2 alone: $(cat "$T/diff")"

# a file of a nested store named through the tree: its store is found upwards
check "$CBFS" cat "$par/s2/d/b.csv"
same_file "$T/data.csv" "$T/check.out"
check "$CBFS" stat "$par/s2/d/b.csv"
grep -q "128K .* $par/s2/d/b.csv\$" "$T/check.out" || fail "stat of one file: $(cat "$T/check.out")"

# fsck: one store under its lock; a store below the tree is not its to check or repair
fsck_rc 8 --repair --block-size 64K "$par"
grep -q "$par/s1 is a store of its own" "$T/fsck.out" || fail "fsck s1: $(cat "$T/fsck.out")"
grep -q "$par/s2 is a store of its own" "$T/fsck.out" || fail "fsck s2: $(cat "$T/fsck.out")"
[[ -e $par/s2/a.csv.cbfsidx || -e $par/s2/.cbfsidx/a.csv ]] && fail "fsck of the tree repaired s2/a.csv"
[[ -e $par/.cbfs ]] && fail "fsck left $par/.cbfs"
fsck_rc 8 "$par/s2/d"
grep -q 'inside a store' "$T/fsck.out" || fail "fsck of a directory in a store: $(cat "$T/fsck.out")"
fsck_rc 1 --repair "$par/s2"
[[ -f $par/s2/.cbfsidx/a.csv ]] || fail "fsck --repair of s2 wrote no sidecar"
verify_rc 0 "$par"

# symlinks are not followed into a store; a symlink named .cbfs makes no store
ln -s s2 "$par/link"
mkdir "$par/fake" && ln -s ../s2/.cbfs "$par/fake/.cbfs"
verify_rc 0 "$par"
grep -q '^verified 5 file(s) (1 plain), .*: 0 problem(s)$' "$T/v.out" || fail "symlinks: $(cat "$T/v.out")"
rm -r "$par/link" "$par/fake"

# a cbfs mount point below the tree: its files are its store's, read where it lies
cbfs_mount "$par/s2" "$par/m"
verify_rc 0 "$par"
grep -q '^verified 5 file(s) (1 plain)' "$T/v.out" || fail "mount point: $(cat "$T/v.out")"
grep -q "$par/m is a cbfs mount of $par/s2: not walked" "$T/v.out" || fail "mount point: $(cat "$T/v.out")"
cbfs_umount "$par/m"
rmdir "$par/m"
# an in-place mount hides its store: not checked, an error
cbfs_mount "$par/s1" "$par/s1"
verify_rc 2 "$par"
grep -q "$par/s1 is an in-place cbfs mount" "$T/v.out" || fail "in-place mount: $(cat "$T/v.out")"
cbfs_umount "$par/s1"
verify_rc 0 "$par"
pass

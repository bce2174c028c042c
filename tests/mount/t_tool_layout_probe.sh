#!/usr/bin/env bash
# A directory outside any store (a store that lost its .cbfs/, a copy of part of one) is
# read by the tools as layout 2 only where an index directory shows it and no sidecar of
# layout 1 says otherwise, else as layout 1 (tool_loc_resolve: one walk of the tree
# tells both). Which one shows in a file x.cbfsidx without a file x: layout 1's orphan
# sidecar, a plain file of layout 2.
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 200K "$T/data.csv" 11
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
mkdir -p "$mnt/d/e"
cp "$T/data.csv" "$mnt/a.csv"
cp "$T/data.csv" "$mnt/d/e/b.csv"
cbfs_umount "$mnt"

# verify_rc RC DIR: cbfs verify DIR exits RC, its output in $T/v.out
verify_rc() {
    local rc=0
    "$CBFS" verify "$2" >"$T/v.out" 2>&1 || rc=$?
    check_eq "$1" "$rc" "exit status of cbfs verify $2 ($(tail -n 2 "$T/v.out" | tr '\n' '|'))"
}

# layout 2 without .cbfs/: the index directories show it
tree=$T/l2
cp -a "$store" "$tree" && rm -rf "$tree/.cbfs"
echo user >"$tree/x.cbfsidx"
verify_rc 0 "$tree"
grep -q '^verified 3 file(s) (1 plain)' "$T/v.out" || fail "layout 2: $(cat "$T/v.out")"
# one index directory, deep down, is enough
rm -r "$tree/.cbfsidx"
verify_rc 1 "$tree"
grep -q '^verified 3 file(s) (1 plain)' "$T/v.out" || fail "layout 2, one index directory: $(cat "$T/v.out")"
# no index directory and no sidecar of layout 1: layout 1, as such trees always were
rm -r "$tree/d/e/.cbfsidx"
verify_rc 1 "$tree"
grep -q "$tree/x.cbfsidx: orphan sidecar" "$T/v.out" || fail "no index directory: $(cat "$T/v.out")"
# an index directory and a sidecar of layout 1 beside its file: layout 1 (a store of
# layout 1 that lost its store.conf)
tree=$T/both
cp -a "$store" "$tree" && rm -rf "$tree/.cbfs"
echo user >"$tree/x.cbfsidx"
mv "$tree/.cbfsidx/a.csv" "$tree/a.csv.cbfsidx" && rmdir "$tree/.cbfsidx"
verify_rc 1 "$tree"
grep -q "$tree/x.cbfsidx: orphan sidecar" "$T/v.out" || fail "both: $(cat "$T/v.out")"
pass

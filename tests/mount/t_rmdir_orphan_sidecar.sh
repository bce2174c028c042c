#!/usr/bin/env bash
# A directory that lists as empty can be removed: in a layout-1 store one that
# holds only an orphan sidecar (NAME.cbfsidx whose data file is gone, hidden
# from listings) failed with ENOTEMPTY; layout 2 already emptied its .cbfsidx/.
# A directory with a real (hidden-sidecar) file in it still refuses.
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_layout1_store "$store"
cbfs_mount "$store" "$mnt" codec=lz4
mkdir "$mnt/d" "$mnt/e"
head -c 10000 /dev/urandom >"$mnt/d/x"
head -c 10000 /dev/urandom >"$mnt/e/y"
cbfs_umount "$mnt"
rm "$store/d/x" # the data file lost, its sidecar left
[[ -e $store/d/x.cbfsidx ]] || fail "no layout-1 sidecar where expected"
cbfs_mount "$store" "$mnt" codec=lz4
[[ -z $(ls -A "$mnt/d") ]] || fail "d does not list as empty"
rmdir "$mnt/d" || fail "an empty-looking directory cannot be removed"
rmdir "$mnt/e" 2>"$T/rmdir.err" && fail "rmdir of a directory holding a file succeeded"
grep -q "not empty" "$T/rmdir.err" || fail "rmdir e: $(cat "$T/rmdir.err")"
cbfs_umount "$mnt"
[[ ! -e $store/d && -e $store/e/y && -e $store/e/y.cbfsidx ]] || fail "store: $(ls -R "$store")"
pass

#!/usr/bin/env bash
# The offline tools walk a store one directory level per call: with PATH_MAX bytes on
# the stack per level, a tree 2500 directories deep (paths past PATH_MAX; a DB host's
# high fd limit lets the walk hold one fd per level) crashed verify, fsck and stat
# (SIGSEGV), and fsck --upgrade. It must be walked, the file at its bottom found; past
# 4096 levels the walk stops there with an error, never a crash.
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/f.csv" 7
cp "$T/f.csv" "$mnt/top.csv"
cbfs_umount "$mnt"
# deep/a/a/.../a (2500 levels) holding a compressed file moved down from the top
python3 - "$store" 2500 <<'PY'
import os, sys
os.chdir(sys.argv[1]); os.mkdir("deep"); os.chdir("deep")
for _ in range(int(sys.argv[2])):
    os.mkdir("a"); os.chdir("a")
os.mkdir(".cbfsidx")
top = sys.argv[1]
os.rename(os.path.join(top, "top.csv"), "f.csv")
os.rename(os.path.join(top, ".cbfsidx", "top.csv"), os.path.join(".cbfsidx", "f.csv"))
PY
ulimit -n 20000 || fail "cannot raise the fd limit"
for sub in verify fsck stat; do
    rc=0; "$CBFS" $sub "$store" >"$T/$sub.out" 2>&1 || rc=$?
    check_eq 0 "$rc" "cbfs $sub of a 2500-deep tree ($(tail -c 300 "$T/$sub.out"))"
done
grep -q '1 file' "$T/verify.out" || fail "verify did not find the file at the bottom: $(tail -c 300 "$T/verify.out")"
# an orphan sidecar at the bottom (its path past PATH_MAX) is said, not skipped; no file of
# its directory owns it, and its directory cannot be named for the store's walk (past
# PATH_MAX): kept, an error
deep_orphan() {
    python3 - "$store" 2500 "$1" <<'PY'
import os, shutil, sys
os.chdir(os.path.join(sys.argv[1], "deep"))
for _ in range(int(sys.argv[2])):
    os.chdir("a")
if sys.argv[3] == "make":
    shutil.copyfile(os.path.join(".cbfsidx", "f.csv"), os.path.join(".cbfsidx", "g.csv"))
else:
    os.unlink(os.path.join(".cbfsidx", "g.csv"))
PY
}
deep_orphan make
rc=0; "$CBFS" fsck "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq 8 "$rc" "cbfs fsck of a 2500-deep tree with an orphan sidecar at its bottom ($(tail -c 300 "$T/fsck.out"))"
grep -q 'orphan sidecar: its data file is missing' "$T/fsck.out" &&
    grep -q 'cannot tell whether a file of the store is its: file name too long; left as it is' "$T/fsck.out" ||
    fail "fsck did not say the orphan at the bottom: $(tail -c 300 "$T/fsck.out")"
deep_orphan remove
# deeper than the walk goes
python3 - "$store" 4200 <<'PY'
import os, sys
os.chdir(sys.argv[1]); os.mkdir("deeper"); os.chdir("deeper")
for _ in range(int(sys.argv[2])):
    os.mkdir("a"); os.chdir("a")
PY
rc=0; "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || rc=$?
[[ $rc != 0 && $rc -lt 128 ]] || fail "verify of a 4200-deep tree: exit $rc"
grep -q 'more than 4096 directories deep' "$T/verify.out" || fail "no message: $(tail -c 300 "$T/verify.out")"
# with a terminal on stderr verify walks twice (its progress bar's walk first): the error
# was said and counted twice; and fsck walks for orphan sidecars before it checks the files
script -qec "$CBFS verify $store" /dev/null >"$T/verify.tty" 2>&1 || true
check_eq "1 1" "$(grep -o 'more than 4096 directories deep' "$T/verify.tty" | wc -l) $(grep -o ', 1 error(s)' "$T/verify.tty" | wc -l)" \
    "the deep tree's error said, and the count of errors, by verify on a terminal ($(tail -c 300 "$T/verify.tty"))"
rc=0; "$CBFS" fsck "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq "8 1 1" "$rc $(grep -o 'more than 4096 directories deep' "$T/fsck.out" | wc -l) $(grep -o ', 1 error(s)' "$T/fsck.out" | wc -l)" \
    "exit status of fsck, the deep tree's error said, and the count of errors ($(tail -c 300 "$T/fsck.out"))"
rm -rf "$store/deeper" "$store/deep" # coreutils' rm walks a tree this deep

# fsck --upgrade (layout 1 -> 2) walks the tree too: it crashed as well, and every rerun
# crashed at the same place, the store half converted
old=$T/old
mkdir -p "$old"
cbfs_layout1_store "$old"
python3 - "$old" 2500 <<'PY'
import os, sys
os.chdir(sys.argv[1]); os.mkdir("deep"); os.chdir("deep")
for _ in range(int(sys.argv[2])):
    os.mkdir("a"); os.chdir("a")
open("f", "w").write("plain\n")
open("f.cbfsidx", "w").close() # an orphan sidecar of layout 1: moved like any other
PY
rc=0; "$CBFS" fsck --upgrade "$old" >"$T/up.out" 2>&1 || rc=$?
check_eq 0 "$rc" "fsck --upgrade of a 2500-deep layout-1 store ($(tail -c 300 "$T/up.out"))"
grep -qx 'layout=2' "$old/.cbfs/store.conf" || fail "store.conf does not say layout 2"
rm -rf "$old"
pass

#!/usr/bin/env bash
# cbfs(1) renders without warnings and documents every subcommand; every subcommand
# answers --help with status 0 and a usage line; usage errors exit 2 (fsck: 8); the
# programs and the man pages carry the version CMake's project() gives.
. "$(dirname "$0")/lib.sh"
cbfs_tool

bdir=$(dirname "$CBFS_MOUNT_BIN")
page=$bdir/man/cbfs.1  # as installed: configured by CMake from man/cbfs.1
MANWIDTH=80 man --warnings -l "$page" >"$T/man.txt" 2>"$T/man.err" || fail "man failed: $(cat "$T/man.err")"
[[ ! -s $T/man.err ]] || fail "man warnings: $(head -n 5 "$T/man.err")"
for sub in stat verify cat bench stats mkfs fsck; do
    grep -q "^   $sub\$" "$T/man.txt" || grep -q "^  *cbfs $sub" "$T/man.txt" || fail "man page lacks $sub"
    check "$CBFS" "$sub" --help
    grep -q "^usage: cbfs $sub" "$T/check.out" || fail "$sub --help: $(head -n 2 "$T/check.out")"
    want=2
    [[ $sub == fsck ]] && want=8
    rc=0; "$CBFS" "$sub" --no-such-option x >/dev/null 2>&1 || rc=$?
    check_eq "$want" "$rc" "$sub with a bad option"
done
grep -q 'EXIT STATUS' "$T/man.txt" || fail "no EXIT STATUS section"
check "$CBFS" --help
rc=0; "$CBFS" frobnicate >/dev/null 2>&1 || rc=$?
check_eq 2 "$rc" "unknown subcommand"

# one version, project() in CMakeLists.txt: both programs and both man pages say it
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$bdir/CMakeCache.txt")
[[ -n $version ]] || fail "no CMAKE_PROJECT_VERSION in $bdir/CMakeCache.txt"
check_eq "cbfs $version" "$("$CBFS" --version)" "cbfs --version"
check "$CBFS_MOUNT_BIN" --version
grep -q "^mount.cbfs (cbfs) $version, " "$T/check.out" || fail "mount.cbfs --version: $(cat "$T/check.out")"
for p in cbfs.1 mount.cbfs.8; do
    grep -q "^\.TH .* \"cbfs $version\" " "$bdir/man/$p" || fail "$p: $(grep '^\.TH' "$bdir/man/$p")"
done
pass "version $version"

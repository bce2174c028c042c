#!/usr/bin/env bash
# cbfs(1) renders without warnings and documents every subcommand; every subcommand
# answers --help with status 0 and a usage line; usage errors exit 2 (fsck: 8).
. "$(dirname "$0")/lib.sh"
cbfs_tool

page=$CBFS_REPO/man/cbfs.1
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
pass

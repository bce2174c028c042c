#!/usr/bin/env bash
# `cbfs verify` and `cbfs fsck` count a problem they found but had no memory to keep in
# their list: it is printed at once, and the summary, --json and the exit status count it. Before,
# the problem was printed and dropped: "0 problem(s)", exit 0, on a store whose sidecar
# was missing (helper-57: allocation failures injected at each call of the tool; here
# strdup of the problem's text fails, tools/strdupfail.c).
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload strdupfail

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/v.csv" 7
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/v.csv" "$mnt/victim.csv"
cbfs_umount "$mnt"
rm "$store/.cbfsidx/victim.csv" # one problem: the sidecar is missing

rc=0
"$CBFS" verify "$store" >"$T/v.out" 2>&1 || rc=$?
check_eq 1 "$rc" "verify exit status, with memory"
grep -q 'missing' "$T/v.out" || fail "verify did not name the missing sidecar: $(cat "$T/v.out")"

rc=0
LD_PRELOAD=$T/strdupfail.so CBFS_STRDUPFAIL_PREFIX=missing "$CBFS" verify "$store" >"$T/v.out" 2>&1 || rc=$?
grep -q 'missing' "$T/v.out" || fail "verify without memory did not print the problem: $(cat "$T/v.out")"
grep -q ' 1 problem(s)' "$T/v.out" || fail "verify without memory: summary: $(tail -n 1 "$T/v.out")"
check_eq 1 "$rc" "verify exit status, no memory to keep the problem"
# --json: the problem it could not list is counted there too (helper-60: "problems":[] and
# exit 1, nothing in the JSON said why)
rc=0
LD_PRELOAD=$T/strdupfail.so CBFS_STRDUPFAIL_PREFIX=missing "$CBFS" verify --json "$store" \
    >"$T/v.json" 2>/dev/null || rc=$?
check_eq 1 "$rc" "verify --json exit status, no memory to keep the problem"
check_eq 1 "$(python3 -c 'import json,sys; d=json.load(open(sys.argv[1]))
print(len(d["problems"]) + d["problems_unlisted"])' "$T/v.json")" "verify --json: problems listed and unlisted"

rc=0
LD_PRELOAD=$T/strdupfail.so CBFS_STRDUPFAIL_PREFIX=missing "$CBFS" fsck "$store" >"$T/f.out" 2>&1 || rc=$?
grep -q '1 problem(s)' "$T/f.out" || fail "fsck without memory: summary: $(tail -n 1 "$T/f.out")"
check_eq 4 "$rc" "fsck exit status, no memory to keep the problem"

fsck_rc 1 --repair "$store"
check "$CBFS" verify "$store"
pass

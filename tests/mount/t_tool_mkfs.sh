#!/usr/bin/env bash
# `cbfs mkfs` writes .cbfs/store.conf with the given defaults, which a mount without
# codec options then uses (seen by `cbfs stat`); it refuses an initialised store (1),
# a mounted one (1), a directory inside a store (2) and bad options (2).
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
check "$CBFS" mkfs -o codec=zstd:5,block_size=64K "$store"
grep -q 'codec zstd level 5' "$T/check.out" || fail "mkfs output: $(cat "$T/check.out")"
grep -q '^codec *= *zstd' "$store/.cbfs/store.conf" || fail "store.conf: $(cat "$store/.cbfs/store.conf")"
grep -qx 'layout=2' "$store/.cbfs/store.conf" || fail "mkfs: a new store is not in layout 2: $(cat "$store/.cbfs/store.conf")"
rc=0; "$CBFS" mkfs "$store" >/dev/null 2>"$T/err" || rc=$?
check_eq 1 "$rc" "mkfs of an initialised store"
grep -q 'already a cbfs store' "$T/err" || fail "message: $(cat "$T/err")"
rc=0; "$CBFS" mkfs "$store/sub" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "mkfs of a directory inside a store"
grep -q 'inside a cbfs store' "$T/err" || fail "message: $(cat "$T/err")"
[[ ! -e $store/sub ]] || fail "the refused mkfs left $store/sub (or a .cbfs in it) behind"

python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/x.csv" 51
cbfs_mount "$store" "$mnt"
cp "$T/x.csv" "$mnt/x.csv"
rc=0; "$CBFS" mkfs "$T/mnt" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "mkfs of a mount point"
grep -q 'inside a mounted cbfs' "$T/err" || fail "message: $(cat "$T/err")"
rc=0; "$CBFS" mkfs "$store" >/dev/null 2>"$T/err" || rc=$?
check_eq 1 "$rc" "mkfs of a mounted store"
grep -q 'in use by a cbfs daemon (pid [0-9]*)' "$T/err" || fail "message: $(cat "$T/err")"
cbfs_umount "$mnt"
check "$CBFS" stat --json "$store/x.csv"
python3 -c 'import json,sys; f=json.load(open(sys.argv[1]))["files"][0]; assert f["codecs"]=="zstd:5" and f["block_size"]==65536, f' \
    "$T/check.out" || fail "mount did not use the mkfs defaults: $(cat "$T/check.out")"

for bad in codec=zip level=99 level=99999999999 level=x block_size=3K bogus=1 workers=2 codec; do
    rc=0; "$CBFS" mkfs -o "$bad" "$T/other" >/dev/null 2>"$T/err" || rc=$?
    check_eq 2 "$rc" "mkfs -o $bad"
    [[ -s $T/err ]] || fail "mkfs -o $bad: no message"
done
# "\," is a comma inside a value, as in mount.cbfs -o: one codec name, refused whole
rc=0; "$CBFS" mkfs -o 'codec=zstd\,level=5' "$T/other" >/dev/null 2>"$T/err" || rc=$?
check_eq 2 "$rc" "mkfs -o with an escaped comma"
grep -q "'zstd,level=5'" "$T/err" || fail "mkfs: '\\,' not read as a comma: $(cat "$T/err")"
[[ ! -e $T/other/.cbfs ]] || fail "a failed mkfs left .cbfs behind"
pass

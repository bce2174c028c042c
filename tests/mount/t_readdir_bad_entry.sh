#!/usr/bin/env bash
# One file whose index cannot be read (here a plain file beside a leftover
# sidecar, which the loader refuses with EIO) must not keep the rest of its
# directory from being listed, as on ext4: only that file gets the error.
# (readdirplus ended its batch at the failed lookup and stayed on that entry,
# so a program that stats entries while it reads the directory, which makes
# the kernel ask READDIRPLUS again, got EIO after the first names.)
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" "codec=lz4"
for f in a b c d e; do head -c 5000 /dev/urandom >"$mnt/$f"; done
head -c 5000 /dev/urandom >"$mnt/p"
cbfs_umount "$mnt"
rm "$store/p"
printf 'plain bytes\n' >"$store/p"   # now p's sidecar is a leftover
cbfs_expect_log_errors "leftover"
cbfs_mount "$store" "$mnt" "codec=none"
python3 - "$mnt" >"$T/py.out" 2>&1 <<'PY'
import os, sys
names = []
try:
    with os.scandir(sys.argv[1]) as it:
        for e in it:
            names.append(e.name)
            try:
                os.stat(e.path)
            except OSError as x:
                print("stat", e.name, x)
except OSError as x:
    print("scandir failed after", sorted(names), ":", x)
print("listed", len(names), sorted(names))
PY
sed "s/^/  /" "$T/py.out"
ls "$mnt" >/dev/null 2>"$T/ls.err"; note "ls after: $(cat "$T/ls.err")"
cbfs_umount "$mnt"
grep -q "^listed 6 " "$T/py.out" || fail "listing broken by one bad entry: $(tail -1 "$T/py.out")"
grep -q "^stat p .*Input/output error" "$T/py.out" || fail "p itself should fail with EIO: $(cat "$T/py.out")"
pass

#!/usr/bin/env bash
# readdir while others change the directory (POSIX: an entry neither created nor removed
# during the listing appears exactly once): tools/dirchurn.py creates, writes, renames
# (to free names and over its own files), unlinks, and makes and removes directories
# holding a file, in a directory of 500 files and in the root, while tools/dirpos.c lists
# both over and over (readdir; readdir with an lstat of each entry, as ls -l, which makes
# the kernel ask READDIRPLUS; getdents64 with 64-byte buffers, a seek in the daemon per
# call). Every stable name once in every listing, no name twice, and no hidden name ever
# (a sidecar, .cbfsidx, .cbfs, an aside); afterwards cbfs verify and fsck find nothing,
# .cbfs holds nothing left over, and a remount lists the stable files with their bytes.
# Both layouts, codec=none and zstd.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cc -O2 -Wall -Wextra -o "$T/dirpos" "$CBFS_TOOLS/dirpos.c" || fail "cannot build dirpos"
secs=5 n=500
hidden='\.cbfsidx$|^\.cbfs$|aside'

stable_files() { # ROOT check|write
    python3 - "$1" "$2" "$n" <<'PY'
import sys
root, what, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(n):
    want = b'stable %d\n' % i * (i % 50 + 1)
    p = '%s/d/s%d' % (root, i)
    if what == 'write':
        open(p, 'wb').write(want)
    elif open(p, 'rb').read() != want:
        sys.exit('%s: other bytes' % p)
PY
}

for layout in 1 2; do
    for codec in none zstd; do
        what="layout $layout, codec=$codec"
        store=$T/s.$layout.$codec mnt=$T/mnt
        cbfs_layout_store "$store" "$layout"
        cbfs_mount "$store" "$mnt" "codec=$codec"
        mkdir "$mnt/d"
        stable_files "$mnt" write
        (cd "$mnt/d" && ls) >"$T/stable"
        check_eq $n "$(wc -l <"$T/stable")" "$what: files listed before"
        echo d >"$T/stable.root"
        pids=()
        for w in A B; do
            python3 "$CBFS_TOOLS/dirchurn.py" "$mnt/d" $w $secs >"$T/churn.$w" 2>&1 &
            pids+=($!)
        done
        python3 "$CBFS_TOOLS/dirchurn.py" "$mnt" R $secs >"$T/churn.R" 2>&1 &
        pids+=($!)
        "$T/dirpos" watch "$mnt/d" "$T/stable" $secs "$hidden" >"$T/w.readdir" 2>&1 &
        pids+=($!)
        DIRPOS_STAT=1 "$T/dirpos" watch "$mnt/d" "$T/stable" $secs "$hidden" >"$T/w.plus" 2>&1 &
        pids+=($!)
        DIRPOS_BUF=64 "$T/dirpos" watch "$mnt/d" "$T/stable" $secs "$hidden" >"$T/w.small" 2>&1 &
        pids+=($!)
        DIRPOS_BUF=64 "$T/dirpos" watch "$mnt" "$T/stable.root" $secs "$hidden" >"$T/w.root" 2>&1 &
        pids+=($!)
        rc=0
        for p in "${pids[@]}"; do wait "$p" || rc=1; done
        ((rc == 0)) || fail "$what: $(cat "$T"/churn.* "$T"/w.* | head -c 1500 | tr '\n' '|')"
        note "$what: $(cat "$T"/churn.* | tr '\n' ' ')"
        (cd "$mnt/d" && ls) >"$T/after"
        diff "$T/stable" "$T/after" >/dev/null || fail "$what: listed after: $(diff "$T/stable" "$T/after" | head -n 5 | tr '\n' '|')"
        cbfs_umount "$mnt"
        "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || fail "$what: cbfs verify: $(tail -n 3 "$T/verify.out")"
        fsck_rc 0 "$store"
        left=$(ls -A "$store/.cbfs" | grep -Ev '^(lock|store\.conf)$' || true)
        [[ -z $left ]] || fail "$what: left in .cbfs: $left"
        cbfs_mount "$store" "$mnt" "codec=$codec"
        (cd "$mnt" && ls -A) >"$T/after.root"
        check_eq d "$(cat "$T/after.root")" "$what: the root after a remount"
        (cd "$mnt/d" && ls -A) >"$T/after"
        diff "$T/stable" "$T/after" >/dev/null || fail "$what: listed after a remount: $(diff "$T/stable" "$T/after" | head -n 5 | tr '\n' '|')"
        stable_files "$mnt" check >"$T/out" 2>&1 || fail "$what: $(cat "$T/out")"
        cbfs_umount "$mnt"
        rm -rf "$store"
    done
done
pass

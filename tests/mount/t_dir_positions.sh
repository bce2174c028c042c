#!/usr/bin/env bash
# Directory positions through the mount where the store holds names the mount hides
# (layout 1: NAME.cbfsidx beside every other file; layout 2: .cbfsidx/; .cbfs in the
# root). tools/dirpos.c: telldir after every entry, seekdir back to saved places after
# more entries were read, rewinddir, and getdents64 with 64- to 32768-byte buffers (a
# 64-byte one makes every call a READDIR at a new offset, a seek in the daemon), plain
# and with an lstat of each entry as it comes (READDIRPLUS): every visible name exactly
# once, in directories of 1, 100 and 10000 entries, codec=none and zstd, both layouts;
# cbfs verify and fsck find nothing afterwards.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cc -O2 -Wall -Wextra -o "$T/dirpos" "$CBFS_TOOLS/dirpos.c" || fail "cannot build dirpos"

# fill_store DIR N LAYOUT: N entries in the store directory DIR (beside its template
# file tmpl and directory sub, made through the mount): every other file a copy of
# tmpl with its sidecar where tmpl has one, the rest plain; the names into $T/expected
fill_store() {
    python3 - "$@" "$T/expected" <<'PY'
import os, random, shutil, sys
d, n, layout, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
sc = (lambda name: os.path.join(d, name + '.cbfsidx')) if layout == '1' else \
     (lambda name: os.path.join(d, '.cbfsidx', name))
has_sc = os.path.exists(sc('tmpl'))
data = open(os.path.join(d, 'tmpl'), 'rb').read()
side = open(sc('tmpl'), 'rb').read() if has_sc else None
random.seed(n)
names = ['tmpl', 'sub']
for i in range(max(n - 2, 0)):
    name = 'f%d_%s' % (i, 'x' * random.randrange(0, 40))  # records of many lengths
    names.append(name)
    if has_sc and i % 2 == 0:
        open(os.path.join(d, name), 'wb').write(data)
        open(sc(name), 'wb').write(side)
    else:
        open(os.path.join(d, name), 'wb').write(b'plain %d\n' % i)
if n == 1:
    shutil.rmtree(os.path.join(d, 'sub'))
    names.remove('sub')
open(out, 'w').write('\n'.join(names) + '\n')
PY
}

runs=0
for layout in 1 2; do
    for codec in none zstd; do
        sizes="1 100"
        [[ $codec == zstd ]] && sizes+=" 10000"
        for n in $sizes; do
            what="layout $layout, codec=$codec, $n entries"
            store=$T/s.$layout.$codec.$n mnt=$T/mnt
            cbfs_layout_store "$store" "$layout"
            cbfs_mount "$store" "$mnt" "codec=$codec"
            mkdir "$mnt/d" "$mnt/d/sub"
            echo template >"$mnt/d/tmpl"
            echo x >"$mnt/d/sub/x"
            cbfs_umount "$mnt"
            fill_store "$store/d" "$n" "$layout"
            cbfs_mount "$store" "$mnt" "codec=$codec"
            for stat in 0 1; do
                DIRPOS_STAT=$stat "$T/dirpos" seek "$mnt/d" "$T/expected" >"$T/out" 2>&1 ||
                    fail "$what, seek (lstat $stat): $(head -c 1200 "$T/out")"
                for b in 64 280 32768; do
                    DIRPOS_STAT=$stat "$T/dirpos" getdents "$mnt/d" $b "$T/expected" >"$T/out" 2>&1 ||
                        fail "$what, getdents $b (lstat $stat): $(head -c 1200 "$T/out")"
                    runs=$((runs + 1))
                done
            done
            echo d >"$T/expected.root" # .cbfs hidden in the root
            "$T/dirpos" seek "$mnt" "$T/expected.root" >"$T/out" 2>&1 || fail "$what, root: $(cat "$T/out")"
            "$T/dirpos" getdents "$mnt" 64 "$T/expected.root" >"$T/out" 2>&1 ||
                fail "$what, root getdents: $(cat "$T/out")"
            cbfs_umount "$mnt"
            "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || fail "$what: cbfs verify: $(tail -n 3 "$T/verify.out")"
            fsck_rc 0 "$store"
            rm -rf "$store"
        done
    done
done
pass "$runs listings"

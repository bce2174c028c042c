#!/usr/bin/env bash
# rmdir of a directory that lists as empty but that its owner made read-only (0555) or
# unreadable (0333) after emptying it, and a rename over such a directory, on a daemon without
# CAP_DAC_OVERRIDE (as a user's own mount runs; emulated here by a root daemon whose
# bounding set lacks it): ext4 removes an empty directory with the parent's write
# permission alone, but the store's directory still holds its hidden sidecar names
# (layout 2: the emptied .cbfsidx/; layout 1: orphan NAME.cbfsidx whose data file went
# from the store), whose removal needs the directory's. Each failed with EACCES. A
# read-only directory that holds a file still refuses (ENOTEMPTY) and keeps its mode.
. "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || pass "not root: cannot take capabilities from a daemon, nothing checked"
cbfs_tool
# the daemon without the capabilities that override directory permissions
cat >"$T/nodac" <<EOF2
#!/bin/sh
exec setpriv --bounding-set -dac_override,-dac_read_search,-fowner -- "$CBFS_MOUNT_BIN" "\$@"
EOF2
chmod +x "$T/nodac"
CBFS_MOUNT_BIN=$T/nodac

# the answers of ext4 (the local filesystem)
mkdir -p "$T/ref/d" "$T/ref/e" "$T/ref/s" "$T/ref/w"
chmod 555 "$T/ref/d" "$T/ref/e"
chmod 333 "$T/ref/w"
want="$(answer rmdir rmdir "$T/ref/d") $(answer rename mv -T "$T/ref/s" "$T/ref/e")"
want+=" $(answer rmdir-0333 rmdir "$T/ref/w")"
check_eq "rmdir: ok rename: ok rmdir-0333: ok" "$want" "ext4's answers"

for layout in 1 2; do
    store=$T/s.$layout mnt=$T/mnt
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$mnt" codec=zstd
    mkdir "$mnt/d" "$mnt/e" "$mnt/s" "$mnt/w" "$mnt/full"
    for f in d/f e/f w/f full/f; do seq 2000 >"$mnt/$f"; done
    echo kept >"$mnt/s/kept"
    if [[ $layout == 2 ]]; then
        rm "$mnt/d/f" "$mnt/e/f" "$mnt/w/f" # their .cbfsidx/ stays
    else
        cbfs_umount "$mnt"
        rm "$store/d/f" "$store/e/f" "$store/w/f" # only the sidecars stay (orphans)
        cbfs_mount "$store" "$mnt" codec=zstd
    fi
    [[ -z $(ls -A "$mnt/d") && -z $(ls -A "$mnt/e") ]] || fail "layout $layout: d, e do not list as empty"
    [[ -n $(ls -A "$store/d") ]] || fail "layout $layout: the store's d holds no hidden name: nothing to try"
    chmod 555 "$mnt/d" "$mnt/e" "$mnt/full"
    chmod 333 "$mnt/w"
    got="$(answer rmdir rmdir "$mnt/d") $(answer rename mv -T "$mnt/s" "$mnt/e")"
    got+=" $(answer rmdir-0333 rmdir "$mnt/w")"
    check_eq "$want" "$got" "layout $layout: answers"
    [[ ! -e $store/d && ! -e $store/w ]] || fail "layout $layout: d or w is still in the store"
    check_eq kept "$(cat "$mnt/e/kept")" "layout $layout: the directory renamed over e"
    check_fails rmdir "$mnt/full"
    grep -q 'not empty' "$T/last.err" || fail "layout $layout: rmdir of a read-only directory holding a file: $(cat "$T/last.err")"
    check_eq 555 "$(stat -c %a "$mnt/full")" "layout $layout: mode of the directory rmdir refused"
    chmod 755 "$mnt/full"
    cbfs_umount "$mnt"
    "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || fail "layout $layout: cbfs verify: $(tail -n 3 "$T/verify.out")"
    fsck_rc 0 "$store"
    note "layout $layout ok"
done
pass

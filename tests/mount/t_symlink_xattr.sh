#!/usr/bin/env bash
# Extended attributes of symlinks as ext4 keeps them: trusted.* and security.*
# are set, listed, read and removed on the link itself, never on its target
# (dangling links and links to files and directories alike); user.* is refused
# (EPERM to set, ENODATA to read: Linux's own rule for symlinks). Every answer
# is compared with the same operations on a directory of the local
# filesystem, and again after a remount; in the store the xattrs sit on the
# link, the target has none.
. "$(dirname "$0")/lib.sh"

# try WHAT CMD...: prints "WHAT ok" or "WHAT <its error, path left out>"
try() {
    local what=$1
    shift
    if "$@" >/dev/null 2>"$T/try.err"; then
        echo "$what: ok"
    else
        echo "$what: $(sed -n '$s/.*: //p' "$T/try.err")"
    fi
}
# xattrs NAME: every xattr of NAME itself (not followed), on one line
xattrs() { echo "$1: $(getfattr -h -d -m- "$1" 2>&1 | grep -v '^#' | grep -v '^$' | LC_ALL=C sort | tr '\n' ' ')"; }

# link_ops: in the current directory; one line per answer
link_ops() {
    echo data >file
    mkdir dir
    ln -s nowhere dangling
    ln -s file tofile
    ln -s dir todir
    local l
    for l in dangling tofile todir; do
        try "$l trusted" setfattr -h -n trusted.t -v "t-$l" $l
        try "$l security" setfattr -h -n security.s -v "s-$l" $l
        try "$l user" setfattr -h -n user.u -v u $l
        try "$l get user" getfattr -h -n user.u $l
        try "$l replace" setfattr -h -n trusted.t -v "t2-$l" $l
        try "$l remove" setfattr -h -x security.s $l
        try "$l remove again" setfattr -h -x security.s $l
        xattrs $l
    done
    xattrs file
    xattrs dir
}

# state: the xattrs of every name (remount check)
state() { for n in file dir dangling tofile todir; do xattrs $n; done; }

ref=$T/ref
mkdir -p "$ref"
(cd "$ref" && link_ops) >"$T/ref.out" 2>&1
grep -q '^tofile: trusted.t="t2-tofile" $' "$T/ref.out" ||
    fail "the local filesystem keeps no xattrs on symlinks: $(tr '\n' '|' <"$T/ref.out")"
(cd "$ref" && state) >"$T/ref.state"

for opts in codec=lz4 codec=none; do
    store=$T/s.${opts#codec=} mnt=$T/m.${opts#codec=}
    mkdir -p "$store"
    cbfs_mount "$store" "$mnt" "$opts"
    (cd "$mnt" && link_ops) >"$T/got.out" 2>&1
    diff -u "$T/ref.out" "$T/got.out" >"$T/diff" ||
        fail "$opts: answers differ from ext4: $(grep '^[-+][^-+]' "$T/diff" | head -n 6 | tr '\n' '|')"
    cbfs_umount "$mnt"
    cbfs_mount "$store" "$mnt" "$opts"
    (cd "$mnt" && state) >"$T/got.state"
    diff -u "$T/ref.state" "$T/got.state" >"$T/diff" ||
        fail "$opts: after a remount: $(grep '^[-+][^-+]' "$T/diff" | head -n 6 | tr '\n' '|')"
    cbfs_umount "$mnt"
    (cd "$store" && state) >"$T/store.state"
    diff -u "$T/ref.state" "$T/store.state" >"$T/diff" ||
        fail "$opts: in the store: $(grep '^[-+][^-+]' "$T/diff" | head -n 6 | tr '\n' '|')"
done
pass "$(wc -l <"$T/ref.out") answers as ext4's"

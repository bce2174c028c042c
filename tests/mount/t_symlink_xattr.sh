#!/usr/bin/env bash
# Extended attributes of symlinks as ext4 keeps them: trusted.* and security.*
# are set, listed, read and removed on the link itself, never on its target
# (dangling links and links to files and directories alike); user.* is refused
# (EPERM to set, ENODATA to read: Linux's own rule for symlinks). Every answer
# is compared with the same operations on a directory of the local
# filesystem, and again after a remount; in the store the xattrs sit on the
# link, the target has none.
. "$(dirname "$0")/lib.sh"

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
        answer "$l trusted" setfattr -h -n trusted.t -v "t-$l" $l
        answer "$l security" setfattr -h -n security.s -v "s-$l" $l
        answer "$l user" setfattr -h -n user.u -v u $l
        answer "$l get user" getfattr -h -n user.u $l
        answer "$l replace" setfattr -h -n trusted.t -v "t2-$l" $l
        answer "$l remove" setfattr -h -x security.s $l
        answer "$l remove again" setfattr -h -x security.s $l
        xattrs $l
    done
    xattrs file
    xattrs dir
}

# state: the xattrs of every name (remount check)
state() { for n in file dir dangling tofile todir; do xattrs $n; done; }

ref_answers link_ops state
grep -q '^tofile: trusted.t="t2-tofile" $' "$T/ref.out" ||
    fail "the local filesystem keeps no xattrs on symlinks: $(tr '\n' '|' <"$T/ref.out")"
for opts in codec=lz4 codec=none; do
    mounted_answers "$opts" link_ops state
    (cd "$store" && state) >"$T/store.state"
    same_answers "$opts: in the store" "$T/ref.state" "$T/store.state"
done
pass "$(wc -l <"$T/ref.out") answers as ext4's"

#!/usr/bin/env bash
# cbfs fsck --repair after a rename over a compressed file, or an exchange of two, of which
# only the data files' names reached the disk: what btrfs leaves when the renamed file is
# fsync'd (its log holds that inode's names, not the sidecars'; t_powercut_rename_btrfs).
# The data file at the target name then has the replaced file's sidecar, and its own is an
# orphan at its old name (a rename), or each has the other's (an exchange). The files were
# written with block_size=1M in a store of 256K: their frames do not prove their block size
# (both layouts).
# Before, fsck rebuilt each index from the frames (which failed: exit 4, EIO) and removed
# the real sidecar as nobody's; now a sidecar that carries another file id than its data
# file's frames goes aside into .cbfs/ and is settled by file id, as a rename's asides are:
# fsck --repair exits 1, fsck 0, and every name reads as after the operation. Likewise a
# hard link of which only the data file's link reached the disk (btrfs, an fsync of the
# new name): the new name had no sidecar, and its index was rebuilt from the frames
# (exit 4, EIO); the sidecar of the file's other name is linked to it now.
. "$(dirname "$0")/lib.sh"
cbfs_crash_setup

# store OP NEW: a copy of the template, OP on its data files only, then the repair
store_op() {
    rm -rf "$T/w" && cp -a "$tmpl" "$T/w"
    "$@"
}
over() { mv "$T/w/a.bkp" "$T/w/c.bkp"; }
exchange() {
    python3 - "$T/w/a.bkp" "$T/w/c.bkp" <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    raise OSError(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)")
PY
}
link() { ln "$T/w/a.bkp" "$T/w/l.bkp"; }
# check_op OP SAYS WANT: after OP, fsck says SAYS (exit 4), --repair leaves WANT
check_op() {
    local op=$1 says=$2 want=$3 got
    store_op "$op"
    fsck_rc 4 "$T/w"
    grep -q "$says" "$T/fsck.out" || fail "$op: fsck does not say so: $(tr '\n' '|' <"$T/fsck.out")"
    fsck_rc 1 --repair "$T/w"
    cp "$T/fsck.out" "$T/repair.out"
    fsck_rc 0 "$T/w"
    cbfs_mount "$T/w" "$mnt"
    got=$(python3 "$CBFS_TOOLS/crashstate.py" "$mnt" "$T/tags" $(sed 's/=[^ ]*//g' <<<"$want"))
    cbfs_umount "$mnt"
    check_eq "$want" "$got" "$op: after fsck --repair ($(tr '\n' '|' <"$T/repair.out"))"
}
for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" a.bkp=A c.bkp=C z.bkp=Z
    cbfs_crash_needs_sidecar "$tmpl" "$layout" a.bkp
    foreign="its sidecar carries another file's id than its frames"
    check_op over "$foreign" "a.bkp=- c.bkp=A z.bkp=Z"
    check_op exchange "$foreign" "a.bkp=C c.bkp=A z.bkp=Z"
    check_op link "a name of a compressed file without its sidecar's link" \
        "a.bkp=A c.bkp=C l.bkp=A z.bkp=Z"
done
pass "layouts 2 and 1"

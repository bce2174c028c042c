#!/usr/bin/env bash
# The daemon killed (SIGKILL) at each call an exchange of names (renameat2 RENAME_EXCHANGE)
# makes that changes the store, in turn (tools/crashpoint.c, armed for the exchange only):
# of two compressed files, and of a compressed file and a plain one in another directory
# (codec none), in both layouts. The compressed files were written with block_size=1M in
# a store of 256K, so their frames do not prove their block size. After each kill, cbfs
# fsck --repair, then cbfs fsck must find the store clean and the mount must read every
# file as before the exchange or as after it, bit-exact (cbfs_crash_campaign in lib.sh).
# The sidecars were exchanged in place after the data files: killed in between, each name
# had the other file's sidecar (EIO, and fsck --repair exited 4: "repair failed: block
# size of a lost index cannot be told"), or the plain file the compressed one's (removed
# by fsck --repair as a leftover, and the compressed file EIO); they go aside first now.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload crashpoint
mnt=$T/mnt
mkdir "$T/tags"
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/tags/A" 64 # 3 blocks of 1M: no 256K frame
python3 "$CBFS_TOOLS/gendata.py" csv 2300K "$T/tags/C" 65
python3 "$CBFS_TOOLS/gendata.py" csv 1500K "$T/tags/Z" 66 # a bystander

# the ops, run in the mount: renameat2(RENAME_EXCHANGE) of FROM and TO
exchange_of() {
    python3 - "$mnt/$1" "$mnt/$2" <<'PY'
import ctypes, sys
libc = ctypes.CDLL(None, use_errno=True)
if libc.renameat2(-100, sys.argv[1].encode(), -100, sys.argv[2].encode(), 2) != 0:
    raise OSError(ctypes.get_errno(), "renameat2(RENAME_EXCHANGE)")
PY
}
exchange() { exchange_of a.bkp c.bkp; }
exchange_plain() { exchange_of a.bkp p/q.bkp; } # p/: codec none, q.bkp plain

total=0
for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_layout_store "$tmpl" "$layout"
    if ((layout == 1)); then
        sed -i 's/^block_size=.*/block_size=262144/' "$tmpl/.cbfs/store.conf"
    else
        "$CBFS" mkfs -o codec=lz4,block_size=256K "$tmpl" >/dev/null
    fi
    cbfs_mount "$tmpl" "$mnt" block_size=1M
    cp "$T/tags/A" "$mnt/a.bkp"
    cp "$T/tags/C" "$mnt/c.bkp"
    cp "$T/tags/Z" "$mnt/z.bkp"
    mkdir "$mnt/p"
    setfattr -n user.cbfs.codec -v none "$mnt/p"
    cp "$T/tags/C" "$mnt/p/q.bkp"
    cbfs_umount "$mnt"
    [[ -e $(cbfs_sidecar_of "$tmpl" p/q.bkp "$layout") ]] && fail "layout $layout: p/q.bkp is not plain"
    # the case: without its sidecar, a.bkp is not read
    rm -rf "$T/w" && cp -a "$tmpl" "$T/w"
    rm "$(cbfs_sidecar_of "$T/w" a.bkp "$layout")"
    cbfs_expect_log_errors 'block size of a lost index'
    cbfs_mount "$T/w" "$mnt"
    cat "$mnt/a.bkp" >/dev/null 2>&1 && fail "layout $layout: a.bkp reads without its sidecar: the test does not reach its case"
    cbfs_umount "$mnt"
    CBFS_LOG_ALLOW=

    cbfs_crash_campaign "$tmpl" block_size=1M exchange \
        "a.bkp=C c.bkp=A p/q.bkp=C z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=C z.bkp=Z"
    total=$((total + crash_points))
    cbfs_crash_campaign "$tmpl" block_size=1M exchange_plain \
        "a.bkp=C c.bkp=C p/q.bkp=A z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=C z.bkp=Z"
    total=$((total + crash_points))
done
pass "$total kill points: $crash_found_old left the state before, $crash_found_new the one after"

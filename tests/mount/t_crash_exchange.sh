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
cbfs_crash_setup

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

for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" a.bkp=A c.bkp=C z.bkp=Z p/:plain p/q.bkp=C
    cbfs_crash_needs_sidecar "$tmpl" "$layout" a.bkp

    cbfs_crash_campaign "$tmpl" block_size=1M exchange \
        "a.bkp=C c.bkp=A p/q.bkp=C z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=C z.bkp=Z"
    cbfs_crash_campaign "$tmpl" block_size=1M exchange_plain \
        "a.bkp=C c.bkp=C p/q.bkp=A z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=C z.bkp=Z"
done
cbfs_crash_pass

#!/usr/bin/env bash
# The daemon killed (SIGKILL) at each call that a new compressed file's create, write,
# fsync and close make it make that changes the store, in turn (tools/crashpoint.c,
# armed for them only), in both layouts, with block_size=1M in a store of 256K (frames
# that do not prove their block size: the sidecar's header is its only record). After
# each kill, cbfs fsck --repair, then cbfs fsck must find the store clean, and the mount
# must read the file whole and bit-exact once its fsync had returned; before that, not
# there, or part of it: no longer, each 64 KiB its own bytes or zeros (a block not
# written yet), never an error (cbfs_crash_campaign in lib.sh).
. "$(dirname "$0")/lib.sh"
cbfs_crash_setup

# the op: n.bin created, written, fsync'd (then $T/acked made, outside the mount), closed
create() {
    local rc=0
    rm -f "$T/acked"
    python3 - "$mnt/n.bin" "$T/tags/A" "$T/acked" <<'PY' || rc=$?
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
data = open(sys.argv[2], "rb").read()
for o in range(0, len(data), 1 << 20):
    os.write(fd, data[o:o + (1 << 20)])
os.fsync(fd)
open(sys.argv[3], "w").close()
os.close(fd)
PY
    # acknowledged: the close that failed after it (a killed daemon) takes nothing back
    [[ -e $T/acked ]] && crash_acked=1
    return "$rc"
}

export CBFS_CRASH_PART=A
for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" z.bkp=Z
    cbfs_crash_campaign "$tmpl" block_size=1M create "n.bin=A z.bkp=Z" \
        "n.bin=- z.bkp=Z" "n.bin=~A z.bkp=Z" "n.bin=~A:0 z.bkp=Z"
done
cbfs_crash_pass

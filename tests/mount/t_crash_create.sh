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
cbfs_tool
cbfs_preload crashpoint
mnt=$T/mnt
mkdir "$T/tags"
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/tags/A" 64 # 3 blocks of 1M: no 256K frame
python3 "$CBFS_TOOLS/gendata.py" csv 1500K "$T/tags/Z" 66 # a bystander

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

total=0
export CBFS_CRASH_PART=A
for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_layout_store "$tmpl" "$layout"
    if ((layout == 1)); then
        sed -i 's/^block_size=.*/block_size=262144/' "$tmpl/.cbfs/store.conf"
    else
        "$CBFS" mkfs -o codec=lz4,block_size=256K "$tmpl" >/dev/null
    fi
    cbfs_mount "$tmpl" "$mnt" block_size=1M
    cp "$T/tags/Z" "$mnt/z.bkp"
    cbfs_umount "$mnt"
    cbfs_crash_campaign "$tmpl" block_size=1M create "n.bin=A z.bkp=Z" \
        "n.bin=- z.bkp=Z" "n.bin=~A z.bkp=Z" "n.bin=~A:0 z.bkp=Z"
    total=$((total + crash_points))
done
pass "$total kill points: $crash_found_old left the state before, $crash_found_new the one after"

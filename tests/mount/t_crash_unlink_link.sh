#!/usr/bin/env bash
# The daemon killed (SIGKILL) at each call an unlink of a compressed file, and a hard
# link of one (in its own directory, and into another), makes that changes the store, in
# turn (tools/crashpoint.c, armed for the operation only), in both layouts. The files
# were written with block_size=1M in a store of 256K, so their frames do not prove their
# block size and a lost sidecar would make them unreadable (EIO). After each kill,
# cbfs fsck --repair, then cbfs fsck must find the store clean and the mount must read
# every file as before the operation or as after it, bit-exact (cbfs_crash_campaign).
# A link linked the data file first and its sidecar after: killed in between, the new
# name was the data file without a sidecar, unreadable (EIO) even after fsck --repair
# (exit 4); the sidecar goes first now. An unlink killed after its sidecar's move aside
# needs fsck --repair to move it back (t_crash_rename).
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload crashpoint
mnt=$T/mnt
mkdir "$T/tags"
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/tags/A" 64 # 3 blocks of 1M: no 256K frame
python3 "$CBFS_TOOLS/gendata.py" csv 1500K "$T/tags/Z" 66 # a bystander

# the ops, run in the mount
remove() { rm "$mnt/a.bkp"; }
link_here() { ln "$mnt/a.bkp" "$mnt/l.bkp"; }
link_there() { ln "$mnt/a.bkp" "$mnt/d/l.bkp"; }

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
    mkdir "$mnt/d"
    cp "$T/tags/A" "$mnt/a.bkp"
    cp "$T/tags/Z" "$mnt/z.bkp"
    cbfs_umount "$mnt"
    # the case: without its sidecar, a.bkp is not read
    rm -rf "$T/w" && cp -a "$tmpl" "$T/w"
    rm "$(cbfs_sidecar_of "$T/w" a.bkp "$layout")"
    cbfs_expect_log_errors 'block size of a lost index'
    cbfs_mount "$T/w" "$mnt"
    cat "$mnt/a.bkp" >/dev/null 2>&1 && fail "layout $layout: a.bkp reads without its sidecar: the test does not reach its case"
    cbfs_umount "$mnt"
    CBFS_LOG_ALLOW=

    cbfs_crash_campaign "$tmpl" block_size=1M remove "a.bkp=- z.bkp=Z" "a.bkp=A z.bkp=Z"
    total=$((total + crash_points))
    cbfs_crash_campaign "$tmpl" block_size=1M link_here \
        "a.bkp=A l.bkp=A z.bkp=Z" "a.bkp=A l.bkp=- z.bkp=Z"
    total=$((total + crash_points))
    cbfs_crash_campaign "$tmpl" block_size=1M link_there \
        "a.bkp=A d/l.bkp=A z.bkp=Z" "a.bkp=A d/l.bkp=- z.bkp=Z"
    total=$((total + crash_points))
done
pass "$total kill points: $crash_found_old left the state before, $crash_found_new the one after"

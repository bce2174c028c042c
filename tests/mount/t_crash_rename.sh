#!/usr/bin/env bash
# The daemon killed (SIGKILL) at each call a rename of a compressed file makes that changes
# the store, in turn (tools/crashpoint.c, armed for the rename only): within a directory
# to a free name, into another directory (whose index directory it makes) to a free name,
# and over another compressed file (whose sidecar goes aside into .cbfs first); in both
# layouts. The files were written with block_size=1M in a store of 256K, so their frames
# do not prove their block size and a lost sidecar would make them unreadable (EIO).
# After each kill, cbfs fsck --repair, then cbfs fsck must find the store clean and the
# mount must read every file as before the rename or as after it, bit-exact
# (cbfs_crash_campaign in lib.sh). Killed between the target's sidecar's move aside and
# the data file's rename, the target kept its contents and its only record of its block
# size was in .cbfs/rename-aside-*, which fsck --repair only named: the target stayed
# unreadable (fsck exit 4, EIO) until fsck settled the asides as it does orphan sidecars.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload crashpoint
mnt=$T/mnt
mkdir "$T/tags"
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/tags/A" 64 # 3 blocks of 1M: no 256K frame
python3 "$CBFS_TOOLS/gendata.py" csv 2300K "$T/tags/C" 65
python3 "$CBFS_TOOLS/gendata.py" csv 1500K "$T/tags/Z" 66 # a bystander

# the ops, run in the mount
within() { mv "$mnt/a.bkp" "$mnt/b.bkp"; }
across() { mv "$mnt/a.bkp" "$mnt/d/e.bkp"; }
over() { mv "$mnt/a.bkp" "$mnt/c.bkp"; }

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
    cp "$T/tags/C" "$mnt/c.bkp"
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

    cbfs_crash_campaign "$tmpl" block_size=1M within \
        "a.bkp=- b.bkp=A c.bkp=C z.bkp=Z" "a.bkp=A b.bkp=- c.bkp=C z.bkp=Z"
    total=$((total + crash_points))
    cbfs_crash_campaign "$tmpl" block_size=1M across \
        "a.bkp=- d/e.bkp=A c.bkp=C z.bkp=Z" "a.bkp=A d/e.bkp=- c.bkp=C z.bkp=Z"
    total=$((total + crash_points))
    cbfs_crash_campaign "$tmpl" block_size=1M over \
        "a.bkp=- c.bkp=A z.bkp=Z" "a.bkp=A c.bkp=C z.bkp=Z"
    total=$((total + crash_points))
done
pass "$total kill points: $crash_found_old left the state before, $crash_found_new the one after"

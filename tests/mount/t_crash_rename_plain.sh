#!/usr/bin/env bash
# The daemon killed (SIGKILL) at each call that a rename of a compressed file over a plain
# one (into a directory of codec none), and of a plain file over a compressed one, makes
# that changes the store, in turn (tools/crashpoint.c, armed for the rename only), in
# both layouts. The compressed files were written with block_size=1M in a store of 256K,
# so their frames do not prove their block size and a lost sidecar would make them
# unreadable (EIO). After each kill, cbfs fsck --repair, then cbfs fsck must find the
# store clean and the mount must read every file as before the rename or as after it,
# bit-exact (cbfs_crash_campaign in lib.sh). No kill point failed when it was written.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_preload crashpoint
mnt=$T/mnt
mkdir "$T/tags"
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/tags/A" 64 # 3 blocks of 1M: no 256K frame
python3 "$CBFS_TOOLS/gendata.py" csv 2300K "$T/tags/C" 65
python3 "$CBFS_TOOLS/gendata.py" csv 1500K "$T/tags/Z" 66 # a bystander
python3 "$CBFS_TOOLS/gendata.py" csv 1800K "$T/tags/Q" 67 # plain: p/ is codec none

# the ops, run in the mount
over_plain() { mv "$mnt/a.bkp" "$mnt/p/q.bkp"; }
plain_over() { mv "$mnt/p/q.bkp" "$mnt/c.bkp"; }

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
    cp "$T/tags/Q" "$mnt/p/q.bkp"
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

    cbfs_crash_campaign "$tmpl" block_size=1M over_plain \
        "a.bkp=- c.bkp=C p/q.bkp=A z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=Q z.bkp=Z"
    total=$((total + crash_points))
    cbfs_crash_campaign "$tmpl" block_size=1M plain_over \
        "a.bkp=A c.bkp=Q p/q.bkp=- z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=Q z.bkp=Z"
    total=$((total + crash_points))
done
pass "$total kill points: $crash_found_old left the state before, $crash_found_new the one after"

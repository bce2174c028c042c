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
cbfs_crash_setup

# the ops, run in the mount
within() { mv "$mnt/a.bkp" "$mnt/b.bkp"; }
across() { mv "$mnt/a.bkp" "$mnt/d/e.bkp"; }
over() { mv "$mnt/a.bkp" "$mnt/c.bkp"; }

for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" d/ a.bkp=A c.bkp=C z.bkp=Z
    cbfs_crash_needs_sidecar "$tmpl" "$layout" a.bkp

    cbfs_crash_campaign "$tmpl" block_size=1M within \
        "a.bkp=- b.bkp=A c.bkp=C z.bkp=Z" "a.bkp=A b.bkp=- c.bkp=C z.bkp=Z"
    cbfs_crash_campaign "$tmpl" block_size=1M across \
        "a.bkp=- d/e.bkp=A c.bkp=C z.bkp=Z" "a.bkp=A d/e.bkp=- c.bkp=C z.bkp=Z"
    cbfs_crash_campaign "$tmpl" block_size=1M over \
        "a.bkp=- c.bkp=A z.bkp=Z" "a.bkp=A c.bkp=C z.bkp=Z"
done
cbfs_crash_pass

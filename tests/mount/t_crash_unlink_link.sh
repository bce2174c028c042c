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
cbfs_crash_setup

# the ops, run in the mount
remove() { rm "$mnt/a.bkp"; }
link_here() { ln "$mnt/a.bkp" "$mnt/l.bkp"; }
link_there() { ln "$mnt/a.bkp" "$mnt/d/l.bkp"; }

for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" d/ a.bkp=A z.bkp=Z
    cbfs_crash_needs_sidecar "$tmpl" "$layout" a.bkp

    cbfs_crash_campaign "$tmpl" block_size=1M remove "a.bkp=- z.bkp=Z" "a.bkp=A z.bkp=Z"
    cbfs_crash_campaign "$tmpl" block_size=1M link_here \
        "a.bkp=A l.bkp=A z.bkp=Z" "a.bkp=A l.bkp=- z.bkp=Z"
    cbfs_crash_campaign "$tmpl" block_size=1M link_there \
        "a.bkp=A d/l.bkp=A z.bkp=Z" "a.bkp=A d/l.bkp=- z.bkp=Z"
done
cbfs_crash_pass

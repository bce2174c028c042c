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
cbfs_crash_setup

# the ops, run in the mount
over_plain() { mv "$mnt/a.bkp" "$mnt/p/q.bkp"; }
plain_over() { mv "$mnt/p/q.bkp" "$mnt/c.bkp"; }

for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" a.bkp=A c.bkp=C z.bkp=Z p/:plain p/q.bkp=Q
    cbfs_crash_needs_sidecar "$tmpl" "$layout" a.bkp

    cbfs_crash_campaign "$tmpl" block_size=1M over_plain \
        "a.bkp=- c.bkp=C p/q.bkp=A z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=Q z.bkp=Z"
    cbfs_crash_campaign "$tmpl" block_size=1M plain_over \
        "a.bkp=A c.bkp=Q p/q.bkp=- z.bkp=Z" "a.bkp=A c.bkp=C p/q.bkp=Q z.bkp=Z"
done
cbfs_crash_pass

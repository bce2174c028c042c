#!/usr/bin/env bash
# The daemon killed (SIGKILL) at each call that changes the store while an EXISTING
# compressed file's data changes, in turn (tools/crashpoint.c, armed for the operation
# only), in both layouts, with the writeback cache and without (writeback_cache=off):
# 100 KiB written over the boundary of its blocks 0 and 1, a shrink (ftruncate) into the
# middle of block 1, an append that fills block 2 and starts block 3, and an O_TRUNC
# open that writes other contents; each then fsync'd and closed. The file (2600 KiB, 3
# blocks of 1M) was written with block_size=1M in a store of 256K (cbfs_crash_template),
# so its frames do not prove its block size; a kill point costs its mounts, not its
# bytes. After each kill, cbfs fsck --repair, then cbfs fsck must find the store clean,
# and the mount must read the file as after the operation once its fsync had returned;
# before that, as before it or as after it, or, cut short, each 64 KiB as before or as
# after (--mix in tools/crashstate.py; an append's block not stored yet: zeros past the
# old end), and for the O_TRUNC rewrite part of the new contents (--part); a shrink
# only as before or after. Never other bytes, never an error (cbfs_crash_campaign).
# Killed between a truncate's rewrite of the block straddling the new end and the SIZE
# frame behind it (two writes then), the rescan applied the rewrite alone: the old size
# with the straddling block's tail zeros; both are appended with one write now
# (cbfs_file_store_frames).
. "$(dirname "$0")/lib.sh"
cbfs_crash_setup

# the file's contents after each op, in $T/tags: W (A with 100 KiB of C's bytes written
# over 1M-50K..1M+50K), S (A cut at 1M+300K), P (A with 600 KiB of C's appended)
python3 - "$T/tags" <<'PY'
import os, sys
t = sys.argv[1]
a, c = (open(os.path.join(t, n), "rb").read() for n in "AC")
o = (1 << 20) - 50 * 1024
open(os.path.join(t, "W"), "wb").write(a[:o] + c[o:o + 100 * 1024] + a[o + 100 * 1024:])
open(os.path.join(t, "S"), "wb").write(a[:(1 << 20) + 300 * 1024])
open(os.path.join(t, "P"), "wb").write(a + c[:600 * 1024])
PY

# cbfs_rewrite_op HOW: a.bkp opened (HOW: ow, shrink, append or trunc), changed into
# its tag (W, S, P or C), fsync'd (then $T/acked made, outside the mount) and closed
cbfs_rewrite_op() {
    local rc=0
    rm -f "$T/acked"
    python3 - "$1" "$mnt/a.bkp" "$T/tags" "$T/acked" <<'PY' || rc=$?
import os, sys
how, path, tags, acked = sys.argv[1:]
def tag(n):
    return open(os.path.join(tags, n), "rb").read()
flags = {"ow": 0, "shrink": 0, "append": os.O_APPEND, "trunc": os.O_TRUNC}[how]
fd = os.open(path, os.O_WRONLY | flags)
if how == "ow":
    o = (1 << 20) - 50 * 1024
    os.pwrite(fd, tag("W")[o:o + 100 * 1024], o)
elif how == "shrink":
    os.ftruncate(fd, len(tag("S")))
elif how == "append":
    os.write(fd, tag("P")[len(tag("A")):])
else:
    data = tag("C")
    for o in range(0, len(data), 1 << 20):
        os.write(fd, data[o:o + (1 << 20)])
os.fsync(fd)
open(acked, "w").close()
os.close(fd)
PY
    # acknowledged: the close that failed after it (a killed daemon) takes nothing back
    [[ -e $T/acked ]] && crash_acked=1
    return "$rc"
}
overwrite() { cbfs_rewrite_op ow; }
shrink() { cbfs_rewrite_op shrink; }
append() { cbfs_rewrite_op append; }
retrunc() { cbfs_rewrite_op trunc; }

# Every kill point in layout 2; in layout 1 every third (from the first, second or third
# call, in turn), to keep the test near 90 s (~0.5 s a kill point, ~200 in all): the
# layouts differ only in where the sidecar lies, not in the calls the data path of an
# existing file makes.
export CBFS_CRASH_MIX="A~W A~P"
i=0
for layout in 2 1; do
    tmpl=$T/tmpl$layout
    cbfs_crash_template "$tmpl" "$layout" a.bkp=A z.bkp=Z
    for wb in "" ,writeback_cache=off; do
        opts=block_size=1M$wb
        for op in overwrite shrink append retrunc; do
            if ((layout == 1)); then
                export CBFS_CRASH_STRIDE=3 CBFS_CRASH_FROM=$((i++ % 3 + 1))
            fi
            unset CBFS_CRASH_PART
            case $op in
            overwrite) cbfs_crash_campaign "$tmpl" "$opts" overwrite "a.bkp=W z.bkp=Z" \
                "a.bkp=A z.bkp=Z" "a.bkp=A~W z.bkp=Z" ;;
            shrink) cbfs_crash_campaign "$tmpl" "$opts" shrink "a.bkp=S z.bkp=Z" \
                "a.bkp=A z.bkp=Z" ;;
            append) cbfs_crash_campaign "$tmpl" "$opts" append "a.bkp=P z.bkp=Z" \
                "a.bkp=A z.bkp=Z" "a.bkp=A~P z.bkp=Z" ;;
            retrunc)
                export CBFS_CRASH_PART=C
                cbfs_crash_campaign "$tmpl" "$opts" retrunc "a.bkp=C z.bkp=Z" \
                    "a.bkp=A z.bkp=Z" "a.bkp=~C z.bkp=Z" "a.bkp=~C:0 z.bkp=Z"
                ;;
            esac
        done
    done
done
cbfs_crash_pass

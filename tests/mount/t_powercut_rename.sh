#!/usr/bin/env bash
# Power cuts (not kill -9) during the daemon's namespace operations on compressed files:
# a rename over another compressed file (in its directory, and into another one), a
# RENAME_EXCHANGE of two, an unlink, a hard link (in its directory, and into another),
# and a create + write + fsync (tools/pcnsop.py). CBFS_PC_OPS may also name a rename
# over, an exchange and a link followed by an fsync of the file at its new name instead
# of its directory (over_fsync, exchange_fsync, link_fsync: never acknowledged, as POSIX
# promises nothing of the name then): on btrfs, whose fsync of a file logs that inode's
# names only, they left the target with the replaced file's sidecar, or the new name
# without one, which fsck --repair could not settle (exit 4, EIO) before helper-72's
# fix (t_powercut_rename_btrfs runs them; on ext4 a journal commit carries everything
# before it, and they add nothing to the default seven). The store is on an ext4 on a loop
# device over tools/volatile.c (a disk with a volatile write cache, as in t_powercut.sh);
# its files were written with block_size=1M in a store of 256K (cbfs_crash_template), so
# their frames do not prove their block size and a sidecar lost or left beside the wrong
# data file makes a file unreadable (EIO). Each operation is followed by an fsync of the
# directories it changed, its acknowledgement.
#
# Cut points, per operation: first once after the acknowledgement (which also counts the
# FSYNCs, the loop device's cache flushes, that the operation sends: F), then at the
# arrival of each of its FSYNCs 1..F (before it is applied); each point twice: dropping
# everything the disk did not flush (4 KiB sectors), and keeping a seeded random half of
# it (512 B sectors: torn blocks; 4 KiB under XFS and btrfs). After each cut: the ext4
# replays its journal, e2fsck -fn; a mount of a copy of the store reads every name as
# before the operation or as after it, or an error (as cbfs_crash_campaign's first look;
# once acknowledged, as after and no error: a crash must need no fsck); cbfs fsck
# --repair (exit 0 or 1), cbfs fsck (exit 0), and a mount reads every name as before or
# as after, bit-exact, never an error and no other name (tools/crashstate.py); only as
# after once
# the operation was acknowledged (its call and its directory fsyncs returned 0 before the
# disk was cut: Linux 6.18's ext4 answers a directory's fsync with 0 after another task's
# journal commit failed, jbd2_journal_force_commit finding nothing to commit, which
# helper-72 saw lose an "acknowledged" rename with CBFS_PC_HAMMER=1 and reproduced on
# ext4 alone; tools/pcnsop.py).
#
# Not covered: layout 1 (CBFS_PC_LAYOUT=1 runs it), plain files, the cut at a WRITE
# between two flushes (ext4's journal makes what lands there one of the states at a
# flush; the kept half stands for the rest), several operations in one journal
# transaction, the writeback cache's own timing (the files are written before).
# On ext4 (and XFS) a journal commit carries every namespace change made before it, so
# the states a cut leaves are those of a kill -9 at the same moment (t_crash_rename,
# t_crash_exchange, t_crash_unlink_link, t_crash_create cover every such point): this
# test checks that the directory fsyncs of the acknowledgement reach the sidecars' and
# the asides' directories too, and that the tools settle what a torn-off journal leaves.
# The operation itself sends no FSYNC (the daemon syncs no directory before the caller's
# fsync): its steps land in one journal transaction, and the cuts leave before or after.
# CBFS_PC_HAMMER=1 runs a task beside it that fsyncs a file of the ext4 in a loop, so
# that journal commits (and cuts) fall between the daemon's steps (the aside, the data
# file's rename, the sidecar's, the aside's removal): 20-80 FSYNCs per operation, slow.
# Environment: CBFS_POWERCUT_SEED (default 1), CBFS_POWERCUT_FS=ext4|xfs|btrfs (the
# store's file system, default ext4), CBFS_PC_OPS (default: the seven without _fsync),
# CBFS_PC_LAYOUT (default 2), CBFS_PC_HAMMER, CBFS_PC_VERBOSE=1 (a line per cut).
. "$(dirname "$0")/lib.sh"
cbfs_pc_setup
mnt=$T/mnt
hammer=${CBFS_PC_HAMMER:-0} seed0=${CBFS_POWERCUT_SEED:-1} sfs=${CBFS_POWERCUT_FS:-ext4} layout=${CBFS_PC_LAYOUT:-2}
ops=(${CBFS_PC_OPS:-over over_there exchange unlink link link_there create})
case $sfs in # make, check after the log's replay (read-only), image size
ext4) mkfs_() { mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 "$1"; }
    fsck_() { e2fsck -fn "$1"; }
    size=64M ;;
xfs) mkfs_() { mkfs.xfs -q -f "$1"; }
    fsck_() { xfs_repair -n "$1"; }
    size=320M ;;
btrfs) mkfs_() { mkfs.btrfs -q -f "$1"; }
    fsck_() { btrfs check --readonly "$1"; }
    size=128M ;;
*) fail "CBFS_POWERCUT_FS=$sfs: ext4, xfs or btrfs" ;;
esac
command -v "mkfs.$sfs" >/dev/null || fail "needs mkfs.$sfs (scripts/deps.sh test)"
mkdir -p "$T/tags"
python3 "$CBFS_TOOLS/gendata.py" csv 2600K "$T/tags/A" 64
python3 "$CBFS_TOOLS/gendata.py" csv 2300K "$T/tags/C" 65
python3 "$CBFS_TOOLS/gendata.py" csv 1500K "$T/tags/Z" 66
python3 "$CBFS_TOOLS/gendata.py" csv 1800K "$T/tags/Q" 67

# the image every cycle starts from: the store on a clean file system
truncate -s "$size" "$T/base"
mkfs_ "$T/base" >/dev/null || fail "mkfs.$sfs"
cbfs_pc_loop_up "$T/base"
mount -t "$sfs" "$LOOP" "$ext" || fail "cannot mount the $sfs"
cbfs_crash_template "$ext/store" "$layout" d/ a.bkp=A c.bkp=C d/e.bkp=Q z.bkp=Z
umount "$ext"
cbfs_pc_loop_down

# before and after of each operation (crashstate.py's words)
base="a.bkp=A c.bkp=C d/e.bkp=Q z.bkp=Z"
declare -A new old
new[over]="a.bkp=- c.bkp=A d/e.bkp=Q z.bkp=Z" old[over]=$base
new[over_fsync]=${new[over]} old[over_fsync]=$base
new[exchange_fsync]="a.bkp=C c.bkp=A d/e.bkp=Q z.bkp=Z" old[exchange_fsync]=$base
new[link_fsync]="a.bkp=A c.bkp=C d/e.bkp=Q l.bkp=A z.bkp=Z"
old[link_fsync]="a.bkp=A c.bkp=C d/e.bkp=Q l.bkp=- z.bkp=Z"
new[over_there]="a.bkp=- c.bkp=C d/e.bkp=A z.bkp=Z" old[over_there]=$base
new[exchange]="a.bkp=C c.bkp=A d/e.bkp=Q z.bkp=Z" old[exchange]=$base
new[unlink]="a.bkp=- c.bkp=C d/e.bkp=Q z.bkp=Z" old[unlink]=$base
new[link]="a.bkp=A c.bkp=C d/e.bkp=Q l.bkp=A z.bkp=Z"
old[link]="a.bkp=A c.bkp=C d/e.bkp=Q l.bkp=- z.bkp=Z"
new[link_there]="a.bkp=A c.bkp=C d/e.bkp=Q d/l.bkp=A z.bkp=Z"
old[link_there]="a.bkp=A c.bkp=C d/e.bkp=Q d/l.bkp=- z.bkp=Z"
new[create]="a.bkp=A c.bkp=C d/e.bkp=Q n.bin=A z.bkp=Z"
old[create]="a.bkp=A c.bkp=C d/e.bkp=Q n.bin=- z.bkp=Z|a.bkp=A c.bkp=C d/e.bkp=Q n.bin=~A z.bkp=Z|a.bkp=A c.bkp=C d/e.bkp=Q n.bin=~A:0 z.bkp=Z"

state_of() { # DIR NAMES...: crashstate.py's line for the store mounted on DIR
    local d=$1
    shift
    python3 "$CBFS_TOOLS/crashstate.py" --part A "$d" "$T/tags" "$@"
}

ncycles=0 nlate=0 nacked=0 nnew=0 nold=0 nflush=0
# cycle OP N KEEP SECTOR: the power cut at the operation's Nth FSYNC (0: after its
# acknowledgement), keeping KEEP % of the SECTOR-byte sectors not flushed; sets fsyncs
# (the FSYNCs from the operation's start to the cut)
cycle() {
    local op=$1 n=$2 keep=$3 sector=$4 s w x got seen rc acked=0
    local -a args=(--seed "$((seed0 * 1000 + ncycles))" --keep "$keep" --sector "$sector" --relative 1)
    ((n)) && args+=(--cut-fsync "$n")
    local what="$op, cut $( ((n)) && echo "at its FSYNC $n" || echo "after its acknowledgement"), keep $keep% of $sector B sectors"
    local names
    names=$(sed 's/=[^ ]*//g' <<<"${new[$op]}")
    cp --sparse=always "$T/base" "$img"
    local elog=$T/emu.log
    "$T/volatile" "${args[@]}" "$img" "$emu" -f >"$elog" 2>&1 &
    EMU_PID=$!
    cbfs_pc_wait_for grep -qsF " $emu fuse" /proc/mounts || fail "$what: the emulator did not mount: $(tail -n 3 "$elog")"
    cbfs_pc_loop_up "$emu/img"
    mount -t "$sfs" "$LOOP" "$ext" || fail "$what: cannot mount the $sfs"
    cbfs_mount "$ext/store" "$mnt" block_size=1M
    rm -f "$T/mark".*
    local hpid=
    if ((hammer)); then # journal commits between the daemon's steps
        python3 -c '
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT, 0o600)
i = 0
while not os.path.exists(sys.argv[2]):
    try:
        os.pwrite(fd, bytes([i & 255]), 0)
        os.fsync(fd)
    except OSError:
        break
    i += 1
' "$ext/hammer" "$T/mark.stop" &
        hpid=$!
        sleep 0.05
    fi
    python3 "$CBFS_TOOLS/pcnsop.py" "$op" "$mnt" "$T/tags" "$T/mark" "$EMU_PID" "$elog" 2>"$T/op.err" || true
    if [[ -n $hpid ]]; then
        touch "$T/mark.stop"
        wait "$hpid" || true
    fi
    if ! grep -q CUT "$elog"; then
        ((n == 0)) || note "$what: the operation sent fewer FSYNCs this time: cut after it"
        kill -USR1 "$EMU_PID"
        ls "$emu" >/dev/null 2>&1 || true
    fi
    cbfs_pc_wait_for grep -q CUT "$elog" || fail "$what: the emulator did not cut"
    [[ -e $T/mark.acked ]] && acked=1
    [[ -e $T/mark.late ]] && nlate=$((nlate + 1))
    # the disk is dead: everything torn down, nothing more lands
    cbfs_pc_crash_daemon "$mnt"
    cbfs_pc_retry_busy umount "$ext" || umount -l "$ext"
    cbfs_pc_loop_down
    cbfs_pc_emu_down
    x=$(sed -n 's/.*epoch at write [0-9]* fsync \([0-9]*\):.*/\1/p' "$elog" | head -n 1)
    w=$(sed -n 's/.*CUT.* cut after [0-9]* writes, \([0-9]*\) fsyncs.*/\1/p' "$elog" | head -n 1)
    [[ -n $x && -n $w ]] || fail "$what: no epoch or cut in the emulator's log: $(tr '\n' '|' <"$elog")"
    fsyncs=$((w - x))
    what+=" ($( ((acked)) && echo acknowledged || echo "not acknowledged: $(tail -n 1 "$T/op.err")"))"
    # recovery, on the image itself
    cbfs_pc_loop_up "$img"
    mount -t "$sfs" "$LOOP" "$ext" || fail "$what: the $sfs does not mount after the cut"
    cbfs_pc_retry_busy umount "$ext"
    fsck_ "$LOOP" >"$T/fsck_.out" 2>&1 || fail "$what: $sfs check after the journal replay: $(tail -n 4 "$T/fsck_.out" | tr '\n' '|')"
    mount -t "$sfs" "$LOOP" "$ext" || fail "$what: cannot mount the $sfs again"
    local -a may=("${new[$op]}") olds=()
    if ((!acked)); then
        IFS='|' read -r -a olds <<<"${old[$op]}"
        may+=("${olds[@]}")
    fi
    # before any repair, on a copy (a mount repairs what it loads)
    rm -rf "$T/r" && cp -a "$ext/store" "$T/r"
    local allow=$CBFS_LOG_ALLOW
    CBFS_LOG_ALLOW=. # what it finds of the cut, said
    cbfs_mount "$T/r" "$mnt"
    got=$(state_of "$mnt" $names)
    cbfs_umount "$mnt"
    CBFS_LOG_ALLOW=$allow
    # acknowledged: as after, with no fsck (the mount repairs what it loads)
    ((acked)) && [[ $got != "${new[$op]}" ]] &&
        fail "$what: before cbfs fsck the mount reads '$got', not '${new[$op]}'"
    for w in $got; do
        [[ $w == *=ERR\(* ]] && continue
        seen=0
        for s in "${may[@]}"; do [[ " $s " == *" $w "* ]] && seen=1; done
        ((seen)) || fail "$what: before cbfs fsck the mount reads $w, neither as before nor as after the operation, nor an error ($got)"
    done
    rc=0
    "$CBFS" fsck --repair "$ext/store" >"$T/repair.out" 2>&1 || rc=$?
    ((rc <= 1)) || fail "$what: cbfs fsck --repair exited $rc: $(tr '\n' '|' <"$T/repair.out")"
    rc=0
    "$CBFS" fsck "$ext/store" >"$T/fsck.out" 2>&1 || rc=$?
    ((rc == 0)) || fail "$what: cbfs fsck after --repair exited $rc: $(tr '\n' '|' <"$T/fsck.out") (repair: $(tr '\n' '|' <"$T/repair.out"))"
    cbfs_mount "$ext/store" "$mnt"
    got=$(state_of "$mnt" $names)
    cbfs_umount "$mnt"
    cbfs_pc_retry_busy umount "$ext"
    cbfs_pc_loop_down
    seen=0
    for s in "${may[@]}"; do [[ $got == "$s" ]] && seen=1; done
    ((seen)) || fail "$what: after cbfs fsck --repair the mount holds '$got', not '$(
        IFS='|'
        echo "${may[*]}"
    )' (repair: $(tr '\n' '|' <"$T/repair.out"))"
    ncycles=$((ncycles + 1)) nacked=$((nacked + acked))
    if [[ $got == "${new[$op]}" ]]; then nnew=$((nnew + 1)); else nold=$((nold + 1)); fi
    [[ ${CBFS_PC_VERBOSE:-0} == 1 ]] && note "$what, $fsyncs FSYNCs to the cut: $got"
    return 0
}

# the kept half in 512 B sectors tears 4 KiB blocks; not under XFS and btrfs, whose own
# metadata blocks (a superblock written with FUA, kept torn) can leave them unmountable,
# cbfs not reached (t_powercut.sh's XFS cycles, helper-26)
torn=512
[[ $sfs == ext4 ]] || torn=4096
t0=$SECONDS
for op in "${ops[@]}"; do
    [[ -n ${new[$op]:-} ]] || fail "CBFS_PC_OPS: no operation $op"
    cycle "$op" 0 0 4096
    f=$fsyncs
    ((f > 0)) || fail "$op: no FSYNC reached the disk during the operation and its acknowledgement"
    nflush=$((nflush + f))
    cycle "$op" 0 50 "$torn"
    for ((n = 1; n <= f; n++)); do
        cycle "$op" "$n" 0 4096
        cycle "$op" "$n" 50 "$torn"
    done
done
((ncycles > 0)) || fail "no cut checked"
note "$ncycles cuts in $((SECONDS - t0)) s (${#ops[@]} operations, $nflush FSYNCs of theirs, each cut twice, and twice after each)"
((nlate == 0)) || note "$nlate time(s) the directory fsyncs returned 0 after the cut (not counted as acknowledged)"
pass "$ncycles cuts on $sfs: $nacked acknowledged; $nnew left the state after, $nold the one before"

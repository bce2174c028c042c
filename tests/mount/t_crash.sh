#!/usr/bin/env bash
# Crash safety: a writer (tools/crashwriter.py) extends and overwrites several files with
# periodic fsync(); the DAEMON is killed with SIGKILL at a random moment (0.2-2 s), the
# mount is detached, the store remounted, and every range the writer logged as durable
# (after fsync()/close() returned) must read back byte-exact, every file fully readable.
# `cbfs fsck` on the crashed, unmounted store may report torn tails and lagging indexes
# (non-durable data) but never a damaged block or an unloadable file.
# Environment: CBFS_CRASH_CYCLES (default 20), CBFS_CRASH_SEED (default random, printed).
. "$(dirname "$0")/lib.sh"
cbfs_tool
cycles=${CBFS_CRASH_CYCLES:-20}
seed=${CBFS_CRASH_SEED:-$((RANDOM * 32768 + RANDOM))}
RANDOM=$seed
note "seed $seed (rerun with CBFS_CRASH_SEED=$seed), $cycles cycles"

store=$T/store mnt=$T/mnt state=$T/state
mkdir -p "$store" "$state"
codecs=(lz4 zstd lz4 zstd:3 bzip2)
bsizes=(64K 128K 1M 256K 64K 512K)
# Recovery after a crash is logged (repairs, dropped records); nothing else may be.
cbfs_expect_log_errors 'torn|tail|repair|rescan|lags|not indexed|dropped|recover'

# crash_daemon MNT: SIGKILL the daemon serving MNT, detach the mount, reap the daemon.
crash_daemon() {
    local m=$1 pid=${CBFS_PID[$1]}
    kill -9 "$pid"
    wait "$pid" 2>/dev/null || true
    unset "CBFS_PID[$m]"
    fusermount3 -uz "$m" || fail "fusermount3 -uz $m after the crash failed"
}

# fsck_crashed WHEN [--repair]: the unmounted store after a crash; only non-durable
# debris (torn tails, unindexed frames, torn index records) may be reported.
nfsck=0
fsck_crashed() {
    local when=$1 rc=0
    shift
    "$CBFS" fsck "$@" "$store" >"$T/fsck.out" 2>&1 || rc=$?
    nfsck=$((nfsck + 1))
    # e2fsck codes: 0 clean, 1 corrected, 4 left uncorrected; 8 is an operational error
    ((rc == 0 || rc == 1 || rc == 4)) || fail "$when: cbfs fsck $* exited $rc: $(tail -n 4 "$T/fsck.out" | tr '\n' '|')"
    local bad
    bad=$(grep -v -E '^fsck |torn tail|index lags the data file|index record\(s\) not replayed|index rebuilt|repaired' "$T/fsck.out" || true)
    [[ -z $bad ]] || fail "$when: cbfs fsck $* reports more than crash debris: $(head -n 4 <<<"$bad" | tr '\n' '|')"
    if [[ $* == *--repair* ]]; then
        rc=0
        "$CBFS" fsck "$store" >"$T/fsck.out" 2>&1 || rc=$?
        check_eq 0 "$rc" "$when: cbfs fsck after --repair ($(tail -n 3 "$T/fsck.out" | tr '\n' '|'))"
    fi
}

verified=0 lost=0 ambiguous=0 crashed_busy=0
# verify_cycle K: the remounted store holds everything cycle K's writer logged as durable
verify_cycle() {
    local out rc=0
    out=$(python3 "$CBFS_TOOLS/crashwriter.py" verify "$mnt" "$T/log.$1" "$state" 2>&1) || rc=$?
    local v l a
    read -r _ v _ l _ a _ < <(tail -n 1 <<<"$out")
    verified=$((verified + ${v:-0})) lost=$((lost + ${l:-0})) ambiguous=$((ambiguous + ${a:-0}))
    ((rc == 0)) || fail "cycle $1 (codec ${codecs[$1 % ${#codecs[@]}]}, block_size ${bsizes[$1 % ${#bsizes[@]}]}): $(tr '\n' '|' <<<"$out")"
}

t0=$SECONDS
for ((k = 1; k <= cycles; k++)); do
    codec=${codecs[$k % ${#codecs[@]}]} bs=${bsizes[$k % ${#bsizes[@]}]}
    cbfs_mount "$store" "$mnt" "codec=$codec,block_size=$bs"
    if ((k > 1)); then
        verify_cycle $((k - 1))
        # every file in the store reads fully (also older cycles and carried files)
        find "$mnt" -type f -print0 | xargs -0 -r cat >/dev/null 2>"$T/cat.err" ||
            fail "after cycle $((k - 1)): a file is unreadable: $(head -n 3 "$T/cat.err" | tr '\n' '|')"
    fi
    ((k > 3)) && rm -rf "$mnt/c$((k - 3))"  # bound the store; deleting crashed files works
    mkdir "$mnt/c$k"
    names=("c$k/f0" "c$k/f1" "c$k/f2")
    ((k > 1)) && names+=("c$((k - 1))/f0")  # extend a file that went through a crash
    python3 "$CBFS_TOOLS/crashwriter.py" write "$mnt" "$T/log.$k" "$((seed % 1000 + k))" "${names[@]}" \
        >"$T/writer.$k.out" 2>&1 &
    wpid=$!
    # the random delay counts from the writer's first write (it first reads the carried file)
    for ((i = 0; i < 200; i++)); do grep -q '^W ' "$T/log.$k" 2>/dev/null && break; sleep 0.05; done
    ms=$((200 + RANDOM % 1800))
    sleep "$((ms / 1000)).$(printf %03d $((ms % 1000)))"
    kill -0 "$wpid" 2>/dev/null || fail "cycle $k: the writer ended before the crash: $(cat "$T/writer.$k.out")"
    crash_daemon "$mnt"
    # the writer now gets ENOTCONN/EIO and stops; it must not hang
    for ((i = 0; i < 100; i++)); do kill -0 "$wpid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$wpid" 2>/dev/null && fail "cycle $k: the writer hangs 10 s after the crash"
    wait "$wpid" || fail "cycle $k: writer failed: $(cat "$T/writer.$k.out")"
    grep -q 'stopped after' "$T/writer.$k.out" || fail "cycle $k: writer: $(cat "$T/writer.$k.out")"
    syncs=$(grep -c '^S ' "$T/log.$k" || true)
    ((syncs > 0)) || crashed_busy=$((crashed_busy + 1))
    if ((k % 8 == 0)); then
        fsck_crashed "cycle $k" --repair
    elif ((k % 3 == 0)); then
        fsck_crashed "cycle $k"
    fi
done
cbfs_mount "$store" "$mnt"
verify_cycle "$cycles"
find "$mnt" -type f -print0 | xargs -0 -r cat >/dev/null 2>"$T/cat.err" ||
    fail "after the last cycle: a file is unreadable: $(head -n 3 "$T/cat.err" | tr '\n' '|')"
cbfs_umount "$mnt"
fsck_crashed "at the end"
((lost == 0)) || fail "$lost durable bytes lost"
note "cycles $cycles, bytes verified $verified, bytes lost $lost, ambiguous (unsynced at the crash) $ambiguous, fsck runs $nfsck, cycles without any sync before the crash $crashed_busy, $((SECONDS - t0)) s"
pass "cycles $cycles, verified $verified B, lost $lost B"

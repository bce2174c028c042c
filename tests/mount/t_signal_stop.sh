#!/usr/bin/env bash
# SIGTERM (systemd's stop), SIGINT and SIGHUP stop the daemon cleanly: the mount is
# detached at once and the daemon serves the files still open on it until they are
# closed. libfuse's handlers ended the loop at once: what the writeback cache still held
# for an open file never reached the store (a writer's 12.5 MiB of accepted writes, 0
# bytes stored), its close failed with ENOTCONN, and the daemon exited 0 saying
# nothing. A second signal still stops at once; that is logged and the exit is 1.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
head -c $((200 * 65536)) /dev/urandom >"$T/data"

# writer NAME: writes $T/data to $mnt/NAME, waits for $T/go.NAME, closes; prints what close said
writer() { python3 "$CBFS_TOOLS/heldwriter.py" "$mnt/$1" "$T/data" "$T/go.$1"; }
wait_for() { local i; for ((i = 0; i < 400; i++)); do [[ -e $1 ]] && return 0; sleep 0.05; done; fail "timed out waiting for $1"; }

for sig in TERM INT HUP; do
    cbfs_mount "$store" "$mnt" codec=lz4
    writer "f.$sig" >"$T/writer.$sig" 2>&1 &
    wpid=$!
    wait_for "$T/go.f.$sig.written"
    pid=${CBFS_PID[$mnt]}
    kill -"$sig" "$pid"
    for ((i = 0; i < 100; i++)); do mountpoint -q "$mnt" || break; sleep 0.05; done
    mountpoint -q "$mnt" && fail "SIG$sig: the mount was not detached"
    kill -0 "$pid" 2>/dev/null || fail "SIG$sig: the daemon exited with a file still open"
    touch "$T/go.f.$sig"
    wait "$wpid"
    check_eq "close ok" "$(cat "$T/writer.$sig")" "SIG$sig: the writer's close"
    cbfs_reap "$mnt" # exits 0, clean log
    cbfs_mount "$store" "$mnt"
    cmp -s "$mnt/f.$sig" "$T/data" || fail "SIG$sig: the file in the store is $(stat -c %s "$mnt/f.$sig") bytes, not the whole write"
    cbfs_umount "$mnt"
done

# idle: SIGTERM stops at once, exit 0
cbfs_mount "$store" "$mnt"
kill -TERM "${CBFS_PID[$mnt]}"
cbfs_reap "$mnt"

# a second signal stops at once: exit 1, logged
cbfs_mount "$store" "$mnt" codec=lz4
writer g >"$T/writer.g" 2>&1 &
wpid=$!
wait_for "$T/go.g.written"
pid=${CBFS_PID[$mnt]}
kill -TERM "$pid"
for ((i = 0; i < 100; i++)); do mountpoint -q "$mnt" || break; sleep 0.05; done
kill -TERM "$pid"
for ((i = 0; i < 200; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$pid" 2>/dev/null && fail "the daemon still runs after a second signal"
rc=0; wait "$pid" || rc=$?
unset "CBFS_PID[$mnt]"
check_eq 1 "$rc" "exit status after a second signal"
grep -q "stopped at once by a second signal" "$(cbfs_log_of "$mnt")" || fail "not logged: $(tail -n 3 "$(cbfs_log_of "$mnt")")"
touch "$T/go.g"
wait "$wpid" || true
pass

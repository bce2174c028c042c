#!/usr/bin/env bash
# A daemon that hits a thread limit after it mounted (ulimit -u, TasksMax, a cgroup's
# pids.max) keeps serving with the threads it has, and libfuse says "error creating
# thread" on every request it cannot give a new thread: 333 lines in 8 s (helper-58)
# buried everything else in the log. The same line again within 10 s is counted and said
# once with the next line (cbfs_main_fuse_log). The daemon runs in a pids cgroup whose
# limit is set, once it has mounted, to the tasks it has then (one serving thread); 16
# readers at once then want more.
. "$(dirname "$0")/lib.sh"

cbfs_pids_cgroup
cbfs_expect_log_errors "error creating thread"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cat >"$T/incg.sh" <<SH
#!/bin/sh
echo \$\$ >"$cg/cgroup.procs" && exec "$CBFS_MOUNT_BIN" "\$@"
SH
chmod +x "$T/incg.sh"
echo max >"$cg/pids.max"
CBFS_MOUNT_BIN=$T/incg.sh cbfs_mount "$store" "$mnt" codec=lz4,workers=1
cat "$cg/pids.current" >"$cg/pids.max"
for i in $(seq 16); do head -c 100000 /dev/urandom >"$mnt/f$i" || fail "write f$i"; done
for _ in $(seq 8); do
    pids=()
    for i in $(seq 16); do
        cat "$mnt/f$i" >/dev/null &
        pids+=($!)
    done
    wait "${pids[@]}" # not the daemon's job
done
cbfs_umount "$mnt"
log=$(cbfs_log_of "$mnt")
lines=$(grep 'error creating thread' "$log" | grep -vc 'more time' || true)
counts=$(grep -c 'more time' "$log" || true)
note "pids.max $(cat "$cg/pids.max"): $lines line(s) of 'error creating thread', $counts of counts"
((lines > 0)) || fail "the limit made no serving thread fail: nothing checked"
# one line per 10 s, and the run takes about one second (a loaded machine: a few)
((lines <= 3 && counts <= 3)) || fail "$lines lines of the same libfuse error, $counts counts"
pass "$lines line(s), $counts count(s)"

#!/usr/bin/env bash
# A background daemon (mount -t cbfs, a systemd mount unit) that cannot start
# its first FUSE serving thread (a thread limit: ulimit -u, TasksMax, a
# cgroup's pids.max) must make its mount command fail. It released its parent
# with status 0 as soon as the mount was made, then found it could not serve
# and unmounted: `mount` said yes, and a backup meant for the store went into
# the directory below the mount point. The daemon runs in a pids cgroup whose
# limit is raised one task at a time: at each limit the mount command either
# fails with nothing mounted, or succeeds with the store mounted and serving;
# it never succeeds with nothing mounted. Root only (cgroups).
. "$(dirname "$0")/lib.sh"

cbfs_pids_cgroup
dpid=
cg_cleanup() { # the background daemon is not the harness's: its mount goes first
    if [[ -n $dpid ]]; then
        fusermount3 -uz "$mnt" 2>/dev/null
        for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
    fi
}
trap 'rc=$?; cg_cleanup; (exit $rc); cbfs_cleanup' EXIT

store=$T/store mnt=$T/mnt
mkdir -p "$store" "$mnt"
rmnt=$(realpath "$mnt")
failed=0 served=0 thread_failed=0
for n in 3 4 5 6; do
    # the last try's daemon is gone, and reaped (a zombie still counts)
    for _ in $(seq 100); do [[ $(cat "$cg/pids.current") == 0 ]] && break; sleep 0.1; done
    check_eq 0 "$(cat "$cg/pids.current")" "tasks left in the cgroup before pids.max $n"
    echo "$n" >"$cg/pids.max"
    rc=0
    # the daemon forks and its parent waits for the mount (background form)
    sh -c 'echo $$ >"$1/cgroup.procs" && shift && exec "$@"' sh "$cg" \
        "$CBFS_MOUNT_BIN" -o codec=lz4,workers=1 "$store" "$mnt" </dev/null >"$T/out.$n" 2>&1 || rc=$?
    grep -q 'error creating thread' "$T/out.$n" && thread_failed=$((thread_failed + 1))
    if ((rc != 0)); then
        grep -qs " $rmnt fuse" /proc/mounts && fail "pids.max $n: mount.cbfs failed ($rc) but left the mount"
        failed=$((failed + 1))
        note "pids.max $n: status $rc: $(tail -n 1 "$T/out.$n")"
        continue
    fi
    grep -qs " $rmnt fuse" /proc/mounts ||
        fail "pids.max $n: mount.cbfs said 0 and nothing is mounted: $(tr '\n' '|' <"$T/out.$n")"
    dpid=$(cat "$cg/cgroup.procs" | head -n 1)
    echo "n=$n" >"$mnt/f" || fail "pids.max $n: the mount does not take a file"
    check_eq "n=$n" "$(cat "$mnt/f")" "pids.max $n: the file read back"
    fusermount3 -u "$mnt" || fail "pids.max $n: cannot unmount"
    for _ in $(seq 100); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$dpid" 2>/dev/null && fail "pids.max $n: the daemon did not exit after the unmount"
    dpid=
    served=$((served + 1))
    note "pids.max $n: mounted and served"
done
# the limit must have hit a serving thread at least once, or nothing was checked
((thread_failed > 0)) || fail "no limit tried made a serving thread fail (failed $failed, served $served)"
((served > 0)) || fail "no limit tried let the daemon serve (failed $failed)"
pass "failed $failed, served $served"

#!/usr/bin/env bash
# A daemon that cannot start its threads (a user's ulimit -u, a service's
# TasksMax, a cgroup's pids.max) must say so and exit 1 before mounting: the
# engine's workers failed with "input/output error on the store", which sent
# the admin to the disks. Run as an otherwise unused uid with RLIMIT_NPROC 1,
# so the daemon's first thread fails whatever else runs on the machine; the
# cbfs tool's worker pool says the same. Root only (setpriv to another uid).
. "$(dirname "$0")/lib.sh"

[[ $(id -u) == 0 ]] || pass "not root: cannot run the daemon as another uid, nothing checked"
uid=54321
store=$T/store mnt=$T/mnt
mkdir -p "$store" "$mnt"
chown "$uid:$uid" "$store" "$mnt"
chmod 755 "$T"
# limited CMD...: CMD as $uid with RLIMIT_NPROC 1 (soft and hard); status in $rc
limited() {
    rc=0
    timeout 20 setpriv --reuid=$uid --regid=$uid --clear-groups -- prlimit --nproc=1:1 -- "$@" \
        </dev/null >"$T/out" 2>&1 || rc=$?
}
limited "$CBFS_MOUNT_BIN" -f "$store" "$mnt"
note "daemon: status $rc: $(head -n 1 "$T/out")"
check_eq 1 "$rc" "the daemon's exit status"
grep -qs " $(realpath "$mnt") fuse" /proc/mounts && fail "mounted after all"
grep -q 'cannot start a thread' "$T/out" || fail "the daemon's message: $(cat "$T/out")"
grep -q 'input/output error' "$T/out" && fail "a thread limit reported as a store I/O error: $(cat "$T/out")"

cbfs_tool
limited "$CBFS" verify "$store"
note "cbfs verify: status $rc: $(head -n 1 "$T/out")"
((rc != 0)) || fail "cbfs verify ran without its threads"
grep -q 'cannot start a thread' "$T/out" || fail "cbfs verify's message: $(cat "$T/out")"
pass

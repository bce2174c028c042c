# Shared helpers for the end-to-end backup-tool tests (tests/mount/t_e2e_*.sh).
# Sourced AFTER tests/mount/lib.sh (which owns mounting, cleanup, pass/fail): adds
# timing, the throughput/ratio report lines, and running commands as another user.
#
# Every figure line starts with "E2E " so a run's numbers can be grepped from the logs:
#   E2E <test> <what>: <secs> s, <MB/s>, logical <MiB>, stored <MiB>, ratio <x>:1

# Root is needed: the tests run servers and tools as postgres/mysql (runuser), chown
# files to other users and mknod a device node. CI runs the suite as root.
(($(id -u) == 0)) || fail "the e2e tests must run as root (runuser, chown, mknod)"

# The e2e tests write files as a non-root service user through the mount, and that
# user must be able to reach paths below $T (mktemp -d makes it 0700).
chmod 755 "$T"

# The cbfs tool built beside the daemon ($CBFS: `cbfs verify`, as the guides advise).
cbfs_tool

# e2e_need CMD...: each command must exist (these tests never skip: CI installs
# everything with scripts/deps.sh --test, so a missing tool is a failure).
e2e_need() {
    local c
    for c in "$@"; do
        command -v "$c" >/dev/null 2>&1 || [[ -x $c ]] ||
            fail "$c not found: run scripts/deps.sh --test"
    done
}

# e2e_as USER CMD...: run CMD as USER (root runs it directly when USER is root),
# with a PATH that also holds the tool's own bin directory if E2E_PATH is set.
e2e_as() {
    local u=$1
    shift
    if [[ $u == "$(id -un)" ]]; then
        env ${E2E_PATH:+PATH="$E2E_PATH:$PATH"} "$@"
    else
        runuser -u "$u" -- env ${E2E_PATH:+PATH="$E2E_PATH:$PATH"} "$@"
    fi
}

# e2e_now: seconds since the epoch with nanoseconds.
e2e_now() { date +%s.%N; }

# e2e_timed VAR CMD...: run CMD (it must succeed; output kept in $T/VAR.out) and
# store its wall time in seconds in VAR.
e2e_timed() {
    local __var=$1 __t0 __t1 __rc=0
    shift
    __t0=$(e2e_now)
    "$@" >"$T/$__var.out" 2>&1 || __rc=$?
    __t1=$(e2e_now)
    ((__rc == 0)) || fail "command failed ($__rc): $* -- $(tail -c 600 "$T/$__var.out" | tr '\n' '|')"
    printf -v "$__var" '%.2f' "$(awk -v a="$__t0" -v b="$__t1" 'BEGIN { print b - a }')"
}

# e2e_bytes PATH...: logical bytes (du --apparent-size) and physical bytes (du, i.e.
# st_blocks: what cbfs stored), printed as "LOGICAL PHYSICAL".
e2e_bytes() {
    local app phys
    app=$(du -scb "$@" | tail -n 1 | cut -f1) || fail "du --apparent-size $*"
    phys=$(du -sc -B1 "$@" | tail -n 1 | cut -f1) || fail "du $*"
    echo "$app $phys"
}

# e2e_report TEST WHAT SECS PATH...: the backup line: time, throughput over the
# logical bytes, logical vs stored size and the ratio, for PATH... in the mount.
e2e_report() {
    local what=$1 secs=$2 app phys
    shift 2
    read -r app phys < <(e2e_bytes "$@")
    ((app > 0)) || fail "$what: backup is empty ($*)"
    ((phys > 0)) || fail "$what: du reports 0 bytes stored for $* (st_blocks missing?)"
    local mbs ratio pct
    mbs=$(awk -v b="$app" -v s="$secs" 'BEGIN { printf "%.1f", b / 1e6 / (s + 0.001) }')
    ratio=$(awk -v a="$app" -v p="$phys" 'BEGIN { printf "%.2f", a / p }')
    pct=$(awk -v a="$app" -v p="$phys" 'BEGIN { printf "%.1f", 100 * p / a }')
    echo "E2E $TEST_NAME $what: backup ${secs} s, ${mbs} MB/s, logical $((app >> 20)) MiB," \
         "stored $((phys >> 20)) MiB ($pct%), ratio ${ratio}:1"
}

# e2e_report_restore TEST WHAT SECS [BYTES]: the restore line.
e2e_report_restore() {
    local what=$1 secs=$2 bytes=${3:-0} extra=
    if ((bytes > 0)); then
        extra=", $(awk -v b="$bytes" -v s="$secs" 'BEGIN { printf "%.1f", b / 1e6 / (s + 0.001) }') MB/s read"
    fi
    echo "E2E $TEST_NAME $what: restore ${secs} s$extra"
}

# e2e_verify_store STORE: `cbfs verify STORE` (every frame read and checked); the
# mount must be unmounted (the daemon holds the store lock).
e2e_verify_store() {
    check "$CBFS" verify "$1"
    note "cbfs verify $1: ok"
}

# e2e_free_port: a TCP port on 127.0.0.1 that nothing listens on right now.
e2e_free_port() {
    python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# ---------------------------------------------------------------- server cleanup

# Servers a test starts (postgres, mariadbd) live outside lib.sh's view, so each
# registers a stop command with e2e_at_exit; on every exit path they run (last
# registered first) BEFORE lib.sh's cleanup unmounts and removes $T. The status
# and failure location of the test are kept for lib.sh's report.
E2E_AT_EXIT=()
e2e_at_exit() { E2E_AT_EXIT+=("$1"); }
e2e_exit_trap() {
    local rc=$? i
    set +e
    trap - ERR  # a failing stop command must not replace the test's failure location
    for ((i = ${#E2E_AT_EXIT[@]} - 1; i >= 0; i--)); do
        eval "${E2E_AT_EXIT[i]}" >>"$T/at_exit.log" 2>&1
    done
    (exit "$rc")
    cbfs_cleanup
}
trap e2e_exit_trap EXIT

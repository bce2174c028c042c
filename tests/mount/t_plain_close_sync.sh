#!/usr/bin/env bash
# A writer's close of a plain file (codec=none) syncs it (fdatasync of the store file, seen
# with strace on the daemon), as a compressed file's close does: what a close acknowledged
# survives a power cut (t_powercut_plain cuts the power; this test says which close syncs).
# A close with nothing changed since the file's last sync, and a reader's close, sync
# nothing. With and without the writeback cache.
. "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || fail "strace is needed (scripts/deps.sh --test installs it)"

for wb in on off; do
    cbfs_mount_fresh codec=none writeback_cache=$wb
    strace -f -qq -e trace=fsync,fdatasync -p "${CBFS_PID[$mnt]}" -o "$T/strace.$wb" &
    spid=$!
    sleep 0.5
    rc=0
    python3 - "$mnt" "$T/strace.$wb" >"$T/py.out" 2>&1 <<'PY' || rc=$?
import os, sys, time
mnt, trace = sys.argv[1], sys.argv[2]
def syncs():
    time.sleep(0.3)  # strace writes its lines behind the calls
    return sum(1 for l in open(trace) if "sync(" in l and "resumed" not in l)
def step(what, want, fn):
    before = syncs()
    fn()
    got = syncs() - before
    if got != want:
        sys.exit("%s: %d sync call(s), want %d" % (what, got, want))
def write_close():
    fd = os.open(mnt + "/p", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(fd, os.urandom(300000))
    os.close(fd)
def open_close(flags):
    return lambda: os.close(os.open(mnt + "/p", flags))
def truncate_close():
    fd = os.open(mnt + "/p", os.O_WRONLY)
    os.ftruncate(fd, 1000)
    os.close(fd)
step("a writer's close after writing", 1, write_close)
step("a writer's close with nothing changed since", 0, open_close(os.O_RDWR))
step("a reader's close", 0, open_close(os.O_RDONLY))
step("a writer's close after a truncate", 1, truncate_close)
PY
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    ((rc == 0)) || fail "writeback_cache=$wb: $(cat "$T/py.out") (traced: $(tr '\n' '|' <"$T/strace.$wb"))"
    check_eq 1000 "$(stat -c %s "$mnt/p")" "size after the truncate"
    cbfs_umount "$mnt"
done
pass

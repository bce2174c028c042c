#!/usr/bin/env bash
# close(2) of a plain file while the daemon is out of fds. With the daemon full
# of open handles (only the fd cache's idle fds to give back), the
# application's close must still succeed: the file is fine on the store.
# (Once, flush took a dup of the handle's fd and answered EMFILE to close(2);
# a writer's flush now syncs through the handle's own fd, a reader's does
# nothing.)
. "$(dirname "$0")/lib.sh"
LIMIT=64 N=200
store=$T/store mnt=$T/mnt
mkdir -p "$store"
for i in $(seq 1 $N); do printf 'file %d\n' "$i" >"$store/p$i"; done

CBFS_DAEMON_NOFILE=$LIMIT cbfs_mount "$store" "$mnt" codec=none
out=$(python3 - "$mnt" "$N" <<'PY'
import errno, os, sys
mnt, n = sys.argv[1], int(sys.argv[2])
fds, full = [], None
for i in range(1, n + 1):
    try:
        fds.append(os.open(os.path.join(mnt, f"p{i}"), os.O_RDWR))
    except OSError as e:
        full = e.errno
        break
if full not in (errno.EMFILE, errno.ENFILE):
    print(f"opened {len(fds)} files without reaching the daemon's fd limit ({full})")
    sys.exit(1)
# A failed open gives back what it could (the fd cache's idle fds): open p1,
# whose O_PATH fd the daemon holds, until the daemon is full of handles.
fails = 0
while fails < 2 and len(fds) < 4 * n:
    try:
        fds.append(os.open(os.path.join(mnt, "p1"), os.O_RDWR))
        fails = 0
    except OSError as e:
        if e.errno not in (errno.EMFILE, errno.ENFILE):
            raise
        fails += 1
bad = 0
for fd in fds:
    try:
        os.close(fd)
    except OSError as e:
        bad += 1
        print(f"close: {e}")
print(f"{len(fds)} open at the limit; {bad} closes failed")
sys.exit(1 if bad else 0)
PY
) || fail "$out"
note "$out"
check_eq "file 7" "$(cat "$mnt/p7")" "a plain file after the closes"
pass

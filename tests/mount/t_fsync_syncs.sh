#!/usr/bin/env bash
# What fsync(2) and a directory's fsync make the store sync (seen with strace on the
# daemon; a power cut is not simulated here):
#  - fsync of a compressed file after fchmod and utime syncs the data file and its
#    sidecar with fsync, not fdatasync (which leaves mode, owner and times to the store's
#    next journal commit; with nothing written since the last sync it synced nothing);
#  - fsync of a directory syncs its .cbfsidx too (layout 2): after rename(tmp, final) and
#    fsync(dir), a store filesystem that keeps no more than POSIX asks could bring back
#    final's new data file beside its old sidecar.
. "$(dirname "$0")/lib.sh"
command -v strace >/dev/null || fail "strace is needed (scripts/deps.sh --test installs it)"

cbfs_mount_fresh codec=lz4 block_size=64K
mkdir "$mnt/d"
head -c 200000 /dev/urandom >"$mnt/d/x"
strace -f -qq -e trace=openat,fsync,fdatasync,utimensat,rename,renameat,renameat2 -p "${CBFS_PID[$mnt]}" -o "$T/strace.out" &
spid=$!
sleep 0.5
python3 - "$mnt/d/x" "$mnt/d" <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR)
os.fchmod(fd, 0o600)
os.utime(fd, (1000000000, 1000000000))
os.fsync(fd)
os.close(fd)
os.rename(sys.argv[2] + "/x", sys.argv[2] + "/y")
dfd = os.open(sys.argv[2], os.O_RDONLY | os.O_DIRECTORY)
os.fsync(dfd)
os.close(dfd)
PY
sleep 0.3
kill "$spid" 2>/dev/null || true
wait "$spid" 2>/dev/null || true
python3 - "$T/strace.out" <<'PY' || fail "sync calls: $(grep -E 'sync|cbfsidx' "$T/strace.out" | tr '\n' '|')"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
# the file's fsync: two fsync(2) calls (data file, sidecar) after the times were put
# back and before the rename (the directory's fsync, after it, makes two more)
put = [i for i, l in enumerate(lines) if "utimensat(" in l and "1000000000" in l]
assert put, "no utimensat putting back the times"
ren = [i for i, l in enumerate(lines) if re.search(r"\brename(at2?)?\(", l)]
assert ren and ren[0] > put[0], "no rename traced after the times were put back"
fs = [l for l in lines[put[0]:ren[0]] if re.search(r"\bfsync\(", l)]
assert len(fs) >= 2, "fsync of the file: %d fsync calls after the times" % len(fs)
# the directory's fsync: its .cbfsidx opened and fsync'd
idx = [re.search(r"= (\d+)$", l) for l in lines if '".cbfsidx"' in l and "O_DIRECTORY" in l and "O_PATH" not in l]
fds = {m.group(1) for m in idx if m}
assert fds, "the directory's .cbfsidx was not opened"
assert any(re.search(r"\bfsync\((%s)\)" % "|".join(fds), l) for l in lines), ".cbfsidx not fsync'd"
PY
check_eq 600 "$(stat -c %a "$mnt/d/y")" "mode after fsync"
check_eq 1000000000 "$(stat -c %Y "$mnt/d/y")" "mtime after fsync"
cbfs_umount "$mnt"
check_eq 600 "$(stat -c %a "$store/d/y")" "the data file's mode in the store"
pass

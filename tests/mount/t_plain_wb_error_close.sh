#!/usr/bin/env bash
# A plain file's writeback error (the store's fsync fails: EIO, a thin pool or an NFS
# store full) is reported by Linux once per open file of the store. A writer's close of a
# plain file is an fdatasync of the handle's store descriptor (e4d120d), so the close of
# another copy of the writer's open file (a child's exec closing its close-on-exec copy,
# a close of a dup) took the store's only report of it, and the writer's own fsync and
# close then returned 0: the errseq promise (cbfs/errseq.h: a close leaves a failure for
# the fsync) held for compressed files only. And a writer's close skips its sync where a
# sync since the last change succeeded, through any handle: a second handle's failed and
# then good fsync made the writer's close return 0 though its store descriptor would
# have reported the failure. tools/syncfail.c makes the store's fsync fail as Linux's
# does (once per open file of the store).
. "$(dirname "$0")/lib.sh"

cbfs_preload syncfail
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_expect_log_errors 'fsync|fdatasync|Input/output'
export CBFS_SYNCFAIL_NAME=f CBFS_SYNCFAIL_TRIGGER=$T/trigger
LD_PRELOAD=$T/syncfail.so cbfs_mount "$store" "$mnt" codec=none,writeback_cache=off
for how in ${HOWS:-exec dup other}; do
    rm -f "$mnt/f"
    out=$(PYTHONPATH=$CBFS_TOOLS python3 - "$mnt/f" "$how" "$T/trigger" <<'PY'
import os, subprocess, sys
from errcheck import outcomes
path, how, trig = sys.argv[1:4]
w = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
os.pwrite(w, os.urandom(1 << 20), 0)
open(trig, "w").close()  # the store's writeback of the file fails
if how == "exec":
    subprocess.run(["true"], check=True)  # its copy of w closes at exec: a FLUSH
elif how == "dup":
    try:
        os.close(os.dup(w))
    except OSError:
        pass
else:  # another open file of it, fsync'd twice: it hears the failure, then 0
    r = os.open(path, os.O_RDONLY)
    for _ in range(2):
        try:
            os.fsync(r)
        except OSError:
            pass
    os.close(r)
taken = "taken" if not os.path.exists(trig) else "NOT TAKEN"
fns = (("close", lambda: os.close(w)),) if how == "other" else \
      (("fsync", lambda: os.fsync(w)), ("close", lambda: os.close(w)))
print("store error %s, %s" % (taken, outcomes(fns)))
PY
)
    note "the other copy closed by $how: $out"
    [[ $out == "store error taken"* ]] || fail "$how: the store's sync failure was not made: $out"
    [[ $out == *"Input/output error"* ]] ||
        fail "$how: the writer heard nothing of the failed writeback: $out"
done
rm -f "$mnt/f"
cbfs_umount "$mnt"
pass

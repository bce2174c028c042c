#!/usr/bin/env bash
# A failure to store that nobody was waiting for (the store full) must reach the writer's
# fsync and close even when another copy of its open file was closed first: a child's
# fork + exec (its close-on-exec copy is a FLUSH of the same open file) or a close of a
# dup. That close used to take the failure for the handle, and the writer's fsync and
# close then returned 0 with its bytes not stored (helper-51, twentieth session). Now a
# close reports it and leaves it for the fsync (cbfs/errseq.h, cbfs_errseq_peek).
# Compressed (the engine's background store) and plain with the writeback cache (a page
# written back); for each, the other copy closed by a child's exec and by close(dup).
. "$(dirname "$0")/lib.sh"

cbfs_tmpfs_store 32m
cbfs_expect_log_errors 'no space left on the store|could not be stored'
for opts in codec=lz4 codec=none; do
    cbfs_mount "$store" "$mnt" "$opts"
    for how in exec dup; do
        rm -f "$mnt/f" "$fs/filler"
        sync
        avail=$(df -B1 --output=avail "$fs" | tail -n 1)
        fallocate -l $((avail - (1 << 20))) "$fs/filler" || fail "fallocate of the filler"
        out=$(PYTHONPATH=$CBFS_TOOLS python3 - "$mnt/f" "$how" <<'PY'
import os, subprocess, sys
from errcheck import outcomes
path, how = sys.argv[1], sys.argv[2]
data = os.urandom(3 << 20)  # incompressible, more than the store has left
w = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
try:
    os.pwrite(w, data, 0)
except OSError as e:  # refused at once: reported, nothing to test
    print("write", e.strerror)
    sys.exit(0)
if how == "exec":
    subprocess.run(["true"], check=True)  # its copy of w closes at exec: a FLUSH
else:
    try:
        os.close(os.dup(w))
    except OSError:
        pass  # that close may report it too; the writer's own must as well
print(outcomes((("fsync", lambda: os.fsync(w)), ("close", lambda: os.close(w)))))
PY
)
        note "$opts, the other copy closed by $how: $out"
        [[ $out == write* || $out == "fsync No space left on device"* ]] ||
            fail "$opts, $how: the writer's fsync did not report the lost write: $out"
        rm -f "$mnt/f" "$fs/filler"
    done
    cbfs_umount "$mnt"
done
pass

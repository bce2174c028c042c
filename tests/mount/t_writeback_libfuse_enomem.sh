#!/usr/bin/env bash
# A page the kernel writes back that libfuse itself answers with an error (no memory for
# the request: "fuse: failed to allocate request", before any op of the daemon sees it)
# is heard by the writer's close. The kernel keeps such an error for whichever descriptor
# of the file flushes first: a reader's close (which writes the writer's dirty pages
# back) took it, and the writer's close then returned 0 with its new bytes not stored;
# after a remount the block read its older, fsync'd version (helper-57, an
# allocation-failure injector). The daemon now counts an error reply to a writeback
# WRITE as it counts its own failed pages (channel.c, cbfs_chan_on_lost_write).
# tools/reqfail.c fails libfuse's callocs while a trigger file exists.
. "$(dirname "$0")/lib.sh"

cbfs_preload reqfail
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_expect_log_errors 'could not be stored|cannot|out of memory|lost'
export CBFS_REQFAIL_TRIGGER=$T/trigger
for codec in lz4 none; do
    LD_PRELOAD=$T/reqfail.so cbfs_mount "$store" "$mnt" codec=$codec
    out=$(python3 - "$mnt/f.$codec" "$T/trigger" "$T/want.$codec" <<'PY'
import os, sys, time
path, trig, want = sys.argv[1:4]
old = os.urandom(1 << 20)
w = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(w, old)
os.fsync(w)                       # acknowledged: 1 MiB
r = os.open(path, os.O_RDONLY)    # a reader of the file (a verifier, cat)
new = os.urandom(1 << 16)
os.pwrite(w, new, 65536)          # in the kernel's page cache only
open(trig, "w").close()           # libfuse has no memory for requests
try:
    os.close(r)                   # writes the page back: libfuse answers ENOMEM
    res = ["reader close ok"]
except OSError as e:
    res = ["reader close " + e.strerror]
os.unlink(trig)
try:
    os.close(w)
    res.append("writer close ok")
    open(want, "wb").write(old[:65536] + new + old[131072:])
except OSError as e:
    res.append("writer close " + e.strerror)
    open(want, "wb").write(b"")   # not acknowledged: old or new
print(", ".join(res))
PY
)
    note "$codec: $out"
    [[ $out == "reader close "* && $out != "reader close ok"* ]] ||
        fail "$codec: the writeback was not refused (no injection?): $out"
    cbfs_umount "$mnt"
    cbfs_mount "$store" "$mnt" codec=$codec
    drop_caches
    if [[ -s $T/want.$codec ]]; then
        same_file "$T/want.$codec" "$mnt/f.$codec"
    fi
    [[ $out == *"writer close ok" ]] && fail "$codec: the writer's close acknowledged a page libfuse refused: $out"
    cbfs_umount "$mnt"
done
pass

#!/usr/bin/env bash
# The kernel's own SETATTR of a file's mtime and ctime (writeback cache: after a rename,
# unlink, link, setxattr, fallocate or copy_file_range of a file, fuse_flush_time_update)
# through a handle open for writing, on a daemon out of descriptors, succeeds. The daemon
# opened the file's O_PATH descriptor again for it (evicted from its fd cache) and
# answered EMFILE; the kernel takes any such failure as a writeback error of the file
# (mapping_set_error: AS_EIO), and the next close of any of its descriptors returned EIO
# (t_stress_mixed under an fd limit of 64, helper-65). The handle's own descriptor (a
# plain file's, the engine's data file of a compressed one) needs no new one, nor does a
# compressed file open only for reading (no handle in the SETATTR; the engine's); so does
# putting a compressed file's times back after its flush or fsync (EMFILE from fsync and
# close before). tools/openfail.c fails the reopen with EMFILE once the descriptor has left
# the fd cache. A compressed file open for writing and for reading, a plain one for
# writing (a plain file open only for reading is left: the SETATTR names no descriptor).
. "$(dirname "$0")/lib.sh"

cbfs_preload openfail
store=$T/store mnt=$T/mnt
export CBFS_OPENFAIL_NAME=/b2 CBFS_OPENFAIL_TRIGGER=$T/trigger
for v in codec=lz4:O_RDWR codec=lz4:O_RDONLY codec=none:O_RDWR; do
    opts=${v%:*} mode=${v#*:}
    rm -rf "$store" "$T/trigger"
    mkdir -p "$store"
    # 64 descriptors: the fd cache keeps 16 idle (cbfs_fdcache_default_cap)
    CBFS_DAEMON_NOFILE=64 LD_PRELOAD=$T/openfail.so cbfs_mount "$store" "$mnt" "$opts"
    out=$(python3 - "$mnt" "$T/trigger" "$mode" <<'PY'
import errno, os, sys
mnt, trig, mode = sys.argv[1:4]
b = mnt + "/b"
with open(b, "wb") as f:
    f.write(os.urandom(100000))
# open for writing, the kernel's SETATTR carries this handle; else none (a compressed
# file's engine has the data file open all the same)
fd = os.open(b, getattr(os, mode))
for i in range(40):  # their descriptors push b's out of the daemon's fd cache
    with open("%s/x%d" % (mnt, i), "wb") as f:
        f.write(b"x" * 1000)
for i in range(40):
    os.stat("%s/x%d" % (mnt, i))
open(trig, "w").close()
said = []
def call(name, fn):
    try:
        fn()
        said.append(name + " done")
    except OSError as e:
        said.append(name + " " + errno.errorcode[e.errno])
# then the kernel sets b2's times in a SETATTR
call("rename", lambda: os.rename(b, mnt + "/b2"))
# a compressed file's times go back after the engine's writes (the flush's settle)
call("fsync", lambda: os.fsync(fd))
os.unlink(trig)  # the last close puts them back through the O_PATH fd, reopened
call("close", lambda: os.close(fd))
print(", ".join(said))
PY
)
    note "$opts, $mode: $out"
    [[ $out == "rename done, fsync done, close done" ]] || fail "$opts, $mode: $out"
    rm -f "$mnt"/x* "$mnt/b2"
    cbfs_umount "$mnt"
done
pass

#!/usr/bin/env bash
# The kernel's own SETATTR of a file's mtime and ctime after a setxattr, removexattr or
# link of a file nobody has open (writeback cache: fuse_update_ctime ->
# fuse_flush_time_update) succeeds on a daemon out of descriptors. The daemon let the
# file's O_PATH descriptors go between the change and that SETATTR, could not open them
# again and answered EMFILE; the kernel takes that as a writeback error of the file
# (AS_EIO), and the next close of a descriptor of it returned EIO (t_stress_mixed's
# nofile:drop: variant, helper-71's kernel trace). Now the change takes what the SETATTR
# needs first and holds it for it (src/fuse/flushhold.h).
# How: the fd cache keeps the fds of removed files the kernel still holds, at most its
# size (16 under an fd limit of 64), and they take the room of idle ones: with that full,
# every fd the daemon stops using is closed at once. tools/openfail.c then lets as many
# reopens of b2's data file and sidecar through as the change needs (2; the link of the
# daemon before this made 4, its stat the last two, which a failure there would hide) and
# fails the rest with EMFILE; a getxattr with none let through first proves b2's fds are
# out of the cache. Reached through an O_PATH descriptor (/proc/self/fd), or by a name
# the kernel keeps for a minute (attr_timeout), b2 needs no lookup meanwhile.
. "$(dirname "$0")/lib.sh"

cbfs_preload openfail
store=$T/store mnt=$T/mnt
mkdir -p "$store"
export CBFS_OPENFAIL_NAME=b2 CBFS_OPENFAIL_TRIGGER=$T/trigger
CBFS_DAEMON_NOFILE=64 LD_PRELOAD=$T/openfail.so cbfs_mount "$store" "$mnt" codec=lz4,attr_timeout=60
out=$(python3 - "$mnt" "$T/trigger" <<'PY'
import errno, os, sys
mnt, trig = sys.argv[1:3]
b = mnt + "/b2"
with open(b, "wb") as f:
    f.write(os.urandom(100000))
o = os.open(b, os.O_PATH)
via = "/proc/self/fd/%d" % o
held = []
for i in range(12):  # removed while held: their fds fill the cache's room (2 each)
    k = "%s/k%d" % (mnt, i)
    with open(k, "wb") as f:
        f.write(b"k" * 1000)
    held.append(os.open(k, os.O_PATH))
    os.unlink(k)
said = []
def let(n):
    with open(trig, "w") as t:
        t.write("%d\n" % n)
def call(name, fn, n):
    let(0)
    try:  # b2's O_PATH fd is not in the fd cache: its reopen is refused
        os.getxattr(via, "user.none")
        said.append(name + ": b2 still cached")
    except OSError as e:
        if e.errno != errno.EMFILE:
            said.append(name + ": b2 getxattr " + errno.errorcode[e.errno])
    let(n)
    try:
        fn()
        said.append(name + " done")
    except OSError as e:
        said.append(name + " " + errno.errorcode[e.errno])
    os.unlink(trig)
    try:  # the close that hears a writeback error of b2
        os.close(os.open(via, os.O_RDONLY))
    except OSError as e:
        said.append("close after " + name + " " + errno.errorcode[e.errno])
call("setxattr", lambda: os.setxattr(via, "user.t", b"1"), 2)
call("removexattr", lambda: os.removexattr(via, "user.t"), 2)
call("link", lambda: os.link(b, mnt + "/lb2"), 4)  # a reopen may name either
print(", ".join(said))
PY
)
note "$out"
check_eq "setxattr done, removexattr done, link done" "$out" "the changes and the closes after them"
cbfs_umount "$mnt"
pass

#!/usr/bin/env bash
# A chmod, chown or utimes by path of a compressed file nobody has open, on a daemon that
# cannot open the file's sidecar (out of descriptors): either the change is made and
# answered as done, or it is refused and nothing changes. The reply's stat wants the
# sidecar, so the daemon made the change and then answered EMFILE: the program was told
# its chmod failed, and the mode had changed (helper-51's model checker, twentieth
# session; a known limit until then). tools/openfail.c makes the sidecar's opens fail
# with EMFILE once its descriptor has left the daemon's fd cache. With and without the
# writeback cache.
. "$(dirname "$0")/lib.sh"

cbfs_preload openfail
store=$T/store mnt=$T/mnt
export CBFS_OPENFAIL_NAME=/.cbfsidx/b CBFS_OPENFAIL_TRIGGER=$T/trigger
for opts in codec=lz4 codec=lz4,writeback_cache=off; do
    rm -rf "$store" "$T/trigger"
    mkdir -p "$store"
    # 64 descriptors: the fd cache keeps 16 idle (cbfs_fdcache_default_cap)
    CBFS_DAEMON_NOFILE=64 LD_PRELOAD=$T/openfail.so cbfs_mount "$store" "$mnt" "$opts"
    out=$(python3 - "$mnt" "$store" "$T/trigger" <<'PY'
import errno, os, sys, time
mnt, store, trig = sys.argv[1:4]
b = mnt + "/b"
with open(b, "wb") as f:
    f.write(os.urandom(300000))
for i in range(40):  # their descriptors push b's (its data file's and sidecar's) out
    with open("%s/x%d" % (mnt, i), "wb") as f:
        f.write(b"x" * 1000)
for i in range(40):
    os.stat("%s/x%d" % (mnt, i))
open(trig, "w").close()
changes = (("chmod", lambda: os.chmod(b, 0o600), lambda st: st.st_mode & 0o7777 == 0o600),
           ("chown", lambda: os.chown(b, 65534, 65534), lambda st: st.st_uid == 65534),
           ("utimes", lambda: os.utime(b, (1000000000, 1000000000)),
            lambda st: st.st_mtime == 1000000000))
said = []
for name, fn, _ in changes:
    try:
        fn()
        said.append("done")
    except OSError as e:
        said.append(errno.errorcode[e.errno])
os.unlink(trig)
time.sleep(1.5)  # attr_timeout: the kernel asks the daemon again
res, refused = [], 0
for (name, _, made), told in zip(changes, said):
    in_store, in_mount = made(os.lstat(store + "/b")), made(os.stat(b))
    refused += told != "done"
    ok = in_store == in_mount == (told == "done")
    res.append("%s %s, %s%s" % (name, told, "made" if in_store else "not made",
                                "" if ok else " MISMATCH"))
print("; ".join(res) if refused else "SETUP: no change was refused (the sidecar's open did not fail)")
PY
)
    note "$opts: $out"
    [[ $out == SETUP* ]] && fail "$opts: $out"
    [[ $out == *MISMATCH* ]] && fail "$opts: a change was made and answered as failed, or the reverse: $out"
    rm -f "$mnt"/x* "$mnt/b"
    cbfs_umount "$mnt"
done
pass

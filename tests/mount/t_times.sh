#!/usr/bin/env bash
# Times that backup tools set survive the data they just wrote: cp -p, rsync -a and a
# program that writes, sets the mtime on the open file (futimens) and only then closes
# must leave exactly that mtime, through the mount and after a remount, for compressed
# and plain files, with and without the writeback cache. (With the writeback cache the
# kernel may still hold dirty pages when it sends the times; the daemon puts them back
# after the engine's last write: src/fuse/inode.c cbfs_inode_record_times.)
. "$(dirname "$0")/lib.sh"

src=$T/src
python3 "$CBFS_TOOLS/gendata.py" csv 3M "$src" 61
head -c 12345 "$src" >>"$src" # a partial last block: written by the flush at close
touch -d '2020-01-02 03:04:05.123456789' "$src"
want=$(stat -c %Y.%y "$src")
for opts in codec=lz4 codec=lz4,writeback_cache=off codec=none codec=none,writeback_cache=off; do
    store=$T/s.${opts//[=,]/_} mnt=$T/m.${opts//[=,]/_}
    mkdir -p "$store"
    cbfs_mount "$store" "$mnt" "$opts"
    cp -p "$src" "$mnt/cp"
    rsync -a "$src" "$mnt/rsync"
    python3 - "$src" "$mnt/futimens" <<'PY'
import os, sys
data = open(sys.argv[1], "rb").read()
st = os.stat(sys.argv[1])
fd = os.open(sys.argv[2], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(fd, data)
os.utime(fd, ns=(st.st_atime_ns, st.st_mtime_ns))  # before close: data may still be pending
os.close(fd)
PY
    for f in cp rsync futimens; do
        check_eq "$want" "$(stat -c %Y.%y "$mnt/$f")" "$opts: mtime of $f through the mount"
    done
    cbfs_umount "$mnt"
    cbfs_mount "$store" "$mnt" "$opts"
    for f in cp rsync futimens; do
        check_eq "$want" "$(stat -c %Y.%y "$mnt/$f")" "$opts: mtime of $f after a remount"
        same_file "$src" "$mnt/$f"
    done
    cbfs_umount "$mnt"
done
pass

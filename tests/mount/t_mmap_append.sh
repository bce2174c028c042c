#!/usr/bin/env bash
# A shared mapping's pages belong where they are mapped, also when the kernel
# writes them back through an O_APPEND handle: without the writeback cache
# the daemon honours O_APPEND itself, and it put such a page at the end of
# the file (a compressed file: the engine's append; a plain one: the store
# fd's O_APPEND). Two cases, as ext4 answers them: the mapping made through
# an O_APPEND fd; and one handle mapping and writing the file while another
# process holds it open O_APPEND with a mapping of its own (the kernel picks
# either handle for the write-back). Compressed and plain (codec=none) files,
# checked after a remount.
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt ref=$T/ref
mkdir -p "$store" "$ref"
run() { # DIR: both cases in DIR
    python3 - "$1" <<'PY'
import mmap, os, sys
d = sys.argv[1]
# one handle: opened O_APPEND, written, mapped, stored into, synced
fd = os.open(d + "/one", os.O_RDWR | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o644)
os.write(fd, b"a" * 8192)
m = mmap.mmap(fd, 8192)
m[0:10] = b"X" * 10
m.flush()
m.close()
os.close(fd)
# two handles: A maps and writes at 4096; B holds an O_APPEND mapping too
a = os.open(d + "/two", os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(a, b"b" * 8192)
b = os.open(d + "/two", os.O_RDWR | os.O_APPEND)
mb = mmap.mmap(b, 8192)
ma = mmap.mmap(a, 8192)
ma[4096:4100] = b"YYYY"
ma.flush()
ma.close()
mb.close()
os.close(b)
os.close(a)
PY
}
run "$ref"
cbfs_mount "$store" "$mnt" codec=lz4,writeback_cache=off
mkdir "$mnt/plain"
check setfattr -n user.cbfs.codec -v none "$mnt/plain"
run "$mnt"
run "$mnt/plain"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt" codec=lz4,writeback_cache=off
drop_caches
for f in one two; do
    same_file "$ref/$f" "$mnt/$f"
    same_file "$ref/$f" "$mnt/plain/$f"
done
[[ -f $store/.cbfsidx/one && ! -e $store/plain/.cbfsidx/one ]] || fail "not one compressed and one plain file"
cbfs_umount "$mnt"
pass

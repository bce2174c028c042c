#!/usr/bin/env bash
# Another filesystem inside the store: here btrfs subvolumes and a snapshot of one, as
# snapper or a subvolume per day makes them on a btrfs backup volume. Every object of
# the mount has the mount's st_dev, and each subvolume numbers its inodes anew (a
# snapshot's files have their originals' numbers), so the mount showed two different
# files as one (st_dev, st_ino): tar stored the snapshot's file as a hard link of the
# original and restored the original's bytes for it (exit 0), find and du skipped the
# subvolumes as file-system loops, cp -a left one out. Such objects now show a number
# made of their file system's place among those met and their own number there
# (cbfs_inode_st_ino), in stat and in readdir. Also: a second daemon's refusal names the
# first one's pid on a subvolume.
. "$(dirname "$0")/lib.sh"
img=$T/btrfs.img fs=$T/fs mnt=$T/mnt
mkdir -p "$fs" "$mnt"
truncate -s 256M "$img"
mkfs.btrfs -q -f "$img" >"$T/mkfs.out" 2>&1 || fail "mkfs.btrfs: $(cat "$T/mkfs.out")"
mount -o loop "$img" "$fs" || fail "cannot mount a loop btrfs (needs root and btrfs in the kernel)"
store=$fs/store
btrfs -q subvolume create "$store" || fail "cannot create a subvolume"
python3 "$CBFS_TOOLS/gendata.py" csv 700K "$T/monday" 61
python3 "$CBFS_TOOLS/gendata.py" csv 700K "$T/tuesday" 62
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
btrfs -q subvolume create "$store/sub"
cp "$T/monday" "$mnt/sub/full.bkp"
ln "$mnt/sub/full.bkp" "$mnt/sub/full.link" # nlink 2: tar's hard-link table
btrfs -q subvolume snapshot "$store/sub" "$store/snap"
cp "$T/tuesday" "$mnt/snap/full.bkp"
sync
[[ $(stat -c %i "$store/sub/full.bkp") == $(stat -c %i "$store/snap/full.bkp") ]] ||
    fail "setup: the snapshot's file does not share its original's inode number in the store"
ids=$(stat -c %i "$mnt" "$mnt/sub" "$mnt/snap" "$mnt/sub/full.bkp" "$mnt/snap/full.bkp")
check_eq 5 "$(sort -u <<<"$ids" | wc -l)" "distinct inode numbers of 5 objects through the mount ($(tr '\n' ' ' <<<"$ids"))"
check_eq "$(stat -c %i "$mnt/sub/full.bkp")" "$(stat -c %i "$mnt/sub/full.link")" "a hard link's inode number"
# the numbers stay when the kernel forgets the inodes (they were the addresses of the
# daemon's inode structs, which the next lookups got again: tar again took one file
# for a link of another), for every name of a file; readdir's d_ino agrees with stat
# past readdirplus's first buffer (300 files in the snapshot), "." and ".." included
for i in $(seq 300); do : >"$mnt/snap/e$i"; done
before=$(stat -c '%n %i' "$mnt/sub/full.bkp" "$mnt/snap/full.bkp" "$mnt/snap/e7")
for round in 1 2 3; do
    drop_caches
    stat -c %i "$mnt/snap/e$((round * 50))" >/dev/null # lookups that may take a freed struct
    check_eq "$before" "$(stat -c '%n %i' "$mnt/sub/full.bkp" "$mnt/snap/full.bkp" "$mnt/snap/e7")" \
        "inode numbers after the kernel forgot them (round $round)"
    check_eq "$(stat -c %i "$mnt/sub/full.bkp")" "$(stat -c %i "$mnt/sub/full.link")" \
        "a hard link's inode number after the kernel forgot it (round $round)"
done
python3 - "$mnt/snap" <<'PY' || fail "readdir's d_ino against stat in the snapshot"
import ctypes, os, struct, sys
d = sys.argv[1]
def dents(path):  # getdents64 itself: scandir leaves out "." and ".."
    libc = ctypes.CDLL(None, use_errno=True)
    fd, out, buf = os.open(path, os.O_RDONLY | os.O_DIRECTORY), {}, ctypes.create_string_buffer(1 << 16)
    while True:
        n = libc.syscall(217, fd, buf, len(buf))  # SYS_getdents64 on x86-64
        if n <= 0:
            break
        pos = 0
        while pos < n:
            ino, _, reclen = struct.unpack_from("QqH", buf.raw, pos)
            out[buf.raw[pos + 19:pos + reclen].split(b"\0")[0].decode()] = ino
            pos += reclen
    os.close(fd)
    return out
got = dents(d)
want = {name: os.lstat(os.path.join(d, name)).st_ino for name in got}
bad = [(name, got[name], want[name]) for name in got if got[name] != want[name]]
if bad or "." not in got or ".." not in got:
    sys.exit("%d of the %d entries: %s" % (len(bad), len(got), bad[:3]))
PY
check_eq 304 "$(find "$mnt" -type f 2>"$T/find.err" | wc -l)" "files find sees ($(head -n 1 "$T/find.err"))"
mkdir "$T/restore"
tar -C "$mnt" -cf - . | tar -C "$T/restore" -xf - || fail "tar through the mount"
cmp "$T/restore/snap/full.bkp" "$T/tuesday" || fail "tar restored another file's bytes for snap/full.bkp"
cmp "$T/restore/sub/full.bkp" "$T/monday" || fail "tar restored sub/full.bkp wrong"
cmp "$T/restore/snap/full.link" "$T/tuesday" || fail "tar restored snap/full.link (a link of snap/full.bkp) wrong"
# A second daemon, with .cbfs/ moved away, is refused by the root's flock and names the
# first one's pid from /proc/locks, which gives btrfs's device where stat gives the
# subvolume's: it said "an unknown process" (helper-45).
mv "$store/.cbfs" "$store/.cbfs-moved"
mkdir -p "$T/mnt2"
rc=0; timeout 20 "$CBFS_MOUNT_BIN" -f "$store" "$T/mnt2" </dev/null >"$T/second.out" 2>&1 || rc=$?
mv "$store/.cbfs-moved" "$store/.cbfs"
if grep -qF " $T/mnt2 fuse" /proc/mounts; then
    fusermount3 -u "$T/mnt2"
    fail "a second daemon mounted the store"
fi
((rc != 0 && rc != 124)) || fail "second daemon: exit status $rc"
grep -q 'in use by a cbfs daemon (pid [0-9]*)' "$T/second.out" ||
    fail "the refusal does not name the daemon: $(cat "$T/second.out")"
cbfs_umount "$mnt"
umount "$fs" || fail "cannot unmount the btrfs store"
pass

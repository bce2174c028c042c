#!/usr/bin/env bash
# Resource limits are input too. 2000 compressed files (multi-block, many
# directories) are written, then served by a daemon whose soft and hard fd
# limit is 256 while the kernel keeps every inode cached: every size that stat
# shows and every byte read must be right, `ls -lR` must work, writes into the
# files must land, the daemon must hold a bounded number of fds and exit 0
# with a clean log. (Before the fd cache, 131 of 200 files read back raw frame
# bytes at a limit of 150: a failed open was taken for "not compressed".)
. "$(dirname "$0")/lib.sh"

N=2000 LIMIT=256
store=$T/store mnt=$T/mnt src=$T/src
mkdir -p "$store" "$src"
python3 - "$src" "$N" <<'PY'
import os, random, sys
d, n = sys.argv[1], int(sys.argv[2])
for i in range(n):
    sub = os.path.join(d, f"d{i % 20:02d}")
    os.makedirs(sub, exist_ok=True)
    size = (i * 7919) % (200 << 10) + (i % 3)  # 0 .. 200 KiB: up to 4 blocks of 64K
    rnd = random.Random(i)
    line = f"{i:05d} ".encode() + bytes(rnd.choice(b"abcdefgh ") for _ in range(50)) + b"\n"
    with open(os.path.join(sub, f"f{i:05d}.dat"), "wb") as f:
        f.write((line * (size // len(line) + 1))[:size])
PY

cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
cp -r "$src/." "$mnt/"
cbfs_umount "$mnt"
nidx=$(find "$store" -path '*/.cbfsidx/*' -type f | wc -l)
check_eq "$N" "$nidx" "sidecars in the store"

drop_caches
CBFS_DAEMON_NOFILE=$LIMIT cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
pid=${CBFS_PID[$mnt]}
check_eq "$LIMIT" "$(awk '/Max open files/ {print $4}' "/proc/$pid/limits")" "daemon soft fd limit"

# every size as stat shows it (all 2000 inodes stay cached in the kernel from here)
ls -lR "$mnt" >"$T/ls.out" 2>"$T/ls.err" || fail "ls -lR: $(head -c 300 "$T/ls.err")"
(cd "$src" && find . -type f -printf '%p %s\n' | LC_ALL=C sort) >"$T/sizes.exp"
(cd "$mnt" && find . -type f -printf '%p %s\n' | LC_ALL=C sort) >"$T/sizes.act" ||
    fail "find over the mount failed"
diff -q "$T/sizes.exp" "$T/sizes.act" >/dev/null ||
    fail "stat sizes differ: $(diff "$T/sizes.exp" "$T/sizes.act" | head -n 4 | tr '\n' '|')"
# every byte
same_tree "$src" "$mnt"
nfd=$(ls "/proc/$pid/fd" | wc -l)
note "daemon holds $nfd fds with $N files cached (limit $LIMIT)"
((nfd <= LIMIT / 4 + 32)) || fail "daemon holds $nfd fds: not bounded by its fd cache"

# writes into files the daemon reaches again by handle: append to and
# overwrite the middle of every 7th file, through the mount and in the source
python3 - "$src" "$mnt" "$N" <<'PY'
import os, sys
src, mnt, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
for i in range(0, n, 7):
    rel = os.path.join(f"d{i % 20:02d}", f"f{i:05d}.dat")
    for root in (src, mnt):
        with open(os.path.join(root, rel), "r+b") as f:
            size = f.seek(0, 2)
            f.write(f"appended {i}\n".encode() * 50)
            f.seek(size // 2)
            f.write(b"MIDDLE" * 100)
PY
cbfs_umount "$mnt"
drop_caches
CBFS_DAEMON_NOFILE=$LIMIT cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
same_tree "$src" "$mnt"
pass "$N files, fd limit $LIMIT, $nfd fds held"

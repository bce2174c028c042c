#!/usr/bin/env bash
# A compressed file's page that the kernel writes back and the engine refuses (here a
# partial rewrite of a block whose stored frame cannot be read: a bad sector under it,
# tools/shortio.c) must reach the writer at its close, whatever another descriptor did
# first. The refusal in the WRITE's reply stayed with the kernel, for whichever
# descriptor asked first: a reader's fsync took it and the writer's close returned 0,
# its bytes never stored. The FUSE layer counts it in the file (cbfs_file_count_lost_write)
# and every handle hears it once, as t_plain_writeback_error checks for plain files
# (helper-30 met it on a broken file; the review moved the fix to the boundary).
. "$(dirname "$0")/lib.sh"

cbfs_preload shortio
store=$T/store mnt=$T/mnt
mkdir -p "$store"
store=$(realpath "$store")
head -c $((1 << 20)) /dev/urandom >"$T/src"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
cp "$T/src" "$mnt/f"
cbfs_umount "$mnt"
read -r _ off _ < <(python3 "$CBFS_TOOLS/frames.py" "$store/f" | awk '$3 == 2')
[[ -n $off ]] || fail "no frame of block 2 in the store"

cbfs_expect_log_errors 'input/output error|unreadable|could not be read'
CBFS_SHORTIO_DIR=$store CBFS_SHORTIO_BAD=$((off + 100)) LD_PRELOAD=$T/shortio.so \
    cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
python3 - "$mnt/f" <<'PY' >"$T/out" 2>&1 || fail "$(cat "$T/out")"
import errno, os, sys
p = sys.argv[1]
a = os.open(p, os.O_WRONLY)
b = os.open(p, os.O_RDONLY)
os.pwrite(a, b"y" * 4096, 2 * 65536 + 4096)  # a whole page: into the page cache, no read


def outcome(call, fd):
    try:
        call(fd)
        return "0"
    except OSError as e:
        return errno.errorcode[e.errno]


said, got = outcome(os.fsync, b), outcome(os.close, a)
os.close(b)
print(f"the reader's fsync got {said}, the writer's close {got}")
sys.exit(0 if got != "0" else 1)
PY
note "$(cat "$T/out")"
cbfs_umount "$mnt"
pass

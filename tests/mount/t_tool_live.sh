#!/usr/bin/env bash
# The tools on a store that a backup is writing through its mount (a cron job's
# `cbfs verify`, a restore test's `cbfs cat`): a block the daemon rewrote (its old
# frame punched once the new record is down) or a partial block an fsync stored and
# the next write replaced must not be called damage, and cat prints the file's bytes.
# The tools look again at a file that changed under them (tool_file_changed) before
# they report. Before, verify and cat said "corrupt data: checksum mismatch" (exit 1)
# for healthy files, several times a run. A damaged file beside them is still found.
. "$(dirname "$0")/lib.sh"
cbfs_tool

store=$T/store mnt=$T/mnt
mkdir -p "$store"
python3 "$CBFS_TOOLS/gendata.py" mixed 24M "$T/src" 71
python3 "$CBFS_TOOLS/gendata.py" csv 1M "$T/bad.csv" 72
cbfs_mount "$store" "$mnt" codec=zstd:1,block_size=64K
cp "$T/src" "$mnt/db.bkp"
cp "$T/bad.csv" "$mnt/bad.csv"
cbfs_umount "$mnt"
# one payload byte of bad.csv's block 2 flipped: real damage
read -r _ off _ _ _ _ plen < <(python3 "$CBFS_TOOLS/frames.py" "$store/bad.csv" | awk '$3 == 2')
python3 - "$store/bad.csv" $((off + 64 + plen / 2)) <<'PY'
import os, sys
fd = os.open(sys.argv[1], os.O_RDWR); pos = int(sys.argv[2])
b = os.pread(fd, 1, pos); os.pwrite(fd, bytes([b[0] ^ 0xFF]), pos); os.close(fd)
PY

cbfs_mount "$store" "$mnt"
# writers: db.bkp rewritten in place, and a new file appended, fsync'd every
# 1000000 bytes (not a block multiple: each fsync stores a partial block)
touch "$T/run"
(while [[ -e $T/run ]]; do
    dd if="$T/src" of="$mnt/db.bkp" bs=1000000 conv=notrunc,fsync status=none
done) &
rw=$!
python3 - "$mnt/new.bkp" "$T/src" "$T/run" <<'PY' &
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
src = open(sys.argv[2], "rb").read()
while os.path.exists(sys.argv[3]):
    for i in range(0, len(src), 1000000):
        os.write(fd, src[i:i + 1000000])
        os.fsync(fd)
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
os.close(fd)
PY
aw=$!
end=$((SECONDS + 10)) rounds=0 bad=
while ((SECONDS < end)); do
    rounds=$((rounds + 1))
    rc=0; "$CBFS" verify "$store" >"$T/v.out" 2>&1 || rc=$?
    grep -v '^verified' "$T/v.out" | grep -v "^$store/bad.csv: offset [0-9]*: block 2 " >"$T/v.other" || true
    [[ $rc == 1 && -s $T/v.other ]] && bad+="verify: $(head -n 2 "$T/v.other" | tr '\n' '|') "
    grep -q "^$store/bad.csv: offset [0-9]*: block 2 " "$T/v.out" || bad+="verify missed bad.csv's damage (rc $rc) "
    rc=0; "$CBFS" cat "$store/db.bkp" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
    [[ $rc == 0 ]] || bad+="cat (rc $rc): $(head -n 1 "$T/cat.err") "
    cmp -s "$T/cat.out" "$T/src" || bad+="cat printed other bytes "
    [[ -z $bad ]] || break
done
rm -f "$T/run"
wait "$rw" "$aw"
cbfs_umount "$mnt"
[[ -z $bad ]] || fail "round $rounds: $bad"
note "$rounds rounds of verify and cat while two writers ran"
pass

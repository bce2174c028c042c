#!/usr/bin/env bash
# A block far out in a file needs the engine's block table up to it: at the far end of the
# largest file (CBFS_MAX_BLOCKS blocks) 2.5 GiB. Where the daemon cannot have that memory (an
# address-space limit set on it here) the write must be reported failed at fsync; the block
# was stored without its table entry and fsync said success, the block then read as zeros,
# and a rewrite of part of it stored those zeros over the data.
. "$(dirname "$0")/lib.sh"

if ldd "$CBFS_MOUNT_BIN" | grep -q 'lib[at]san'; then
    note "skipped: a sanitizer's shadow memory does not fit under an address-space limit"
    pass
fi
cbfs_expect_log_errors 'out of memory'
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=256K
pid=${CBFS_PID[$mnt]}
vsz_kib=$(awk '/^VmSize:/ {print $2}' "/proc/$pid/status")
prlimit --pid "$pid" --as=$(((vsz_kib + 1024 * 1024) * 1024)) || fail "prlimit --as on the daemon"
head -c 4096 /dev/zero | tr '\0' Z >"$T/z"
last=$(((1 << 26) - 1)) # the last block a file may have (CBFS_MAX_BLOCKS - 1)
if dd if="$T/z" of="$mnt/far" bs=4K seek=$((last * 64)) conv=fsync,notrunc status=none \
    2>"$T/dd.err"; then
    fail "fsync succeeded for a block the daemon had no table memory for; it reads back as" \
        "'$(tail -c 16 "$mnt/far" | od -An -c | tr -s ' ')'"
fi
grep -q 'Cannot allocate memory' "$T/dd.err" || fail "dd: $(cat "$T/dd.err")"
note "dd: $(tr '\n' ' ' <"$T/dd.err")"
# a block near the start still works under the same limit
dd if="$T/z" of="$mnt/near" bs=4K seek=1 conv=fsync status=none || fail "a near block failed"
cmp -s -i 4096:0 "$mnt/near" "$T/z" || fail "the near block reads back wrong"
cbfs_umount "$mnt"
pass

#!/usr/bin/env bash
# The escape hatch: a sequentially written zstd (lz4) data file in the STORE is
# decoded by stock `zstd -d` (`lz4 -d`) to the original bytes, zero and random runs included.
. "$(dirname "$0")/lib.sh"

python3 "$CBFS_TOOLS/gendata.py" mixed $((5 * 1024 * 1024 + 999)) "$T/src.bin" 61
want=$(sha "$T/src.bin")
for codec in zstd lz4; do
    for bs in 64K 1M; do
        store=$T/store-$codec-$bs
        mkdir -p "$store"
        cbfs_mount "$store" "$T/mnt" codec=$codec,block_size=$bs
        dd if="$T/src.bin" of="$T/mnt/f.bin" bs=1M status=none
        cbfs_umount "$T/mnt"
        got=$("$codec" -d -c <"$store/f.bin" 2>"$T/dec.err" | sha256sum | cut -c1-64)
        [[ -s $T/dec.err ]] && fail "$codec -d on $store/f.bin: $(head -c 300 "$T/dec.err")"
        check_eq "$want" "$got" "stock $codec -d of the data file (block_size=$bs)"
    done
done
# A writer that seeks past blocks it never writes leaves the stream a gap
# that never comes: the reorder window gives up (once), counts it and says
# so in the log (info); the data still reads back right.
store=$T/store-gap
mkdir -p "$store"
cbfs_mount "$store" "$T/mnt" codec=zstd,block_size=64K,writeback_cache=off
for out in "$T/gap.bin" "$T/mnt/gap.bin"; do # blocks 0-3, then 16-79 of 64K
    dd if="$T/src.bin" of="$out" bs=256K count=1 status=none
    dd if="$T/src.bin" of="$out" bs=256K skip=4 seek=4 count=16 conv=notrunc status=none
done
gaps=$(getfattr --absolute-names --only-values -n user.cbfs.stats "$T/mnt" | sed -n 's/^stream_gaps=//p')
((gaps >= 1)) || fail "stream_gaps is '$gaps' after a write that skipped 768 KiB"
check_eq "$(sha "$T/gap.bin")" "$(sha "$T/mnt/gap.bin")" "the sparse file reads back"
cbfs_umount "$T/mnt"
pass

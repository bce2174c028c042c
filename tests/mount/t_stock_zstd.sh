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
pass

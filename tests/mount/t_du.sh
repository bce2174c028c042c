#!/usr/bin/env bash
# du tells the truth: a compressible 64 MB file's `du -k` (physical) is much smaller
# than `du --apparent-size -k` (logical), which equals the bytes written, as does st_size.
. "$(dirname "$0")/lib.sh"

python3 "$CBFS_TOOLS/gendata.py" csv 64M "$T/big.csv" 51
store=$T/store mnt=$T/mnt
mkdir -p "$store"
check_sizes() { # WHEN
    local app phys sz
    sz=$(stat -c %s "$mnt/big.csv")
    app=$(du --apparent-size -k "$mnt/big.csv" | cut -f1)
    phys=$(du -k "$mnt/big.csv" | cut -f1)
    check_eq 67108864 "$sz" "$1: stat -c %s"
    check_eq 65536 "$app" "$1: du --apparent-size -k"
    ((phys > 0)) || fail "$1: du -k is 0 (st_blocks not reported)"
    ((phys * 3 < app)) || fail "$1: du -k $phys is not much smaller than the apparent $app KiB"
    note "$1: du -k $phys KiB, apparent $app KiB"
}
cbfs_mount "$store" "$mnt" codec=zstd
dd if="$T/big.csv" of="$mnt/big.csv" bs=1M conv=fsync status=none
check_sizes "after close"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt" codec=zstd
check_sizes "after remount"
# the store really is smaller
storek=$(du -kc "$store/big.csv" "$store/.cbfsidx/big.csv" | tail -n1 | cut -f1)
((storek * 3 < 65536)) || fail "store uses $storek KiB for 64 MiB of CSV"
cbfs_umount "$mnt"
pass

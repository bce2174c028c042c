#!/usr/bin/env bash
# Every codec round-trips multi-block files written the ways backup tools write:
# dd bs=1M, dd bs=8K, cp, tar -x of a tree, and 1-byte writes; compared after a remount.
# Block size 64K (many blocks from little data), then the default (256K).
. "$(dirname "$0")/lib.sh"

src=$T/src
mkdir -p "$src"
python3 "$CBFS_TOOLS/gendata.py" mixed $((3 * 1024 * 1024 + 12345)) "$src/mixed.bin" 11
# for the default block size: its zero run (30%) holds whole all-zero blocks
python3 "$CBFS_TOOLS/gendata.py" mixed $((7 * 1024 * 1024 + 777)) "$src/big.bin" 13
python3 "$CBFS_TOOLS/gendata.py" csv 100K "$src/small.csv" 12
# a small real tree: some package docs (text, gz, symlinks), ~3 MB
docs=$(ls /usr/share/doc | sort | sed -n 1,40p)  # sed, not head: no SIGPIPE under pipefail
# shellcheck disable=SC2086
tar -cf "$src/tree.tar" -C /usr/share/doc $docs
mkdir -p "$src/tree" && tar -xf "$src/tree.tar" -C "$src/tree"

write_all() { # MNT
    local m=$1
    dd if="$src/mixed.bin" of="$m/dd1m.bin" bs=1M status=none
    dd if="$src/mixed.bin" of="$m/dd8k.bin" bs=8K status=none
    cp "$src/mixed.bin" "$m/cp.bin"
    mkdir "$m/tree" && tar -xf "$src/tree.tar" -C "$m/tree"
    python3 "$CBFS_TOOLS/bytewriter.py" "$src/small.csv" "$m/bytes.csv"
}

verify_all() { # MNT
    local m=$1 f
    for f in dd1m.bin dd8k.bin cp.bin; do same_file "$src/mixed.bin" "$m/$f"; done
    check_eq "$(stat -c %s "$src/mixed.bin")" "$(stat -c %s "$m/dd1m.bin")" "logical size"
    same_file "$src/small.csv" "$m/bytes.csv"
    same_tree "$src/tree" "$m/tree"
}

for codec in $(cbfs_codecs none); do
    for bs in 64K default; do
        SECONDS=0
        store=$T/store-$codec-$bs mnt=$T/mnt
        mkdir -p "$store"
        opts=codec=$codec
        [[ $bs != default ]] && opts+=,block_size=$bs
        cbfs_mount "$store" "$mnt" "$opts"
        if [[ $bs == 64K ]]; then
            write_all "$mnt"
            verify_all "$mnt"   # from the page cache / the daemon's open state
        else
            dd if="$src/big.bin" of="$mnt/big.bin" bs=1M status=none
            cp "$src/mixed.bin" "$mnt/cp.bin"
        fi
        cbfs_umount "$mnt"
        drop_caches
        cbfs_mount "$store" "$mnt" "$opts"
        if [[ $bs == 64K ]]; then
            verify_all "$mnt"
        else
            same_file "$src/big.bin" "$mnt/big.bin"
            same_file "$src/mixed.bin" "$mnt/cp.bin"
        fi
        if [[ $codec != none ]]; then
            [[ -f $store/.cbfsidx/cp.bin ]] || fail "$codec: no sidecar for a compressed file"
        else
            [[ ! -e $store/.cbfsidx/cp.bin ]] || fail "codec=none wrote a sidecar"
            same_file "$src/mixed.bin" "$store/cp.bin"   # stored as a plain file
        fi
        cbfs_umount "$mnt"
        note "$codec block_size=$bs ok (${SECONDS}s)"
    done
done
pass

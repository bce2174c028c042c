#!/usr/bin/env bash
# O_APPEND from one handle while another extends/shrinks, O_TRUNC on open (also while
# another handle has unflushed data), O_DIRECT writes and reads mixed with buffered I/O
# (tools/posix_open.py, against the same steps on ext4), and dd oflag=direct/iflag=direct;
# everything compared again after a remount; O_TRUNC of a running program (ETXTBSY, the
# file untouched); every codec, and zstd without the writeback cache.
. "$(dirname "$0")/lib.sh"

python3 "$CBFS_TOOLS/gendata.py" mixed 3M "$T/src.bin" 9
head -c 200K /dev/urandom >"$T/patch.bin"
for opts in $(cbfs_codec_variants); do
    cbfs_mount_fresh "$opts" block_size=64K
    ref=$T/ref-$tag
    mkdir -p "$ref"
    python3 "$CBFS_TOOLS/posix_open.py" "$mnt" "$ref" 65536 >"$T/out" 2>&1 ||
        fail "$tag: $(cat "$T/out")"
    # dd with O_DIRECT: write, read back cached, overwrite a range direct, both reads see it
    for d in "$mnt" "$ref"; do
        check dd if="$T/src.bin" of="$d/dd" bs=64K oflag=direct status=none
        check cat "$d/dd"  # fill the page cache with the old bytes
        check dd if="$T/patch.bin" of="$d/dd" bs=4K seek=100 oflag=direct conv=notrunc status=none
        check dd if="$d/dd" of="$d/dd.direct" bs=64K iflag=direct status=none
    done
    same_file "$ref/dd" "$mnt/dd"  # buffered read
    same_file "$ref/dd" "$mnt/dd.direct"  # what iflag=direct read
    same_file "$ref/dd" "$ref/dd.direct"
    cbfs_umount "$mnt"
    drop_caches
    cbfs_mount "$store" "$mnt"
    for f in append trunc direct dd; do same_file "$ref/$f" "$mnt/$f"; done
    check dd if="$mnt/dd" of="$T/dd.direct" bs=64K iflag=direct status=none
    same_file "$ref/dd" "$T/dd.direct"
    # O_RDONLY|O_TRUNC of a running program: ETXTBSY, and nothing else happens. The
    # kernel checks that only after the daemon's open, which emptied the file when it
    # took O_TRUNC itself (atomic O_TRUNC): the program died of SIGBUS (helper-9, pjdfstest)
    for d in "$mnt" "$ref"; do
        cp /bin/sleep "$d/slp"
        "$d/slp" 2 &
        spid=$!
        sleep 0.3
        python3 -c 'import errno, os, sys
try:
    os.open(sys.argv[1], os.O_RDONLY | os.O_TRUNC)
except OSError as e:
    sys.exit(0 if e.errno == errno.ETXTBSY else f"{e}")
sys.exit("opened")' "$d/slp" || fail "$tag: O_RDONLY|O_TRUNC of a running program in $d"
        wait "$spid" || fail "$tag: the program in $d died (status $?) of an O_TRUNC open that failed"
    done
    same_file /bin/sleep "$mnt/slp"
    cbfs_umount "$mnt"
    note "$opts ok"
done
pass

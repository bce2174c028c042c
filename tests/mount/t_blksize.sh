#!/usr/bin/env bash
# st_blksize: a compressed file reports its own block size (SEEK_DATA/SEEK_HOLE answer in
# whole blocks of it, without the writeback cache), while open, after close and after a
# remount with another block_size; a plain file reports the store's. Every offset SEEK_DATA/SEEK_HOLE return
# is a multiple of st_blksize (or the size), and cp --sparse=always and tar --sparse copy
# a sparse file into and out of the mount bit-exact.
. "$(dirname "$0")/lib.sh"

# a sparse source: data, a hole, data across a block boundary, a hole up to the size
python3 - "$T/sparse.src" <<'EOF'
import os, sys
fd = os.open(sys.argv[1], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
os.pwrite(fd, os.urandom(100_000), 0)
os.pwrite(fd, b"row,1,2,3\n" * 40_000, 5_000_000)
os.ftruncate(fd, 9_000_123)
os.close(fd)
EOF

# seek_walk FILE: checks st_blksize (open and by path) against $bs and prints the
# SEEK_DATA/SEEK_HOLE boundaries; fails on one that is not a multiple of it
seek_walk() {
    python3 - "$1" "$bs" <<'EOF' || fail "$(cat "$T/walk.err")"
import errno, os, sys
path, bs = sys.argv[1], int(sys.argv[2])
fd = os.open(path, os.O_RDONLY)
size = os.fstat(fd).st_size
for what, got in (("fstat", os.fstat(fd).st_blksize), ("stat", os.stat(path).st_blksize)):
    if got != bs:
        sys.exit(f"{path}: {what} st_blksize {got}, want the file's block size {bs}")
off, whence, marks = 0, os.SEEK_DATA, []
while True:
    try:
        off = os.lseek(fd, off, whence)
    except OSError as e:
        if e.errno != errno.ENXIO:
            raise
        break
    if off % bs and off != size:
        sys.exit(f"{path}: {'SEEK_DATA' if whence == os.SEEK_DATA else 'SEEK_HOLE'} gave {off}, "
                 f"not a multiple of st_blksize {bs}")
    marks.append(off)
    if off >= size:
        break
    whence = os.SEEK_HOLE if whence == os.SEEK_DATA else os.SEEK_DATA
print(" ".join(map(str, marks)))
EOF
}

# (with the writeback cache, the default, the kernel answers SEEK_DATA/SEEK_HOLE
# itself: no holes but EOF; see t_posix_seek)
for bs_wbc in 16384,off 1048576,on; do
    bs=${bs_wbc%,*} wbc=${bs_wbc#*,}
    store=$T/store-$bs mnt=$T/mnt
    mkdir -p "$store"
    cbfs_mount "$store" "$mnt" codec=zstd,block_size=$bs,writeback_cache=$wbc
    cp --sparse=always "$T/sparse.src" "$mnt/cp.sparse"
    check_eq "$bs" "$(stat -c %o "$mnt/cp.sparse")" "stat -c %o of a compressed file (block_size $bs)"
    marks=$(seek_walk "$mnt/cp.sparse" 2>"$T/walk.err")
    if [[ $wbc == off ]]; then
        [[ $marks == 0\ * ]] && (($(wc -w <<<"$marks") >= 4)) || fail "block_size $bs: no holes found: $marks"
    else
        check_eq "0 9000123" "$marks" "SEEK_DATA/SEEK_HOLE answered by the kernel"
    fi
    note "block_size $bs, writeback_cache=$wbc: SEEK_DATA/SEEK_HOLE boundaries $marks"

    mkdir "$mnt/t"
    tar --sparse -cf "$T/in.tar" -C "$T" sparse.src
    tar --sparse -xf "$T/in.tar" -C "$mnt/t"
    same_file "$T/sparse.src" "$mnt/t/sparse.src"
    seek_walk "$mnt/t/sparse.src" >/dev/null 2>"$T/walk.err"

    mkdir "$mnt/plain"
    check setfattr -n user.cbfs.codec -v none "$mnt/plain"
    cp "$T/sparse.src" "$mnt/plain/p"
    [[ ! -e $store/plain/.cbfsidx/p ]] || fail "plain/p is compressed"
    check_eq "$(stat -c %o "$store/plain/p")" "$(stat -c %o "$mnt/plain/p")" "st_blksize of a plain file"
    cbfs_umount "$mnt"

    # after a remount with another block size: old files keep theirs, new ones get the new
    drop_caches
    cbfs_mount "$store" "$mnt" block_size=64K,writeback_cache=$wbc
    check_eq "$bs" "$(stat -c %o "$mnt/cp.sparse")" "stat -c %o after a remount with block_size=64K"
    seek_walk "$mnt/cp.sparse" >/dev/null 2>"$T/walk.err"
    rm -f "$T/out.sparse" "$T/out.tar"
    cp --sparse=always "$mnt/cp.sparse" "$T/out.sparse"
    same_file "$T/sparse.src" "$T/out.sparse"
    tar --sparse -cf "$T/out.tar" -C "$mnt" cp.sparse t
    rm -rf "$T/x" && mkdir "$T/x"
    tar --sparse -xf "$T/out.tar" -C "$T/x"
    same_file "$T/sparse.src" "$T/x/cp.sparse"
    same_file "$T/sparse.src" "$T/x/t/sparse.src"
    echo new >"$mnt/new"
    check_eq 65536 "$(stat -c %o "$mnt/new")" "stat -c %o of a new file under block_size=64K"
    cbfs_umount "$mnt"
    note "block_size $bs: cp --sparse and tar --sparse round trips bit-exact"
done
pass

#!/usr/bin/env bash
# cbfs demo: installs deps, builds, and backs up a REAL sample (a ~0.5-1 GB tar of system
# files) into an lz4 cbfs mount, then restores it after a remount with cold caches and
# proves it bit-exact. Prints sizes, ratio and throughput against the bare store disk.
# Everything lives under one /tmp directory that is removed (and unmounted) on any exit.
set -euo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)

./scripts/deps.sh
./scripts/build.sh build
BIN=$REPO/build/mount.cbfs

D=$(mktemp -d /tmp/cbfs-demo.XXXXXX)
STORE=$D/store MNT=$D/mnt BARE=$D/bare
mkdir -p "$STORE" "$MNT" "$BARE"
DPID=
cleanup() {
    set +e
    if mountpoint -q "$MNT"; then fusermount3 -u "$MNT" 2>/dev/null || fusermount3 -uz "$MNT"; fi
    if [[ -n $DPID ]]; then
        for _ in $(seq 100); do kill -0 "$DPID" 2>/dev/null || break; sleep 0.1; done
        kill -9 "$DPID" 2>/dev/null
        wait "$DPID" 2>/dev/null
    fi
    mountpoint -q "$MNT" || rm -rf --one-file-system "$D"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

mount_demo() {
    "$BIN" -f -o codec=lz4 "$STORE" "$MNT" 2>>"$D/daemon.log" &
    DPID=$!
    for _ in $(seq 200); do
        mountpoint -q "$MNT" && return 0
        kill -0 "$DPID" 2>/dev/null || { cat "$D/daemon.log" >&2; echo "demo: mount failed" >&2; exit 1; }
        sleep 0.05
    done
    echo "demo: not mounted after 10 s" >&2
    exit 1
}
umount_demo() {
    local rc=0
    for _ in $(seq 50); do fusermount3 -u "$MNT" 2>/dev/null && break; sleep 0.2; done
    wait "$DPID" || rc=$?
    DPID=
    ((rc == 0)) || { cat "$D/daemon.log" >&2; echo "demo: daemon exited with status $rc" >&2; exit 1; }
}
drop_caches() {
    sync
    if [[ -w /proc/sys/vm/drop_caches ]]; then echo 3 >/proc/sys/vm/drop_caches; else
        echo "demo: (not root: page cache not dropped, read figures are optimistic)"; fi
}
now() { date +%s.%N; }
mbps() { awk -v b="$1" -v s="$2" 'BEGIN { printf "%.0f", b / 1000000 / (s > 0 ? s : 1e-9) }'; }
secs() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", b - a }'; }

# 1. the sample backup: a tar of real system files, written to the bare store disk
echo; echo "== making the sample backup (tar of /usr/share, /usr/include, python stdlib)"
srcs=()
for p in usr/share usr/include usr/lib/python3*; do [[ -d /$p ]] && srcs+=("$p"); done
tar -cf "$BARE/sample.tar" -C / "${srcs[@]}" 2>/dev/null || true
[[ -s $BARE/sample.tar ]] || { echo "demo: could not create the sample tar" >&2; exit 1; }
size=$(stat -c %s "$BARE/sample.tar")
echo "sample: $BARE/sample.tar, $((size / 1048576)) MiB"
want=$(sha256sum <"$BARE/sample.tar" | cut -c1-64)

# 2. baseline: the same bytes copied to the bare store disk, made durable
t=$(now)
dd if="$BARE/sample.tar" of="$BARE/copy.tar" bs=1M conv=fdatasync status=none
bare_s=$(secs "$t" "$(now)")
rm -f "$BARE/copy.tar"

# 3. backup into cbfs (lz4), made durable (fsync flushes every frame and the index)
mount_demo
t=$(now)
dd if="$BARE/sample.tar" of="$MNT/sample.tar" bs=1M conv=fsync status=none
write_s=$(secs "$t" "$(now)")
logical=$(stat -c %s "$MNT/sample.tar")
umount_demo

# 4. restore after a remount with cold caches
mount_demo
drop_caches
t=$(now)
dd if="$MNT/sample.tar" of=/dev/null bs=1M status=none
read_s=$(secs "$t" "$(now)")
got=$(sha256sum <"$MNT/sample.tar" | cut -c1-64)
umount_demo

physical=$(du -B1 -c "$STORE/sample.tar" "$STORE/.cbfsidx/sample.tar" | tail -n 1 | cut -f1) # data + sidecar (layout 2)
echo
echo "== results (codec=lz4, default block size 256 KiB, $(nproc) CPUs)"
printf '  logical size        %12d bytes (%d MiB)\n' "$logical" $((logical / 1048576))
printf '  physical size       %12d bytes (%d MiB, data file + index)\n' "$physical" $((physical / 1048576))
awk -v l="$logical" -v p="$physical" 'BEGIN { printf "  ratio               %12.2f : 1\n", l / p }'
printf '  write (dd, fsync)   %8s MB/s  (%s s)   bare store disk: %s MB/s (%s s)\n' \
    "$(mbps "$size" "$write_s")" "$write_s" "$(mbps "$size" "$bare_s")" "$bare_s"
printf '  read (cold cache)   %8s MB/s  (%s s)\n' "$(mbps "$size" "$read_s")" "$read_s"
if [[ $logical == "$size" && $got == "$want" ]]; then
    echo "  sha256 $got"
    echo "restore verified: bit-exact"
else
    echo "RESTORE MISMATCH: size $logical vs $size, sha256 $got vs $want" >&2
    exit 1
fi

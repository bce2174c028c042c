#!/usr/bin/env bash
# A/B of two (or more) mount.cbfs builds on namespace operations, interleaved so the
# machine's noise hits all alike: per point, a fresh store under /var/tmp with N
# compressed 4 KiB files (lz4), then after a remount and drop_caches the wall time
# of stat(2) of every file (lookups: data file and sidecar found) and of a rename
# of every file to a new name (data file and sidecar moved), then of a chmod and a
# utime of every file (SETATTR by path: the reply's stat). Prints one line per point;
# compare medians.
#
#   perf/nsbench.sh [-n REPS] [-f FILES] BIN...
# Example (the eighth session's figures in docs/PERF.md):
#   perf/nsbench.sh -n 3 /tmp/old/b/mount.cbfs build/mount.cbfs
set -euo pipefail
reps=3 files=2000
while getopts n:f: o; do
    case $o in
    n) reps=$OPTARG ;;
    f) files=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
(($# >= 1)) || { sed -n '2,11p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
w=$(mktemp -d /var/tmp/cbfs-nsbench.XXXXXX)
cleanup() {
    if mountpoint -q "$w/m" 2>/dev/null; then fusermount3 -u "$w/m" 2>/dev/null || umount -l "$w/m"; fi
    wait 2>/dev/null || true
    rm -rf "$w"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
mkdir -p "$w/m"
mount_() { "$1" -f -o codec=lz4 "$w/s" "$w/m" 2>>"$w/daemon.log" & pid=$!
    for _ in $(seq 100); do mountpoint -q "$w/m" && return; sleep 0.05; done
    echo "nsbench: $1 did not mount: $(tail -n 2 "$w/daemon.log")" >&2; exit 1; }
umount_() { fusermount3 -u "$w/m"; wait "$pid"; }
now() { date +%s.%N; }
for ((rep = 1; rep <= reps; rep++)); do
    for bin in "$@"; do
        rm -rf "$w/s" && mkdir "$w/s"
        mount_ "$bin"
        python3 -c "import os,sys
for i in range(int(sys.argv[2])):
    with open('%s/f%d' % (sys.argv[1], i), 'wb') as f: f.write(os.urandom(4096))" "$w/m" "$files"
        umount_
        mount_ "$bin"
        echo 3 >/proc/sys/vm/drop_caches
        t0=$(now)
        python3 -c "import os,sys
for i in range(int(sys.argv[2])): os.stat('%s/f%d' % (sys.argv[1], i))" "$w/m" "$files"
        t1=$(now)
        python3 -c "import os,sys
for i in range(int(sys.argv[2])): os.rename('%s/f%d' % (sys.argv[1], i), '%s/g%d' % (sys.argv[1], i))" "$w/m" "$files"
        t2=$(now)
        python3 -c "import os,sys
for i in range(int(sys.argv[2])): os.chmod('%s/g%d' % (sys.argv[1], i), 0o600)" "$w/m" "$files"
        t3=$(now)
        python3 -c "import os,sys
for i in range(int(sys.argv[2])): os.utime('%s/g%d' % (sys.argv[1], i), (1e9, 1e9))" "$w/m" "$files"
        t4=$(now)
        umount_
        printf '%s stat%d %.3f s rename%d %.3f s chmod%d %.3f s utime%d %.3f s\n' "$bin" \
            "$files" "$(bc <<<"$t1 - $t0")" "$files" "$(bc <<<"$t2 - $t1")" \
            "$files" "$(bc <<<"$t3 - $t2")" "$files" "$(bc <<<"$t4 - $t3")"
    done
done

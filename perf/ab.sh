#!/usr/bin/env bash
# A/B of two mount.cbfs builds in one run: the points alternate (A, B, A, B, ...)
# so the machine's noise hits both alike; prints every figure and the medians.
#
#   perf/ab.sh [-n REPS] [-s SOURCE] A_MOUNT_CBFS B_MOUNT_CBFS 'OPTIONS|BS' ...
#
# Each point: a fresh store under /var/tmp, `mount.cbfs -f -o OPTIONS`, one
# `dd bs=BS conv=fdatasync` of SOURCE into it, MB/s = 10^6 bytes / wall seconds,
# unmount. OPTIONS is the mount's -o list (e.g. codec=lz4,workers=1); BS dd's
# block size. SOURCE defaults to /var/tmp/src256 (perf/gensrc.py 256M /var/tmp/src256).
# Example (the write-behind figures in docs/PERF.md):
#   perf/ab.sh -n 5 /work/base/build/mount.cbfs build/mount.cbfs \
#       'codec=lz4,workers=1,writeback_cache=off|1M' 'codec=lz4|8K'
set -euo pipefail
reps=3 src=/var/tmp/src256
while getopts n:s: o; do
    case $o in
    n) reps=$OPTARG ;;
    s) src=$OPTARG ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
(($# >= 3)) || { sed -n '2,13p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
bins=("$1" "$2")
shift 2
[[ -r $src ]] || { echo "ab.sh: no source $src (perf/gensrc.py 256M $src)" >&2; exit 2; }
work=$(mktemp -d /var/tmp/cbfs-ab.XXXXXX)
pid= mbps=
cleanup() {
    if mountpoint -q "$work/mnt" 2>/dev/null; then fusermount3 -u "$work/mnt" 2>/dev/null || umount -l "$work/mnt"; fi
    [[ -n $pid ]] && wait "$pid" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
trap 'exit 130' INT TERM
bytes=$(stat -c %s "$src")

# point BIN OPTIONS BS: sets mbps. Runs in this shell (not in $(...)), so the
# EXIT trap knows the daemon and unmounts whatever a signal interrupts.
point() {
    rm -rf "$work/store" "$work/mnt"
    mkdir -p "$work/store" "$work/mnt"
    "$1" -f -o "$2" "$work/store" "$work/mnt" 2>>"$work/daemon.log" &
    pid=$!
    for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.05; done
    mountpoint -q "$work/mnt" || { echo "ab.sh: $1 did not mount: $(tail -n 2 "$work/daemon.log")" >&2; exit 1; }
    local t0 t1
    t0=$(date +%s.%N)
    dd if="$src" of="$work/mnt/f" bs="$3" conv=fdatasync status=none
    t1=$(date +%s.%N)
    fusermount3 -u "$work/mnt"
    wait "$pid"
    pid=
    mbps=$(python3 -c "print(round($bytes / 1e6 / ($t1 - $t0)))")
}

declare -A got=()
sync
for ((r = 1; r <= reps; r++)); do
    for spec in "$@"; do
        for ab in 0 1; do
            point "${bins[ab]}" "${spec%|*}" "${spec#*|}"
            got["$spec|$ab"]+=" $mbps"
            echo "rep $r $([[ $ab == 0 ]] && echo A || echo B) [${spec%|*}] bs=${spec#*|}: $mbps MB/s"
        done
    done
done
echo
echo "A = ${bins[0]}, B = ${bins[1]}, $reps reps, median MB/s (all)"
for spec in "$@"; do
    python3 - "$spec" "${got["$spec|0"]}" "${got["$spec|1"]}" <<'EOF'
import statistics, sys
spec, a, b = sys.argv[1], [int(x) for x in sys.argv[2].split()], [int(x) for x in sys.argv[3].split()]
ma, mb = statistics.median(a), statistics.median(b)
print(f"[{spec.split('|')[0]}] bs={spec.split('|')[1]}: A {ma:.0f} ({' '.join(map(str, a))})  "
      f"B {mb:.0f} ({' '.join(map(str, b))})  B/A {mb / ma:.2f}x")
EOF
done

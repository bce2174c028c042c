#!/usr/bin/env bash
# A/B of two mount.cbfs builds in one run: the points alternate (A, B, A, B, ...)
# so the machine's noise hits both alike; prints every figure and the medians.
#
#   perf/ab.sh [-n REPS] [-s SOURCE] [-r] A_MOUNT_CBFS B_MOUNT_CBFS 'OPTIONS|BS' ...
#
# Each point: a fresh store under /var/tmp, `mount.cbfs -f -o OPTIONS`, one
# `dd bs=BS conv=fdatasync` of SOURCE into it, MB/s = 10^6 bytes / wall seconds,
# the daemon's CPU (ms, utime + stime), context switches (all its threads,
# voluntary and not) and stream gaps (user.cbfs.stats), unmount. -r: the point
# is the restore instead: the file is written as above, then the mount is made
# again after drop_caches and read with `dd bs=1M of=/dev/null` (MB/s, CPU and
# switches of that read). OPTIONS
# is the mount's -o list (e.g. codec=lz4,workers=1); BS dd's block size.
# SOURCE defaults to /var/tmp/src256 (perf/gensrc.py 256M /var/tmp/src256).
# Example (the write-behind figures in docs/PERF.md):
#   perf/ab.sh -n 5 /work/base/build/mount.cbfs build/mount.cbfs \
#       'codec=lz4,workers=1,writeback_cache=off|1M' 'codec=lz4|8K'
set -euo pipefail
reps=3 src=/var/tmp/src256 read=
while getopts n:s:r o; do
    case $o in
    n) reps=$OPTARG ;;
    s) src=$OPTARG ;;
    r) read=1 ;;
    *) exit 2 ;;
    esac
done
shift $((OPTIND - 1))
(($# >= 3)) || { sed -n '2,17p' "$0" | sed 's/^# \{0,1\}//'; exit 2; }
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
mount_() { # BIN OPTIONS: mounts $work/store on $work/mnt, sets pid
    "$1" -f -o "$2" "$work/store" "$work/mnt" 2>>"$work/daemon.log" &
    pid=$!
    for _ in $(seq 100); do mountpoint -q "$work/mnt" && break; sleep 0.05; done
    mountpoint -q "$work/mnt" || { echo "ab.sh: $1 did not mount: $(tail -n 2 "$work/daemon.log")" >&2; exit 1; }
}
umount_() {
    fusermount3 -u "$work/mnt"
    wait "$pid"
    pid=
}
cpu_ms() { awk -v hz="$(getconf CLK_TCK)" '{print int(($14 + $15) * 1000 / hz)}' "/proc/$pid/stat"; }
switches() { cat /proc/"$pid"/task/*/status | awk '/ctxt_switches/ {s += $2} END {print s}'; }
# the mount's stream gaps so far (the daemon's user.cbfs.stats; - if it has none)
gaps_() { getfattr --only-values -n user.cbfs.stats "$work/mnt" 2>/dev/null |
    awk -F= '$1 == "stream_gaps" {g = $2} END {print (g == "" ? "-" : g)}'; }

# point BIN OPTIONS BS: sets mbps, cpu, cs, gaps
point() {
    rm -rf "$work/store" "$work/mnt"
    mkdir -p "$work/store" "$work/mnt"
    mount_ "$1" "$2"
    local t0 t1 c0 s0
    if [[ -n $read ]]; then
        dd if="$src" of="$work/mnt/f" bs="$3" conv=fdatasync status=none
        umount_
        sync
        echo 3 >/proc/sys/vm/drop_caches
        mount_ "$1" "$2"
    fi
    c0=$(cpu_ms) s0=$(switches)
    t0=$(date +%s.%N)
    if [[ -n $read ]]; then
        dd if="$work/mnt/f" of=/dev/null bs=1M status=none
    else
        dd if="$src" of="$work/mnt/f" bs="$3" conv=fdatasync status=none
    fi
    t1=$(date +%s.%N)
    cpu=$(($(cpu_ms) - c0)) cs=$(($(switches) - s0)) gaps=$(gaps_)
    umount_
    mbps=$(python3 -c "print(round($bytes / 1e6 / ($t1 - $t0)))")
}

declare -A got=() gcpu=() gcs=() ggaps=()
sync
for ((r = 1; r <= reps; r++)); do
    for spec in "$@"; do
        for ab in 0 1; do
            point "${bins[ab]}" "${spec%|*}" "${spec#*|}"
            got["$spec|$ab"]+=" $mbps"
            gcpu["$spec|$ab"]+=" $cpu"
            gcs["$spec|$ab"]+=" $cs"
            ggaps["$spec|$ab"]+=" $gaps"
            echo "rep $r $([[ $ab == 0 ]] && echo A || echo B) [${spec%|*}] bs=${spec#*|}:" \
                "$mbps MB/s, daemon $cpu ms CPU, $cs switches, $gaps stream gaps"
        done
    done
done
echo
echo "A = ${bins[0]}, B = ${bins[1]}, $reps reps, ${read:+restore (cold read), }median (all)"
for spec in "$@"; do
    python3 - "$spec" "${got["$spec|0"]}" "${got["$spec|1"]}" "${gcpu["$spec|0"]}" \
        "${gcpu["$spec|1"]}" "${gcs["$spec|0"]}" "${gcs["$spec|1"]}" \
        "${ggaps["$spec|0"]}" "${ggaps["$spec|1"]}" <<'EOF'
import statistics, sys
spec = sys.argv[1]
a, b, ca, cb, sa, sb = ([int(x) for x in v.split()] for v in sys.argv[2:8])
ga, gb = sys.argv[8].split(), sys.argv[9].split()
med = statistics.median
def col(x): return f"{med(x):.0f} ({' '.join(map(str, x))})"
print(f"[{spec.split('|')[0]}] bs={spec.split('|')[1]}: MB/s A {col(a)}  B {col(b)}  "
      f"B/A {med(b) / med(a):.2f}x")
print(f"    daemon CPU ms: A {med(ca):.0f}  B {med(cb):.0f};  switches: A {med(sa):.0f}  B {med(sb):.0f};"
      f"  stream gaps: A {' '.join(ga)}  B {' '.join(gb)}")
EOF
done

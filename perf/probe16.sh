#!/usr/bin/env bash
# perf/probe16.sh STEP: one device call's worth of measurements on the 16-core machine, from
# the kit (perf/kit.sh --perf here; carry perf/kit). Each step stays inside one call's 10
# minutes (every ddbench has its own --deadline, the whole step a timeout) and leaves one
# archive, $OUT/probe-STEP.tgz, with every CSV, log and profile it made, so the call's
# 8-file limit on returned files never cuts one off.
#   A: the suite's stream and many sections (targets 1, 2, 3, 5), 2 GiB, 3 reps; a
#      system-wide profile of one lz4 stream and of 8 lz4 writers; channel options
#      (writeback cache off, clone_fd, max_background, fuse_threads) at 1 and 8 writers.
#   C: the kernel's dirty limits for FUSE and the writeback cache, 4 GiB, 1 and 8 writers:
#      nullfs with and without the cache, cbfs lz4 / zstd:1 with the cache, without it, and
#      with the FUSE bdi's max_ratio 100 (and strict_limit 0); profiles with wait stacks.
#   D: profiles with wait stacks (lz4 1 and 8 writers with and without the cache, zstd:1 8
#      writers, nullfs with the cache 8 writers), then one stream of 8 GiB: bare, nullfs with
#      and without the cache, cbfs lz4.
#   E: the engine's in-flight budget (inflight=, default 4 x workers x block = 16 MiB on 16
#      cores) with the writeback cache, 2 GiB, 1 and 8 writers, lz4 and zstd:1.
#   B: the suite's workers section (target 4 and the sweep), 2 GiB, 2 reps; profiles of
#      8 zstd:1 writers and of one lz4 stream with workers=1.
#   G: target 5 (restore, 4 GiB, 4 reps: nullfs, lz4, zstd:1, each cbfs codec also with both
#      read-aheads raised), target 3b (8 writers, 2 GiB, 3 reps: nullfs, zstd:1 with 256K and
#      1M blocks, lz4, the zstd -T16 pipe, zstd:1 in memory with 8 threads), profiles and wait
#      samples of one cold read alone (cbfs lz4, nullfs), then the suite's stream section
#      (targets 1, 2) with what time is left. For a session with one call (15 minutes).
#   F: the restore (target 5): one cold reader (ddbench reads only one-writer points),
#      nullfs against cbfs lz4 and zstd:1 with the engine's read-ahead (readahead=, then 8
#      blocks) and the mount's (fuse_readahead=, then 1M) raised, alone and together,
#      2 GiB, 5 reps. Never run as such: G and two calls by hand did it (PERF.md, fifteenth
#      session), and the defaults are now 32 and 2M.
#   H: target 5 against a ceiling that serves real bytes (nullfs-mem256M: READs answered
#      from 256 MiB of distinct memory, not the zero page), at the defaults (2M read-ahead)
#      and with 4M, 4 GiB, 4 reps; then the 1M-block lead of target 3b (8 zstd:1 writers,
#      256K and 1M blocks, and 256K without the writeback cache, against the zstd -T16
#      pipe, 2 GiB, 3 reps, stream gaps in the CSV notes). For one call.
#   I: why 8 zstd:1 writers run faster without the writeback cache: profiles and wait
#      samples of one point with and without it, then 4 and 16 writers each way against the
#      pipe, 2 GiB, 2 reps. About 30 s.
#   J: target 3b against the FUSE bdi's dirty limit set between the kernel's 1 % and
#      max_ratio=100 (bdi.max_bytes 512M, 1G, 4G: zstd:1, 1 and 8 writers, 1 MiB writes, and
#      8 KiB writes of one writer, against the pipe, 2 GiB, 3 reps); then what 2 cores
#      cannot show of correctness: the TSan engine stress (perf/kit.sh --tsan) with 4, 8
#      and 16 workers side by side, and 16 writers of mixed record sizes through one mount,
#      compared byte for byte warm, then after a remount cold, then `cbfs verify` and stock
#      `zstd -d` of each data file. About 4 minutes.
#   K: target 4: a trace of the scheduler's switches (perf record -a -g -e
#      sched:sched_switch) around one workers=1 point each of lz4 and zstd:1 (1 writer,
#      1 MiB writes), summed by perf/switches.py: where the one worker is off its CPU (a
#      mutex, the pool's empty queue, I/O, preempted), by tenth of the point; then the
#      codecs in memory with one thread, the reference. About 1 minute (estimated:
#      6 s here at 128M on 2 cores; not yet run there).
# PROBE_SIZE (2G; C 4G) and PROBE_REPS (A 3, B 2, C 2) shrink a step for a smoke test here.
# Back here: tar xzf probe-STEP.tgz; perf/ddbench --report *.csv
set -uo pipefail
step=${1:?usage: perf/probe16.sh A|B|C|D|E|F|G|H|I|J|K}
size=${PROBE_SIZE:-2G} # C: 4G
repo=$(cd "$(dirname "$0")/.." && pwd)
kit=$repo/perf/kit
res=${OUT:-/tmp}/probe-$step
mkdir -p "$res"
export PATH="$kit/bin:$PATH"
t_start=$(date +%s)
left() { echo $((560 - ($(date +%s) - t_start))); }

dd_() { # ddbench through the kit, its output kept; deadline: what is left minus a margin
    local name=$1 margin=$2
    shift 2
    local dl=$(($(left) - margin))
    ((dl > 20)) || { echo "probe16: no time left for $name"; return 0; }
    OUT= timeout $((dl + 60)) bash "$kit/run.sh" --deadline "$dl" --csv "$res/$name.csv" "$@" \
        >"$res/$name.md" 2>"$res/$name.log"
    echo "== $name: exit $? ($(left) s left)"
    if [[ $name == suite* ]]; then
        grep -E '^\| [0-9]+ \|' "$res/$name.md" | grep -v "not measured"
    else
        grep -E '^\| .* \| (write|read) \|' "$res/$name.md"
    fi
    return 0
}

prof() { # system-wide on-CPU profile of one ddbench point, and where its threads wait
    local name=$1
    shift
    ((($(left)) > 90)) || { echo "probe16: no time left for profile $name"; return 0; }
    python3 "$repo/perf/stacks.py" --until-killed >"$res/wait-$name.txt" &
    local sp=$!
    LD_LIBRARY_PATH=$kit/lib timeout 120 perf record -a -g -F 499 -o /tmp/$name.data -- \
        env OUT= bash "$kit/run.sh" --reps 1 --sizes 1M --size $size --csv "$res/prof-$name.csv" "$@" \
        >"$res/prof-$name.log" 2>&1
    kill $sp; wait $sp 2>/dev/null
    report_ "$name"
}

report_() { # NAME: the reports of /tmp/NAME.data into $res, the data removed
    local name=$1
    local pr=(env LD_LIBRARY_PATH="$kit/lib" perf report -i "/tmp/$name.data" --stdio --no-children)
    "${pr[@]}" --sort comm,dso,sym -g none --percent-limit 0.3 2>/dev/null | grep -v '^#' |
        grep -v '^$' | head -150 >"$res/prof-$name.txt"
    "${pr[@]}" --sort comm,dso -g none --percent-limit 0.2 2>/dev/null | grep -v '^#' |
        grep -v '^$' >"$res/prof-$name-comm.txt"
    "${pr[@]}" --comms mount.cbfs,cbfs-pool --sort sym -g caller,0.5,callee,function,percent \
        --percent-limit 2 2>/dev/null | grep -v '^$' | head -600 >"$res/prof-$name-graph.txt"
    rm -f /tmp/$name.data
    echo "== profile $name: $(grep -c . "$res/prof-$name.txt") lines ($(left) s left)"
    head -25 "$res/prof-$name-comm.txt"
}

rprof() { # NAME SYSTEM: profile and wait samples of one cold read alone (ddbench --read-wrap)
    local name=$1
    shift
    ((($(left)) > 90)) || { echo "probe16: no time left for profile $name"; return 0; }
    # stacks.py without the kit's libraries: python3 keeps the machine's own
    cat >"/tmp/rwrap-$name.sh" <<EOF
env -u LD_LIBRARY_PATH python3 "$repo/perf/stacks.py" --until-killed >"$res/wait-$name.txt" &
sp=\$!
perf record -a -g -F 499 -o "/tmp/$name.data" -- "\$@" 2>/dev/null
rc=\$?
kill \$sp; wait \$sp 2>/dev/null
exit \$rc
EOF
    timeout 150 env OUT= bash "$kit/run.sh" --reps 1 --sizes 1M --writers 1 --size $size --read \
        --read-wrap "bash /tmp/rwrap-$name.sh" --csv "$res/prof-$name.csv" "$@" \
        >"$res/prof-$name.log" 2>&1
    report_ "$name"
}

tsan_() { # the TSan engine stress, several pools side by side (kit/tsan: the binary, libtsan)
    local t=$kit/tsan pids=() i=0
    [[ -x $t/cbfs-engine-stress ]] || { echo "probe16: no $t/cbfs-engine-stress"; return 0; }
    for cfg in "ST_WORKERS=16" "ST_WORKERS=16 ST_RA=32" "ST_WORKERS=8 ST_CACHE=8388608" \
        "ST_WORKERS=4" "ST_WORKERS=16 ST_CACHE=262144" "ST_WORKERS=8 ST_RA=1"; do
        # setarch -R: older TSan runtimes may fail to map their shadow memory under the
        # higher mmap randomisation of newer kernels; without ASLR they do not
        (cd /tmp && env $cfg LD_LIBRARY_PATH=$t:$kit/lib TSAN_OPTIONS="halt_on_error=1 exitcode=66" \
            timeout 300 setarch "$(uname -m)" -R "$t/cbfs-engine-stress" </dev/null \
            >"$res/tsan-$i.log" 2>&1; echo "rc=$? $cfg" >>"$res/tsan-$i.log") &
        pids+=($!)
        i=$((i + 1))
    done
    wait "${pids[@]}"
    for f in "$res"/tsan-*.log; do echo "== $(basename "$f"): $(tail -n 2 "$f" | tr '\n' ' ')"; done
}

mixcheck_() { # 16 writers of mixed record sizes through one mount, compared byte for byte
    local w=/var/tmp/probe-mix src=/dev/shm/probe-mix-src bad=0 i
    local sizes=(4096 8192 10240 65536 1048576 3000 131072 512 262144 16384 1048576 8192 \
        2097152 32768 4096 1000000)
    rm -rf "$w"
    mkdir -p "$w/store" "$w/mnt"
    python3 "$kit/gensrc.py" 1G "$src" >/dev/null || { echo "mixcheck: no source"; return 0; }
    trap 'fusermount3 -u "$w/mnt" 2>/dev/null; umount -l "$w/mnt" 2>/dev/null' RETURN
    mnt_() { LD_LIBRARY_PATH=$kit/lib "$kit/bin/mount.cbfs" -o codec=zstd:1 "$w/store" "$w/mnt"; }
    mnt_ || { echo "mixcheck: mount failed"; return 0; }
    local dev; dev=$(mountpoint -d "$w/mnt")
    echo "mixcheck: bdi $dev max_ratio $(cat /sys/class/bdi/$dev/max_ratio) max_bytes \
$(cat /sys/class/bdi/$dev/max_bytes 2>/dev/null) strict_limit $(cat /sys/class/bdi/$dev/strict_limit)"
    local t0=$EPOCHREALTIME
    for i in "${!sizes[@]}"; do
        # each writer its own 64 MiB-aligned offset of the source, 384 MiB
        dd if="$src" of="$w/mnt/f$i" bs="${sizes[$i]}" iflag=skip_bytes,count_bytes \
            skip=$(((i % 8) << 26)) count=$((384 << 20)) conv=fdatasync status=none &
    done
    wait
    echo "mixcheck: 16 writers, 6 GiB in $(python3 -c "print(round($EPOCHREALTIME - $t0, 1))") s"
    echo 3 >/proc/sys/vm/drop_caches
    for i in "${!sizes[@]}"; do
        cmp -s -n $((384 << 20)) -i $(((i % 8) << 26)):0 "$src" "$w/mnt/f$i" ||
            { echo "mixcheck: f$i (bs ${sizes[$i]}) differs warm"; bad=1; }
    done
    fusermount3 -u "$w/mnt" || umount -l "$w/mnt"
    sleep 1
    echo 3 >/proc/sys/vm/drop_caches
    mnt_ || { echo "mixcheck: remount failed"; return 0; }
    for i in "${!sizes[@]}"; do
        [[ $(stat -c %s "$w/mnt/f$i") == $((384 << 20)) ]] || { echo "mixcheck: f$i size"; bad=1; }
        cmp -s -n $((384 << 20)) -i $(((i % 8) << 26)):0 "$src" "$w/mnt/f$i" ||
            { echo "mixcheck: f$i (bs ${sizes[$i]}) differs after remount"; bad=1; }
    done
    fusermount3 -u "$w/mnt" || umount -l "$w/mnt"
    LD_LIBRARY_PATH=$kit/lib "$kit/bin/cbfs" verify "$w/store" 2>&1 | tail -n 3
    local stock=0
    for i in "${!sizes[@]}"; do
        LD_LIBRARY_PATH=$kit/lib zstd -dc "$w/store/f$i" 2>/dev/null |
            cmp -s -n $((384 << 20)) -i $(((i % 8) << 26)):0 "$src" - && stock=$((stock + 1))
    done
    echo "mixcheck: $stock of 16 data files decode with stock zstd -d to the source"
    ((bad)) && echo "mixcheck: FAILED" || echo "mixcheck: all 16 files equal the source, warm and cold"
    rm -rf "$w" "$src"
}

{ nproc; lscpu | grep -E 'Model name|MHz|NUMA|L3'; free -g; df -hT /var/tmp; lsblk -d -o NAME,ROTA,MODEL,SIZE
  uname -a; for f in /sys/class/bdi/*/; do echo "$f $(cat $f/max_ratio 2>/dev/null) $(cat $f/strict_limit 2>/dev/null)"; done
  sysctl vm.dirty_ratio vm.dirty_background_ratio vm.dirty_bytes; } >"$res/machine.txt" 2>&1
case $step in
A)
    dd_ suite-A 200 --suite 16core --section stream --section many --size $size --reps ${PROBE_REPS:-3}
    prof lz4-w1 --writers 1 --system 'lz4=codec=lz4'
    prof lz4-w8 --writers 8 --system 'lz4=codec=lz4'
    dd_ channel 5 --size $size --reps ${PROBE_REPS:-2} --sizes 1M --writers 1,8 --system nullfs \
        --system 'lz4=codec=lz4' --system 'lz4 wbc-off=codec=lz4,writeback_cache=off' \
        --system 'lz4 clone_fd=codec=lz4,clone_fd' \
        --system 'lz4 bg64=codec=lz4,max_background=64' \
        --system 'lz4 thr32=codec=lz4,fuse_threads=32'
    ;;
C)
    dd_ bdi 150 --size ${PROBE_SIZE:-4G} --reps ${PROBE_REPS:-2} --sizes 1M --writers 1,8 --system nullfs --system nullfs-wbc \
        --system 'lz4=codec=lz4' --system 'lz4 wbc-off=codec=lz4,writeback_cache=off' \
        --system 'lz4 mr100=codec=lz4,bdi.max_ratio=100' \
        --system 'lz4 strict0=codec=lz4,bdi.strict_limit=0,bdi.max_ratio=100' \
        --system 'zstd1=codec=zstd:1' --system 'zstd1 wbc-off=codec=zstd:1,writeback_cache=off' \
        --system 'zstd1 strict0=codec=zstd:1,bdi.strict_limit=0,bdi.max_ratio=100' \
        --system pipe-zstd
    prof lz4-w8 --writers 8 --system 'lz4=codec=lz4'
    prof lz4off-w8 --writers 8 --system 'lz4off=codec=lz4,writeback_cache=off'
    prof lz4-w1 --writers 1 --system 'lz4=codec=lz4'
    ;;
D)
    prof lz4-w8 --writers 8 --system 'lz4=codec=lz4'
    prof lz4off-w8 --writers 8 --system 'lz4off=codec=lz4,writeback_cache=off'
    prof nullwbc-w8 --writers 8 --system nullfs-wbc
    prof zstd-w8 --writers 8 --system 'zstd1=codec=zstd:1'
    prof lz4-w1 --writers 1 --system 'lz4=codec=lz4'
    dd_ long 5 --size ${PROBE_SIZE:-8G} --reps 2 --sizes 1M --writers 1 --system bare \
        --system nullfs --system nullfs-wbc --system 'lz4=codec=lz4'
    ;;
E)
    dd_ inflight 5 --size $size --reps ${PROBE_REPS:-2} --sizes 1M --writers 1,8 \
        --system 'lz4=codec=lz4' --system 'lz4 i64=codec=lz4,inflight=64M' \
        --system 'lz4 i256=codec=lz4,inflight=256M' \
        --system 'lz4 wbc-off=codec=lz4,writeback_cache=off' \
        --system 'lz4 wbc-off i64=codec=lz4,writeback_cache=off,inflight=64M' \
        --system 'zstd1=codec=zstd:1' --system 'zstd1 i64=codec=zstd:1,inflight=64M' \
        --system 'zstd1 i256=codec=zstd:1,inflight=256M'
    ;;
B)
    dd_ suite-B 150 --suite 16core --section workers --size $size --reps ${PROBE_REPS:-2}
    prof zstd-w8 --writers 8 --system 'zstd1=codec=zstd:1'
    prof lz4-wk1 --writers 1 --system 'lz4 wk1=codec=lz4,workers=1'
    ;;
F)
    dd_ restore 5 --read --size $size --reps ${PROBE_REPS:-5} --sizes 1M --writers 1 \
        --system nullfs --system 'lz4=codec=lz4' --system 'lz4 ra32=codec=lz4,readahead=32' \
        --system 'lz4 fra4M=codec=lz4,fuse_readahead=4M' \
        --system 'lz4 ra32 fra4M=codec=lz4,readahead=32,fuse_readahead=4M' \
        --system 'zstd1=codec=zstd:1' \
        --system 'zstd1 ra32 fra4M=codec=zstd:1,readahead=32,fuse_readahead=4M'
    ;;
G)  # the two targets still short (5, 3b) at the current code, then targets 1 and 2 again
    dd_ restore 330 --read --size ${PROBE_SIZE:-4G} --reps ${PROBE_REPS:-4} --sizes 1M --writers 1 \
        --system nullfs --system 'lz4=codec=lz4' \
        --system 'lz4 ra32 fra4M=codec=lz4,readahead=32,fuse_readahead=4M' \
        --system 'zstd1=codec=zstd:1' \
        --system 'zstd1 ra32 fra4M=codec=zstd:1,readahead=32,fuse_readahead=4M'
    dd_ many8 250 --size $size --reps ${PROBE_REPS:-3} --sizes 1M --writers 8 --system nullfs \
        --system 'zstd1=codec=zstd:1' --system 'zstd1 bs1M=codec=zstd:1,block_size=1M' \
        --system 'lz4=codec=lz4' --system pipe-zstd --codec-threads 8 --codecs zstd:1
    rprof read-lz4 --system 'lz4=codec=lz4'
    rprof read-nullfs --system nullfs
    dd_ suite-stream 5 --suite 16core --section stream --size $size --reps ${PROBE_REPS:-3}
    ;;
H)  # target 5 against the zero page and against real bytes; the 1M-block gaps
    dd_ restore 180 --read --size ${PROBE_SIZE:-4G} --reps ${PROBE_REPS:-4} --sizes 1M --writers 1 \
        --system nullfs --system nullfs-mem256M --system 'lz4=codec=lz4' \
        --system 'zstd1=codec=zstd:1' --system nullfs-ra4M --system nullfs-ra4M-mem256M \
        --system 'lz4 fra4M=codec=lz4,fuse_readahead=4M' \
        --system 'zstd1 fra4M=codec=zstd:1,fuse_readahead=4M'
    dd_ many8 5 --size $size --reps ${PROBE_REPS:-3} --sizes 1M --writers 8 \
        --system 'zstd1=codec=zstd:1' --system 'zstd1 bs1M=codec=zstd:1,block_size=1M' \
        --system 'zstd1 wbc-off=codec=zstd:1,writeback_cache=off' --system pipe-zstd
    ;;
I)  # why 8 zstd:1 writers run faster without the writeback cache (H: 1.52x vs 1.32x the pipe)
    prof w8-zstd1 --writers 8 --system 'zstd1=codec=zstd:1'
    prof w8-zstd1-wbcoff --writers 8 --system 'zstd1 wbc-off=codec=zstd:1,writeback_cache=off'
    dd_ many16 5 --size $size --reps ${PROBE_REPS:-2} --sizes 1M --writers 4,16 \
        --system 'zstd1=codec=zstd:1' --system 'zstd1 wbc-off=codec=zstd:1,writeback_cache=off' \
        --system pipe-zstd
    ;;
J)  # 3b against bdi.max_bytes between the kernel's 1 % and 100 %; 16-core correctness
    mb() { echo "zstd1 mb$1=codec=zstd:1,bdi.max_bytes=$2"; }
    dd_ bdibytes 120 --size $size --reps ${PROBE_REPS:-3} --sizes 1M --writers 1,8 \
        --system 'zstd1=codec=zstd:1' --system "$(mb 512M 536870912)" \
        --system "$(mb 1G 1073741824)" --system "$(mb 4G 4294967296)" --system pipe-zstd
    dd_ bdibytes8K 100 --size $size --reps ${PROBE_REPS:-2} --sizes 8K --writers 1 \
        --system 'zstd1=codec=zstd:1' --system "$(mb 1G 1073741824)" \
        --system "$(mb 4G 4294967296)"
    tsan_
    mixcheck_ 2>&1 | tee "$res/mixcheck.txt"
    ;;
K)  # target 4: where the one worker of workers=1 is off its CPU; the in-memory reference
    for c in lz4 zstd:1; do
        n=w1-${c/:/}
        ((($(left)) > 90)) || { echo "probe16: no time left for $n"; break; }
        LD_LIBRARY_PATH=$kit/lib timeout 150 perf record -a -g -e sched:sched_switch \
            -o /tmp/$n.data -- env OUT= bash "$kit/run.sh" --reps 1 --sizes 1M --writers 1 \
            --size $size --system "$n=codec=$c,workers=1" --csv "$res/$n.csv" >"$res/$n.md" 2>&1
        LD_LIBRARY_PATH=$kit/lib perf script -i /tmp/$n.data -F comm,tid,time,event,trace,ip,sym \
            2>/dev/null | python3 "$repo/perf/switches.py" >"$res/switches-$n.txt"
        rm -f /tmp/$n.data
        echo "== $n: $(grep -E '^\| .* \| write \|' "$res/$n.md" | head -1)"
        head -n 26 "$res/switches-$n.txt"
    done
    dd_ codec1 20 --size $size --reps ${PROBE_REPS:-3} --codec-threads 1 --system nullfs --sizes 1M
    grep -E '^\| codec' "$res/codec1.md"
    ;;
*) echo "probe16: unknown step $step" >&2; exit 2 ;;
esac
tar czf "${OUT:-/tmp}/probe-$step.tgz" -C "$(dirname "$res")" "$(basename "$res")"
rm -rf "$res"
echo "probe16 $step: $(($(date +%s) - t_start)) s"

#!/usr/bin/env bash
# Builds the cbfs libFuzzer targets (tests/fuzz/) with clang + ASan/UBSan, generates
# the seed corpus with the library itself, runs each target for SECONDS_PER_TARGET
# and prints "fuzz: TARGET executions=N" per target and, as the LAST line,
# "N passed, N failed" (a crash, leak, timeout or OOM is a failure).
# Usage: scripts/fuzz.sh [SECONDS_PER_TARGET]   (default 20)
# Environment: BUILD_DIR        build directory (default: build-fuzz/ in the repo)
#              CBFS_FUZZ_OUT    corpora, crash inputs and logs (default: BUILD_DIR/fuzz-out)
#              CBFS_FUZZ_TARGETS  space-separated subset (default: all five)
#              CBFS_JOBS        build parallelism (default 2)
# Crash inputs are kept as CBFS_FUZZ_OUT/TARGET/crash-*; reproduce with
#   BUILD_DIR/TARGET CRASH_FILE
# and once fixed, keep them in tests/fuzz/regress/NAME/ (NAME: TARGET without
# fuzz_), which every run reads with the seeds.
set -uo pipefail
cd "$(dirname "$0")/.."
REPO=$(pwd)
secs=${1:-20}
[[ $secs =~ ^[0-9]+$ ]] && ((secs > 0)) || { echo "usage: $0 [SECONDS_PER_TARGET]" >&2; exit 2; }
BUILD_DIR=${BUILD_DIR:-$REPO/build-fuzz}
OUT=${CBFS_FUZZ_OUT:-$BUILD_DIR/fuzz-out}
TARGETS=${CBFS_FUZZ_TARGETS:-fuzz_frame_hdr fuzz_block_decode fuzz_index_replay fuzz_index_open fuzz_store_conf}
jobs=${CBFS_JOBS:-2}
passed=0 failed=0

summary() { echo "$passed passed, $failed failed"; ((failed == 0)); exit $?; }

# ---- clang and its libFuzzer/sanitizer runtimes (idempotent: installs only what is missing)
if ! ./scripts/deps.sh --fuzz; then
    echo "fuzz: cannot install clang and its runtimes (scripts/deps.sh --fuzz)" >&2; failed=1; summary
fi

# ---- build: the whole core library instrumented, only the fuzz targets built
echo "fuzz: building $BUILD_DIR"
mkdir -p "$OUT"
if ! { CC=clang cmake -S "$REPO" -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Debug -DCMAKE_C_FLAGS=-O1 \
           -DCBFS_FUZZ=ON -DCBFS_SANITIZE=address,undefined -DCBFS_BUILD_TESTS=OFF \
           >"$OUT/build.log" 2>&1 &&
       cmake --build "$BUILD_DIR" -j "$jobs" --target $TARGETS cbfs-fuzz-seeds \
           >>"$OUT/build.log" 2>&1; }; then
    echo "fuzz: BUILD FAILED (see $OUT/build.log):"; tail -n 30 "$OUT/build.log"
    failed=1; summary
fi

# ---- seeds: real frames and sidecars written by the library (never committed)
rm -rf "$OUT/seeds"
if ! "$BUILD_DIR/cbfs-fuzz-seeds" "$OUT/seeds" "$REPO/tests/golden"; then
    echo "fuzz: seed generation failed"; failed=1; summary
fi

# ---- run: the corpus directory grows across runs (seeds are re-added each time)
for t in $TARGETS; do
    name=${t#fuzz_}
    corpus=$OUT/$t/corpus
    mkdir -p "$corpus"
    log=$OUT/$t/run.log
    rc=0
    # Inputs that once broke a contract (tests/fuzz/regress/NAME/) are read
    # with the seeds, so every run tries them first.
    regress=()
    [[ -d $REPO/tests/fuzz/regress/$name ]] && regress=("$REPO/tests/fuzz/regress/$name")
    # -timeout: one input; the outer timeout only guards against a wedged fuzzer.
    ( cd "$OUT/$t" && UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 \
        timeout -k 10 $((secs + 120)) "$BUILD_DIR/$t" -max_total_time="$secs" \
            -rss_limit_mb=2048 -timeout=10 -print_final_stats=1 -artifact_prefix="$OUT/$t/" \
            "$corpus" "$OUT/seeds/$name" "${regress[@]}" ) >"$log" 2>&1 || rc=$?
    execs=$(grep -a 'stat::number_of_executed_units' "$log" | tail -n 1 | awk '{print $2}')
    echo "fuzz: $t executions=${execs:-0}"
    if ((rc == 0)) && [[ -n $execs ]]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1))
        echo "fuzz: $t FAILED (exit status $rc), log $log"
        grep -aE 'ERROR:|SUMMARY:|contract broken|Test unit written|^    #[0-9]+ ' "$log" | head -n 40 | sed 's/^/    /'
    fi
done
summary

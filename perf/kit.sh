#!/usr/bin/env bash
# perf/kit.sh: builds cbfs (scripts/build.sh, incremental) and collects perf/kit/, a
# self-contained benchmark kit for a bare machine (no package registry, no fio, no apt):
#   bin/   mount.cbfs cbfs cbfs-nullfs cbfs-codec-bench fusermount3 zstd lz4 (debug info
#          stripped; symbols kept)
#   lib/   every shared library they need except glibc's own (libc, libm, libpthread, libdl,
#          librt, ld-linux): the machine there has a newer glibc, so those come from it
#   ddbench gensrc.py gendata.py   the benchmark and the source generator
#   corpus-slice.zst   only when a TPC-H corpus tar exists here (see below)
#   run.sh   the one command there: bash perf/kit/run.sh --suite 16core --part 1/3 ...
#   VERSION  commit, build type, host, file list with sha256
# The source data is not carried: run.sh makes it there (perf/gensrc.py: gendata.py csv +
# mixed chunks, ~2 s per GiB on 16 cores), or repeats corpus-slice.zst when the kit has one:
# 4 pieces of CBFS_KIT_SLICE_MIB/4 MiB (default 96 MiB in all) at 10/35/60/85 % of
# /var/tmp/cbfs-corpus/tpch-sf1.tar (or tpch-sf0.1.tar; CBFS_KIT_CORPUS=FILE for another),
# compressed with zstd -19.
# With --perf, bin/ also gets this machine's perf (linux-perf, Debian 12's 6.1) and lib/ the
# libraries it loads (~35 MiB more): for `perf record`/`perf report` of a point there, which
# has no perf of its own. perf 6.1 reads a newer kernel's perf_event ABI.
# With --tsan, tsan/ gets the engine stress built with ThreadSanitizer (scripts/build.sh
# build-tsan, as the suite builds it) and its libtsan: perf/probe16.sh J runs it with 16
# workers, which this machine's 2 cores cannot exercise.
# Usage: perf/kit.sh [--perf] [--tsan] [BUILD_DIR]   (default build/)
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$PWD
with_perf=0 with_tsan=0
while [[ "${1:-}" == --* ]]; do
    case $1 in
    --perf) with_perf=1 ;;
    --tsan) with_tsan=1 ;;
    *) echo "usage: perf/kit.sh [--perf] [--tsan] [BUILD_DIR]" >&2; exit 2 ;;
    esac
    shift
done
bdir=${1:-build}
kit=$repo/perf/kit
limit_mib=40
((with_perf)) && limit_mib=80
((with_tsan)) && limit_mib=$((limit_mib + 10))

scripts/build.sh "$bdir" >/dev/null
rm -rf "$kit"
mkdir -p "$kit/bin" "$kit/lib"

bins=("$bdir/mount.cbfs" "$bdir/cbfs" "$bdir/cbfs-nullfs" "$bdir/cbfs-codec-bench")
tools=(fusermount3 zstd lz4)
((with_perf)) && tools+=(perf)
for t in "${tools[@]}"; do
    p=$(command -v "$t" || true)
    [[ -n "$p" ]] || { echo "kit.sh: $t not found here (apt-get install fuse3 zstd lz4 linux-perf)" >&2; exit 1; }
    bins+=("$p")
done
for b in "${bins[@]}"; do
    strip --strip-debug -o "$kit/bin/$(basename "$b")" "$b"
    chmod 755 "$kit/bin/$(basename "$b")" # a copy of fusermount3 is not setuid: fine as root
done

# Libraries, by the soname the loader looks for (left of "=>"), resolved through symlinks.
glibc='^(linux-vdso|ld-linux|libc\.so|libm\.so|libpthread\.so|libdl\.so|librt\.so|libresolv\.so|libutil\.so)'
for b in "${bins[@]}"; do
    ldd "$b" | awk '$2 == "=>" && $3 ~ /^\// {print $1, $3}'
done | sort -u | while read -r soname path; do
    [[ "$soname" =~ $glibc ]] && continue
    cp -L "$path" "$kit/lib/$soname"
done
for need in libfuse3.so.3 libzstd.so.1 liblz4.so.1 liblzma.so.5 libbz2.so.1.0 libxxhash.so.0; do
    [[ -f "$kit/lib/$need" ]] || { echo "kit.sh: $need not collected (ldd changed?)" >&2; exit 1; }
done
strip --strip-debug "$kit"/lib/*.so* 2>/dev/null || true

if ((with_tsan)); then
    scripts/build.sh build-tsan -DCMAKE_BUILD_TYPE=Debug -DCBFS_SANITIZE=thread \
        -DCBFS_BUILD_TESTS=OFF >/dev/null
    mkdir -p "$kit/tsan"
    strip --strip-debug -o "$kit/tsan/cbfs-engine-stress" build-tsan/cbfs-engine-stress
    ldd build-tsan/cbfs-engine-stress | awk '$1 ~ /^libtsan/ && $3 ~ /^\// {print $1, $3}' |
        while read -r soname path; do cp -L "$path" "$kit/tsan/$soname"; done
    ls "$kit"/tsan/libtsan.so.* >/dev/null || { echo "kit.sh: libtsan not collected" >&2; exit 1; }
fi

install -m 755 perf/ddbench "$kit/ddbench"
install -m 755 perf/gensrc.py "$kit/gensrc.py"
install -m 644 tests/mount/tools/gendata.py "$kit/gendata.py"

# A corpus slice, when there is a corpus here.
corpus=${CBFS_KIT_CORPUS:-}
if [[ -z "$corpus" ]]; then
    for c in /var/tmp/cbfs-corpus/tpch-sf1.tar /var/tmp/cbfs-corpus/tpch-sf0.1.tar; do
        [[ -f "$c" ]] && { corpus=$c; break; }
    done
fi
source_note="generated there by gensrc.py (gendata.py csv + mixed, 64 MiB chunks); no corpus tar here"
if [[ -n "$corpus" ]]; then
    slice_mib=${CBFS_KIT_SLICE_MIB:-96}
    piece=$((slice_mib / 4))
    size=$(stat -c %s "$corpus")
    total_mib=$((size >> 20))
    ((total_mib >= slice_mib)) || { echo "kit.sh: $corpus smaller than $slice_mib MiB" >&2; exit 1; }
    {
        for pct in 10 35 60 85; do
            skip=$((total_mib * pct / 100))
            ((skip + piece <= total_mib)) || skip=$((total_mib - piece))
            dd if="$corpus" bs=1M skip="$skip" count="$piece" status=none
        done
    } | zstd -19 -T0 -q -c >"$kit/corpus-slice.zst"
    source_note="corpus slice: 4 x $piece MiB at 10/35/60/85 % of $(basename "$corpus") ($size bytes), repeated to the size there"
fi

{
    echo "cbfs perf kit, made $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(hostname) ($(. /etc/os-release; echo "$PRETTY_NAME"), $(ldd --version | head -1))"
    echo "commit $(git rev-parse HEAD)$(git diff --quiet HEAD -- src include perf CMakeLists.txt || echo ' + uncommitted changes') ($(git rev-parse --abbrev-ref HEAD))"
    echo "build $bdir: $(grep -m1 '^CMAKE_BUILD_TYPE:' "$bdir/CMakeCache.txt" | cut -d= -f2)"
    echo "source: $source_note"
    echo
    (cd "$kit" && find . -type f ! -name VERSION | sort | xargs sha256sum)
} >"$kit/VERSION"

cat >"$kit/run.sh" <<'EOF'
#!/usr/bin/env bash
# cbfs perf kit: perf/ddbench with the kit's programs and libraries (made by perf/kit.sh).
#   bash perf/kit/run.sh --suite 16core --part 1/3 --csv $OUT/part1.csv
# PATH: the kit's bin/ first (zstd, lz4, fusermount3). LD_LIBRARY_PATH=the kit's lib/ is set
# for every program ddbench runs (--libdir), not for python3 itself, which must keep the
# machine's own libz/liblzma. The source (2 GiB for the suite) is made once in /var/tmp and
# reused while the machine stays up. Output: stdout (Markdown tables, targets), stderr
# (progress); with $OUT set, both are also kept in $OUT/ddbench-*.log.
set -euo pipefail
kit=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
export PATH="$kit/bin:$PATH"
head -4 "$kit/VERSION"
echo "machine: $(nproc) CPUs, $(uname -r), $(. /etc/os-release 2>/dev/null; echo "${PRETTY_NAME:-?}"), $(ldd --version 2>/dev/null | head -1)"
missing=$(for b in "$kit"/bin/*; do
    LD_LIBRARY_PATH="$kit/lib" LD_TRACE_LOADED_OBJECTS=1 "$b" 2>&1 | grep -E "not found|error" | sed "s|^|$(basename "$b"): |"
done || true)
[[ -z "$missing" ]] || { echo "kit: libraries missing:"; echo "$missing"; exit 1; }
[[ -e /dev/fuse ]] || echo "kit: no /dev/fuse here: FUSE points will fail"
args=(--build "$kit/bin" --libdir "$kit/lib" --deadline 500)
[[ -f "$kit/corpus-slice.zst" ]] && args+=(--slice "$kit/corpus-slice.zst")
if [[ -n "${OUT:-}" && -d "${OUT:-}" && -w "${OUT:-}" ]]; then
    log="$OUT/ddbench-$(date +%Y%m%d-%H%M%S).log"
    cp "$kit/VERSION" "$OUT/kit-VERSION.txt"
    python3 "$kit/ddbench" "${args[@]}" "$@" 2>&1 | tee "$log"
    exit "${PIPESTATUS[0]}"
fi
exec python3 "$kit/ddbench" "${args[@]}" "$@"
EOF
chmod 755 "$kit/run.sh"

mib=$(du -sm "$kit" | cut -f1)
echo "kit: $kit, $(du -sh "$kit" | cut -f1) ($(ls "$kit/lib" | tr '\n' ' '))"
echo "source: $source_note"
((mib <= limit_mib)) || echo "kit.sh: WARNING: $mib MiB, over the $limit_mib MiB budget" >&2
echo "there: bash perf/kit/run.sh --suite 16core --part 1/3 --csv \$OUT/part1.csv   (carry: [\"perf/kit\"])"

#!/usr/bin/env bash
# Configures and builds cbfs with CMake.
# Usage: scripts/build.sh [BUILD_DIR [extra cmake args...]]   (default: build/, RelWithDebInfo)
# Environment: CBFS_JOBS (parallel jobs, default: online CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."

bdir=${1:-build}
shift || true
jobs=${CBFS_JOBS:-$(nproc 2>/dev/null || echo 2)}

has_type=0
for a in "$@"; do [[ "$a" == -DCMAKE_BUILD_TYPE=* ]] && has_type=1; done
args=("$@")
((has_type)) || args=(-DCMAKE_BUILD_TYPE=RelWithDebInfo "${args[@]}")

cmake -S . -B "$bdir" "${args[@]}" >/dev/null
cmake --build "$bdir" -j "$jobs"
echo "build: $bdir/mount.cbfs"

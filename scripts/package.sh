#!/usr/bin/env bash
# Builds the Debian package cbfs_VERSION_ARCH.deb with CPack (docs/PACKAGING.md says why).
# Usage: scripts/package.sh [BUILD_DIR]   (default: build-deb/; never build/, which the
# tests use). Configures BUILD_DIR with -DCBFS_PACKAGE_DEB=ON (packaging/deb.cmake),
# Debian's hardening flags (dpkg-buildflags) and no unit tests, builds, packs, and prints
# the package's path as the last line.
# Environment: CBFS_JOBS (parallel jobs, default: online CPUs).
set -euo pipefail
cd "$(dirname "$0")/.."

bdir=${1:-build-deb}
[[ $(realpath -m "$bdir") != $(realpath -m build) ]] ||
    { echo "package: build/ is the tests' build; use another directory" >&2; exit 2; }
# Debian's build flags with every hardening feature (fortify, stack protector, PIE,
# relro, bind-now: what lintian checks); -ffile-prefix-map keeps paths out of binaries.
export DEB_BUILD_MAINT_OPTIONS=hardening=+all
cflags="$(dpkg-buildflags --get CFLAGS) $(dpkg-buildflags --get CPPFLAGS)"
ldflags=$(dpkg-buildflags --get LDFLAGS)
./scripts/build.sh "$bdir" -DCBFS_PACKAGE_DEB=ON -DCBFS_BUILD_TESTS=OFF -DCBFS_HELPER_DIR=/sbin \
    -DCMAKE_C_FLAGS="$cflags" -DCMAKE_EXE_LINKER_FLAGS="$ldflags" >/dev/null
rm -f "$bdir"/cbfs_*.deb
(cd "$bdir" && cpack -G DEB >cpack.log 2>&1) || { cat "$bdir/cpack.log" >&2; exit 1; }
deb=$(ls "$bdir"/cbfs_*.deb)
echo "package: $deb"

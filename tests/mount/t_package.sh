#!/usr/bin/env bash
# The Debian package: scripts/package.sh builds it (in build-deb/, never build/, which the
# other tests use), lintian reports no error or warning, `apt-get install ./cbfs_*.deb`
# puts /sbin/mount.cbfs, /sbin/mount.fuse.cbfs, /usr/bin/cbfs and both man pages in place;
# an fstab line of type cbfs and one of type fuse.cbfs mount with `mount DIR` through
# mount(8) (an alternative fstab, `mount -T`: /etc/fstab is not touched), files written
# there come back through the installed `cbfs cat` after umount; the installed systemd
# examples pass systemd-analyze verify with their man pages; `apt-get remove` leaves no
# file of the package behind.
# The package is removed on every exit path. The test refuses to run, touching nothing,
# when a cbfs package is installed or a /sbin/mount.cbfs it did not install exists.
. "$(dirname "$0")/lib.sh"

[[ $(id -u) -eq 0 ]] || fail "needs root (apt-get, mount(8))"
OWN=(/sbin/mount.cbfs /sbin/mount.fuse.cbfs /usr/bin/cbfs)
pkg_installed() { [[ $(dpkg-query -W -f='${Status}' cbfs 2>/dev/null) == *" installed" ]]; }
pkg_installed && fail "a cbfs package is installed already; remove it first (apt-get remove cbfs)"
for f in "${OWN[@]}"; do
    [[ ! -e $f && ! -L $f ]] || fail "$f exists (not from this test); it would be replaced: move it away first"
done

# our mounts (background daemons under $T) and the package go first, then the harness;
# errexit and the ERR trap off first, or `(exit $rc)` would end the trap before cbfs_cleanup
installed=0
pkg_cleanup() {
    local m i
    for m in $(awk -v t="$T" 'index($2, t) == 1 {print $2}' /proc/mounts); do umount -l "$m"; done
    for ((i = 0; i < 100; i++)); do pgrep -f "mount[.](fuse[.])?cbfs .*$T/" >/dev/null || break; sleep 0.1; done
    if ((installed)) && pkg_installed; then
        apt-get -o DPkg::Lock::Timeout=120 remove -y -q cbfs >"$T/cleanup-remove.log" 2>&1 ||
            echo "  t_package: apt-get remove cbfs failed: $(tail -n 3 "$T/cleanup-remove.log")"
    fi
}
trap 'rc=$?; trap - ERR; set +e; pkg_cleanup; (exit $rc); cbfs_cleanup' EXIT

# build; version from the build's CMake cache (project() in CMakeLists.txt)
bdir=${CBFS_PKG_BUILD:-$CBFS_REPO/build-deb}
"$CBFS_REPO/scripts/package.sh" "$bdir" >"$T/package.log" 2>&1 ||
    fail "scripts/package.sh: $(tail -n 5 "$T/package.log" | tr '\n' '|')"
version=$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$bdir/CMakeCache.txt")
# the package's version: project()'s plus the commit, so a rebuild from a later commit
# upgrades (packaging/deb.cmake)
pkgver=$version+git$(git -C "$CBFS_REPO" rev-list --count HEAD).g$(git -C "$CBFS_REPO" rev-parse --short=7 HEAD)
deb=$bdir/cbfs_${pkgver}_$(dpkg --print-architecture).deb
[[ -f $deb ]] || fail "no $deb: $(tail -n 2 "$T/package.log")"
check_eq "package: $deb" "$(tail -n 1 "$T/package.log")" "package.sh's last line"
check_eq "$pkgver" "$(dpkg-deb -f "$deb" Version)" "the package's version"
dpkg --compare-versions "$pkgver" gt "$version" || fail "$pkgver is not newer than $version"
dpkg-deb -f "$deb" Depends >"$T/depends"
for d in fuse3 libfuse3-3 libzstd1 liblz4-1 liblzma5 libbz2-1.0 libxxhash0 libc6; do
    grep -qE "(^|, )$d( |,|$)" "$T/depends" || fail "Depends lacks $d: $(cat "$T/depends")"
done

# lintian (as root it says so on stderr; that line is not a finding)
lintian --fail-on error,warning "$deb" >"$T/lintian.out" 2>&1 ||
    fail "lintian: $(grep -v 'root privileges' "$T/lintian.out" | head -n 8 | tr '\n' '|')"
! grep -qE '^[EW]: ' "$T/lintian.out" || fail "lintian: $(grep -E '^[EW]: ' "$T/lintian.out" | head -n 8 | tr '\n' '|')"

# install
installed=1
apt-get -o DPkg::Lock::Timeout=120 install -y -q --no-install-recommends "$deb" >"$T/install.log" 2>&1 ||
    fail "apt-get install $deb: $(tail -n 5 "$T/install.log" | tr '\n' '|')"
pkg_installed || fail "apt-get install: cbfs not installed"
check_eq "mount.cbfs" "$(readlink /sbin/mount.fuse.cbfs)" "/sbin/mount.fuse.cbfs link"
check_eq "cbfs $version" "$(/usr/bin/cbfs --version)" "/usr/bin/cbfs --version"
/sbin/mount.cbfs --version | grep -q "^mount.cbfs (cbfs) $version, " || fail "/sbin/mount.cbfs --version"
check_eq /usr/share/man/man8/mount.cbfs.8.gz "$(man -w mount.cbfs)" "man -w mount.cbfs"
check_eq /usr/share/man/man1/cbfs.1.gz "$(man -w cbfs)" "man -w cbfs"
zcat /usr/share/man/man8/mount.cbfs.8.gz | grep -q "^\.TH .*\"cbfs $version\"" || fail "man page version"
dpkg -L cbfs >"$T/files"
for doc in FORMAT.md NFS.md OPERATIONS.md guides/oracle-rman.md guides/postgresql.md; do
    grep -qx "/usr/share/doc/cbfs/$doc" "$T/files" || fail "$doc not installed"
done

# the systemd examples as installed, now with their man pages checked too
ex=/usr/share/doc/cbfs/examples
mkdir -p "$T/units"
cp "$ex/backups.mount.example" "$T/units/backups.mount"
cp "$ex/cbfs-textfile.service" "$ex/cbfs-textfile.timer" "$T/units/"
systemd-analyze verify "$T/units/backups.mount" "$T/units/cbfs-textfile.service" \
    "$T/units/cbfs-textfile.timer" >"$T/verify.out" 2>&1 && [[ ! -s $T/verify.out ]] ||
    fail "systemd-analyze verify (installed examples): $(head -n 4 "$T/verify.out" | tr '\n' '|')"

# fstab lines of both types, mounted by mount point through mount(8) and the helper
python3 "$CBFS_TOOLS/gendata.py" csv 3M "$T/a.csv" 5
mkdir -p "$T/store1" "$T/mnt1" "$T/store2" "$T/mnt2"
cat >"$T/fstab" <<EOF
# store      mount point  type       options                  dump pass
$T/store1    $T/mnt1      cbfs       codec=zstd:3,nofail      0    0
$T/store2    $T/mnt2      fuse.cbfs  codec=lz4,noauto,nofail  0    0
EOF
for i in 1 2; do
    mount -T "$T/fstab" "$T/mnt$i" 2>"$T/mount.err" || fail "mount -T fstab $T/mnt$i: $(cat "$T/mount.err")"
    grep -q "^$T/store$i $T/mnt$i fuse.cbfs " /proc/mounts || fail "mnt$i: not in /proc/mounts"
    pid=$(pgrep -f "mount[.](fuse[.])?cbfs .*$T/store$i ") || fail "mnt$i: no daemon"
    check_eq "$(realpath /sbin/mount.cbfs)" "$(readlink "/proc/$pid/exe")" "mnt$i's daemon (the installed one)"
    cp "$T/a.csv" "$T/mnt$i/a.csv"
    umount "$T/mnt$i" || fail "umount $T/mnt$i"
    for _ in $(seq 100); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    ! kill -0 "$pid" 2>/dev/null || fail "mnt$i: daemon $pid still running 10 s after umount"
    # restore without the daemon, with the installed tool
    /usr/bin/cbfs cat "$T/store$i/a.csv" >"$T/back.csv" || fail "cbfs cat store$i/a.csv"
    same_file "$T/a.csv" "$T/back.csv"
    /usr/bin/cbfs verify "$T/store$i" >"$T/verify$i.out" 2>&1 ||
        fail "cbfs verify store$i: $(tail -n 3 "$T/verify$i.out")"
done
[[ -s $T/store1/.cbfsidx/a.csv && -s $T/store2/.cbfsidx/a.csv ]] || fail "no compressed files in the stores"

# remove: no file of the package is left (directories shared with others may stay)
installed=0
apt-get -o DPkg::Lock::Timeout=120 remove -y -q cbfs >"$T/remove.log" 2>&1 ||
    fail "apt-get remove cbfs: $(tail -n 5 "$T/remove.log" | tr '\n' '|')"
! pkg_installed || fail "cbfs still installed after apt-get remove"
while read -r f; do
    [[ -d $f ]] && continue  # a directory, or /sbin -> usr/sbin on a merged /usr
    [[ ! -e $f && ! -L $f ]] || fail "apt-get remove left $f behind"
done <"$T/files"
for f in "${OWN[@]}"; do [[ ! -e $f && ! -L $f ]] || fail "$f still there after apt-get remove"; done
pass "$(basename "$deb"), $(grep -c . "$T/files") paths"

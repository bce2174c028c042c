#!/usr/bin/env bash
# The systemd examples in mount-helpers/ pass `systemd-analyze verify` with no warning
# (it reads unit files without systemd running as PID 1): the .mount unit under the name
# its Where= demands, the textfile timer with its service. The mount unit keeps the
# promises docs/OPERATIONS.md makes (after local-fs.target, stopped before umount.target,
# a bound on umount(8)). A unit with a mistake in it fails the same check. No mount.
. "$(dirname "$0")/lib.sh"

src=$CBFS_REPO/mount-helpers d=$T/units
mkdir -p "$d"
cp "$src/backups.mount.example" "$d/backups.mount"
cp "$src/cbfs-textfile.service" "$src/cbfs-textfile.timer" "$d/"
# verify UNIT...: status 0 and not a line of output (unknown keys are only warnings).
# --man=no: the man pages the units name are checked by t_package.sh once installed.
verify() { systemd-analyze verify --man=no "$@" >"$T/verify.out" 2>&1 && [[ ! -s $T/verify.out ]]; }
verify "$d/backups.mount" "$d/cbfs-textfile.service" "$d/cbfs-textfile.timer" ||
    fail "systemd-analyze verify: $(head -n 5 "$T/verify.out" | tr '\n' '|')"

# the mount unit: ordered after local-fs.target, outside it, stopped before umount.target,
# with a bound on umount(8), and nothing that restarts it
for want in DefaultDependencies=no After=local-fs.target Conflicts=umount.target \
    Before=umount.target Type=cbfs TimeoutSec=5min; do
    grep -qx "$want" "$d/backups.mount" || fail "backups.mount lacks $want"
done
! grep -q '^Restart' "$d/backups.mount" || fail "backups.mount restarts something"

# the check can fail: an unknown key, and a unit named after another mount point
mkdir -p "$d/bad"
sed 's/^TimeoutSec=/TimeoutSecs=/' "$src/backups.mount.example" >"$d/bad/backups.mount"
! verify "$d/bad/backups.mount" || fail "verify accepted an unknown key"
cp "$src/backups.mount.example" "$d/bad/restore.mount"
! verify "$d/bad/restore.mount" || fail "verify accepted a unit named after another mount point"
pass

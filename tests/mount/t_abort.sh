#!/usr/bin/env bash
# An aborted FUSE connection (fusectl's abort, what an admin does to a hung mount)
# is not an unmount: the daemon flushes what was written, says so in its log and
# exits 1, leaving the dead mount for the admin to unmount; the data is intact
# after a remount. (A plain unmount exits 0: every other test.)
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
ctl=/sys/fs/fuse/connections
if [[ -z $(ls -A "$ctl" 2>/dev/null) ]] && mount -t fusectl fusectl "$ctl" 2>/dev/null; then
    mounted_ctl=1
fi
python3 "$CBFS_TOOLS/gendata.py" mixed 3M "$T/src.bin" 31
cbfs_mount "$store" "$mnt" codec=zstd,block_size=64K
cp "$T/src.bin" "$mnt/f.bin"
dev=$(awk -v m="$(realpath "$mnt")" '$5 == m {print $3}' /proc/self/mountinfo)
if [[ ! -w $ctl/${dev#*:}/abort ]]; then
    [[ -n ${mounted_ctl:-} ]] && umount "$ctl"
    cbfs_umount "$mnt"
    note "fusectl not available: abort not tested"
    pass
fi
pid=${CBFS_PID[$mnt]} log=${CBFS_LOG[$mnt]}
echo 1 >"$ctl/${dev#*:}/abort"
[[ -n ${mounted_ctl:-} ]] && umount "$ctl"
rc=0
for ((i = 0; i < 300; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
wait "$pid" || rc=$?
unset "CBFS_PID[$mnt]"
check_eq 1 "$rc" "daemon exit status after an abort"
grep -q "the FUSE connection of .* was aborted" "$log" || fail "no abort line in the log: $(tail -n 3 "$log")"
rc=0
stat "$mnt" >/dev/null 2>"$T/stat.err" || rc=$?
grep -q 'not connected' "$T/stat.err" || fail "the aborted mount is not left in place: $(cat "$T/stat.err")"
fusermount3 -u "$mnt" || umount -l "$mnt"
cbfs_mount "$store" "$mnt"
same_file "$T/src.bin" "$mnt/f.bin"
cbfs_umount "$mnt"
pass

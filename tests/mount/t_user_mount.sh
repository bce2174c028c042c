#!/usr/bin/env bash
# A daemon run by an ordinary user (fusermount3's setuid mount, as a user's
# own backups would) serves its files with exactly the modes asked for: its
# own umask must not narrow them (a file made with umask 0 came out 644, not
# 666), and the data reads back. /dev/fuse is opened up to the user for the
# test (it is 0600 on this machine) and put back on every exit path.
. "$(dirname "$0")/lib.sh"

id nobody >/dev/null 2>&1 || fail "needs the user nobody"
[[ -u $(command -v fusermount3) ]] || fail "fusermount3 is not setuid here (the fuse3 package makes it so)"
fuse_mode=$(stat -c %a /dev/fuse)
u=$T/user
restore() {
    [[ -n ${upid:-} ]] && { as_nobody fusermount3 -u "$u/m" 2>/dev/null || umount -l "$u/m" 2>/dev/null; wait "$upid" 2>/dev/null; } || true
    chmod "$fuse_mode" /dev/fuse
}
trap 'rc=$?; restore; (exit $rc); cbfs_cleanup' EXIT
chmod 666 /dev/fuse
mkdir -p "$u/s" "$u/m"
chown -R nobody: "$u"
chmod 755 "$T" "$u"
python3 "$CBFS_TOOLS/gendata.py" csv 3M "$T/src" 1
chmod 644 "$T/src"
# user_mount LOG: the user's daemon on $u/s at $u/m (upid)
user_mount() {
    (umask 022; exec setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
        "$CBFS_MOUNT_BIN" -f -o codec=lz4 "$u/s" "$u/m") >"$1" 2>&1 &
    upid=$!
    for _ in $(seq 50); do grep -q " $u/m " /proc/mounts && break; sleep 0.1; done
    grep -q " $u/m " /proc/mounts || fail "the user's mount did not come up: $(cat "$1")"
}
# user_umount LOG: unmounted by the user, the daemon exits 0
user_umount() {
    as_nobody fusermount3 -u "$u/m" || fail "the user could not unmount"
    wait "$upid" || fail "the user's daemon exited $?: $(cat "$1")"
    upid=
}
user_mount "$T/user.log"
as_nobody sh -c "umask 0; : >'$u/m/f'; mkdir -m 777 '$u/m/d'; mkdir '$u/m/e'; cp '$T/src' '$u/m/c'" ||
    fail "creating as the user failed"
got=$(as_nobody stat -c '%n %a' "$u/m/f" "$u/m/d" "$u/m/e" | sed "s|$u/m/||")
as_nobody cmp "$T/src" "$u/m/c" || fail "the user's compressed file reads back other bytes"
user_umount "$T/user.log"
[[ -e $u/s/.cbfsidx/c || -e $u/s/c.cbfsidx ]] || fail "c was not stored compressed"
# SIGTERM stops a user's daemon through fusermount3 -u -z (stop.h), with a file still
# open for writing: the mount is detached at once, the daemon serves the open file until
# it is closed, then exits 0 with every byte stored (libfuse's own handler, which an idle
# daemon could not tell apart, ended the loop at once and lost what the cache held;
# Debian's python3: the user may not reach root's pyenv, if PATH has one)
user_mount "$T/user2.log"
as_nobody cmp "$T/src" "$u/m/c" || fail "c after a remount"
cp "$CBFS_TOOLS/heldwriter.py" "$T/" # where the user can read it (the checkout may be root's only)
chmod 644 "$T/heldwriter.py"
as_nobody /usr/bin/python3 "$T/heldwriter.py" "$u/m/w" "$T/src" "$u/go" >"$T/writer.out" 2>&1 &
wpid=$!
for _ in $(seq 200); do [[ -e $u/go.written ]] && break; sleep 0.05; done
[[ -e $u/go.written ]] || fail "the user's writer did not finish its writes: $(cat "$T/writer.out")"
kill -TERM "$upid"
for _ in $(seq 100); do grep -q " $u/m " /proc/mounts || break; sleep 0.05; done
grep -q " $u/m " /proc/mounts && fail "still mounted after SIGTERM: $(cat "$T/user2.log")"
kill -0 "$upid" 2>/dev/null || fail "the user's daemon exited on SIGTERM with a file still open"
touch "$u/go"
wait "$wpid" || true
check_eq "close ok" "$(cat "$T/writer.out")" "the user's writer's close after SIGTERM"
wait "$upid" || fail "the user's daemon exited $? on SIGTERM: $(cat "$T/user2.log")"
upid=
user_mount "$T/user2.log"
as_nobody cmp "$T/src" "$u/m/w" || fail "the file written across SIGTERM is not whole"
user_umount "$T/user2.log"
# A file the user may write but does not own (root's, 0666) whose sidecar is
# lost: the user's daemon rebuilds it as its own (it cannot give it away), and
# takes it as the file's index from then on: every later write open works.
[[ -f $u/s/.cbfsidx/c ]] || fail "c has no sidecar"
chown root "$u/s/c"
chmod 666 "$u/s/c"
rm "$u/s/.cbfsidx/c"
cp "$T/src" "$T/want"
for i in 1 2; do
    user_mount "$T/user4.log"
    as_nobody sh -c "echo line$i >>'$u/m/c'" 2>"$T/append.err" ||
        fail "append $i to root's 0666 file by the user's daemon: $(cat "$T/append.err")"
    echo "line$i" >>"$T/want"
    user_umount "$T/user4.log"
done
[[ -f $u/s/.cbfsidx/c ]] || fail "c's sidecar was not rebuilt"
user_mount "$T/user4.log"
as_nobody cmp "$T/want" "$u/m/c" || fail "c after the appends"
user_umount "$T/user4.log"
# A first mount that fails (here fusermount3 refuses allow_other to a user) leaves no
# store.conf: its settings stayed every later mount's defaults.
if grep -qs '^[[:space:]]*user_allow_other' /etc/fuse.conf; then
    note "user_allow_other is set in /etc/fuse.conf: the failed first mount is not tried"
else
    mkdir -p "$u/s2" && chown nobody: "$u/s2"
    rc=0
    (umask 022; exec setpriv --reuid=nobody --regid="$(id -g nobody)" --clear-groups -- \
        timeout 20 "$CBFS_MOUNT_BIN" -f -o allow_other,codec=zstd:9 "$u/s2" "$u/m") \
        >"$T/user3.log" 2>&1 || rc=$?
    [[ $rc != 0 && $rc != 124 ]] || fail "the user's allow_other mount did not fail (exit $rc): $(cat "$T/user3.log")"
    [[ -e $u/s2/.cbfs/store.conf ]] && fail "the failed first mount left its store.conf: $(cat "$u/s2/.cbfs/store.conf")"
fi
[[ $(tr '\n' ' ' <<<"$got") == "f 666 d 777 e 777 " ]] || fail "modes: $(tr '\n' ' ' <<<"$got") (want f 666 d 777 e 777)"
pass

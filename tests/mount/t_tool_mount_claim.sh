#!/usr/bin/env bash
# The cbfs tool maps a path inside a fuse.cbfs mount to the store the mount's source
# field (its fsname) names. Any user may make such a mount (fusermount3) naming another's
# store: `mount.cbfs -o fsname=/root/store ~/s ~/m`. root's (or another user's)
# `cbfs fsck --repair ~user/m`, `cbfs cat ~user/m/f` then acted on /root/store. The claim is
# taken only from a mount made by root, by the owner of the store it names, or by the
# caller itself (tool_mount_claim); any other is refused, naming the mount, the uid that
# made it and the store it claims, and a walk that meets it does not walk it. A bind mount
# of a directory of a cbfs mount maps to that directory of the store (mountinfo's root),
# not to the store's root.
#
# The user's allow_other mount needs user_allow_other in /etc/fuse.conf: the test runs in
# a mount namespace of its own, where a copy of fuse.conf that has it is bound over the
# machine's (which stays as it is, for the tests running beside this one); /dev/fuse is
# opened up to the user for the test (0600 here) and put back on every exit path.
if [[ -z ${CBFS_MOUNT_CLAIM_NS:-} && $(id -u) == 0 ]]; then
    CBFS_MOUNT_CLAIM_NS=1 exec unshare -m --propagation private "$BASH" "$0" "$@"
fi
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_two_users
[[ -u $(command -v fusermount3) ]] || fail "fusermount3 is not setuid here (the fuse3 package makes it so)"
[[ -n ${CBFS_MOUNT_CLAIM_NS:-} ]] || fail "not in a mount namespace of its own"
cbfs_ns_leave_others

fuse_mode=$(stat -c %a /dev/fuse)
u=$T/user
restore() {
    [[ -n ${upid:-} ]] && { as_user "$A" fusermount3 -u "$u/m" 2>/dev/null || umount -l "$u/m" 2>/dev/null; wait "$upid" 2>/dev/null; } || true
    chmod "$fuse_mode" /dev/fuse
}
trap 'rc=$?; restore; (exit $rc); cbfs_cleanup' EXIT
chmod 666 /dev/fuse
{ grep -v user_allow_other /etc/fuse.conf 2>/dev/null || true; echo user_allow_other; } >"$T/fuse.conf"
touch /etc/fuse.conf 2>/dev/null || true
mount --bind "$T/fuse.conf" /etc/fuse.conf || fail "cannot bind a fuse.conf over /etc/fuse.conf"

# root's store: f, sub/g and an orphan sidecar (a repair of it would remove that)
python3 "$CBFS_TOOLS/gendata.py" csv 200K "$T/root_f" 3
python3 "$CBFS_TOOLS/gendata.py" csv 100K "$T/root_g" 4
rs=$T/rs
mkdir -p "$rs"
cbfs_mount "$rs" "$T/m" codec=lz4
cp "$T/root_f" "$T/m/f"
mkdir "$T/m/sub"
cp "$T/root_g" "$T/m/sub/g"
cp "$T/root_g" "$T/m/gone"
cbfs_umount "$T/m"
rm "$rs/gone"
orphan=$(cbfs_sidecar_of "$rs" gone 2)
[[ -f $orphan ]] || fail "no orphan sidecar at $orphan"
chmod 755 "$rs"

# A bind mount of a directory of root's mount shows that directory of the store
cbfs_mount "$rs" "$T/m" codec=lz4
mkdir "$T/b"
mount --bind "$T/m/sub" "$T/b"
rc=0
"$CBFS" cat "$T/b/g" >"$T/b.out" 2>"$T/b.err" || rc=$?
umount "$T/b"
check_eq 0 "$rc" "cat through a bind mount of a directory of the mount: $(cat "$T/b.err")"
cmp -s "$T/root_g" "$T/b.out" || fail "cat through the bind mount gave other bytes than sub/g"
cbfs_umount "$T/m"

# the user's own store, with f of its own
python3 "$CBFS_TOOLS/gendata.py" csv 150K "$T/user_f" 5
chmod 644 "$T/user_f"
mkdir -p "$u/s" "$u/m"
chown -R "$A:" "$u"
chmod 755 "$u"
# user_mount LOG [OPTS]: A's daemon on $u/s at $u/m (upid), allow_other(,OPTS)
user_mount() {
    (umask 022; exec setpriv --reuid="$A" --regid="$(id -g "$A")" --clear-groups -- \
        "$CBFS_MOUNT_BIN" -f -o "codec=lz4,allow_other${2:+,$2}" "$u/s" "$u/m") >"$1" 2>&1 &
    upid=$!
    for _ in $(seq 50); do grep -q " $u/m " /proc/self/mountinfo && break; sleep 0.1; done
    grep -q " $u/m " /proc/self/mountinfo || fail "the user's mount did not come up: $(cat "$1")"
}
user_umount() {
    as_user "$A" fusermount3 -u "$u/m" || fail "the user could not unmount"
    wait "$upid" || fail "the user's daemon exited $?: $(cat "$1")"
    upid=
}
user_mount "$T/user1.log"
as_user "$A" cp "$T/user_f" "$u/m/f" || fail "the user cannot write its mount"
user_umount "$T/user1.log"

# A's mount of its own store: its claim is taken
user_mount "$T/user2.log"
"$CBFS" cat "$u/m/f" >"$T/own.out" 2>"$T/own.err" || fail "root's cat of the user's own mount: $(cat "$T/own.err")"
cmp -s "$T/user_f" "$T/own.out" || fail "root's cat of the user's own mount gave other bytes"
user_umount "$T/user2.log"

# A's mount that claims root's store: refused, naming the mount, A's uid and the store
user_mount "$T/user3.log" "fsname=$rs"
grep -q "^[^ ]* [^ ]* [^ ]* / $u/m .* - fuse.cbfs $rs .*user_id=$(id -u "$A")" /proc/self/mountinfo ||
    fail "the user's mount does not claim $rs: $(grep " $u/m " /proc/self/mountinfo)"
rc=0
"$CBFS" cat "$u/m/f" >"$T/cat.out" 2>"$T/cat.err" || rc=$?
check_eq 2 "$rc" "root's cat of a file of A's mount that claims root's store ($(cat "$T/cat.err"))"
[[ ! -s $T/cat.out ]] || fail "root's cat printed a file of the store A's mount claims"
grep -q "$u/m/f is on the cbfs mount $u/m: it was made by uid $(id -u "$A") and claims the store $rs, which uid 0 owns: not taken" "$T/cat.err" ||
    fail "cat's refusal: $(cat "$T/cat.err")"
fsck_rc 8 --repair "$u/m"
grep -q "it was made by uid $(id -u "$A") and claims the store $rs" "$T/fsck.out" || fail "fsck's refusal: $(cat "$T/fsck.out")"
[[ -f $orphan ]] || fail "fsck --repair through A's mount changed root's store"
rc=0
as_user "$B" "$CBFS" stat "$u/m" >"$T/b.out" 2>&1 || rc=$?
check_eq 2 "$rc" "B's stat of A's mount that claims root's store ($(cat "$T/b.out"))"
grep -q "was made by uid $(id -u "$A") and claims the store $rs" "$T/b.out" || fail "B's refusal: $(cat "$T/b.out")"
# A's own word is taken by A: it reads what it could name itself (root's store made
# readable to all for it)
chmod -R go+rX "$rs/.cbfs"
as_user "$A" "$CBFS" cat "$u/m/f" >"$T/a.out" 2>"$T/a.err" || fail "A's cat of its own mount's claim: $(cat "$T/a.err")"
cmp -s "$T/root_f" "$T/a.out" || fail "A's cat through its own claim is not root's f"
# a walk that meets the mount does not walk it, and says why (an error: not checked)
rc=0
"$CBFS" verify "$u" >"$T/v.out" 2>&1 || rc=$?
check_eq 2 "$rc" "verify of the directory holding A's mount ($(cat "$T/v.out"))"
grep -q "$u/m is a cbfs mount: it was made by uid $(id -u "$A") and claims the store $rs, .*; not walked" "$T/v.out" ||
    fail "verify's word on A's mount: $(cat "$T/v.out")"
user_umount "$T/user3.log"
fsck_rc 4 "$rs"
grep -q "orphan sidecar" "$T/fsck.out" || fail "root's store lost its orphan: $(cat "$T/fsck.out")"
pass

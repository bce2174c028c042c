#!/usr/bin/env bash
# POSIX ACLs as ext4 keeps them (the kernel enforces them: FUSE_POSIX_ACL; the
# store keeps them as its own xattrs). A named entry denies or grants another
# user (nobody, through allow_other) what the mode alone would not; a
# directory's default ACL is inherited by the files, directories and fifos
# made in it whatever the umask, and without one the umask applies; setfacl
# and chmod each change the other's answer at once (no stale attribute or ACL
# cache); an owner outside a setgid file's group who sets an ACL clears the
# set-group-ID bit; all of it survives a remount. Every answer is compared
# with the same operations on a directory of the local filesystem, for
# compressed and plain files. In the store a sidecar carries its data file's mode and ACL, so
# nobody denied the data can read its index there. On a store without ACLs
# (ramfs) the mount has none and the modes decide.
. "$(dirname "$0")/lib.sh"

id nobody >/dev/null 2>&1 || fail "needs the user nobody"
try() { answer "$1" as_nobody "${@:2}"; } # try WHAT CMD...: nobody's answer
# show NAME: its mode and ACL (access and default entries) on one line
show() { echo "$1 $(stat -c %a "$1") $(getfacl -cp "$1" | grep -v '^$' | tr '\n' ' ')"; }

# acl_ops: the operations, in the current directory; one line per answer
acl_ops() {
    chmod 777 .
    echo data >deny
    chmod 644 deny
    setfacl -m u:nobody:--- deny
    show deny
    try "read deny" cat deny
    echo data >grant
    chmod 600 grant
    setfacl -m u:nobody:rw grant
    show grant
    try "read grant" cat grant
    try "append grant" sh -c 'echo x >>grant'
    # setfacl, chmod, setfacl -b: each answer read back at once
    echo data >flip
    chmod 640 flip
    try "read flip before" cat flip
    setfacl -m u:nobody:r flip
    show flip
    try "read flip" cat flip
    chmod 604 flip
    show flip
    try "read flip after chmod" cat flip
    setfacl -b flip
    show flip
    try "read flip after setfacl -b" cat flip
    # the owner sets an ACL on its setgid file: outside the group the bit goes
    local g
    for g in root "$(id -g nobody)"; do
        echo data >sgid$g
        chown nobody:$g sgid$g
        chmod 2775 sgid$g
        try "setfacl sgid$g" setfacl -m u:daemon:rw sgid$g
        show sgid$g
    done
    mkdir dx
    chmod 777 dx
    setfacl -m u:nobody:r-x dx
    show dx
    try "create in dx" touch dx/n
    try "list dx" ls dx
    # default ACLs, with modes asked for beyond them and every umask
    mkdir dd
    chmod 755 dd
    setfacl -d -m u:nobody:rwx,g::r-x,o::--- dd
    local u n
    for u in 077 022 000; do
        (
            umask $u
            echo x >dd/f$u
            touch dd/t$u
            mkdir dd/d$u
            mkdir -m 700 dd/m$u
            mkfifo dd/p$u
            cp -p deny dd/c$u
        )
        for n in f t d m p c; do show dd/$n$u; done
    done
    try "append dd/f022" sh -c 'echo y >>dd/f022'
    try "create in dd/d022" touch dd/d022/n
    chmod 700 dd
    show dd
    # a setgid directory with a default ACL
    mkdir sg
    chmod 2775 sg
    setfacl -d -m g::rwx sg
    (
        umask 077
        mkdir sg/s
        touch sg/f
    )
    show sg/s
    show sg/f
    # no default ACL: the umask
    for u in 027 077; do
        (
            umask $u
            touch p$u
            mkdir q$u
            mkfifo r$u
        )
        show p$u
        show q$u
        show r$u
    done
}

# state: mode and ACL of everything below the current directory (remount check)
state() {
    local n
    find . -mindepth 1 \( -name '*.cbfsidx' -o -path ./.cbfs \) -prune -o -print | LC_ALL=C sort |
        while read -r n; do show "$n"; done
}

chmod 755 "$T"
ref_answers acl_ops state
grep -q '^read deny: Permission denied$' "$T/ref.out" ||
    fail "the local filesystem did not deny: $(head -n 3 "$T/ref.out" | tr '\n' '|')"
for opts in codec=lz4 codec=none; do mounted_answers "$opts,allow_other" acl_ops state; done

# the store of the compressed mount: each sidecar has its data file's
# permission bits (no set-id bits) and ACL, also where it was lost and made
# again: by the daemon (rebuilt from the frames at a writable open) and by fsck
perms() { printf '%o %s' $((0$(stat -c %a "$1") & 0777)) "$(getfacl -cp "$1" | tr '\n' ' ')"; }
store=$T/s.lz4_allow_other
rm "$store/.cbfsidx/grant" "$store/.cbfsidx/deny" "$store/dd/.cbfsidx/f022"
cbfs_mount "$store" "$T/m" codec=lz4
echo more >>"$T/m/grant"
cbfs_umount "$T/m"
[[ -f $store/.cbfsidx/grant ]] || fail "the daemon did not rebuild the sidecar of grant"
cbfs_tool
rc=0
"$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
check_eq 1 "$rc" "cbfs fsck --repair (1: errors corrected): $(tail -n 3 "$T/fsck.out" | tr '\n' '|')"
[[ -f $store/.cbfsidx/deny && -f $store/dd/.cbfsidx/f022 ]] && grep -q '/deny: repaired' "$T/fsck.out" ||
    fail "fsck did not rebuild the sidecars: $(tail -n 3 "$T/fsck.out" | tr '\n' '|')"
n=0
while read -r sc; do
    data=$(dirname "$(dirname "$sc")")/$(basename "$sc")
    check_eq "$(perms "$data")" "$(perms "$sc")" "mode and ACL of the sidecar $sc"
    n=$((n + 1))
done < <(find "$store" -path '*/.cbfsidx/*' -type f)
((n >= 10)) || fail "only $n sidecars in the store"
check_eq "$(try "read" cat "$store/.cbfsidx/deny")" "read: Permission denied" "nobody reading the sidecar of deny"
check_eq "$(try "read" cat "$store/.cbfsidx/grant")" "read: ok" "nobody reading the sidecar of grant"

# a store without ACLs (ramfs keeps no xattrs): the mount has none, and the modes
# and the umask decide as before (no ENOTSUP from permission checks)
mkdir -p "$T/ramfs"
mount -t ramfs ramfs "$T/ramfs" || fail "cannot mount a ramfs (needs root)"
mkdir "$T/ramfs/s"
cbfs_mount "$T/ramfs/s" "$T/m" codec=lz4,allow_other
chmod 777 "$T/m"
echo data >"$T/m/r644"
echo data >"$T/m/p600"
chmod 600 "$T/m/p600"
check_eq "setfacl: Operation not supported" "$(answer setfacl setfacl -m u:nobody:r "$T/m/r644")" \
    "setfacl without ACLs in the store"
check_eq "r644: ok" "$(try r644 cat "$T/m/r644")" "nobody reads a 0644 file without ACLs"
check_eq "p600: Permission denied" "$(try p600 cat "$T/m/p600")" "nobody reads a 0600 file without ACLs"
(umask 027 && mkdir "$T/m/d027" && touch "$T/m/d027/f")
check_eq "750 640" "$(stat -c %a "$T/m/d027" "$T/m/d027/f" | tr '\n' ' ' | sed 's/ $//')" \
    "modes with umask 027 without ACLs"
cbfs_umount "$T/m"
umount "$T/ramfs"
pass "$(wc -l <"$T/ref.out") answers as ext4's"

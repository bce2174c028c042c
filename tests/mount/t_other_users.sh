#!/usr/bin/env bash
# Another user (nobody) on an allow_other mount: what modes, ACLs and sticky
# directories deny it is denied, what they allow is allowed: read, write,
# truncate, rename, delete, create, chmod/chown/utimes/setfacl of root's files,
# xattrs, hard links (fs.protected_hardlinks). Every answer is compared with
# the same operations on a directory of the local filesystem (ext4), for
# compressed and plain files. Then the store's own names: neither nobody nor
# root reaches .cbfs/ or a sidecar through the mount by any path (.., ./,
# symlinks in the mount to ../.cbfs, .cbfs, a sidecar name, the mount's own
# absolute path), and through a symlink to the store itself nobody reads
# neither .cbfs/ nor the sidecar of a file it may not read (the sidecar has
# the data file's mode and ACL), nor the daemon's fds.
. "$(dirname "$0")/lib.sh"

id nobody >/dev/null 2>&1 || fail "needs the user nobody"
try() { answer "$1" as_nobody "${@:2}"; } # try WHAT CMD...: nobody's answer

files=(r644 p600 w666 acl_deny acl_rw)
hidden='^\.cbfs$|\.cbfsidx$' # the store's names, as ls prints them
# setup: root's tree in the current directory
setup() {
    local f
    for f in "${files[@]}"; do echo data >$f; done
    chmod 644 r644 acl_deny
    chmod 600 p600 acl_rw
    chmod 666 w666
    setfacl -m u:nobody:--- acl_deny
    setfacl -m u:nobody:rw acl_rw
    mkdir open closed sticky private
    chmod 777 open
    chmod 755 closed
    chmod 1777 sticky
    chmod 700 private
    for f in open/root_f open/x closed/f sticky/root_f private/f; do echo data >$f; done
    chmod 666 closed/f sticky/root_f private/f
    ln -s p600 to_p600
    as_nobody sh -c 'echo mine >sticky/own_f'
}

# user_ops: nobody's operations in the current directory; one line per answer
user_ops() {
    local f
    for f in "${files[@]}"; do
        try "read $f" cat $f
        try "append $f" sh -c "echo x >>$f"
    done
    try "read via symlink" cat to_p600
    try "truncate w666" truncate -s 1 w666
    try "truncate r644" truncate -s 1 r644
    try "rename in closed" mv closed/f closed/g
    try "rename in open" mv open/root_f open/moved
    try "rename root's in sticky" mv sticky/root_f sticky/mine
    try "rename own in sticky" mv sticky/own_f sticky/own_g
    try "rename into closed" mv open/x closed/x
    try "delete in closed" rm -f closed/f
    try "delete root's in sticky" rm -f sticky/root_f
    try "delete own in sticky" rm -f sticky/own_g
    try "delete in open" rm -f open/moved
    try "mkdir in closed" mkdir closed/n
    try "mkdir in open" mkdir open/n
    try "create in closed" touch closed/new
    try "read in private" cat private/f
    try "list private" ls private
    try "chmod root's" chmod 666 r644
    try "chown root's" chown nobody r644
    try "set times of root's" touch -d 2000-01-01 w666
    try "touch root's writable" touch w666
    try "setfacl root's" setfacl -m u:nobody:rwx r644
    try "set user xattr writable" setfattr -n user.x -v 1 w666
    try "set user xattr read-only" setfattr -n user.x -v 1 r644
    try "get user xattr" getfattr -n user.x w666
    try "hard link unreadable" ln p600 open/hl
    try "hard link writable" ln w666 open/hl2
    echo "state: $(LC_ALL=C ls -A . open closed sticky | tr '\n' ' ')"
}

ref=$T/ref
chmod 755 "$T"
mkdir -p "$ref"
chmod 777 "$ref"
(cd "$ref" && setup && user_ops) >"$T/ref.out" 2>&1
grep -q '^read acl_deny: Permission denied$' "$T/ref.out" ||
    fail "the local filesystem did not deny: $(head -n 4 "$T/ref.out" | tr '\n' '|')"

for opts in codec=lz4 codec=none; do
    tag=${opts#codec=}
    store=$T/s.$tag mnt=$T/m.$tag
    mkdir -p "$store"
    cbfs_mount "$store" "$mnt" "$opts,allow_other"
    chmod 777 "$mnt"
    (cd "$mnt" && setup && user_ops) >"$T/got.out" 2>&1
    same_answers "$opts: answers differ from ext4" "$T/ref.out" "$T/got.out"

    # the store's own names, by every path through the mount: ENOENT for both users
    mkdir "$mnt/sub"
    ln -s ../.cbfs "$mnt/sub/up"
    ln -s .cbfs "$mnt/dot"
    ln -s "$(realpath "$mnt")/.cbfs" "$mnt/abs"
    ln -s .cbfsidx/r644 "$mnt/side"
    ln -s "$(realpath "$store")" "$mnt/store"
    for who in try answer; do
        for p in .cbfs .cbfs/store.conf ./.cbfs/lock sub/../.cbfs/store.conf sub/up/store.conf \
            dot/store.conf abs/store.conf side .cbfsidx/r644 sub/../.cbfsidx/r644 .cbfsidx; do
            check_eq "$p: No such file or directory" "$($who "$p" cat "$mnt/$p")" "$who cat"
        done
        check_eq "ls: No such file or directory" "$($who ls ls "$mnt/sub/up/")" "$who ls sub/up/"
        check_eq "cd: ok" "$($who cd sh -c "cd '$mnt/sub/..' && ! ls -a | grep -E '$hidden'")" \
            "$who: ls -a in sub/.. shows the store's names"
        check_eq "create: Operation not permitted" "$($who create touch "$mnt/sub/up")" \
            "$who creating sub/up's target"
    done
    ! ls -aR "$mnt" | grep -Eq "$hidden" || fail "ls -aR shows the store's names"

    # a symlink to the store itself leaves the mount: the store's modes answer
    check_eq "conf: Permission denied" "$(try conf cat "$mnt/store/.cbfs/store.conf")" "nobody: store/.cbfs"
    check_eq "lock: Permission denied" "$(try lock ls "$mnt/store/.cbfs")" "nobody: ls store/.cbfs"
    if [[ $tag == lz4 ]]; then
        for f in p600 acl_deny; do
            check_eq "$f: Permission denied" "$(try $f cat "$mnt/store/.cbfsidx/$f")" "nobody: sidecar of $f"
        done
        check_eq "r644: ok" "$(try r644 cat "$mnt/store/.cbfsidx/r644")" "nobody: sidecar of r644"
    fi
    check_eq "fds: Permission denied" "$(try fds ls "/proc/${CBFS_PID[$mnt]}/fd")" "nobody: the daemon's fds"
    cbfs_umount "$mnt"
done
pass "$(wc -l <"$T/ref.out") answers as ext4's"

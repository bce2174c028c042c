#!/usr/bin/env bash
# Bad options, missing directories, a locked store, a directory of a store, a mount point
# inside the store: the daemon exits non-zero
# with ONE line on stderr that names the problem, and nothing gets mounted.
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store" "$mnt"
touch "$T/plainfile"

# expect_refused KEYWORD_ERE MOUNT_ARGS...
expect_refused() {
    local kw=$1 rc=0
    shift
    timeout 20 "$CBFS_MOUNT_BIN" "$@" </dev/null >"$T/bad.out" 2>"$T/bad.err" || rc=$?
    local target
    target=$(realpath -m "${!#}")   # the mount point is the last argument
    if grep -qF " $target fuse" /proc/mounts; then
        fusermount3 -u "$target"
        fail "mounted despite: $*"
    fi
    ((rc == 124)) && fail "still running after 20 s (should have refused): $*"
    ((rc != 0)) || fail "exit status 0 for: $*"
    local n
    n=$(grep -c . "$T/bad.err" || true)
    ((n == 1)) || fail "expected one line on stderr for '$*', got $n: $(head -n 4 "$T/bad.err" | tr '\n' '|')"
    grep -Eqi -- "$kw" "$T/bad.err" || fail "stderr for '$*' does not name the problem /$kw/: $(cat "$T/bad.err")"
    note "refused (status $rc): $* -> $(cat "$T/bad.err")"
}

expect_refused 'zip' -f -o codec=zip "$store" "$mnt"
expect_refused 'level|range|99' -f -o codec=zstd:99 "$store" "$mnt"
expect_refused 'level|range' -f -o codec=lz4,level=99 "$store" "$mnt"
expect_refused 'block' -f -o block_size=3000 "$store" "$mnt"
expect_refused 'block' -f -o block_size=64M "$store" "$mnt"
expect_refused 'bogus' -f -o bogus_option=1 "$store" "$mnt"
expect_refused 'workers=999.*0 to 256' -f -o workers=999 "$store" "$mnt"
expect_refused 'readahead=x.*0 to 4096' -f -o readahead=x "$store" "$mnt"
expect_refused 'attr_timeout=-1.*0 to 86400' -f -o attr_timeout=-1 "$store" "$mnt"
expect_refused 'cache_size=lots.*size' -f -o cache_size=lots "$store" "$mnt"
expect_refused 'writeback_cache=maybe.*on or off' -f -o writeback_cache=maybe "$store" "$mnt"
expect_refused 'inflight.*block' -f -o block_size=64K,inflight=4K "$store" "$mnt"
expect_refused 'none.*no levels' -f -o codec=none,level=3 "$store" "$mnt"
expect_refused "user_id=.*remount" -f -o user_id=0 "$store" "$mnt"
expect_refused 'not a cbfs mount' -o remount,ro "$mnt"   # remount of what is not mounted
expect_refused "$T/nostore" -f "$T/nostore" "$mnt"
expect_refused "$T/nomnt" -f "$store" "$T/nomnt"
expect_refused "plainfile|directory" -f "$store" "$T/plainfile"
expect_refused 'zip' -o codec=zip "$store" "$mnt"   # daemonizing form too
[[ ! -e $store/.cbfs/store.conf ]] || note "(store.conf was written by a refused mount)"

# --help shows the real defaults (the first-mount block size is 256K)
"$CBFS_MOUNT_BIN" --help >"$T/help.out" || fail "--help exited $?"
grep -q 'default 256K' "$T/help.out" || fail "--help does not show block_size's default 256K"
grep -A2 '^  block_size=' "$T/help.out" | grep -q 'default 1M' &&
    fail "--help still shows block_size's old 1M default"

# a daemonized mount takes the locks before it forks: a second daemon names the daemon
# (.cbfs/lock's pid), not the parent that took the flock and is gone
mkdir -p "$T/mnt3" "$T/mnt2"
"$CBFS_MOUNT_BIN" -o codec=lz4 "$store" "$T/mnt3" || fail "daemonized mount failed"
dpid=$(pgrep -f -- " $T/mnt3\$") || fail "no daemon for $T/mnt3"
expect_refused "in use by a cbfs daemon \(pid $dpid\); unmount it" -f "$store" "$T/mnt2"
fusermount3 -u "$T/mnt3" || fail "cannot unmount $T/mnt3"
for ((i = 0; i < 100; i++)); do kill -0 "$dpid" 2>/dev/null || break; sleep 0.05; done
kill -0 "$dpid" 2>/dev/null && fail "the daemonized mount's daemon did not exit"

# a second daemon on a locked store
cbfs_mount "$store" "$mnt" codec=lz4
mkdir -p "$T/mnt2"
expect_refused 'in use|lock|busy|another' -f "$store" "$T/mnt2"
echo still-works >"$mnt/x"
check_eq still-works "$(cat "$mnt/x")" "first mount after the refused second daemon"
# .cbfs/ renamed away under the daemon: its lock file went with it, and a second daemon
# made a fresh .cbfs/ and served the same files beside the first (the root is locked too)
mv "$store/.cbfs" "$store/.cbfs-moved"
expect_refused 'in use by a cbfs daemon \(pid [0-9]+\); unmount it' -f "$store" "$T/mnt2"
[[ -e $store/.cbfs ]] && fail "the refused mount made a fresh $store/.cbfs"
mv "$store/.cbfs-moved" "$store/.cbfs"
check_eq still-works "$(cat "$mnt/x")" "first mount after .cbfs/ came back"
# a directory of the store as a store of its own: two daemons served the same files (the
# lock is the root's), and the second wrote a .cbfs/ into the first one's tree
mkdir "$mnt/db" && echo db >"$mnt/db/a"
expect_refused 'is a directory of the store' -f "$store/db" "$T/mnt2"
[[ -e $store/db/.cbfs ]] && fail "the refused mount made $store/db/.cbfs"
cbfs_umount "$mnt"
expect_refused 'is a directory of the store' -f "$store/db" "$T/mnt2"
# a mount point inside the store: the daemon walked into its own mount
mkdir -p "$store/sub"
expect_refused 'inside the store' -f "$store" "$store/sub"
pass

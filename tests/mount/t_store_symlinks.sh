#!/usr/bin/env bash
# A user who can write the store directly (here nobody, in the directory it
# made through an allow_other mount: the store keeps the caller as owner, and
# a store at mode 755 lets it in) cannot turn the daemon (root) on files
# outside the store. It makes its index directory .cbfsidx a symlink to a
# directory of root's files and puts empty files of those names beside it
# (the daemon takes them for compressed files whose sidecars are root's
# files); then chmod, append, unlink, rename and a new file through the mount
# must leave root's files as they were: owner, mode, contents, names.
# (Before, the daemon followed the symlink: chmod gave nobody root's file, an
# append overwrote it with an index, an unlink deleted it, a rename moved it
# into the store.) And a sidecar that is not owned as its data file is
# (another's file moved into the index directory) is never written into.
. "$(dirname "$0")/lib.sh"
id nobody >/dev/null 2>&1 || fail "needs the user nobody"
chmod 755 "$T"
store=$T/store mnt=$T/mnt victim=$T/victim
mkdir -p "$store" "$victim"
chmod 755 "$store"
for f in secret append gone moved linked; do echo "root's $f" >"$victim/$f"; done
chmod 600 "$victim"/*
snap() { (cd "$victim" && stat -c '%n %U %a %s' * && cat ./*); }
want=$(snap)

cbfs_mount "$store" "$mnt" codec=lz4,allow_other
mkdir "$mnt/users"
chmod 1777 "$mnt/users"
as_nobody mkdir "$mnt/users/a" "$mnt/users/b"
as_nobody sh -c "echo mine >'$mnt/users/a/own'" # makes users/a/.cbfsidx
[[ -d $store/users/a/.cbfsidx ]] || fail "no index directory in the store"
[[ $(stat -c %U "$store/users/a") == nobody ]] || fail "the store does not keep the caller as owner"
# nobody, in the store: the index directory becomes a symlink to root's files
as_nobody sh -c "cd '$store/users/a' && mv .cbfsidx .idx-real && ln -s '$victim' .cbfsidx &&
    for f in secret append gone moved; do : >\$f; done"
[[ -L $store/users/a/.cbfsidx ]] || fail "setup: no symlink"
drop_caches
cbfs_expect_log_errors '.'
as_nobody chmod 644 "$mnt/users/a/secret" 2>/dev/null || true
as_nobody sh -c "echo more >>'$mnt/users/a/append'" 2>/dev/null || true
as_nobody rm -f "$mnt/users/a/gone" 2>/dev/null || true
as_nobody mv "$mnt/users/a/moved" "$mnt/users/b/moved" 2>/dev/null || true
as_nobody sh -c "echo new >'$mnt/users/a/fresh'" 2>/dev/null || true
check_eq "$want" "$(snap)" "root's files outside the store"
[[ ! -e $store/users/b/.cbfsidx/moved ]] || fail "a file of root's was moved into the store"

# Another's file moved into the index directory, at a sidecar's name: the
# daemon does not write its index into it.
rm "$store/users/a/.cbfsidx"
as_nobody mv "$store/users/a/.idx-real" "$store/users/a/.cbfsidx"
echo "root's index" >"$store/users/rootfile"
as_nobody sh -c "echo mine >'$mnt/users/a/other'"
cbfs_umount "$mnt"
as_nobody rm "$store/users/a/.cbfsidx/other"
mv "$store/users/rootfile" "$store/users/a/.cbfsidx/other" # (as root: a stand-in for any
# file nobody can rename but not write, e.g. in a shared directory)
cbfs_mount "$store" "$mnt" codec=lz4,allow_other
as_nobody sh -c "echo more >>'$mnt/users/a/other'" 2>/dev/null || true
check_eq "root's index" "$(cat "$store/users/a/.cbfsidx/other")" "a foreign file at a sidecar's name"
cbfs_umount "$mnt"

# The same swap after the names were looked up through the mount (and kept in
# the kernel's cache for a minute): unlink, rename and link then reach the
# daemon's own calls on the sidecar paths, not only a lookup that fails.
cbfs_mount "$store" "$mnt" codec=lz4,allow_other,attr_timeout=60
as_nobody mkdir "$mnt/users/c"
for f in gone moved linked; do as_nobody sh -c "echo mine >'$mnt/users/c/$f'"; done
stat "$mnt/users/b" "$mnt/users/c/gone" "$mnt/users/c/moved" "$mnt/users/c/linked" >/dev/null
as_nobody sh -c "cd '$store/users/c' && mv .cbfsidx .idx-real && ln -s '$victim' .cbfsidx"
as_nobody rm -f "$mnt/users/c/gone" 2>/dev/null || true
as_nobody mv "$mnt/users/c/moved" "$mnt/users/b/moved" 2>/dev/null || true
as_nobody ln "$mnt/users/c/linked" "$mnt/users/b/linked" 2>/dev/null || true
check_eq "$want" "$(snap)" "root's files outside the store (names looked up before the swap)"
cbfs_umount "$mnt"
pass

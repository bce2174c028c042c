#!/usr/bin/env bash
# trusted.* xattr names are listed to root only, as on ext4 (which lists them
# only to CAP_SYS_ADMIN): the daemon, root, listed the store's to everyone
# (their values were refused, the names were not).
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
chmod 755 "$T"
cbfs_mount "$store" "$mnt" "codec=lz4,allow_other"
echo hi >"$mnt/f"
chmod 644 "$mnt/f"
setfattr -n trusted.secret -v 1 "$mnt/f"
setfattr -n user.note -v 2 "$mnt/f"
got=$(as_nobody getfattr -d -m - --absolute-names "$mnt/f" 2>&1) || true
root=$(getfattr -d -m - --absolute-names "$mnt/f" 2>&1) || true
cbfs_umount "$mnt"
[[ $got != *trusted.secret* ]] || fail "an unprivileged user sees trusted.* names: $got"
[[ $got == *user.note* ]] || fail "an unprivileged user no longer sees user.* names: $got"
[[ $root == *trusted.secret* && $root == *user.note* ]] || fail "root's list: $root"
pass

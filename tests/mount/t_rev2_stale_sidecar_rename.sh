#!/usr/bin/env bash
# Review repro: a plain file renamed (or hard-linked) onto a name that has a
# stale sidecar (crash between the data file's and the sidecar's unlink in
# cbfs_unlink_at) is taken for a compressed file at its next lookup
# (cbfs_inode_detect: a sidecar exists => COMPRESSED): its plain bytes are
# then served through the engine. cbfs_rename_at probes the target's sidecar
# only when the target exists, cbfs_link_at only for compressed sources.
. "$(dirname "$0")/lib.sh"
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" "codec=lz4"
head -c 200000 /dev/urandom >"$mnt/x"
cbfs_umount "$mnt"
rm "$store/x" # crash between unlinkat(name) and the sidecar's unlink
cbfs_expect_log_errors .
cbfs_mount "$store" "$mnt" "codec=none"
printf 'hello plain\n' >"$mnt/y"
mv "$mnt/y" "$mnt/x"
printf 'hello link\n' >"$mnt/z"
cbfs_umount "$mnt"
ls -la "$store" "$store/.cbfsidx" | sed 's/^/  store: /'
cbfs_mount "$store" "$mnt" "codec=none"
got=$(cat "$mnt/x" 2>&1 | od -c | head -3 || true)
note "x after remount: size $(stat -c %s "$mnt/x" 2>&1), content: $got"
ln "$mnt/z" "$mnt/x2" || true
check_eq "hello plain" "$(cat "$mnt/x" 2>&1)" "renamed plain file after a remount"
pass

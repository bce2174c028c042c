#!/usr/bin/env bash
# Concurrency of the whole daemon: processes with threads doing random writes, reads,
# truncates, stats, chmods, utimes, renames, unlinks, links, fallocates, xattrs,
# mappings, readdirs and fsyncs racing closes of dups, on a few shared names
# (tools/stress_mixed.py), under lz4 and zstd, small blocks, with and without the
# writeback cache, and with the daemon's fd limit at 64 (its fd cache evicting all the
# while). Meant for the ThreadSanitizer daemon (CBFS_MOUNT_BIN=build-tsan/mount.cbfs:
# a report in its log fails the test, lib.sh); any daemon must serve it with no
# unexpected error, exit 0 and leave a store that cbfs verify finds clean.
# STRESS_SECONDS: how long each variant runs (default 8).
. "$(dirname "$0")/lib.sh"
cbfs_tool

# STRESS_VARIANTS: the mounts' options, one word each ("nofile:" first: fd limit 64);
# STRESS_PROCS, STRESS_THREADS: workers (default 3 processes of 3 threads)
secs=${STRESS_SECONDS:-8}
variants=${STRESS_VARIANTS:-codec=lz4,block_size=4K codec=zstd,block_size=16K,writeback_cache=off nofile:codec=zstd,block_size=4K}
n=0
for v in $variants; do
    n=$((n + 1))
    opts=${v#nofile:}
    store=$T/store$n mnt=$T/mnt$n
    mkdir -p "$store"
    if [[ $v == nofile:* ]]; then
        # every inode held open costs the engine two fds: with 64, opens and stats
        # run out of them now and then (the fd cache has let go of all it could)
        cbfs_expect_log_errors 'Too many open files'
        CBFS_DAEMON_NOFILE=64 cbfs_mount "$store" "$mnt" "$opts"
        allow=1
    else
        cbfs_mount "$store" "$mnt" "$opts"
        allow=0
    fi
    STRESS_ALLOW_EMFILE=$allow python3 "$CBFS_TOOLS/stress_mixed.py" "$mnt" "$n" "${STRESS_PROCS:-3}" \
        "${STRESS_THREADS:-3}" "$secs" \
        2>"$T/stress.err" || fail "$v: $(head -n 5 "$T/stress.err" | tr '\n' '|')"
    cbfs_umount "$mnt"
    CBFS_LOG_ALLOW= # the next variant's log is clean again
    "$CBFS" verify "$store" >"$T/verify.out" 2>&1 ||
        fail "$v: cbfs verify: $(tail -n 5 "$T/verify.out" | tr '\n' '|')"
    note "$v: ok"
done
pass

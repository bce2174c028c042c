#!/usr/bin/env bash
# Unmounting while a backup is still writing: a writer closes 2 MB files in a loop
# and records each name once close(2) returned; (1) `fusermount3 -u` is retried until
# it gets through, (2) a lazy `fusermount3 -uz` mid-way. After the daemon exits,
# every recorded file is intact after a remount: nothing is left to release().
. "$(dirname "$0")/lib.sh"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
for mode in retry lazy; do
    cbfs_mount "$store" "$mnt" codec=zstd,block_size=256K
    mkdir "$mnt/$mode"
    rec=$T/$mode.rec
    : >"$rec"
    python3 "$CBFS_TOOLS/busywriter.py" "$mnt/$mode" 30 $((2 * 1024 * 1024)) "$rec" >"$T/$mode.out" 2>&1 &
    wpid=$!
    # let a few files through first
    i=0
    while ((i++ < 200)) && (($(wc -l <"$rec") < 3)); do sleep 0.05; done
    if [[ $mode == retry ]]; then
        busy=0
        for ((i = 0; i < 2000; i++)); do
            cbfs_try_umount "$mnt" && break
            grep -qi busy "$T/umount.err" || fail "fusermount3 -u: $(cat "$T/umount.err")"
            busy=$((busy + 1))
            sleep 0.01
        done
        mountpoint -q "$mnt" && fail "could not unmount while the writer ran"
        note "retry: unmounted after $busy busy attempts"
    else
        fusermount3 -uz "$mnt" || fail "fusermount3 -uz failed"
    fi
    wait "$wpid" || fail "$mode: writer crashed: $(cat "$T/$mode.out")"
    cbfs_reap "$mnt"
    n=$(wc -l <"$rec")
    note "$mode: $n files recorded; writer: $(tr '\n' ' ' <"$T/$mode.out")"
    ((n >= 3)) || fail "$mode: only $n files recorded"
    cbfs_mount "$store" "$mnt"
    while read -r name want; do
        [[ -f $mnt/$mode/$name ]] || fail "$mode: recorded file $name missing after remount"
        got=$(sha "$mnt/$mode/$name")
        check_eq "$want" "$got" "$mode: sha of recorded file $name"
        check_eq $((2 * 1024 * 1024)) "$(stat -c %s "$mnt/$mode/$name")" "$mode: size of $name"
    done <"$rec"
    cbfs_umount "$mnt"
done
pass

#!/usr/bin/env bash
# Unlink and rename of OPEN files (tools/posix_unlink.py), as on ext4: an unlinked open file
# stays readable and writable until the last close, then its data and sidecar are gone from
# the store and the daemon holds no deleted file open; renamed files being written end up,
# with their sidecars, under the new names (also over an existing file and with
# RENAME_EXCHANGE); contents after a remount; every codec.
. "$(dirname "$0")/lib.sh"

# deleted_fds PID: the daemon's open descriptors of deleted files in the store
deleted_fds() { find "/proc/$1/fd" -type l -printf '%l\n' 2>/dev/null | grep -F "$store" | grep -c '(deleted)' || true; }

# store_files: regular files of the store outside .cbfs, as paths relative to it
store_files() { (cd "$store" && find . -path ./.cbfs -prune -o -type f -print | LC_ALL=C sort | tr '\n' ' '); }

for codec in $(cbfs_codecs); do
    cbfs_mount_fresh "codec=$codec" block_size=64K
    mkdir -p "$T/shadow-$codec"
    pid=${CBFS_PID[$mnt]}
    python3 "$CBFS_TOOLS/posix_unlink.py" unlinked "$mnt" 65536 >"$T/out" 2>&1 ||
        fail "$codec: $(cat "$T/out")"
    # release and forget reach the daemon shortly after close(2) returns
    for ((i = 0; i < 50; i++)); do
        [[ $(deleted_fds "$pid") == 0 && -z $(store_files) ]] && break
        sleep 0.1
    done
    check_eq "" "$(store_files)" "$codec: store files after the unlinked file was closed"
    check_eq 0 "$(deleted_fds "$pid")" "$codec: daemon descriptors of deleted store files after the last close"

    python3 "$CBFS_TOOLS/posix_unlink.py" renamed "$mnt" "$T/shadow-$codec" 65536 >"$T/out" 2>&1 ||
        fail "$codec: $(cat "$T/out")"
    for ((i = 0; i < 50; i++)); do
        [[ $(deleted_fds "$pid") == 0 ]] && break
        sleep 0.1
    done
    check_eq 0 "$(deleted_fds "$pid")" "$codec: daemon descriptors of deleted store files after the renames"
    cbfs_umount "$mnt"
    check_eq "./.cbfsidx/p ./.cbfsidx/q ./.cbfsidx/target ./dir2/.cbfsidx/w2 ./dir2/w2 ./p ./q ./target " \
        "$(store_files)" "$codec: store files after the renames"
    drop_caches
    cbfs_mount "$store" "$mnt"
    for f in dir2/w2 target p q; do same_file "$T/shadow-$codec/${f//\//_}" "$mnt/$f"; done
    check_eq "p q target" "$(cd "$mnt" && ls -p | grep -v / | tr '\n' ' ' | sed 's/ $//')" "$codec: names in the mount"
    cbfs_umount "$mnt"
    note "$codec ok"
done
pass

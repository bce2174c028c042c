#!/usr/bin/env bash
# A rename of a compressed file on a daemon out of descriptors moves the file with its
# sidecar, or fails with nothing moved. The sidecar's rename opened its index directories
# after the data file had moved: out of descriptors then (EMFILE: a busy mount under its
# fd limit; t_stress_mixed found it at 64), the data file moved, its sidecar stayed at
# the old name, and the file, rebuilt from its frames at its next open, failed with EIO
# where they do not prove its block size. tools/openfail.c fails the opens of index
# directories with EMFILE after the first N of the rename's: N from 0 up, so that the
# failure lands on each of them in turn. To a free name in another directory, and over
# another compressed file.
. "$(dirname "$0")/lib.sh"

cbfs_preload openfail
# a rename refused before anything moved says why (the target's sidecar, if any, goes
# aside into .cbfs first, which takes a descriptor too)
cbfs_expect_log_errors 'cannot move the sidecar at the target aside: Too many open files'
store=$T/store mnt=$T/mnt
mkdir -p "$store"
export CBFS_OPENFAIL_NAME=/.cbfsidx CBFS_OPENFAIL_TRIGGER=$T/trigger
LD_PRELOAD=$T/openfail.so cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
mkdir "$mnt/d"
python3 "$CBFS_TOOLS/gendata.py" csv 200K "$T/src" 1
python3 "$CBFS_TOOLS/gendata.py" csv 150K "$T/other" 2

# renamed FROM TO: the rename under the trigger, then the store and the mount checked
renamed() {
    local from=$1 to=$2 n dir base
    echo "$skip" >"$T/trigger"
    if mv -T "$mnt/$from" "$mnt/$to" 2>"$T/mv.err"; then made=$((made + 1)); else failed=$((failed + 1)); fi
    rm -f "$T/trigger"
    for n in "$from" "$to"; do
        dir=$(dirname "$n") base=$(basename "$n")
        [[ -e $store/$n && ! -e $store/$dir/.cbfsidx/$base ]] &&
            fail "N=$skip: $from -> $to left $n in the store without its sidecar"
        [[ ! -e $store/$n && -e $store/$dir/.cbfsidx/$base ]] &&
            fail "N=$skip: $from -> $to left the sidecar of $n without its data file"
    done
    if [[ -e $mnt/$to && ! -e $mnt/$from ]]; then same_file "$T/src" "$mnt/$to"; else same_file "$T/src" "$mnt/$from"; fi
}
made=0 failed=0
for ((skip = 0; skip < 12; skip++)); do
    cp "$T/src" "$mnt/f$skip"
    renamed "f$skip" "d/g$skip"
    cp "$T/src" "$mnt/o$skip"
    cp "$T/other" "$mnt/v$skip"
    renamed "o$skip" "v$skip"
done
((made > 0 && failed > 0)) || fail "SETUP: the renames all failed or all went through ($made made, $failed failed)"
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt"
for ((skip = 0; skip < 12; skip++)); do
    for n in "f$skip" "d/g$skip" "o$skip" "v$skip"; do
        [[ -e $mnt/$n ]] || continue
        if [[ $n == v* && -e $mnt/o$skip ]]; then same_file "$T/other" "$mnt/$n"; else same_file "$T/src" "$mnt/$n"; fi
    done
done
cbfs_umount "$mnt"
pass "$made renames made, $failed refused"

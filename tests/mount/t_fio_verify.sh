#!/usr/bin/env bash
# fio with verify=crc32c, verified through the daemon: write with do_verify=0, unmount,
# drop caches, remount, and run the same job with --verify_only. Variants, every codec,
# block_size=64K: 4 jobs writing their own ranges of ONE file (compressible pattern data),
# 4 jobs with a file each (random data), 4 jobs random-writing 4k..64k pieces of one file.
. "$(dirname "$0")/lib.sh"

command -v fio >/dev/null || fail "fio is not installed"
per_job=${CBFS_FIO_MB:-8}M  # 4 jobs: 32 MB per variant (onefile: 4 x 9M)

# fio_job NAME CODEC: the options of variant NAME (without the verify mode)
fio_job() {
    local common=(--ioengine=psync --numjobs=4 --verify=crc32c --verify_state_save=0)
    case $1 in
    # 24k pieces cross 64K blocks; the 8k offset puts each boundary between two jobs'
    # ranges inside a block, so neighbouring jobs share a block (size: a multiple of 24k)
    onefile)  echo "${common[*]} --name=onefile --filename=onefile --rw=write --bs=24k
                    --size=9M --offset=8k --offset_increment=9M --verify_pattern=0x5a0f3c96" ;;
    manyfiles) echo "${common[*]} --size=$per_job --name=many --rw=write --bs=64k" ;;
    # every piece is a read-modify-write of a 64K block of random data: for the slow
    # codecs (xz, bzip2: ~40-80 s for 32 MB on this machine) 4 x 3M keeps the test short
    randwrite)
        local sz=$per_job
        [[ $2 == xz || $2 == bzip2 ]] && sz=${CBFS_FIO_SLOW_MB:-3}M
        echo "${common[*]} --size=$sz --name=rand --filename=randfile --rw=randwrite
              --bsrange=4k-64k --offset_increment=$sz --randseed=1234" ;;
    esac
}

# fio_run WHAT ARGS...: fio must exit 0, every job must report err= 0, and nothing may
# mention a verify failure (fio 3.33 exits 0 with err= 0 on some crc32c mismatches).
fio_run() {
    local what=$1
    shift
    fio "$@" >"$T/fio.out" 2>&1 || fail "$what: fio exited with status $?: $(grep -m3 -i -E 'verify|bad|err' "$T/fio.out" | tr '\n' '|')"
    if grep -q -i -E 'verify failed|bad magic|bad header|verify: |err= *[1-9]' "$T/fio.out"; then
        fail "$what: $(grep -m3 -i -E 'verify failed|bad magic|bad header|verify: |err= *[1-9]|Expected|Received' "$T/fio.out" | tr '\n' '|')"
    fi
    local jobs
    jobs=$(grep -c 'err= 0' "$T/fio.out" || true)
    check_eq 4 "$jobs" "$what: jobs reporting err= 0"
}

cd "$T"
for codec in ${CBFS_FIO_CODECS:-$(cbfs_codecs)}; do
    store=$T/store-$codec mnt=$T/mnt
    mkdir -p "$store"
    for variant in onefile manyfiles randwrite; do
        start=$SECONDS
        cbfs_mount "$store" "$mnt" "codec=$codec,block_size=64K"
        mkdir "$mnt/$variant"
        # shellcheck disable=SC2046  # word splitting of the option list is intended
        # --directory first: fio resolves --filename against the directory set so far
        fio_run "$codec/$variant write" --directory="$mnt/$variant" $(fio_job $variant $codec) --do_verify=0
        written=$(grep -o -m1 'io=[^ ,]*' "$T/fio.out")
        # the data really went through the mount: compressed files with sidecars in the store
        nidx=$(find "$store/$variant" -path '*/.cbfsidx/*' -type f | wc -l)
        [[ $variant == manyfiles ]] && want=4 || want=1
        check_eq "$want" "$nidx" "$codec/$variant: sidecars in the store"
        [[ -z $(find "$T" -maxdepth 1 -type f -name '*file*') ]] || fail "fio wrote outside the mount"
        cbfs_umount "$mnt"
        drop_caches
        cbfs_mount "$store" "$mnt" "codec=$codec,block_size=64K"
        # shellcheck disable=SC2046
        fio_run "$codec/$variant --verify_only after remount" --directory="$mnt/$variant" \
            $(fio_job $variant $codec) --verify_only
        cbfs_umount "$mnt"
        note "$codec $variant ok (wrote $written, $((SECONDS - start)) s)"
    done
done
pass

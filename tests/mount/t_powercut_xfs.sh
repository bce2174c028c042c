#!/usr/bin/env bash
# t_powercut.sh with the store on XFS, the file system many DBAs' backup volumes use
# (RHEL's default): a short run in the suite; helper-26's 792 cycles on XFS (and 454 on
# btrfs, CBFS_POWERCUT_FS=btrfs) found nothing lost, read wrong or refused.
CBFS_POWERCUT_FS=xfs
CBFS_POWERCUT_CYCLES=${CBFS_POWERCUT_CYCLES:-12}
. "$(dirname "$0")/t_powercut.sh"

#!/usr/bin/env bash
# t_powercut.sh with codec=none: plain files, which the daemon passes through to the store.
# What a close acknowledged must survive a power cut for them as it does for compressed
# files (docs/OPERATIONS.md, "After a crash"): a writer's close syncs its data (it did not,
# helper-52 found, twentieth session: a closed plain file could lose its data to a cut).
export CBFS_POWERCUT_CODEC=none
CBFS_POWERCUT_SEED=${CBFS_POWERCUT_SEED:-5}
CBFS_POWERCUT_CYCLES=${CBFS_POWERCUT_CYCLES:-8}
. "$(dirname "$0")/t_powercut.sh"

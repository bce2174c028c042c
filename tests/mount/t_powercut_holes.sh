#!/usr/bin/env bash
# t_powercut.sh with the writer's holeappend plan (tools/pcwork.py): files truncated up to
# odd or page-aligned sizes, then appended to at the size (1 MiB and 8 KiB, some through
# O_APPEND), truncated up again mid-stream and down into stored blocks, written into the
# hole after all, preallocated and written from 0: the write that starts at the size a
# truncate left (docs/ENGINE.md, Write path, step 5), under power cuts. helper-43 wrote it
# (eighteenth session): 1245 cycles; it found a file the mount refused after a cut (a
# sidecar header that never reached the disk, with part of block 1's frame: seed 23,
# cycle 53 on XFS), which the default plan never reaches, and no lost or wrong byte.
export PC_PROFILE=holeappend
# cycles 53-64 of seed 23 (the refusal's cycle first; the store is ext4 here, where it
# reproduced too, and writeback_cache is off in every third cycle)
CBFS_POWERCUT_SEED=${CBFS_POWERCUT_SEED:-23}
CBFS_POWERCUT_FIRST=${CBFS_POWERCUT_FIRST:-53}
CBFS_POWERCUT_CYCLES=${CBFS_POWERCUT_CYCLES:-64}
. "$(dirname "$0")/t_powercut.sh"

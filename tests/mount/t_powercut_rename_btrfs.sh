#!/usr/bin/env bash
# t_powercut_rename.sh with the store on btrfs, whose fsync of a file logs that inode's
# names and not its directories' other changes: a rename over a compressed file (or an
# exchange of two, or a link) followed by an fsync of the file at its new name, cut
# between the data file's log commit and the sidecar's, left the target name with the
# replaced file's sidecar and the file's own as an orphan (or each with the other's, or
# the new name without a sidecar): fsck --repair exited 4 and the file read EIO (its
# frames do not prove its block size), until fsck settled a sidecar of another file id as
# an aside and linked a hard link's missing sidecar from its other name (helper-72). The
# kept half is in 4 KiB sectors (btrfs's own superblock, torn, leaves it unmountable).
# 42 cuts, about 60 s.
CBFS_POWERCUT_FS=btrfs
CBFS_PC_OPS=${CBFS_PC_OPS:-over over_fsync exchange_fsync link_fsync unlink}
. "$(dirname "$0")/t_powercut_rename.sh"

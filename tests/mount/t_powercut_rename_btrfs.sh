#!/usr/bin/env bash
# t_powercut_rename.sh with the store on btrfs, whose fsync of a file logs that inode's
# names and not its directories' other changes: a rename over a compressed file (or an
# exchange of two) followed by an fsync of the renamed file, cut between the data file's
# log commit and the sidecar's, left the target name with the replaced file's sidecar and
# the file's own as an orphan (or each with the other's): fsck --repair exited 4 and the
# file read EIO (its frames do not prove its block size), until fsck settled a sidecar of
# another file id as an aside (helper-72). The kept half is in 4 KiB sectors (btrfs's own
# superblock, torn, leaves it unmountable). 32 cuts, about 50 s.
CBFS_POWERCUT_FS=btrfs
CBFS_PC_OPS=${CBFS_PC_OPS:-over over_fsync exchange_fsync unlink}
. "$(dirname "$0")/t_powercut_rename.sh"

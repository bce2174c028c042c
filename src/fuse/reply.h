/* Reply helpers shared by the ops files: entry replies (the kernel takes the
 * inode's ref, or it is dropped) and the ownership of objects a request just
 * created. Used by the ops only; they call nothing above the inode table. */
#ifndef CBFS_FUSE_REPLY_H
#define CBFS_FUSE_REPLY_H

#include "fuse/inode.h"

/* Fills e for inode and st (attr/entry timeouts from the options). */
void cbfs_fill_entry(const struct cbfs_fs *fs, struct cbfs_inode *inode, const struct stat *st,
                     struct fuse_entry_param *e);
/* Fills an entry reply for inode (which holds the ref the kernel now takes)
 * and sends it; if the kernel did not take it (interrupted), drops the ref. */
void cbfs_reply_entry(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *inode,
                      const struct stat *st);

/* Gives a just-created object (fd: any fd on it, O_PATH included; dirfd: its
 * directory's) the caller's ownership (the group stays inherited below a
 * setgid directory) and exactly the permission bits of mode (the daemon's
 * umask must not change them). Symlinks only get the owner. @return 0 or
 * errno. */
int cbfs_own_new(fuse_req_t req, int dirfd, int fd, mode_t mode);

/* Clears inode's (node ino) set-id bits as KILLPRIV_V2 asks of a WRITE or
 * fallocate, and tells the kernel its cached mode is stale; on failure
 * replies the error. @return true if it replied: the op must stop. */
bool cbfs_reply_kill_failed(fuse_req_t req, fuse_ino_t ino, struct cbfs_inode *inode);

#endif

/* Reply helpers shared by the ops files: entry replies (the kernel takes the
 * inode's ref, or it is dropped) and the ownership of objects a request just
 * created. Used by the ops only; they call nothing above the inode table. */
#ifndef CBFS_FUSE_REPLY_H
#define CBFS_FUSE_REPLY_H

#include "fuse/inode.h"

/* Fills e for inode and st (attr/entry timeouts from the options; st_ino as
 * cbfs_inode_st_ino). */
void cbfs_reply_fill_entry(const struct cbfs_fs *fs, struct cbfs_inode *inode,
                           const struct stat *st, struct fuse_entry_param *e);
/* Replies inode's attributes st (st_ino as cbfs_inode_st_ino). */
void cbfs_reply_attr(fuse_req_t req, const struct cbfs_fs *fs, struct cbfs_inode *inode,
                     struct stat *st);
/* Fills an entry reply for inode (which holds the ref the kernel now takes)
 * and sends it; if the kernel did not take it (interrupted), drops the ref. */
void cbfs_reply_entry(fuse_req_t req, struct cbfs_fs *fs, struct cbfs_inode *inode,
                      const struct stat *st);

/* The mode to create a request's new object with in the directory dirfd (any
 * fd on it), from the mode the request asks for. With POSIX ACLs the kernel
 * leaves the caller's umask to the daemon: as on ext4 it applies unless the
 * directory has a default ACL, which the store then applies itself to the
 * mode; *inherit tells which (pass it on to cbfs_reply_own_new). */
mode_t cbfs_reply_new_mode(fuse_req_t req, int dirfd, mode_t mode, bool *inherit);

/* Gives a just-created object (fd: any fd on it, O_PATH included; dirfd: its
 * directory's) the caller's ownership (a daemon running as root only; the
 * group stays inherited below a setgid directory) and exactly the permission
 * bits of mode (the daemon's
 * umask must not change them) or, where it inherited a default ACL
 * (inherit), the bits the store gave it, which the ACL's mask and entries
 * match; the set-id bits of mode either way. Symlinks only get the owner.
 * @return 0 or errno. */
int cbfs_reply_own_new(fuse_req_t req, int dirfd, int fd, mode_t mode, bool inherit);

/* Clears inode's (node ino) set-id bits as KILLPRIV_V2 asks of a WRITE or
 * fallocate, and tells the kernel its cached mode is stale; on failure
 * replies the error. @return true if it replied: the op must stop. */
bool cbfs_reply_kill_failed(fuse_req_t req, fuse_ino_t ino, struct cbfs_inode *inode);

#endif

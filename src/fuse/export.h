/* NFS export of the mount (FUSE_CAP_EXPORT_SUPPORT). The kernel puts (node
 * id, generation) in the file handles it gives out (name_to_handle_at, nfsd)
 * and, when it no longer caches the inode of one, asks the daemon to look up
 * "." in that node id; to reconnect a directory it asks for ".." of it. Node
 * ids are the store's inode numbers (inode.h, "Node ids"), so both work after
 * the kernel dropped its caches and after a daemon restart.
 *
 * Rebuilding an inode from its number alone needs a store whose file handle
 * can be made from an inode number: ext4's FILEID_INO32_GEN handle (inode
 * number, generation), where generation 0 means "any" (ext4_nfs_get_inode;
 * the kernel compares the generation of its own handle afterwards). XFS has
 * that layout for small inode numbers but takes 0 as a real generation, as
 * btrfs and tmpfs check theirs: export support stays off there. The store
 * must also be the root of its filesystem: an inode number can name any file
 * of the filesystem, and a handle an NFS client forged must not reach outside
 * the store. Hidden objects (.cbfs and its entries, sidecars) are refused
 * when reached by number; a sidecar is known by its content then, as its
 * name is not known. */
#ifndef CBFS_FUSE_EXPORT_H
#define CBFS_FUSE_EXPORT_H

#include <stdint.h>
#include <sys/stat.h>

#include "fuse/inode.h"

/* @return the generation of the object fd is open on (O_PATH included): the
 * store's i_generation where its file handle has the FILEID_INO32_GEN layout,
 * else 0. */
uint32_t cbfs_export_generation(int fd);

/* Decides whether ids can be looked up by "." on the store whose root is
 * root_fd (root_st: its stat; c: the fd cache set up on it). @return NULL if
 * they can, else why not (a phrase for the log). */
const char *cbfs_export_probe(const struct cbfs_fdcache *c, int root_fd, const struct stat *root_st);

/* LOOKUP of "." or ".." (name) in parent, which the kernel sends only with
 * export support: "." rebuilds the inode of node id parent (which the kernel
 * may not hold, or may have got from a forged handle), ".." gives the parent
 * directory of the directory parent (the root's is the root). On success *out
 * has one more ref and st its attributes, as cbfs_inode_lookup. @return 0,
 * ESTALE (no such object, or one the mount hides), ENOENT (export support is
 * off) or errno. */
int cbfs_export_lookup(struct cbfs_fs *fs, fuse_ino_t parent, const char *name,
                       struct cbfs_inode **out, struct stat *st);

#endif

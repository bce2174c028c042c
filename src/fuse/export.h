/* NFS export of the mount (FUSE_CAP_EXPORT_SUPPORT). The kernel puts (node
 * id, generation) in the file handles it gives out (name_to_handle_at, nfsd)
 * and, when it no longer caches the inode of one, asks the daemon to look up
 * "." in that node id; to reconnect a directory it asks for ".." of it. Node
 * ids are the store's inode numbers (inode.h, "Node ids"), so both work after
 * the kernel dropped its caches and after a daemon restart.
 *
 * Rebuilding an inode from its number alone needs a store where a number
 * names an object and nothing outside the store: an ext4 filesystem whose
 * root is the store's (cbfs_fdcache_ino_probe says why not otherwise; the
 * daemon then offers no export support). Hidden objects (.cbfs and its
 * entries, sidecars) are refused when reached by number; a sidecar is known
 * by its content then, as its name is not known.
 *
 * Dependencies: ops_entry -> export -> inode -> fdcache. */
#ifndef CBFS_FUSE_EXPORT_H
#define CBFS_FUSE_EXPORT_H

#include <stdint.h>
#include <sys/stat.h>

#include "fuse/inode.h"

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

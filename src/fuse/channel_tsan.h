/* channel_tsan.h: the order the kernel gives requests, told to ThreadSanitizer
 * (channel_tsan.c); nothing in other builds. */
#ifndef CBFS_FUSE_CHANNEL_TSAN_H
#define CBFS_FUSE_CHANNEL_TSAN_H

#include <linux/fuse.h>
#include <stddef.h>
#include <sys/uio.h>

/* ThreadSanitizer builds only (src/fuse/channel_tsan.c): the order the kernel gives requests, told
 * to TSan. The kernel sends a request on a node id or a handle (a request's own, LINK's file,
 * RENAME's new directory) only after the reply that handed it out (INIT the root's; the entries of
 * LOOKUP, MKNOD, MKDIR, SYMLINK, LINK, CREATE and READDIRPLUS; the handles of OPEN, OPENDIR,
 * CREATE); a FORGET of a node id, or a RELEASE(DIR) of a handle, only after
 * the replies to every request that used it (the calls wait for them); and a
 * directory handle's READDIR(PLUS) only after the reply to its last one (a
 * directory is read under its position's lock; ops_dir.c keeps the stream's
 * place in the handle without one). So an op may free an inode or a handle
 * that another thread's op used until its reply, and the first WRITE of a
 * handle may read what CREATE made without a lock. libfuse's serving threads
 * meet on no lock between one's reply and the request another reads next, so
 * TSan sees none of this: it orders them only through its model of I/O on
 * descriptors (io_sync=1, its default: every write(2) to any file before
 * every later read(2) of any file, which hides the daemon's real races too);
 * with io_sync=0 it reported each of the above as a race. Three slots say
 * what the kernel promises: per node id "born", released by the replies that
 * hand it out and acquired by every request on it, and "used", released by
 * every reply to a request on it and acquired by its FORGET, BATCH_FORGET,
 * RELEASE and RELEASEDIR; per directory handle "listed", released by a
 * READDIR(PLUS)'s reply and acquired by the next READDIR(PLUS) of it. Nothing
 * else is ordered: two requests on one file stay as unordered to TSan as the
 * kernel leaves them, and so do accesses after a reply. Ids share slots by
 * hash (a little more order, rarely). Run the TSan daemon with
 * TSAN_OPTIONS=io_sync=0. */
#if defined(__SANITIZE_THREAD__)
#define CBFS_CHAN_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CBFS_CHAN_TSAN 1
#endif
#endif
#ifdef CBFS_CHAN_TSAN
/* After a request is read: what the kernel ordered before it. */
void cbfs_chan_tsan_read(const struct fuse_in_header *in, const char *arg, size_t alen);
/* Before the reply (iov[0] its header) to the request this thread read. */
void cbfs_chan_tsan_reply(const struct iovec *iov, int count);
#else
static inline void cbfs_chan_tsan_read(const struct fuse_in_header *in, const char *arg,
                                       size_t alen)
{
    (void)in, (void)arg, (void)alen;
}
static inline void cbfs_chan_tsan_reply(const struct iovec *iov, int count)
{
    (void)iov, (void)count;
}
#endif
#endif

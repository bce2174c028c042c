/* The daemon's own hooks on the /dev/fuse channel (channel.c): negotiates
 * FUSE_HANDLE_KILLPRIV_V2, which libfuse 3.14 cannot, and hands the ops the
 * kill-suid/sgid request flags 3.14 drops. */
#ifndef CBFS_FUSE_CHANNEL_H
#define CBFS_FUSE_CHANNEL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "fuse/cbfs_fuse.h"

/* Reads and writes se's channel through cbfs's hooks from here on. Call after
 * fuse_session_mount, before the loop. after_init (NULL: none) is called once,
 * with arg, by the thread that wrote the INIT reply, right after the kernel
 * took it: the kernel has applied what INIT set (its read-ahead among them).
 * Other serving threads may already be answering requests by then (a file
 * opened in that moment keeps the read-ahead it opened with). @return 0 or
 * errno. */
int cbfs_chan_attach(struct fuse_session *se, void (*after_init)(void *), void *arg);
/* true once INIT negotiated FUSE_HANDLE_KILLPRIV_V2: the daemon then clears
 * suid/sgid itself where the kernel asks (cbfs_chan_take_kill). */
bool cbfs_chan_killpriv_v2(void);
/* true if the request this thread is serving (WRITE, OPEN, CREATE, SETATTR) asks
 * the daemon to kill suid/sgid (the caller lacks CAP_FSETID); clears it. */
bool cbfs_chan_take_kill(void);
/* true if a request of opcode with argument arg (alen bytes, after the
 * fuse_in_header) asks to kill suid/sgid: what cbfs_chan_take_kill reports
 * for it. A too short argument asks nothing. */
bool cbfs_chan_kill_requested(uint32_t opcode, const void *arg, size_t alen);
/* fn(arg, fh, off, err) is called, in the serving thread, when a page the
 * kernel writes back (a WRITE with FUSE_WRITE_CACHE) is answered with error
 * err, by libfuse itself or by an op: fh and off are the request's. Set
 * before the loop. */
void cbfs_chan_on_lost_write(void (*fn)(void *arg, uint64_t fh, uint64_t off, int err), void *arg);
/* true if the channel ended with ECONNABORTED, which the loop was told as
 * ENODEV (an unmount): the caller decides whether the mount is really gone. */
bool cbfs_chan_was_aborted(void);
/* Tells the kernel that ino's attributes changed behind its back (a kill of
 * set-id bits during a WRITE or OPEN, whose replies carry no attributes). */
void cbfs_chan_inval_attr(fuse_ino_t ino);

#endif

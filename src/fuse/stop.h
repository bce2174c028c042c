/* How a signal stops the daemon (SIGTERM, SIGINT, SIGHUP: systemd's stop, a
 * Ctrl-C). libfuse's handlers end the loop at once and then detach the
 * mount: what the kernel's writeback cache still held for files open at that
 * moment never reached the daemon, and the daemon exited 0 (reproduced: a
 * writer's 12.5 MiB of accepted write(2)s gone). Here the first signal
 * detaches the mount, as `umount -l` does (the name goes at once), and the
 * daemon serves on until the kernel lets go of it, when the last file open on
 * it is closed: everything written reaches the store, and the loop then ends
 * as after any unmount (a signal that comes just after an unmount changes
 * nothing). A second signal ends the loop at once, as libfuse did (what the
 * kernel still held is lost: said in the log, exit 1). */
#ifndef CBFS_FUSE_STOP_H
#define CBFS_FUSE_STOP_H

#include <stdbool.h>

#include "fuse/cbfs_fuse.h"

/* Installs the handlers of the three signals over libfuse's and starts the
 * thread that detaches mnt (se's mount point) at the first one. Call from
 * the thread that runs the loop, after the mount. @return 0 or errno
 * (libfuse's handlers stay then). */
int cbfs_stop_start(struct fuse_session *se, const char *mnt);

/* After the loop: ends the thread; the three signals are ignored from then on
 * (the files are flushed after the loop: a signal's default action would cut
 * that short). @return true if a second signal cut the stop short. */
bool cbfs_stop_finish(void);

#endif

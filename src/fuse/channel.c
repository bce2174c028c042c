/* The /dev/fuse channel under libfuse. libfuse 3.14 (Debian 12's) cannot
 * negotiate FUSE_HANDLE_KILLPRIV_V2, and without it the kernel asks the
 * daemon for security.capability before every write(2) into the page cache:
 * one round trip per 8 KiB write of tar or mysqldump, which cost more than
 * the write itself (perf: dd bs=8K spent its time in cap_inode_need_killpriv
 * waiting for GETXATTR). With it the kernel marks the superblock SB_NOSEC and
 * checks each inode once. So cbfs reads and writes the channel itself
 * (fuse_session_custom_io): it adds the flag to the INIT reply when the
 * kernel offers it, and it passes on what 3.14 drops from requests: the
 * kill-suid/sgid flags of WRITE, OPEN, CREATE and SETATTR, which become the
 * daemon's job under KILLPRIV_V2 (see cbfs_chan_take_kill). Everything else is a plain
 * read/writev on the same fd, exactly what libfuse does without hooks. */
#include <errno.h>
#include <linux/fuse.h>
#include <stdbool.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "fuse/channel.h"
#include "fuse/channel_tsan.h"

/* The INIT request's unique id and whether the kernel offered KILLPRIV_V2;
 * written by the thread that reads INIT, read by the one replying to it,
 * which is the same (libfuse answers INIT in the thread that read it). */
static _Thread_local uint64_t cbfs_chan_init_unique;
static _Thread_local bool cbfs_chan_init_v2;
/* The request this thread read last asked to kill suid/sgid. */
static _Thread_local bool cbfs_chan_kill;
static _Atomic bool cbfs_chan_v2; /* negotiated; set once, before any other request */
static struct fuse_session *cbfs_chan_se; /* set by cbfs_chan_attach, before the loop */
static void (*cbfs_chan_after_init)(void *); /* likewise */
static void *cbfs_chan_after_init_arg;

static _Atomic bool cbfs_chan_aborted; /* a read saw ECONNABORTED */

/* The kernel's writeback WRITE (FUSE_WRITE_CACHE) this thread read last,
 * until its reply: libfuse answers some requests itself, in this thread,
 * before any op sees them (no memory for the request: "fuse: failed to
 * allocate request"), and such an error reply to a page written back stays
 * with the kernel for whichever descriptor of the file flushes first: a
 * reader's close took it, and the writer's close returned 0 with the page not
 * stored (helper-57). So the error is handed to the daemon (cbfs_chan_lost),
 * which counts it for the file's writers as it counts its own failed pages. */
static _Thread_local struct {
    uint64_t unique, fh, off;
} cbfs_chan_wb;
static void (*cbfs_chan_lost)(void *arg, uint64_t fh, uint64_t off, int err);
static void *cbfs_chan_lost_arg; /* both set before the loop */

bool cbfs_chan_kill_requested(uint32_t opcode, const void *arg, size_t alen)
{
    switch (opcode) {
    case FUSE_WRITE:
        return alen >= sizeof(struct fuse_write_in) &&
               (((const struct fuse_write_in *)arg)->write_flags & FUSE_WRITE_KILL_SUIDGID) != 0;
    case FUSE_SETATTR: /* 3.14 masks FATTR_KILL_SUIDGID out of the valid bits it passes */
        return alen >= sizeof(struct fuse_setattr_in) &&
               (((const struct fuse_setattr_in *)arg)->valid & FATTR_KILL_SUIDGID) != 0;
    case FUSE_OPEN:
        return alen >= sizeof(struct fuse_open_in) &&
               (((const struct fuse_open_in *)arg)->open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
    case FUSE_CREATE:
        /* fuse_create_in is {flags, mode, umask, open_flags}: its open_flags
         * is the fourth field, where fuse_open_in has it second */
        return alen >= sizeof(struct fuse_create_in) &&
               (((const struct fuse_create_in *)arg)->open_flags & FUSE_OPEN_KILL_SUIDGID) != 0;
    default:
        return false;
    }
}

static ssize_t cbfs_chan_read(int fd, void *buf, size_t len, void *userdata)
{
    (void)userdata;
    const ssize_t n = read(fd, buf, len);
    cbfs_chan_kill = false;
    cbfs_chan_wb.unique = 0;
    if (n == -1 && errno == ECONNABORTED) {
        /* The connection is gone, as with ENODEV, but libfuse ends its loop
         * cleanly only on ENODEV and calls anything else a failure. This
         * kernel (6.18) answers a plain unmount so once in a while (a
         * t_umount_busy run under load); main tells that from a real abort
         * (cbfs_chan_was_aborted). */
        cbfs_chan_aborted = true;
        errno = ENODEV;
        return -1;
    }
    if (n < (ssize_t)sizeof(struct fuse_in_header)) return n;
    const struct fuse_in_header *in = buf;
    const char *arg = (const char *)buf + sizeof *in;
    const size_t alen = (size_t)n - sizeof *in;
    cbfs_chan_tsan_read(in, arg, alen);
    switch (in->opcode) {
    case FUSE_INIT:
        if (alen >= offsetof(struct fuse_init_in, flags) + sizeof(uint32_t)) {
            const struct fuse_init_in *ii = (const void *)arg;
            cbfs_chan_init_unique = in->unique;
            cbfs_chan_init_v2 = (ii->flags & FUSE_HANDLE_KILLPRIV_V2) != 0;
        }
        break;
    case FUSE_WRITE:
        if (alen >= sizeof(struct fuse_write_in) &&
            (((const struct fuse_write_in *)arg)->write_flags & FUSE_WRITE_CACHE)) {
            const struct fuse_write_in *wi = (const void *)arg;
            cbfs_chan_wb.unique = in->unique;
            cbfs_chan_wb.fh = wi->fh;
            cbfs_chan_wb.off = wi->offset;
        }
        cbfs_chan_kill = cbfs_chan_kill_requested(in->opcode, arg, alen);
        break;
    default:
        cbfs_chan_kill = cbfs_chan_kill_requested(in->opcode, arg, alen);
        break;
    }
    return n;
}

static ssize_t cbfs_chan_writev(int fd, struct iovec *iov, int count, void *userdata)
{
    (void)userdata;
    bool init = false;
    if (cbfs_chan_init_unique && count >= 2 && iov[0].iov_len >= sizeof(struct fuse_out_header) &&
        iov[1].iov_len >= offsetof(struct fuse_init_out, flags) + sizeof(uint32_t)) {
        const struct fuse_out_header *out = iov[0].iov_base;
        if (out->unique == cbfs_chan_init_unique && out->error == 0) {
            struct fuse_init_out *io = iov[1].iov_base;
            if (cbfs_chan_init_v2) {
                io->flags |= FUSE_HANDLE_KILLPRIV_V2;
                io->flags &= ~(uint32_t)FUSE_HANDLE_KILLPRIV; /* v2 replaces it */
                cbfs_chan_v2 = true;
            }
            cbfs_log_debug("fuse init: handle_killpriv_v2 %s", cbfs_chan_v2 ? "on" : "not offered");
            cbfs_chan_init_unique = 0;
            init = true;
        }
    }
    if (cbfs_chan_wb.unique && count >= 1 && iov[0].iov_len >= sizeof(struct fuse_out_header)) {
        const struct fuse_out_header *out = iov[0].iov_base;
        if (out->unique == cbfs_chan_wb.unique) {
            cbfs_chan_wb.unique = 0;
            /* the fh is still the daemon's: the kernel holds the file open
             * until this WRITE is answered */
            if (out->error && cbfs_chan_lost)
                cbfs_chan_lost(cbfs_chan_lost_arg, cbfs_chan_wb.fh, cbfs_chan_wb.off, -out->error);
        }
    }
    if (count >= 1 && iov[0].iov_len >= sizeof(struct fuse_out_header))
        cbfs_chan_tsan_reply(iov, count);
    const ssize_t n = writev(fd, iov, count);
    /* The kernel handles the INIT reply inside this writev (process_init_reply),
     * before it lets any other request through. */
    if (init && n >= 0 && cbfs_chan_after_init) cbfs_chan_after_init(cbfs_chan_after_init_arg);
    return n;
}

int cbfs_chan_attach(struct fuse_session *se, void (*after_init)(void *), void *arg)
{
    cbfs_chan_after_init = after_init;
    cbfs_chan_after_init_arg = arg;
    static const struct fuse_custom_io io = {.read = cbfs_chan_read, .writev = cbfs_chan_writev};
    const int r = fuse_session_custom_io(se, &io, fuse_session_fd(se));
    if (r == 0) cbfs_chan_se = se;
    return r < 0 ? -r : 0;
}

void cbfs_chan_on_lost_write(void (*fn)(void *arg, uint64_t fh, uint64_t off, int err), void *arg)
{
    cbfs_chan_lost = fn;
    cbfs_chan_lost_arg = arg;
}

void cbfs_chan_inval_attr(fuse_ino_t ino)
{
    /* offset -1: attributes only, no page cache work, so it is safe from the
     * handler of a request on the same inode */
    if (cbfs_chan_se) (void)fuse_lowlevel_notify_inval_inode(cbfs_chan_se, ino, -1, 0);
}

bool cbfs_chan_killpriv_v2(void)
{
    return cbfs_chan_v2;
}

bool cbfs_chan_take_kill(void)
{
    const bool k = cbfs_chan_kill;
    cbfs_chan_kill = false;
    return k;
}

bool cbfs_chan_was_aborted(void)
{
    return cbfs_chan_aborted;
}

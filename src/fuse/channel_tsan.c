/* The order the kernel gives requests, told to ThreadSanitizer: the model is
 * described in channel_tsan.h. Compiled to nothing outside TSan builds. */
#include "fuse/channel_tsan.h"

#ifdef CBFS_CHAN_TSAN
#include <stdint.h>
#include <string.h>

void __tsan_acquire(void *addr);
void __tsan_release(void *addr);
#define CBFS_CHAN_TSAN_SLOTS 4096
/* only their addresses are used */
static char cbfs_chan_tsan_born[CBFS_CHAN_TSAN_SLOTS], cbfs_chan_tsan_used[CBFS_CHAN_TSAN_SLOTS],
    cbfs_chan_tsan_listed[CBFS_CHAN_TSAN_SLOTS];
static _Thread_local struct {
    uint64_t unique, nodeid;
    uint64_t other; /* the second node id of LINK (the file), RENAME(2) (the new
                       directory): 0 for the others */
    uint64_t fh;    /* READDIR(PLUS)'s handle */
    uint32_t opcode;
} cbfs_chan_tsan_req; /* the request this thread read last */

static void *cbfs_chan_tsan_slot(char *slots, uint64_t nodeid)
{
    return &slots[(nodeid * 0x9E3779B97F4A7C15ull) >> 52];
}

/* After a request is read: what the kernel ordered before it. */
void cbfs_chan_tsan_read(const struct fuse_in_header *in, const char *arg, size_t alen)
{
    cbfs_chan_tsan_req.unique = in->unique;
    cbfs_chan_tsan_req.nodeid = in->nodeid;
    cbfs_chan_tsan_req.opcode = in->opcode;
    cbfs_chan_tsan_req.fh = 0;
    cbfs_chan_tsan_req.other = 0;
    __tsan_acquire(cbfs_chan_tsan_slot(cbfs_chan_tsan_born, in->nodeid));
    switch (in->opcode) {
    case FUSE_LINK:    /* fuse_link_in.oldnodeid */
    case FUSE_RENAME:  /* fuse_rename_in.newdir */
    case FUSE_RENAME2: /* fuse_rename2_in.newdir */
        if (alen >= sizeof(uint64_t)) {
            memcpy(&cbfs_chan_tsan_req.other, arg, sizeof(uint64_t));
            __tsan_acquire(cbfs_chan_tsan_slot(cbfs_chan_tsan_born, cbfs_chan_tsan_req.other));
        }
        break;
    case FUSE_FORGET:
    case FUSE_RELEASE:
    case FUSE_RELEASEDIR:
        __tsan_acquire(cbfs_chan_tsan_slot(cbfs_chan_tsan_used, in->nodeid));
        break;
    case FUSE_READDIR:
    case FUSE_READDIRPLUS:
        if (alen >= sizeof(struct fuse_read_in)) {
            cbfs_chan_tsan_req.fh = ((const struct fuse_read_in *)(const void *)arg)->fh;
            __tsan_acquire(cbfs_chan_tsan_slot(cbfs_chan_tsan_listed, cbfs_chan_tsan_req.fh));
        }
        break;
    case FUSE_BATCH_FORGET:
        if (alen >= sizeof(struct fuse_batch_forget_in)) {
            const struct fuse_batch_forget_in *const b = (const void *)arg;
            const struct fuse_forget_one *const one = (const void *)(b + 1);
            for (size_t i = 0; i < b->count && (i + 1) * sizeof *one <= alen - sizeof *b; i++)
                __tsan_acquire(cbfs_chan_tsan_slot(cbfs_chan_tsan_used, one[i].nodeid));
        }
        break;
    default:
        break;
    }
}

/* A node id the reply hands out (and uses). */
static void cbfs_chan_tsan_hand_out(uint64_t nodeid)
{
    if (!nodeid) return;
    __tsan_release(cbfs_chan_tsan_slot(cbfs_chan_tsan_born, nodeid));
    __tsan_release(cbfs_chan_tsan_slot(cbfs_chan_tsan_used, nodeid));
}

/* Before the reply to the request this thread read. */
void cbfs_chan_tsan_reply(const struct iovec *iov, int count)
{
    const struct fuse_out_header *const out = iov[0].iov_base;
    if (out->unique == 0 || out->unique != cbfs_chan_tsan_req.unique) return;
    __tsan_release(cbfs_chan_tsan_slot(cbfs_chan_tsan_used, cbfs_chan_tsan_req.nodeid));
    if (cbfs_chan_tsan_req.other)
        __tsan_release(cbfs_chan_tsan_slot(cbfs_chan_tsan_used, cbfs_chan_tsan_req.other));
    if (cbfs_chan_tsan_req.opcode == FUSE_READDIR || cbfs_chan_tsan_req.opcode == FUSE_READDIRPLUS)
        __tsan_release(cbfs_chan_tsan_slot(cbfs_chan_tsan_listed, cbfs_chan_tsan_req.fh));
    if (out->error) return;
    const char *const p = count >= 2 ? iov[1].iov_base : NULL;
    const size_t len = count >= 2 ? iov[1].iov_len : 0;
    switch (cbfs_chan_tsan_req.opcode) {
    case FUSE_INIT:
        cbfs_chan_tsan_hand_out(FUSE_ROOT_ID);
        break;
    case FUSE_OPEN:
    case FUSE_OPENDIR:
        cbfs_chan_tsan_hand_out(cbfs_chan_tsan_req.nodeid);
        break;
    case FUSE_LOOKUP:
    case FUSE_MKNOD:
    case FUSE_MKDIR:
    case FUSE_SYMLINK:
    case FUSE_LINK:
    case FUSE_CREATE: /* its handle is its entry's */
        if (len >= sizeof(struct fuse_entry_out))
            cbfs_chan_tsan_hand_out(((const struct fuse_entry_out *)(const void *)p)->nodeid);
        break;
    case FUSE_READDIRPLUS:
        for (size_t at = 0; at + sizeof(struct fuse_direntplus) <= len;) {
            const struct fuse_direntplus *const d = (const void *)(p + at);
            cbfs_chan_tsan_hand_out(d->entry_out.nodeid);
            at += FUSE_DIRENTPLUS_SIZE(d);
        }
        break;
    default:
        break;
    }
}
#endif

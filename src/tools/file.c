/* A data file as the cbfs command opens it: the file with its sidecar and
 * loaded index, opened by name without following symlinks or blocking on a
 * FIFO (tool_file_open_regular, tool_file_open); looked at again where a daemon
 * may be changing it (tool_file_look_again, the one rule in tools/tool.h);
 * and what the tools say of it. The tree it is found in: walk.c. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "cbfs/util.h"
#include "tools/tool.h"

cbfs_err tool_file_open_regular(int dirfd, const char *path, int flags, int *fd)
{
    /* O_PATH opens nothing: a FIFO at the name would block an open(2) for
     * reading until a writer comes (the store's user decides when), and a
     * device's open has effects of its own. Only a regular file is reopened,
     * through its fd, so the name cannot be swapped in between. Without
     * /proc the name is opened again, never blocking (O_NONBLOCK), and must
     * still be the same file. */
    *fd = -1;
    flags &= ~(O_NOFOLLOW | O_CREAT | O_EXCL | O_TRUNC);
    const int pfd = cbfs_store_openat(dirfd, path, O_PATH | O_NOFOLLOW | O_CLOEXEC, 0);
    if (pfd < 0) return cbfs_err_from_errno(errno);
    struct stat st, again;
    cbfs_err e = CBFS_OK;
    if (fstat(pfd, &st) != 0) {
        e = cbfs_err_from_errno(errno);
    } else if (!S_ISREG(st.st_mode)) {
        e = CBFS_E_NOT_REGULAR;
    } else {
        char proc[CBFS_PROCFD_MAX];
        cbfs_procfd(proc, pfd);
        *fd = open(proc, flags | O_NOCTTY | O_CLOEXEC);
        if (*fd < 0 && errno == ENOENT) { /* no /proc */
            *fd = cbfs_store_openat(dirfd, path,
                                    flags | O_NOFOLLOW | O_NONBLOCK | O_NOCTTY | O_CLOEXEC, 0);
            if (*fd >= 0 && (fstat(*fd, &again) != 0 || again.st_dev != st.st_dev ||
                             again.st_ino != st.st_ino)) {
                close(*fd);
                *fd = -1;
                errno = EAGAIN; /* swapped meanwhile */
            }
        }
        if (*fd < 0) e = cbfs_err_from_errno(errno);
    }
    close(pfd);
    return e;
}

/* tf's index as load reads it with the sidecar idx_fd, repairing nothing. */
static cbfs_err tool_file_load(const struct tool_file *tf, int idx_fd, enum tool_load load,
                               struct cbfs_index *idx, struct cbfs_index_report *rep)
{
    return load == TOOL_LOAD_FULL
               ? cbfs_index_load(tf->data_fd, idx_fd, false, &tf->store.bs, idx, rep)
               : cbfs_index_open(tf->data_fd, idx_fd, false, &tf->store.bs, idx, rep);
}

static bool tool_file_stat_same(const struct stat *a, const struct stat *b)
{
    return a->st_size == b->st_size && a->st_mtim.tv_sec == b->st_mtim.tv_sec &&
           a->st_mtim.tv_nsec == b->st_mtim.tv_nsec && a->st_ctim.tv_sec == b->st_ctim.tv_sec &&
           a->st_ctim.tv_nsec == b->st_ctim.tv_nsec;
}

/* Have tf's store files changed since its index was loaded? */
static bool tool_file_changed(const struct tool_file *tf)
{
    struct stat st;
    if (fstat(tf->data_fd, &st) != 0 || !tool_file_stat_same(&st, &tf->data_st)) return true;
    return tf->idx_fd >= 0 &&
           (fstat(tf->idx_fd, &st) != 0 || !tool_file_stat_same(&st, &tf->idx_st));
}

#define TOOL_SIDE_KEEP (-2) /* tool_file_reload: tf's own sidecar fd */

/* Loads tf's index again from its data fd and the sidecar side (an fd, -1 for
 * none, or TOOL_SIDE_KEEP), taking the stats first (a change after them makes
 * the next look see a change). Only a load without error replaces tf's index
 * (moved to *old where given), stats, report and, with another side, its
 * sidecar fd (side then belongs to tf); on error nothing of tf changes and
 * side is the caller's. */
static cbfs_err tool_file_reload(struct tool_file *tf, int side, struct cbfs_index *old)
{
    assert(tf->is_cbfs);
    const int ifd = side == TOOL_SIDE_KEEP ? tf->idx_fd : side;
    struct stat dst, ist = {0};
    if (fstat(tf->data_fd, &dst) != 0 || (ifd >= 0 && fstat(ifd, &ist) != 0))
        return cbfs_err_from_errno(errno);
    struct cbfs_index idx;
    struct cbfs_index_report rep;
    const cbfs_err e = tool_file_load(tf, ifd, TOOL_LOAD_FULL, &idx, &rep);
    if (e) return e;
    if (old && !tf->load_err) *old = tf->idx;
    else if (old) cbfs_index_init(old, 0, 0); /* nothing was loaded: an empty one */
    else if (!tf->load_err) cbfs_index_free(&tf->idx);
    if (side != TOOL_SIDE_KEEP) {
        if (tf->idx_fd >= 0) close(tf->idx_fd);
        tf->idx_fd = side;
    }
    tf->idx = idx;
    tf->rep = rep;
    tf->load_err = CBFS_OK;
    tf->data_st = dst;
    tf->idx_st = ist;
    return CBFS_OK;
}

/* Does tf's name (in tf->dirfd) still name the data file it opened? */
static bool tool_file_at_name(const struct tool_file *tf)
{
    struct stat st;
    return tf->name && fstatat(tf->dirfd, tf->name, &st, AT_SYMLINK_NOFOLLOW) == 0 &&
           st.st_dev == tf->data_st.st_dev && st.st_ino == tf->data_st.st_ino;
}

/* The sidecar tf's name has now where that is another file than tf's: an fd
 * on it, or -1 where there is none now and tf had one (a rename moves a data
 * file before its sidecar, an unlink moves the sidecar away first, a rename
 * over a name replaces both); TOOL_SIDE_KEEP where it is tf's own, or where
 * it cannot be told (an open that fails other than for want of the name: out
 * of fds, no permission). */
static int tool_file_side_now(const struct tool_file *tf)
{
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    int fd;
    if (cbfs_store_sidecar_path(tf->store.layout, tf->name, side, sizeof side) != CBFS_OK)
        return TOOL_SIDE_KEEP;
    const cbfs_err e =
        tool_file_open_regular(tf->dirfd, side, O_RDONLY | O_NOFOLLOW | O_CLOEXEC, &fd);
    if (e == CBFS_E_NOENT) return tf->idx_fd >= 0 ? -1 : TOOL_SIDE_KEEP;
    if (e) return TOOL_SIDE_KEEP;
    struct stat a, b;
    if (tf->idx_fd >= 0 && fstat(fd, &a) == 0 && fstat(tf->idx_fd, &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino) {
        close(fd);
        return TOOL_SIDE_KEEP;
    }
    return fd;
}

enum tool_look tool_file_look_again(struct tool_file *tf, unsigned *looks,
                                    struct cbfs_index *old)
{
    if (!tf->is_cbfs) return TOOL_LOOK_STANDS;
    bool changed = tool_file_changed(tf);
    if (!changed &&
        (tool_recent(&tf->data_st) || (tf->idx_fd >= 0 && tool_recent(&tf->idx_st)))) {
        tool_settle();
        changed = tool_file_changed(tf);
    }
    struct stat st;
    if (fstat(tf->data_fd, &st) == 0 && st.st_nlink == 0) return TOOL_LOOK_GONE; /* removed */
    /* The sidecar at the name, taken only while the name names the file
     * before and after it was opened: the daemon moves a data file before its
     * sidecar, so that sidecar is this file's. A file moved away goes on with
     * the sidecar it has (and is reported under the name it was found at). */
    int side = tool_file_at_name(tf) ? tool_file_side_now(tf) : TOOL_SIDE_KEEP;
    if (side != TOOL_SIDE_KEEP && !tool_file_at_name(tf)) {
        if (side >= 0) close(side);
        side = TOOL_SIDE_KEEP;
    }
    if (!changed && side == TOOL_SIDE_KEEP) return TOOL_LOOK_STANDS;
    enum tool_look r = TOOL_LOOK_KEPT_CHANGING;
    if (*looks < TOOL_LOOKS) {
        r = tool_file_reload(tf, side, old) == CBFS_OK ? TOOL_LOOK_AGAIN : TOOL_LOOK_STANDS;
        if (r == TOOL_LOOK_AGAIN) {
            (*looks)++;
            return r;
        }
        /* a load that failed right as the file went (a rename over it) */
        if (fstat(tf->data_fd, &st) == 0 && st.st_nlink == 0) r = TOOL_LOOK_GONE;
    }
    if (side >= 0) close(side);
    return r;
}

/* tool_file_frame_inside's walk: the frames of one file only. */
static cbfs_err tool_frame_inside_one(void *arg, uint64_t off, const struct cbfs_frame_hdr *h,
                                      bool *stop)
{
    (void)off;
    *stop = h->file_id != *(const uint64_t *)arg;
    return CBFS_OK;
}

/* Sets tf->frame_inside for a plain file that starts with zeros where a
 * frame envelope would be (a sector lost to zeros, the commonest damage),
 * holds a frame header that decodes where the file's second frame could
 * start (past the first frame's header, within the largest frame), and from
 * there holds that file's frames back to back to its end (or to a torn last
 * frame), as a data file does. A disk image that holds a data file does not
 * end with it (helper-48 found ext4 images taken so before the walk). Holes
 * are passed over (SEEK_DATA): a sparse file costs no reads. @return a read
 * error (never a guess). */
static cbfs_err tool_file_frame_inside(struct tool_file *tf)
{
    const uint64_t size = (uint64_t)tf->data_st.st_size;
    uint8_t head[CBFS_FRAME_ENVELOPE_SIZE];
    static const uint8_t zeros[CBFS_FRAME_ENVELOPE_SIZE];
    if (size < 2 * (uint64_t)CBFS_FRAME_HDR_SIZE) return CBFS_OK;
    cbfs_err e = cbfs_pread_full(tf->data_fd, head, sizeof head, 0);
    if (e || memcmp(head, zeros, sizeof head) != 0) return e;
    const off_t data = lseek(tf->data_fd, CBFS_FRAME_HDR_SIZE, SEEK_DATA);
    if (data < 0) return errno == ENXIO ? CBFS_OK : cbfs_err_from_errno(errno);
    bool found;
    uint64_t at;
    e = cbfs_frame_find_header(tf->data_fd, size, (uint64_t)data - 1,
                               2 * (uint64_t)CBFS_FRAME_HDR_SIZE + CBFS_BLOCK_MAX, &at, &found);
    if (e || !found) return e;
    struct cbfs_frame_hdr h;
    if ((e = cbfs_frame_read_hdr(tf->data_fd, at, size, &h)) != CBFS_OK) return e;
    uint64_t end;
    e = cbfs_frame_walk(tf->data_fd, size, at, tool_frame_inside_one, &h.file_id, &end);
    if (e == CBFS_E_VERSION) return CBFS_OK; /* not this file's: tells nothing */
    if (e) return e;
    bool torn_last = false;
    if (end < size && size - end < (uint64_t)CBFS_FRAME_HDR_SIZE + CBFS_BLOCK_MAX &&
        cbfs_pread_full(tf->data_fd, head, sizeof head, end) == CBFS_OK &&
        cbfs_frame_is_envelope(head, sizeof head)) {
        struct cbfs_frame_hdr last;
        const cbfs_err le = cbfs_frame_read_hdr(tf->data_fd, end, size, &last);
        torn_last = le == CBFS_E_TRUNCATED; /* this frame's bytes run past the end */
    }
    if (end == size || torn_last) tf->frame_inside = at;
    return CBFS_OK;
}

cbfs_err tool_file_open(const struct tool_store *store, int dirfd, const char *name,
                        enum tool_load load, struct tool_file *tf)
{
    bool at_side = false;
    memset(tf, 0, sizeof *tf);
    tf->store = *store;
    tf->dirfd = dirfd;
    tf->name = name;
    tf->idx_fd = -1;
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    cbfs_err e = cbfs_store_sidecar_path(store->layout, name, side, sizeof side);
    if (e) return e;
    const int flags = O_RDONLY | O_NOFOLLOW | O_CLOEXEC;
    if ((e = tool_file_open_regular(dirfd, name, flags, &tf->data_fd)) != CBFS_OK) return e;
    if (fstat(tf->data_fd, &tf->data_st) != 0) {
        e = cbfs_err_from_errno(errno);
        goto fail;
    }
    at_side = true;
    e = tool_file_open_regular(dirfd, side, flags, &tf->idx_fd);
    if (e == CBFS_E_NOENT) e = CBFS_OK;
    if (e) goto fail;
    if (tf->idx_fd >= 0 && fstat(tf->idx_fd, &tf->idx_st) != 0) {
        e = cbfs_err_from_errno(errno);
        goto fail;
    }
    at_side = false;
    bool framed = false;
    if (tf->idx_fd < 0 && (e = cbfs_store_has_frame_envelope(tf->data_fd, &framed,
                                                             &tf->envelope_damaged)) != CBFS_OK)
        goto fail;
    tf->is_cbfs = tf->idx_fd >= 0 || framed;
    if (!tf->is_cbfs && load == TOOL_LOAD_FULL && !tf->envelope_damaged &&
        (e = tool_file_frame_inside(tf)) != CBFS_OK)
        goto fail;
    if (!tf->is_cbfs) return CBFS_OK;
    tf->load_err = tool_file_load(tf, tf->idx_fd, load, &tf->idx, &tf->rep);
    if (tf->load_err == CBFS_E_IO || tf->load_err == CBFS_E_NOMEM) {
        e = tf->load_err;
        goto fail;
    }
    return CBFS_OK;
fail:
    tool_file_close(tf);
    tf->side_failed = at_side;
    return e;
}

bool tool_file_open_walked(const struct tool_store *store, int dirfd, const char *name,
                           enum tool_load load, const char *display, const char *sub,
                           unsigned *errors, struct tool_file *tf)
{
    const cbfs_err e = tool_file_open(store, dirfd, name, load, tf);
    if (e == CBFS_E_NOENT && !tf->side_failed)
        return false; /* gone since the listing (a live mount's rename) */
    if (e) {
        tool_file_open_err(sub, store, display, tf, e);
        (*errors)++;
    }
    return e == CBFS_OK;
}

void tool_file_open_err(const char *sub, const struct tool_store *store, const char *display,
                        const struct tool_file *tf, cbfs_err e)
{
    if (!tf->side_failed) {
        tool_err(sub, "%s: %s", display, cbfs_err_str(e));
        return;
    }
    const struct tool_file named = {.store = *store};
    char side[PATH_MAX + CBFS_STORE_SIDECAR_PATH_MAX];
    tool_file_side_display(&named, display, side, sizeof side);
    tool_err(sub, "%s: its sidecar %s: %s", display, side, cbfs_err_str(e));
}

void tool_file_side_display(const struct tool_file *tf, const char *display, char *buf,
                            size_t cap)
{
    /* the store layer names the sidecar; only the directory part is ours */
    char side[CBFS_STORE_SIDECAR_PATH_MAX];
    const char *const slash = strrchr(display, '/');
    const int dlen = slash ? (int)(slash - display + 1) : 0;
    if (cbfs_store_sidecar_path(tf->store.layout, display + dlen, side, sizeof side) != CBFS_OK)
        snprintf(side, sizeof side, "(sidecar of %s)", display + dlen); /* a name too long */
    snprintf(buf, cap, "%.*s%s", dlen, display, side);
}

const char tool_envelope_damaged_msg[] =
    "no sidecar, and it starts with a damaged cbfs frame envelope: most likely a compressed "
    "file that lost its sidecar and its first frame header, which the store's rule takes "
    "for a plain file (the mount serves its raw frames); restore its sidecar, or the file "
    "from another copy";

const char *tool_file_load_advice(const struct tool_file *tf)
{
    if (tf->load_err != CBFS_E_BLOCK_SIZE) return "";
    if (tf->store.bs.asserted)
        return " (the block size given with --block-size is smaller than a block of the file)";
    if (tf->store.bs.otherwise)
        return " (its frames contradict the block size given with --block-size)";
    return " (restore its sidecar, or give the block size the file was written with: "
           "--block-size SIZE of cbfs cat or cbfs fsck --repair)";
}

void tool_file_close(struct tool_file *tf)
{
    if (tf->is_cbfs && !tf->load_err) cbfs_index_free(&tf->idx);
    if (tf->data_fd >= 0) close(tf->data_fd);
    if (tf->idx_fd >= 0) close(tf->idx_fd);
    memset(tf, 0, sizeof *tf);
    tf->data_fd = tf->idx_fd = -1;
}

uint64_t tool_file_physical(const struct tool_file *tf)
{
    return (uint64_t)tf->data_st.st_size + (tf->idx_fd >= 0 ? (uint64_t)tf->idx_st.st_size : 0);
}

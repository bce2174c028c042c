/* The one rule for reporting failures that no caller was waiting for (a
 * block stored after its write returned, a page the kernel wrote back), as
 * Linux's errseq reports writeback errors (include/linux/errseq.h): each
 * failure counts once, and every handle open at the time hears the newest
 * once, at its next fsync, whichever handle's data failed. A close (flush)
 * reports it too but leaves it for the fsync (cbfs_errseq_peek), as NFS's
 * close does: a handle is an open file, which a dup or a fork shares, and
 * the close of one such copy (a child's exec closing its close-on-exec
 * copy) must not take the failure from the writer's own fsync and close. A handle
 * opened while a failure nobody has heard of yet is pending hears it too
 * (`sync FILE` right after a failed store). Not thread-safe: its owner's lock
 * guards it (the engine's file->lock, the FUSE layer's inode->lock for plain
 * files), and every handle's "seen" with it. */
#ifndef CBFS_ERRSEQ_H
#define CBFS_ERRSEQ_H

#include <stdbool.h>
#include <stdint.h>

#include "cbfs/err.h"

struct cbfs_errseq {
    uint64_t seq;  /* failures so far */
    cbfs_err last; /* the newest of them */
    bool heard;    /* some handle has been told the newest */
};

/* Counts failure e (not CBFS_OK). */
static inline void cbfs_errseq_count(struct cbfs_errseq *es, cbfs_err e)
{
    es->seq++;
    es->last = e;
    es->heard = false;
}

/* Is there a failure nobody has heard of yet? */
static inline bool cbfs_errseq_unheard(const struct cbfs_errseq *es)
{
    return es->seq && !es->heard;
}

/* Where a new handle's "seen" starts (errseq_sample). */
static inline uint64_t cbfs_errseq_sample(const struct cbfs_errseq *es)
{
    return es->seq - cbfs_errseq_unheard(es);
}

/* A flush or fsync returns e: if that is the newest failure, some handle
 * has now heard it. */
static inline void cbfs_errseq_told(struct cbfs_errseq *es, cbfs_err e)
{
    if (e && e == es->last) es->heard = true;
}

/* What a handle's close reports: the newest failure since seen (CBFS_OK:
 * none), seen left as it was for the handle's fsync and next close. */
static inline cbfs_err cbfs_errseq_peek(const struct cbfs_errseq *es, uint64_t seen)
{
    return seen != es->seq ? es->last : CBFS_OK;
}

/* What a handle's fsync reports: the newest failure since *seen (CBFS_OK:
 * none); *seen is brought up to date. */
static inline cbfs_err cbfs_errseq_check(struct cbfs_errseq *es, uint64_t *seen)
{
    const cbfs_err e = *seen != es->seq ? es->last : CBFS_OK;
    *seen = es->seq;
    cbfs_errseq_told(es, e);
    return e;
}

/* What a handle's close (close) or fsync reports, the one rule for both:
 * cbfs_errseq_peek or cbfs_errseq_check, and some handle has heard it. */
static inline cbfs_err cbfs_errseq_hear(struct cbfs_errseq *es, uint64_t *seen, bool close)
{
    const cbfs_err e = close ? cbfs_errseq_peek(es, *seen) : cbfs_errseq_check(es, seen);
    cbfs_errseq_told(es, e);
    return e;
}

#endif

/* The durable side of an engine file: a sync makes the frames stored so far
 * durable (fdatasync of the data file), then appends their records and
 * makes the sidecar durable; a writer that never syncs catches up by itself;
 * a failed sync takes the file back to what its sidecar holds
 * (cbfs_file_revert); after a good one, the payloads of garbage frames are
 * punched (cbfs's compaction). docs/ENGINE.md, write path steps 3, 4 and 6. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

void cbfs_file_note_dead(void *arg, uint64_t offset, uint32_t plen)
{
    struct cbfs_file *f = arg;
    cbfs_assert_held(&f->lock);
    if (f->no_punch || plen < 4096) return; /* nothing a 4 KiB fs block could free */
    if (f->ndead == f->dead_cap) {
        size_t cap = f->dead_cap ? f->dead_cap * 2 : 64;
        struct cbfs_dead *v = realloc(f->dead, cap * sizeof *v);
        if (!v) return;
        f->dead = v;
        f->dead_cap = cap;
    }
    f->dead[f->ndead++] = (struct cbfs_dead){offset, plen};
}

/* Reclaims the space of garbage frames by punching holes in their payloads
 * (the 64-byte headers stay, so a rescan still walks the file frame by
 * frame). dead[0..n) must be frames whose replacements (and the records
 * saying so) were written before the fdatasync that just succeeded, so a
 * crash can never leave a block whose only copy was punched: the flush takes
 * the list when it begins its sync. This is cbfs's compaction: no rewrite,
 * no rename, no second copy of the file. No lock held. */
static void cbfs_file_punch_dead(struct cbfs_file *f, const struct cbfs_dead *dead, size_t n)
{
    cbfs_assert_not_held(&f->lock);
    for (size_t i = 0; i < n; i++) {
        uint64_t start = (dead[i].offset + CBFS_FRAME_HDR_SIZE + 4095) & ~4095ull;
        uint64_t end = (dead[i].offset + CBFS_FRAME_HDR_SIZE + dead[i].plen) & ~4095ull;
        if (end <= start) continue;
        if (fallocate(f->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
                      (off_t)(end - start)) != 0) {
            if (errno == EOPNOTSUPP) {
                cbfs_mutex_lock(&f->lock);
                f->no_punch = true; /* garbage stays until the file is rewritten */
                cbfs_mutex_unlock(&f->lock);
            } else { /* nothing is lost, but the space is not given back: say so */
                cbfs_log_info("%s: cannot punch superseded frames from store offset %llu: %s "
                              "(their space stays used)",
                              f->name, (unsigned long long)dead[i].offset, strerror(errno));
            }
            break;
        }
    }
}

/* Drops what a background error left unstored, so the file is what the store
 * holds (a correct prefix, see cbfs_file_store_batch), and lets storing
 * resume. @return the error. Lock held. */
static cbfs_err cbfs_file_reset(struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    const cbfs_err err = f->err;
    if (!f->broken) f->err = CBFS_OK;
    f->resets++;
    for (unsigned i = 0; i < f->nopen; i++) cbfs_engine_buf_put(f->eng, f->open[i].data, f->bs);
    f->nopen = 0;
    f->size = f->size_set = f->idx.size < f->broken_size ? f->idx.size : f->broken_size;
    f->set_below = false;
    if (f->wnext > f->size / f->bs) f->wnext = f->size / f->bs;
    return err;
}

uint64_t cbfs_file_err_seq(struct cbfs_file *f)
{
    cbfs_mutex_lock(&f->lock);
    const uint64_t seq = cbfs_errseq_sample(&f->errs);
    cbfs_mutex_unlock(&f->lock);
    return seq;
}

/* Takes the sync role with a copy of the pending records (their frames were
 * written before: the sync's fdatasync covers them). Lock held, role free.
 * @return CBFS_E_NOMEM, the role not taken. */
static cbfs_err cbfs_file_sync_begin(struct cbfs_file *f, struct cbfs_rsync *rs)
{
    cbfs_assert_held(&f->lock);
    assert(!f->syncing);
    *rs = (struct cbfs_rsync){.end = f->durable_end};
    if (f->nprec) {
        rs->recs = malloc(f->nprec * sizeof *rs->recs);
        if (!rs->recs) return CBFS_E_NOMEM;
        memcpy(rs->recs, f->prec, f->nprec * sizeof *rs->recs);
        rs->n = f->nprec;
        rs->end = cbfs_file_pending_end(f);
    }
    f->syncing = true;
    return CBFS_OK;
}

/* The sync's I/O: the data file durable (fsync with meta: the inode's mode,
 * owner and times too), then the records of its frames appended, then, for a
 * flush, the sidecar durable. Never a record before its frame is durable: a
 * power cut between the two files' writeback would leave it pointing at a
 * frame that did not land. *appended: the records are in the sidecar. No
 * lock, sync role. */
static cbfs_err cbfs_file_sync_io(struct cbfs_file *f, const struct cbfs_rsync *rs, bool flush,
                                  bool meta, bool *appended)
{
    cbfs_assert_not_held(&f->lock);
    const char *const call = meta ? "fsync" : "fdatasync";
    *appended = false;
    cbfs_err e = CBFS_OK;
    if ((meta ? fsync(f->data_fd) : fdatasync(f->data_fd)) != 0) {
        e = cbfs_err_from_errno(errno);
        cbfs_log_err("%s: %s of the data file failed: %s", f->name, call, cbfs_err_str(e));
        return e;
    }
    if (f->idx_fd < 0) return CBFS_OK; /* read-only, rebuilt in memory: nothing stored */
    if (rs->n && (e = cbfs_index_append(&f->idx, f->idx_fd, rs->recs, rs->n))) {
        cbfs_log_err("%s: appending %zu index record(s) failed: %s", f->name, rs->n,
                     cbfs_err_str(e));
        return e;
    }
    *appended = true;
    if (flush && (meta ? fsync(f->idx_fd) : fdatasync(f->idx_fd)) != 0) {
        e = cbfs_err_from_errno(errno);
        atomic_store(&f->head_lost, true); /* the header's page too, if never synced */
        cbfs_log_err("%s: %s of the sidecar failed: %s", f->name, call, cbfs_err_str(e));
    }
    return e;
}

/* After a sync that failed before its records were appended: its fdatasync
 * of the data file (Linux reports a writeback error once and may forget the
 * pages) or the append. Frames stored since the last good sync may be gone,
 * and none has its record in the sidecar yet, so the file goes back to what
 * the sidecar holds, as a reset does after a failed store: the data file is
 * cut back to durable_end (the next open's rescan must not apply a frame
 * whose writer was told it failed), the table is loaded again from the
 * sidecar (repaired as an open would, where records were lost to zeros
 * behind which acknowledged ones lie), and the pending records, the garbage
 * list (some of its frames are live again; the rest stay unpunched), the
 * open blocks and the jobs not stored yet are dropped (they may hold bytes
 * taken back, read for a read-modify-write). The sizes the file showed
 * stay: its lowest and last SIZE since are stored again, so what a truncate
 * cut never comes back.
 *
 * Reporting: the failure is counted for every handle (cbfs_file_sync_end).
 * After a flush's sync (flush), what was written while it ran (past the
 * nsync records it covered) makes the next flush report a failure too
 * (sync_late): that flush's caller heard this one, and the data it wrote
 * meanwhile is gone as well. After a writer's catch-up, nobody has heard
 * yet: its writes fail and nothing more is stored until a flush has
 * reported it (f->stop), so that it cannot store blocks behind the ones
 * taken back (zeros in between: helper-15); reads go on.
 *
 * A torn append (records past index_end that a cut of the sidecar could not
 * take back) keeps the frames they may point at, and a table that cannot be
 * loaded again stays as it was: the file is then broken and stores nothing
 * until it is opened again. All under the lock (a failure path: no writer
 * may open a block from the old table meanwhile), once no committer is
 * storing. Lock held, sync role. */
static void cbfs_file_revert(struct cbfs_file *f, cbfs_err e, size_t nsync, bool flush)
{
    cbfs_assert_held(&f->lock);
    while (f->committing) cbfs_mutex_wait(&f->lock, &f->cond);
    bool late = f->nprec > nsync;
    for (struct cbfs_wjob *j = f->pend_head; j; j = j->next) {
        j->dropped = true;
        late = true;
    }
    for (unsigned i = 0; i < f->nopen; i++) {
        late = late || f->open[i].dirty;
        cbfs_engine_buf_put(f->eng, f->open[i].data, f->bs);
    }
    f->nopen = 0;
    f->resets++; /* a write that waited for a slot fails */
    if (late && flush) f->sync_late = true;
    /* the sizes the file showed stay: what a truncate cut never comes back
     * (cut: the lowest), and an extension after it reads zeros (last) */
    uint64_t cut = UINT64_MAX, last = 0;
    for (size_t i = 0; i < f->nprec; i++) {
        if (f->prec[i].type != CBFS_REC_SIZE) continue;
        last = f->prec[i].block;
        if (last < cut) cut = last;
    }
    const size_t dropped = f->nprec;
    f->nprec = 0;
    f->ndead = 0;
    const uint64_t end = f->durable_end;
    const bool data_cut = !f->idx.torn && ftruncate(f->data_fd, (off_t)end) == 0;
    if (data_cut) {
        f->append_off = end;
        if (f->behind_off > end) f->behind_off = end;
    }
    struct cbfs_index idx;
    struct cbfs_index_report rep = {0};
    /* with repair, as a writable open loads: where records were lost to
     * zeros (a failed sidecar sync) with acknowledged ones behind them, a
     * table that ended at the zeros had the next records written over those
     * (helper-17); the repair writes the rescanned frames' records again.
     * Otherwise it writes nothing: the data file ends at the last record's
     * frame, or at a tail the open kept. */
    const cbfs_err le = cbfs_file_load_index(f->eng, f->data_fd, f->idx_fd, true, &idx, &rep);
    if (!le) {
        idx.on_dead = cbfs_file_note_dead;
        idx.on_dead_arg = f;
        /* the decoded-block cache keys on generations: one taken back is
         * never given to another frame */
        if (idx.next_gen < f->idx.next_gen) idx.next_gen = f->idx.next_gen;
        cbfs_index_free(&f->idx);
        f->idx = idx;
    }
    f->idx_need = f->idx.index_end;
    f->idx_reserved = f->idx.index_end; /* a cut back of the sidecar frees what lay past it */
    f->size = f->size_set = f->idx.size;
    f->set_below = false;
    if (f->wnext > f->size / f->bs) f->wnext = f->size / f->bs;
    const bool back = data_cut && !le; /* the file is what its sidecar holds */
    cbfs_err ce = CBFS_OK;
    if (back && cut != UINT64_MAX) {
        /* without allocating the sidecar ahead: a failed append (a full
         * store) freed that room, and the records wait in memory anyway
         * (a next failure takes them back and stores the sizes again) */
        f->committing = true;
        if (cut < f->size) ce = cbfs_file_store_size(f, cut, false);
        if (!ce && last > f->size) ce = cbfs_file_store_size(f, last, false);
        f->committing = false;
    }
    if ((!back || ce) && cut < f->size) /* until reopened */
        f->size = f->size_set = f->broken_size = cut;
    if (!back || ce) {
        f->broken = true;
        f->err = e;
        cbfs_log_err("%s: after a failed sync, the file cannot go back to what its sidecar holds "
                     "(%s): nothing more is stored until it is opened again",
                     f->name,
                     le   ? cbfs_err_str(le)
                     : ce ? "a truncate since cannot be stored again"
                          : "the data file cannot be cut back");
    } else {
        f->stop = e;
        cbfs_log_warn("%s: a failed sync took the file back to its last durable state (%zu "
                      "frame(s) stored since it are dropped)",
                      f->name, dropped);
    }
}

/* Ends a sync: the records it appended leave the pending list, or, when it
 * failed before they were appended, the file goes back to what its sidecar
 * holds (cbfs_file_revert). A failure is counted for every handle. Releases
 * the sync role and frees rs. Lock held. */
static void cbfs_file_sync_end(struct cbfs_file *f, struct cbfs_rsync *rs, cbfs_err e,
                               bool appended, bool flush)
{
    cbfs_assert_held(&f->lock);
    assert(f->syncing && f->nprec >= rs->n);
    if (appended) {
        if (rs->n) memmove(f->prec, f->prec + rs->n, (f->nprec - rs->n) * sizeof *f->prec);
        f->nprec -= rs->n;
        f->durable_end = rs->end;
    } else if (e && f->writable && f->idx_fd >= 0) {
        cbfs_file_revert(f, e, rs->n, flush);
    }
    if (e) {
        CBFS_STAT_ADD(f->eng, st_write_errors, 1);
        cbfs_file_count_failure(f, e);
    }
    f->syncing = false;
    pthread_cond_broadcast(&f->cond);
    free(rs->recs);
}

bool cbfs_file_lagging(struct cbfs_file *f, struct cbfs_rsync *rs)
{
    cbfs_assert_held(&f->lock);
    if (f->syncing || f->err || f->stop || !f->nprec) return false;
    const uint64_t lag = f->eng->cfg.sync_lag_bytes;
    if (cbfs_file_pending_end(f) - f->durable_end < lag &&
        f->nprec < lag / CBFS_SYNC_LAG_PER_REC)
        return false;
    return cbfs_file_sync_begin(f, rs) == CBFS_OK;
}

void cbfs_file_catch_up(struct cbfs_file *f, struct cbfs_rsync *rs)
{
    bool appended;
    const cbfs_err e = cbfs_file_sync_io(f, rs, false, false, &appended);
    cbfs_mutex_lock(&f->lock);
    cbfs_file_sync_end(f, rs, e, appended, false);
    cbfs_mutex_unlock(&f->lock);
}

/* settle (if not NULL) runs once what was written is stored, without the
 * file's lock (its caller takes its own: the inode's, which is taken before
 * this one), before the syncs. */
cbfs_err cbfs_file_sync(struct cbfs_file *f, uint64_t *seen, bool peek, bool meta,
                        cbfs_err (*settle)(void *arg), void *arg)
{
    cbfs_mutex_lock(&f->lock);
    if (f->sync_late) { /* a write stored while a failed sync ran was taken back */
        f->sync_late = false;
        cbfs_file_count_failure(f, CBFS_E_IO);
    }
    const cbfs_err serr = cbfs_file_seal_all(f, true); /* what it did seal is drained below */
    cbfs_file_drain(f);
    cbfs_err settled = CBFS_OK;
    if (settle) {
        cbfs_mutex_unlock(&f->lock);
        settled = settle(arg);
        cbfs_mutex_lock(&f->lock);
    }
    cbfs_err found = f->err ? cbfs_file_reset(f) : CBFS_OK;
    if (f->stop) { /* a writer's catch-up failed: this flush reports it */
        if (!found) found = f->stop;
        f->stop = CBFS_OK;
    }
    /* One sync at a time. One already running may hold what this flush must
     * make durable (it cleared dirty), so wait for it, and hear of a failure
     * meanwhile (its own, counted): a flush never returns 0 before its data
     * is durable. */
    const uint64_t failures = f->errs.seq; /* moves only while the wait drops the lock */
    while (f->syncing) cbfs_mutex_wait(&f->lock, &f->cond);
    if (f->errs.seq != failures && !found) found = f->errs.last;
    struct cbfs_rsync rs;
    cbfs_err e = (f->dirty || meta) && !serr ? cbfs_file_sync_begin(f, &rs) : CBFS_OK;
    const bool sync = f->syncing; /* taken by this flush */
    struct cbfs_dead *dead = NULL;
    size_t ndead = 0;
    if (sync) {
        f->dirty = false;
        dead = f->dead; /* replaced by frames this sync makes durable */
        ndead = f->ndead;
        f->dead = NULL;
        f->ndead = f->dead_cap = 0;
    }
    cbfs_mutex_unlock(&f->lock);
    bool appended = false;
    if (sync) {
        e = cbfs_file_sync_io(f, &rs, true, meta, &appended);
        if (!e) cbfs_file_punch_dead(f, dead, ndead);
        free(dead); /* after a failure: garbage that stays */
    }
    cbfs_mutex_lock(&f->lock);
    if (sync) cbfs_file_sync_end(f, &rs, e, appended, true);
    if (!found) found = e;
    if (found) f->stop = CBFS_OK; /* reported by this flush (its own, or one it waited for) */
    if (seen && !serr && !(e && !sync)) {
        /* A handle hears every failure since it last heard, found here or not
         * (after it was told ENOMEM, at its next flush); a close hears it and
         * leaves it for the fsync. */
        found = cbfs_errseq_hear(&f->errs, seen, peek);
    }
    cbfs_errseq_told(&f->errs, found);
    cbfs_mutex_unlock(&f->lock);
    return serr ? serr : found ? found : settled;
}

cbfs_err cbfs_file_flush(struct cbfs_file *f, uint64_t *seen)
{
    return cbfs_file_sync(f, seen, false, false, NULL, NULL);
}

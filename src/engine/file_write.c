/* The write side of an engine file: writes fill open blocks, full blocks are
 * sealed into compression jobs on the pool and committed in order by one
 * thread at a time; truncate, extend and hole punching. What makes the
 * stored frames durable (flush, fsync, catch-up, revert) is file_sync.c. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

/* ---- write path: sealing, compressing, committing ---- */

/* Data buffers are always f->bs bytes and frame buffers frame_cap bytes, so
 * both go back to the engine's recycling lists. */
static void cbfs_wjob_free(struct cbfs_file *f, struct cbfs_wjob *j)
{
    cbfs_engine_buf_put(f->eng, j->data, f->bs);
    cbfs_engine_buf_put(f->eng, j->frame, j->frame_cap);
    free(j);
}

/* A backup stream appends gigabytes and calls fdatasync once at the end.
 * Left alone, the store's page cache would hold all of it dirty until then
 * (the kernel's background writeback starts only at dirty_background_ratio,
 * 2.4 GB on a 24 GiB machine), and that fdatasync would write it all while
 * the writer waits. Starting the disk's writeback of every CBFS_WRITE_BEHIND
 * bytes as they are appended overlaps the disk with compression. It is only
 * a start (SYNC_FILE_RANGE_WRITE, no wait, no durability): its errors are
 * ignored here because the writeback records them in the file, where the
 * next fdatasync reports them (cbfs_file_flush). Committer role. */
static void cbfs_file_write_behind(struct cbfs_file *f)
{
    if (f->append_off - f->behind_off < CBFS_WRITE_BEHIND) return;
    (void)sync_file_range(f->data_fd, (off64_t)f->behind_off,
                          (off64_t)(f->append_off - f->behind_off), SYNC_FILE_RANGE_WRITE);
    f->behind_off = f->append_off;
}

/* Frames appended from start on failed (cbfs_file_store_frames): they are
 * cut off the data file again, so that the next open's rescan cannot find and
 * apply data the writer is told was not stored. Their records were never
 * appended: that waits for a sync. Committer role. */
static void cbfs_file_unstore(struct cbfs_file *f, uint64_t start)
{
    if (ftruncate(f->data_fd, (off_t)start) == 0) {
        f->append_off = start;
        if (f->behind_off > start) f->behind_off = start;
    }
}

/* Allocates the sidecar up to want bytes (and on to the next CBFS_IDX_RESERVE
 * step) before frames are stored whose records will need it, so that a store
 * that fills up later still takes the records of what it stored: the frames
 * fail instead, while the writer can still hear of it. A store that cannot
 * allocate ahead (no fallocate) goes without. Committer role. */
static cbfs_err cbfs_file_reserve_records(struct cbfs_file *f, uint64_t want)
{
    if (want <= f->idx_reserved || f->no_reserve) return CBFS_OK;
    const uint64_t to = (want + CBFS_IDX_RESERVE - 1) / CBFS_IDX_RESERVE * CBFS_IDX_RESERVE;
    if (fallocate(f->idx_fd, FALLOC_FL_KEEP_SIZE, (off_t)f->idx_reserved,
                  (off_t)(to - f->idx_reserved)) != 0) {
        if (errno != EOPNOTSUPP && errno != ENODEV && errno != ENOSYS)
            return cbfs_err_from_errno(errno);
        f->no_reserve = true;
        return CBFS_OK;
    }
    f->idx_reserved = to;
    return CBFS_OK;
}

uint64_t cbfs_file_pending_end(const struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    if (!f->nprec) return f->durable_end;
    const struct cbfs_index_rec *r = &f->prec[f->nprec - 1];
    return r->offset + CBFS_FRAME_HDR_SIZE + r->plen;
}

/* Makes room for n more pending records, before their frames are stored: a
 * frame whose record could not be kept would be stored without one. Lock
 * held. */
static cbfs_err cbfs_file_prec_room(struct cbfs_file *f, size_t n)
{
    cbfs_assert_held(&f->lock);
    if (f->nprec + n <= f->prec_cap) return CBFS_OK;
    size_t cap = f->prec_cap ? f->prec_cap : 64;
    while (cap < f->nprec + n) cap *= 2;
    struct cbfs_index_rec *v = realloc(f->prec, cap * sizeof *v);
    if (!v) return CBFS_E_NOMEM;
    f->prec = v;
    f->prec_cap = cap;
    return CBFS_OK;
}

/* Keeps record r of a frame just stored until a sync appends it, and applies
 * it to the table. Room was made (cbfs_file_prec_room). Lock held. */
static cbfs_err cbfs_file_stored(struct cbfs_file *f, const struct cbfs_index_rec *r)
{
    cbfs_assert_held(&f->lock);
    assert(f->nprec < f->prec_cap);
    f->prec[f->nprec++] = *r;
    f->idx_need += CBFS_INDEX_REC_SIZE;
    f->dirty = true; /* set by the commit: a sync begun before it missed it */
    return cbfs_index_apply(&f->idx, r);
}

/* Makes the sidecar's header durable before this open stores a frame past
 * block 0, once per open. A sidecar lost to a crash (its header never
 * written back: a new file's first sync cut short) leaves the block size to
 * be told from the frames, and frame headers do not record it: a file whose
 * frames are block 0's alone reads the same at any size, but one with a
 * block further on and none that shows a whole block (after `ftruncate` up,
 * an append, then the crash: helper-43's power cut) was refused by the
 * mount until `cbfs fsck --repair --block-size` (docs/FORMAT.md 3.3). One
 * fdatasync of 64 bytes per open that writes past its first block; a file
 * of one block pays nothing. After a failed sync of the sidecar (head_lost)
 * the header is written again first. Committer role. @return the error (the
 * frames are not stored: the write fails at the next flush). */
static cbfs_err cbfs_file_secure_head(struct cbfs_file *f)
{
    if (f->head_durable || f->idx_fd < 0) return CBFS_OK;
    cbfs_err e = atomic_load(&f->head_lost) ? cbfs_index_put_header(&f->idx, f->idx_fd) : CBFS_OK;
    if (!e && fdatasync(f->idx_fd) != 0) e = cbfs_err_from_errno(errno);
    if (e) {
        atomic_store(&f->head_lost, true);
        cbfs_log_err("%s: making the sidecar's header durable failed: %s", f->name,
                     cbfs_err_str(e));
        return e;
    }
    atomic_store(&f->head_lost, false);
    f->head_durable = true;
    return CBFS_OK;
}

/* Stores a batch of encoded frames (their records are kept by the caller
 * until a sync: cbfs_file_stored), after allocating the sidecar for their
 * records up to idx_want. Committer role, no lock. */
static void cbfs_file_store_batch(struct cbfs_file *f, struct cbfs_wjob **batch, size_t n,
                                  cbfs_err poison, uint64_t idx_want,
                                  struct cbfs_index_rec *recs, size_t *nrecs)
{
    cbfs_assert_not_held(&f->lock);
    struct cbfs_engine *eng = f->eng;
    *nrecs = 0;
    uint64_t t0 = cbfs_now_ns();
    if (!poison) poison = cbfs_file_reserve_records(f, idx_want);
    for (size_t i = 0; i < n && !poison && !f->head_durable; i++)
        if (!batch[i]->dropped && !batch[i]->err && batch[i]->block > 0)
            poison = cbfs_file_secure_head(f);
    for (size_t i = 0; i < n; i++) {
        struct cbfs_wjob *j = batch[i];
        /* After the first failure nothing more is stored until the error has
         * been reported: a later, smaller frame that still fits would leave a
         * gap (zeros) in the file where the failed block was. */
        if (j->dropped) continue; /* by a failed sync (cbfs_file_revert) */
        if (j->err || (j->err = poison)) {
            poison = j->err;
            continue;
        }
        cbfs_err e = cbfs_pwrite_full(f->data_fd, j->frame, j->frame_len, f->append_off);
        if (e) {
            j->err = poison = e;
            /* ENOSPC may come after part of the frame went down: cut it off
             * (append_off is the data file's end), or a clean unmount leaves
             * a torn tail that verify and fsck report as a crash's (and, if
             * the lost bytes hold the frame magic, one that is never cut). If
             * the cut fails, the next frame overwrites the torn one. */
            if (ftruncate(f->data_fd, (off_t)f->append_off) == -1)
                cbfs_log_warn("%s: cannot cut off a frame cut short at store offset %llu: %s",
                              f->name, (unsigned long long)f->append_off, strerror(errno));
            continue; /* append_off unchanged */
        }
        cbfs_index_rec_from_frame(&j->hdr, f->append_off, &recs[(*nrecs)++]);
        f->append_off += j->frame_len;
        j->stored = true;
    }
    if (*nrecs) cbfs_file_write_behind(f);
    CBFS_STAT_ADD(eng, st_ns_store_write, cbfs_now_ns() - t0);
}

void cbfs_file_count_failure(struct cbfs_file *f, cbfs_err e)
{
    cbfs_assert_held(&f->lock);
    cbfs_errseq_count(&f->errs, e);
}

void cbfs_file_count_lost_write(struct cbfs_file *f, cbfs_err e)
{
    cbfs_mutex_lock(&f->lock);
    cbfs_file_count_failure(f, e);
    cbfs_mutex_unlock(&f->lock);
    CBFS_STAT_ADD(f->eng, st_write_errors, 1);
}

/* Becomes the committer unless someone else is, and appends every finished
 * job at the head of the pending list, in submission order. Called and
 * returns with f->lock held (drops it around store I/O). */
static void cbfs_file_commit_locked(struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    struct cbfs_engine *eng = f->eng;
    if (f->committing) return;
    f->committing = true;
    while (f->pend_head && f->pend_head->done) {
        struct cbfs_wjob *batch[CBFS_COMMIT_BATCH];
        struct cbfs_index_rec recs[CBFS_COMMIT_BATCH];
        size_t n = 0, nrecs;
        for (struct cbfs_wjob *j = f->pend_head; j && j->done && n < CBFS_COMMIT_BATCH; j = j->next)
            batch[n++] = j;
        /* The table grows before the frames are stored, not when their
         * records are applied: a frame stored that the table could not take
         * would read as zeros, and a rewrite of part of its block would
         * store those zeros over it. Without the memory the batch fails. */
        cbfs_err poison = f->err ? f->err : f->stop;
        for (size_t i = 0; i < n && !poison; i++)
            poison = cbfs_index_reserve(&f->idx, batch[i]->block + 1);
        if (!poison) poison = cbfs_file_prec_room(f, n);
        const uint64_t idx_want = f->idx_need + n * CBFS_INDEX_REC_SIZE;
        cbfs_mutex_unlock(&f->lock);
        cbfs_file_store_batch(f, batch, n, poison, idx_want, recs, &nrecs);
        cbfs_mutex_lock(&f->lock);
        size_t r = 0;
        for (size_t i = 0; i < n; i++) {
            struct cbfs_wjob *j = batch[i];
            if (j->stored) {
                /* reserved above: only a record the loader would call
                 * corrupt could fail here, and then the write fails (its
                 * frame and record are on disk, but neither this table nor
                 * the next open's replay takes them) */
                const cbfs_err ae = cbfs_file_stored(f, &recs[r++]);
                if (ae && !j->err) j->err = ae;
                CBFS_STAT_ADD(eng, st_physical_written, j->frame_len);
            }
            if (j->err && !f->err) {
                f->err = j->err;
                cbfs_file_count_failure(f, j->err);
                CBFS_STAT_ADD(eng, st_write_errors, 1);
                cbfs_log_err("%s: storing block %llu failed: %s", f->name,
                             (unsigned long long)j->block, cbfs_err_str(j->err));
            }
            f->pend_head = j->next;
            if (!f->pend_head) f->pend_tail = NULL;
            cbfs_engine_budget_drop(eng, j->len);
            cbfs_wjob_free(f, j);
        }
        pthread_cond_broadcast(&f->cond);
    }
    f->committing = false;
    pthread_cond_broadcast(&f->cond);
}

static void cbfs_wjob_run(struct cbfs_pool_job *pj)
{
    struct cbfs_wjob *j = (struct cbfs_wjob *)pj;
    struct cbfs_file *f = j->f;
    struct cbfs_engine *eng = f->eng;
    /* Sized for a whole block, whatever j->len: one buffer size per file. */
    size_t cap = cbfs_frame_bound(f->codec, f->bs);
    cbfs_err err = CBFS_E_NOMEM;
    j->frame = cbfs_engine_buf_get(eng, cap);
    j->frame_cap = cap;
    if (j->frame) {
        uint64_t t0 = cbfs_now_ns();
        err = cbfs_frame_encode(f->codec, f->level, f->file_id, j->block, j->gen, j->data,
                                j->len, j->frame, cap, &j->frame_len, &j->hdr);
        CBFS_STAT_ADD(eng, st_ns_compress, cbfs_now_ns() - t0);
        if (!err) {
            if (j->hdr.flags & CBFS_FRAME_HOLE) CBFS_STAT_ADD(eng, st_blocks_hole, 1);
            else if (j->hdr.flags & CBFS_FRAME_RAW) CBFS_STAT_ADD(eng, st_blocks_raw, 1);
            else CBFS_STAT_ADD(eng, st_blocks_compressed, 1);
        }
    }
    cbfs_mutex_lock(&f->lock);
    j->err = err;
    j->done = true;
    cbfs_file_commit_locked(f);
    cbfs_mutex_unlock(&f->lock);
}

/* Turns open block i into a compression job. With keep, the job gets a copy
 * and the block stays open and clean (flush: the next small write into it
 * needs no read-back); without, the job takes the buffer and the slot is
 * freed. A clean block is just dropped: its content is already sealed.
 * Lock held. */
static cbfs_err cbfs_file_seal(struct cbfs_file *f, unsigned i, bool keep)
{
    cbfs_assert_held(&f->lock);
    struct cbfs_oblock *ob = &f->open[i];
    if (!ob->dirty) {
        if (!keep) {
            cbfs_engine_buf_put(f->eng, ob->data, f->bs);
            f->open[i] = f->open[--f->nopen];
        }
        return CBFS_OK;
    }
    struct cbfs_wjob *j = calloc(1, sizeof *j);
    if (!j) return CBFS_E_NOMEM;
    if (keep) {
        j->data = cbfs_engine_buf_get(f->eng, f->bs);
        if (!j->data) {
            free(j);
            return CBFS_E_NOMEM;
        }
        memcpy(j->data, ob->data, ob->len);
        ob->dirty = false;
    } else {
        j->data = ob->data;
    }
    j->pj.fn = cbfs_wjob_run;
    j->f = f;
    j->block = ob->block;
    j->len = ob->len;
    j->gen = f->idx.next_gen++;
    if (f->pend_tail) f->pend_tail->next = j;
    else f->pend_head = j;
    f->pend_tail = j;
    if (!keep) f->open[i] = f->open[--f->nopen];
    cbfs_engine_budget_take(f->eng, j->len);
    cbfs_pool_submit(f->eng->pool, &j->pj);
    return CBFS_OK;
}

/* Records [lo, hi) of ob as holding content, merging runs that touch. */
static void cbfs_oblock_mark(struct cbfs_oblock *ob, uint32_t lo, uint32_t hi)
{
    uint32_t out[CBFS_OBLOCK_RUNS + 1][2];
    unsigned m = 0;
    bool placed = false;
    if (ob->nruns == CBFS_OBLOCK_UNTRACKED || lo >= hi) return;
    for (unsigned k = 0; k < ob->nruns; k++) {
        const uint32_t rl = ob->runs[k][0], rh = ob->runs[k][1];
        if (rh < lo) {
            out[m][0] = rl, out[m++][1] = rh;
        } else if (rl > hi) {
            if (!placed) out[m][0] = lo, out[m++][1] = hi, placed = true;
            out[m][0] = rl, out[m++][1] = rh;
        } else {
            lo = rl < lo ? rl : lo;
            hi = rh > hi ? rh : hi;
        }
    }
    if (!placed) out[m][0] = lo, out[m++][1] = hi;
    if (m > CBFS_OBLOCK_RUNS) {
        ob->nruns = CBFS_OBLOCK_UNTRACKED; /* complete only when sealed by force */
        return;
    }
    memcpy(ob->runs, out, m * sizeof out[0]);
    ob->nruns = (uint8_t)m;
}

/* true if every byte of ob's block holds content (written or loaded). */
static bool cbfs_oblock_complete(const struct cbfs_oblock *ob, uint32_t bs)
{
    return ob->nruns == 1 && ob->runs[0][0] == 0 && ob->runs[0][1] == bs;
}

/* Slot of the lowest-numbered open block that is dirty and, with full_only,
 * complete (and below limit). @return its index, or f->nopen if there is none. */
static unsigned cbfs_file_lowest(const struct cbfs_file *f, bool full_only, uint64_t limit)
{
    unsigned best = f->nopen;
    for (unsigned i = 0; i < f->nopen; i++) {
        const struct cbfs_oblock *ob = &f->open[i];
        if (!ob->dirty || ob->block >= limit || (full_only && !cbfs_oblock_complete(ob, f->bs)))
            continue;
        if (best == f->nopen || ob->block < f->open[best].block) best = i;
    }
    return best;
}

cbfs_err cbfs_file_seal_all(struct cbfs_file *f, bool keep)
{
    unsigned i;
    while ((i = cbfs_file_lowest(f, false, UINT64_MAX)) < f->nopen) {
        cbfs_err e = cbfs_file_seal(f, i, keep);
        if (e) return e;
    }
    if (!keep) {
        while (f->nopen) {
            cbfs_err e = cbfs_file_seal(f, 0, false); /* clean: just dropped */
            if (e) return e;
        }
    }
    return CBFS_OK;
}

/* Seals the full blocks that continue the stream at f->wnext, in order. A
 * full block there that is clean was sealed already (by a flush while it
 * waited for the gap): the stream just moves past it. Lock held. */
static cbfs_err cbfs_file_seal_run(struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    for (;;) {
        unsigned i = 0;
        while (i < f->nopen && !(f->open[i].block == f->wnext &&
                                 cbfs_oblock_complete(&f->open[i], f->bs)))
            i++;
        if (i == f->nopen) {
            if (f->slot_waiters) pthread_cond_broadcast(&f->cond); /* the stream moved */
            return CBFS_OK;
        }
        f->wnext++;
        cbfs_err e = cbfs_file_seal(f, i, false); /* dirty: a job; clean: just freed */
        if (e) return e;
    }
}

/* Block b (slot i) was just filled to its end. A sequential stream seals it
 * now, in block order: while an earlier block of the stream has not been
 * sealed, b waits open for it (until the slots run out: cbfs_file_open_block
 * then moves the stream on past its gap, lowest block first, so a writer that
 * seeks costs a delay, not the order). A block behind the stream (a rewrite)
 * is sealed at once. Lock held. */
static cbfs_err cbfs_file_seal_full(struct cbfs_file *f, unsigned i)
{
    cbfs_assert_held(&f->lock);
    const uint64_t b = f->open[i].block;
    if (b < f->wnext) return cbfs_file_seal(f, i, false);
    if (b > f->wnext) return CBFS_OK; /* hold */
    return cbfs_file_seal_run(f);
}

void cbfs_file_drain(struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    while (f->pend_head || f->committing) cbfs_mutex_wait(&f->lock, &f->cond);
}

/* Makes room for one more open block. Full blocks waiting for the stream's
 * gap go first, lowest first; else the least recently used block (a clean
 * one, if any: a flush leaves every block clean, and later writes make the
 * blocks they touch dirty and most recent). But while
 * the stream has a gap, the write carrying it is most likely on its way: in
 * another thread inside cbfs_file_write (f->writers, less those waiting
 * here), or still in the FUSE channel, where a busy machine can keep it for
 * milliseconds while later requests pass it. Wait for it, CBFS_GAP_WAIT_NS
 * at most, rather than store the waiting blocks out of order. A writer that
 * seeks leaves a gap that never comes: after the first such gap, wait only
 * while another writer is in sight. @return CBFS_OK (possibly after waiting,
 * with nothing freed: look again) or an error. Lock held. */
static cbfs_err cbfs_file_free_slot(struct cbfs_file *f, uint64_t *deadline)
{
    cbfs_assert_held(&f->lock);
    unsigned v = cbfs_file_lowest(f, true, UINT64_MAX);
    if (v < f->nopen && f->open[v].block > f->wnext) {
        const unsigned others = atomic_load(&f->writers) - 1 - f->slot_waiters;
        const uint64_t now = cbfs_now_ns();
        if (!*deadline) *deadline = now + CBFS_GAP_WAIT_NS;
        /* a truncate waiting for this write seals every block anyway, and
         * the writers at its gate bring no gap until it is done */
        if ((others > 0 || f->gap_wait) && now < *deadline && !f->truncating) {
            f->slot_waiters++;
            cbfs_mutex_timedwait(&f->lock, &f->cond, CBFS_GAP_WAIT_STEP_NS);
            f->slot_waiters--;
            return CBFS_OK;
        }
        if (f->gap_block != UINT64_MAX) f->gap_wait = false; /* the last one never came */
        f->gap_block = f->wnext;
        /* Reads are right either way; what may be lost is the stock-decoder
         * escape hatch (a late block's frame lands after its successors),
         * which a DBA should hear about. A writer that seeks (a sparse file)
         * lands here too, with its frames still in order. */
        CBFS_STAT_ADD(f->eng, st_stream_gaps, 1);
        if (!f->gap_logged)
            cbfs_log_info("%s: block %llu of a sequential write had not arrived; later blocks "
                          "were stored first. Reads are unaffected; the data file may no longer "
                          "decode with stock zstd/lz4 (cbfs stat tells)",
                          f->name, (unsigned long long)f->wnext);
        f->gap_logged = true;
        f->wnext = f->open[v].block; /* the gap is not coming: move on past it */
        return cbfs_file_seal_run(f);
    }
    /* A backstop: the stream's own block complete but still open. Sealing it
     * alone would leave wnext on a block no longer open, and the blocks held
     * behind it would wait CBFS_GAP_WAIT_NS for a gap that already came.
     * cbfs_file_write_at seals such a block (one reloaded whole) at once, and
     * no other path leaves one open (helper-36's review). */
    if (v < f->nopen && f->open[v].block == f->wnext) return cbfs_file_seal_run(f);
    if (v == f->nopen) {
        v = 0;
        for (unsigned i = 1; i < f->nopen; i++)
            if (f->open[i].last_use < f->open[v].last_use) v = i;
    }
    return cbfs_file_seal(f, v, false);
}

/* true while full blocks past the stream's gap wait open for it (the reorder
 * window is holding). Lock held. */
static bool cbfs_file_holding(const struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    const unsigned v = cbfs_file_lowest(f, true, UINT64_MAX);
    return v < f->nopen && f->open[v].block > f->wnext;
}

/* true if every open block is part written (not complete), dirty and at or
 * past the stream's next block: the slots hold pieces of a sequential stream
 * still to come, none of which can be dropped or stored at no cost. Lock
 * held. */
static bool cbfs_file_only_stream_pieces(const struct cbfs_file *f)
{
    cbfs_assert_held(&f->lock);
    for (unsigned i = 0; i < f->nopen; i++) {
        const struct cbfs_oblock *o = &f->open[i];
        if (o->block < f->wnext || !o->dirty || cbfs_oblock_complete(o, f->bs)) return false;
    }
    return true;
}

/* The open block for b, creating it (read-modify-write of existing content,
 * unless the caller is about to overwrite the whole block; hole: bytes at a
 * new block's start that are a hole no write is on its way to, written as
 * if by the writer, see cbfs_file_write_at), making room if
 * all of the file's slots are taken. The stream's next block may use a spare
 * slot: it is what the waiting blocks wait for; so may a block behind it
 * while blocks are held (the writeback cache sends a page again, or a piece
 * of a sealed block late): making room would wait for the gap too, and with
 * every serving thread waiting nobody could bring it. Otherwise (a rewrite
 * of a reopened file, say) a block makes room in the file's own slots. Fails, creating nothing,
 * if an error is pending or a reset came since the write began (resets: its
 * count then), also while it waited for room: a block created empty for a
 * whole-block write that then fails would hide the stored one. Lock held. */
static cbfs_err cbfs_file_open_block(struct cbfs_file *f, uint64_t b, bool whole, uint32_t hole,
                                     uint64_t resets, struct cbfs_oblock **out)
{
    cbfs_assert_held(&f->lock);
    uint64_t deadline = 0;
    for (;;) {
        if (f->err) return f->err;
        if (f->stop) return f->stop;
        if (f->resets != resets) return f->errs.last;
        for (unsigned i = 0; i < f->nopen; i++) {
            if (f->open[i].block == b) {
                *out = &f->open[i];
                return CBFS_OK;
            }
        }
        if (f->nopen < f->open_max || (b <= f->wnext && f->nopen < CBFS_OPEN_MAX &&
                                       (b == f->wnext || cbfs_file_holding(f))))
            break;
        /* Nothing complete to seal, every slot a piece of a block whose other
         * piece is in another writer's request (the writeback cache's
         * requests need not start on a block: with 1 MiB blocks each one
         * fills the end of one block and the start of the next): evicting one
         * would store half a block out of order, to be loaded and stored again
         * when its other half comes. While other writers are in sight, take a
         * spare slot instead: their pieces complete these blocks. A request
         * leaves at most two blocks part written (its two ends), which bounds
         * the spare slots taken so by the writers in sight. */
        const unsigned others = atomic_load(&f->writers) - 1;
        if (b > f->wnext && others && f->nopen < f->open_max + 2 * others &&
            f->nopen < CBFS_OPEN_MAX && cbfs_file_only_stream_pieces(f))
            break;
        cbfs_err e = cbfs_file_free_slot(f, &deadline);
        if (e) return e;
    }
    unsigned char *data = cbfs_engine_buf_get(f->eng, f->bs);
    if (!data) return CBFS_E_NOMEM;
    uint64_t start = b * f->bs;
    uint32_t exist = 0;
    if (f->size > start) exist = f->size - start >= f->bs ? f->bs : (uint32_t)(f->size - start);
    if (whole) exist = 0;
    bool stored = false;
    if (exist) {
        cbfs_err e = cbfs_file_load_locked(f, b, data, exist, &stored);
        if (e) {
            cbfs_engine_buf_put(f->eng, data, f->bs);
            return e;
        }
    }
    struct cbfs_oblock *ob = &f->open[f->nopen++];
    ob->block = b;
    ob->len = exist;
    ob->dirty = false;
    ob->data = data;
    ob->nruns = 0;
    /* A block never written is not complete yet: the rest of it below the
     * size may be a later request's, whose write came first and grew the
     * size. But a hole it starts with is part of it. */
    if (stored)
        cbfs_oblock_mark(ob, 0, exist);
    else if (hole) {
        assert(hole <= exist); /* the hole lies below the size */
        cbfs_oblock_mark(ob, 0, hole);
    }
    *out = ob;
    return CBFS_OK;
}

/* The page of the kernel's writeback cache: its WRITE requests start on one.
 * (A larger page only makes the append rule below miss, never err.) */
#define CBFS_WRITE_PAGE 4096u

/* cbfs_file_write; within: only the part of [off, off + len) below the
 * size the file has once the write holds the lock (a punch's zeros: a
 * truncate that came first is not undone by them). */
static cbfs_err cbfs_file_write_at(struct cbfs_file *f, const void *buf, size_t len, uint64_t off,
                                   bool within)
{
    if (!f->writable) return CBFS_E_BADF;
    if (off + len < off || !cbfs_size_fits(off + len, f->bs)) return CBFS_E_FBIG;
    const unsigned char *src = buf;
    size_t left = len;
    cbfs_err err = CBFS_OK;
    atomic_fetch_add(&f->writers, 1);
    cbfs_mutex_lock(&f->lock);
    while (f->truncating) cbfs_mutex_wait(&f->lock, &f->cond);
    if (within && off + len > f->size) left = len = off >= f->size ? 0 : (size_t)(f->size - off);
    f->in_write++;
    const uint64_t resets = f->resets, end = off + len;
    /* A writer that starts where a truncate (or the store) left the size,
     * inside a block, continues the file after a hole (a sparse tail, or
     * ftruncate then append): while no write since that size was set began
     * below it, the block's start is zeros that no write is on its way to,
     * so the block completes with this stream and is sealed in its order,
     * and the stream starts there (the blocks between it and the stream, an
     * extend past them, are a hole too). It waited for those bytes as a gap
     * that never comes: a 200 ms wait and a stream gap per file. A write
     * that does come there after all, later, rewrites the block. The
     * writeback cache writes whole pages, so its append starts at the page
     * that holds the size, below it: a write from there past the size is the
     * same append (it carries the page's bytes below the size itself);
     * taken for a write below the size, such an append waited out the gap
     * all the same (helper-43). hole: for the first piece only. */
    const uint64_t page = f->size_set & ~(uint64_t)(CBFS_WRITE_PAGE - 1);
    const bool at_size = off == f->size_set || (off == page && end > f->size_set);
    uint32_t hole = 0;
    if (len && off < f->size_set && !at_size) {
        f->set_below = true;
    } else if (len && at_size && !f->set_below && off % f->bs) {
        hole = (uint32_t)(off % f->bs);
        if (off / f->bs > f->wnext) f->wnext = off / f->bs;
    }
    while (left) {
        uint64_t b = off / f->bs;
        uint32_t boff = (uint32_t)(off % f->bs);
        uint32_t n = f->bs - boff < left ? f->bs - boff : (uint32_t)left;
        struct cbfs_oblock *ob = NULL;
        if (b == f->gap_block) { /* a gap we moved on past came after all */
            f->gap_block = UINT64_MAX;
            f->gap_wait = true;
        }
        /* A pending error stores nothing more; the reset that reports it
         * drops what is open, this write's earlier pieces too (it may come
         * while open_block waits): the write fails rather than leave them
         * out silently. */
        err = cbfs_file_open_block(f, b, boff == 0 && n == f->bs, hole, resets, &ob);
        hole = 0;
        if (err) goto out;
        if (boff > ob->len) memset(ob->data + ob->len, 0, boff - ob->len);
        memcpy(ob->data + boff, src, n);
        const bool was_complete = cbfs_oblock_complete(ob, f->bs);
        cbfs_oblock_mark(ob, boff, boff + n);
        if (boff + n > ob->len) ob->len = boff + n;
        ob->last_use = ++f->use_clock;
        ob->dirty = true;
        off += n;
        src += n;
        left -= n;
        if (off > f->size) f->size = off;
        /* A write that completes the block, or writes up to its last byte of a
         * complete block, means the writer moves on (sequential): compress it
         * now, in stream order. Overwrites inside a full block keep it open,
         * so small random writes share one frame. (The pieces of a block can
         * arrive in any order with the writeback cache: its end first.) A
         * block reloaded whole (part of it was stored early to free its slot)
         * is complete before its other part comes: that part, at the stream's
         * next block, moves the stream on too. */
        if (cbfs_oblock_complete(ob, f->bs) &&
            (boff + n == f->bs || !was_complete || ob->block == f->wnext)) {
            err = cbfs_file_seal_full(f, (unsigned)(ob - f->open));
            if (err) goto out;
        }
    }
out:
    if (err && !f->err && f->resets == resets && (left < len || end > f->size)) {
        /* Part of this write was taken, or it was to extend the file, and
         * the rest is not stored, while later writes would be: a new block
         * it did not reach would read as zeros behind them (helper-10: a
         * failed allocation left 13 such blocks; helper-12: an append whose
         * first piece failed). As after a failed store, nothing more is
         * stored until a flush has reported it and dropped what is open
         * (cbfs_file_reset): a correct prefix. A write inside the file that
         * took nothing just fails (a damaged block's read-modify-write must
         * not stop the file's other writers), and one that a reset failed
         * reports what the reset did. */
        f->err = err;
        cbfs_file_count_failure(f, err);
        CBFS_STAT_ADD(f->eng, st_write_errors, 1);
        cbfs_log_err("%s: a write failed at offset %llu: %s", f->name,
                     (unsigned long long)off, cbfs_err_str(err));
    }
    f->in_write--;
    atomic_fetch_sub(&f->writers, 1);
    if (f->slot_waiters || f->truncating) pthread_cond_broadcast(&f->cond); /* one fewer */
    struct cbfs_rsync rs;
    const bool lag = cbfs_file_lagging(f, &rs);
    cbfs_mutex_unlock(&f->lock);
    CBFS_STAT_ADD(f->eng, st_logical_written, len - left);
    cbfs_engine_budget_wait(f->eng); /* backpressure, outside the file lock */
    if (lag) cbfs_file_catch_up(f, &rs);
    return err;
}

cbfs_err cbfs_file_write(struct cbfs_file *f, const void *buf, size_t len, uint64_t off)
{
    return cbfs_file_write_at(f, buf, len, off, false);
}

/* One frame of a store that is all or nothing (cbfs_file_store_frames). */
struct cbfs_frame_piece {
    const void *frame;
    size_t len;
    struct cbfs_frame_hdr h;
};

/* Stores n (at most 2) frames as one: all appended to the data file, then
 * their records kept, in one piece of the pending list (a sync appends them
 * together), and applied. On a failure none of them is stored: the frames
 * already appended are cut off again (cbfs_file_unstore). With reserve, the
 * sidecar is allocated for their records first (cbfs_file_reserve_records).
 * Lock held, committer role. */
static cbfs_err cbfs_file_store_frames(struct cbfs_file *f, const struct cbfs_frame_piece *p,
                                       size_t n, bool reserve)
{
    cbfs_assert_held(&f->lock);
    assert(f->committing && n <= 2);
    struct cbfs_index_rec r[2];
    /* Applying the records below cannot fail for memory (as in the batch,
     * the table must hold a block before its frame is stored): the only
     * block frame here rewrites a block that has an entry. */
    for (size_t i = 0; i < n; i++)
        assert((p[i].h.flags & CBFS_FRAME_SIZE) || p[i].h.block < f->idx.cap);
    cbfs_err e = cbfs_file_prec_room(f, n);
    if (!e && reserve) e = cbfs_file_reserve_records(f, f->idx_need + n * CBFS_INDEX_REC_SIZE);
    for (size_t i = 0; i < n && !e; i++)
        if (!(p[i].h.flags & CBFS_FRAME_SIZE) && p[i].h.block > 0) e = cbfs_file_secure_head(f);
    if (e) return e;
    const uint64_t start = f->append_off;
    for (size_t i = 0; i < n; i++) {
        e = cbfs_pwrite_full(f->data_fd, p[i].frame, p[i].len, f->append_off);
        if (e) break;
        cbfs_index_rec_from_frame(&p[i].h, f->append_off, &r[i]);
        f->append_off += p[i].len;
    }
    if (e) {
        cbfs_file_unstore(f, start);
        return e;
    }
    CBFS_STAT_ADD(f->eng, st_physical_written, f->append_off - start);
    for (size_t i = 0; i < n; i++) {
        const cbfs_err ae = cbfs_file_stored(f, &r[i]);
        if (!e) e = ae;
    }
    return e;
}

cbfs_err cbfs_file_store_size(struct cbfs_file *f, uint64_t size, bool reserve)
{
    cbfs_assert_held(&f->lock);
    assert(f->committing);
    uint32_t tail = (uint32_t)(size % f->bs);
    const struct cbfs_index_entry *e = cbfs_index_get(&f->idx, size / f->bs);
    struct cbfs_frame_piece p[2];
    size_t n = 0;
    unsigned char *data = NULL, *frame = NULL;
    cbfs_err err = CBFS_OK;
    if (size < f->size && tail && e && e->ulen > tail && !(e->flags & CBFS_FRAME_HOLE)) {
        data = malloc(f->bs);
        size_t cap = cbfs_frame_bound(f->codec, tail);
        frame = malloc(cap);
        err = data && frame ? CBFS_OK : CBFS_E_NOMEM;
        bool stored;
        if (!err) err = cbfs_file_load_locked(f, size / f->bs, data, tail, &stored);
        if (!err)
            err = cbfs_frame_encode(f->codec, f->level, f->file_id, size / f->bs,
                                    f->idx.next_gen++, data, tail, frame, cap, &p[n].len,
                                    &p[n].h);
        if (!err) p[n++].frame = frame;
    }
    uint8_t sframe[CBFS_FRAME_HDR_SIZE];
    if (!err) {
        p[n].h = (struct cbfs_frame_hdr){.version = 1,
                                         .codec = f->codec->id,
                                         .flags = CBFS_FRAME_SIZE,
                                         .block = size,
                                         .generation = f->idx.next_gen++,
                                         .file_id = f->file_id};
        cbfs_frame_hdr_encode(&p[n].h, sframe);
        p[n].frame = sframe;
        p[n++].len = sizeof sframe;
        err = cbfs_file_store_frames(f, p, n, reserve);
    }
    free(data);
    free(frame);
    if (!err) {
        f->size = f->size_set = size;
        f->set_below = false;
        if (f->wnext > size / f->bs) f->wnext = size / f->bs; /* O_TRUNC: a new stream */
    }
    return err;
}

static cbfs_err cbfs_file_resize(struct cbfs_file *f, uint64_t size, bool grow_only)
{
    if (!f->writable) return CBFS_E_BADF;
    if (!cbfs_size_fits(size, f->bs)) return CBFS_E_FBIG;
    cbfs_mutex_lock(&f->lock);
    /* A write is atomic against a truncate, as the kernel's inode lock makes
     * it on a local filesystem (not every FUSE path holds it: an O_TRUNC
     * open without the writeback cache): no write starts while the truncate
     * runs, and the truncate waits for those under way. A write that started
     * while the drain below dropped the lock opened a block of the old
     * contents behind the truncate, and sealed it after: the cut bytes came
     * back. */
    while (f->truncating) cbfs_mutex_wait(&f->lock, &f->cond);
    f->truncating = true;
    while (f->in_write) cbfs_mutex_wait(&f->lock, &f->cond);
    cbfs_err err = CBFS_OK;
    /* grow_only: decided here, under the lock, not by the caller's look at
     * the size (a write may have extended the file past it since) */
    if (grow_only && size <= f->size) goto out;
    err = cbfs_file_seal_all(f, false);
    cbfs_file_drain(f);
    assert(err || (f->nopen == 0 && !f->pend_head)); /* nothing opened behind the gate */
    if (err || (err = f->err)) goto out;
    if (size == f->size) goto out;
    f->committing = true; /* keeps the role while we write below */
    err = cbfs_file_store_size(f, size, true);
    f->committing = false;
out:
    f->truncating = false;
    pthread_cond_broadcast(&f->cond);
    cbfs_mutex_unlock(&f->lock);
    return err;
}

cbfs_err cbfs_file_truncate(struct cbfs_file *f, uint64_t size)
{
    return cbfs_file_resize(f, size, false);
}

cbfs_err cbfs_file_extend(struct cbfs_file *f, uint64_t size)
{
    return cbfs_file_resize(f, size, true);
}

cbfs_err cbfs_file_punch(struct cbfs_file *f, uint64_t off, uint64_t len)
{
    uint64_t size = cbfs_file_size(f);
    if (off >= size) return CBFS_OK;
    if (len > size - off) len = size - off;
    unsigned char *zeros = calloc(1, f->bs);
    if (!zeros) return CBFS_E_NOMEM;
    cbfs_err err = CBFS_OK;
    /* Writing zeros is enough: a whole zero block is stored as a hole frame,
     * and whole-block writes skip the read-modify-write. Each write stays
     * below the size the file has then: a truncate between two of them (an
     * O_TRUNC open, which the kernel does not serialise with fallocate
     * without the writeback cache) is not undone by zeros. */
    while (len && !err) {
        uint64_t n = f->bs - off % f->bs;
        if (n > len) n = len;
        err = cbfs_file_write_at(f, zeros, (size_t)n, off, true);
        off += n;
        len -= n;
    }
    free(zeros);
    return err;
}

/* The committer of an engine file: the frames the pool compressed are stored
 * in the data file in submission order by one thread at a time (the
 * committer role, f->committing), and their records kept until a sync appends
 * them (file_sync.c); and the all-or-nothing store of a new size. What fills
 * and seals the blocks is file_write.c. */
#include <assert.h>
#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

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

void cbfs_wjob_run(struct cbfs_pool_job *pj)
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

/* One frame of a store that is all or nothing (cbfs_file_store_frames). */
struct cbfs_frame_piece {
    const void *frame;
    size_t len;
    struct cbfs_frame_hdr h;
};

/* Stores n (at most 2) frames, laid out back to back in memory, as one: one
 * write appends them all to the data file (a daemon killed between two writes
 * left a truncate's rewrite of its straddling block without the SIZE frame
 * behind it, which the next open's rescan applied: the old size with the
 * block's tail zeros, a file neither as before nor as after the truncate;
 * t_crash_rewrite). A write torn inside (a power cut, a SIGKILL that lands
 * while the kernel copies it) can still leave the first frame alone: the
 * window is narrowed, not closed. Then their records are kept, in one piece
 * of the pending list (a sync appends them together), and applied. On a
 * failure none of them is stored: what was appended is cut off again
 * (cbfs_file_unstore). With reserve, the sidecar is allocated for their
 * records first (cbfs_file_reserve_records). Lock held, committer role. */
static cbfs_err cbfs_file_store_frames(struct cbfs_file *f, const struct cbfs_frame_piece *p,
                                       size_t n, bool reserve)
{
    cbfs_assert_held(&f->lock);
    assert(f->committing && n >= 1 && n <= 2);
    struct cbfs_index_rec r[2];
    size_t total = 0;
    /* Applying the records below cannot fail for memory (as in the batch,
     * the table must hold a block before its frame is stored): the only
     * block frame here rewrites a block that has an entry. */
    for (size_t i = 0; i < n; i++) {
        assert((p[i].h.flags & CBFS_FRAME_SIZE) || p[i].h.block < f->idx.cap);
        assert((const unsigned char *)p[i].frame == (const unsigned char *)p[0].frame + total);
        total += p[i].len;
    }
    cbfs_err e = cbfs_file_prec_room(f, n);
    if (!e && reserve) e = cbfs_file_reserve_records(f, f->idx_need + n * CBFS_INDEX_REC_SIZE);
    for (size_t i = 0; i < n && !e; i++)
        if (!(p[i].h.flags & CBFS_FRAME_SIZE) && p[i].h.block > 0) e = cbfs_file_secure_head(f);
    if (e) return e;
    const uint64_t start = f->append_off;
    e = cbfs_pwrite_full(f->data_fd, p[0].frame, total, start);
    if (e) {
        cbfs_file_unstore(f, start);
        return e;
    }
    for (size_t i = 0; i < n; i++) {
        cbfs_index_rec_from_frame(&p[i].h, f->append_off, &r[i]);
        f->append_off += p[i].len;
    }
    CBFS_STAT_ADD(f->eng, st_physical_written, total);
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
    unsigned char *data = NULL, *frames = NULL;
    /* the SIZE frame: alone, or right behind the straddling block's frame in
     * one buffer (cbfs_file_store_frames writes them with one call) */
    uint8_t sframe[CBFS_FRAME_HDR_SIZE], *sizef = sframe;
    cbfs_err err = CBFS_OK;
    if (size < f->size && tail && e && e->ulen > tail && !(e->flags & CBFS_FRAME_HOLE)) {
        data = malloc(f->bs);
        const size_t cap = cbfs_frame_bound(f->codec, tail);
        frames = malloc(cap + CBFS_FRAME_HDR_SIZE);
        err = data && frames ? CBFS_OK : CBFS_E_NOMEM;
        bool stored;
        if (!err) err = cbfs_file_load_locked(f, size / f->bs, data, tail, &stored);
        if (!err)
            err = cbfs_frame_encode(f->codec, f->level, f->file_id, size / f->bs,
                                    f->idx.next_gen++, data, tail, frames, cap, &p[n].len,
                                    &p[n].h);
        if (!err) {
            p[n].frame = frames;
            sizef = frames + p[n++].len;
        }
    }
    if (!err) {
        p[n].h = (struct cbfs_frame_hdr){.version = 1,
                                         .codec = f->codec->id,
                                         .flags = CBFS_FRAME_SIZE,
                                         .block = size,
                                         .generation = f->idx.next_gen++,
                                         .file_id = f->file_id};
        cbfs_frame_hdr_encode(&p[n].h, sizef);
        p[n].frame = sizef;
        p[n++].len = CBFS_FRAME_HDR_SIZE;
        err = cbfs_file_store_frames(f, p, n, reserve);
    }
    free(data);
    free(frames);
    if (!err) {
        f->size = f->size_set = size;
        f->set_below = false;
        if (f->wnext > size / f->bs) f->wnext = size / f->bs; /* O_TRUNC: a new stream */
    }
    return err;
}

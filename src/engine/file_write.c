/* The write side of an engine file: writes fill open blocks, full blocks are
 * sealed into compression jobs on the pool (which file_commit.c stores in
 * order); truncate, extend and hole punching. What makes the stored frames
 * durable (flush, fsync, catch-up, revert) is file_sync.c. */
#include <assert.h>
#include <stdlib.h>
#include <string.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

/* ---- write path: open blocks and sealing ---- */

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

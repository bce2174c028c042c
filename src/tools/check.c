/* Checking one stored file, shared by `cbfs verify` and `cbfs fsck`: turns
 * cbfs_index_load's report into problems that name the file and the byte
 * offset of the first damage, then reads and decodes every live block on
 * the worker pool (header checksum, payload, XXH3 via cbfs_block_read). */
#include <inttypes.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "cbfs/pool.h"
#include "cbfs/util.h"
#include "tools/tool.h"

/* Logical bytes per pool task: big enough to amortise the hand-off, small
 * enough that two workers share a short file. */
#define TOOL_CHECK_BATCH (8u << 20)

static void tool_check_vadd(struct tool_check *chk, const char *where, uint64_t offset,
                            const char *fmt, va_list ap)
{
    char what[512];
    vsnprintf(what, sizeof what, fmt, ap);
    if (chk->n == chk->cap) {
        const size_t cap = chk->cap ? chk->cap * 2 : 8;
        struct tool_problem *const v = realloc(chk->v, cap * sizeof *v);
        if (!v) goto nomem;
        chk->v = v;
        chk->cap = cap;
    }
    struct tool_problem *const p = &chk->v[chk->n];
    p->where = strdup(where);
    p->what = strdup(what);
    p->offset = offset;
    if (!p->where || !p->what) {
        free(p->where);
        free(p->what);
        goto nomem;
    }
    chk->n++;
    return;
nomem:
    /* Out of memory while reporting: say it now, and count it, or the
     * summary said 0 problem(s) and verify exited 0 (helper-57). */
    if (offset == UINT64_MAX)
        fprintf(stderr, "%s: %s\n", where, what);
    else
        fprintf(stderr, "%s: offset %" PRIu64 ": %s\n", where, offset, what);
    chk->unlisted++;
}

size_t tool_check_count(const struct tool_check *chk)
{
    return chk->n + chk->unlisted;
}

void tool_check_add(struct tool_check *chk, const char *where, uint64_t offset, const char *fmt,
                    ...)
{
    va_list ap;
    va_start(ap, fmt);
    tool_check_vadd(chk, where, offset, fmt, ap);
    va_end(ap);
}

void tool_check_print(const struct tool_check *chk, FILE *f)
{
    for (size_t i = 0; i < chk->n; i++) {
        const struct tool_problem *const p = &chk->v[i];
        if (p->offset == UINT64_MAX)
            fprintf(f, "%s: %s\n", p->where, p->what);
        else
            fprintf(f, "%s: offset %" PRIu64 ": %s\n", p->where, p->offset, p->what);
    }
}

void tool_check_free(struct tool_check *chk)
{
    for (size_t i = 0; i < chk->n; i++) {
        free(chk->v[i].where);
        free(chk->v[i].what);
    }
    free(chk->v);
    memset(chk, 0, sizeof *chk);
}

/* The sidecar record at idx->index_end is where replay stopped: say whether
 * the record itself is bad or the frame it points at (unless that frame is
 * the one the tail report already names). */
static void tool_check_first_dropped(const char *display, const char *side,
                                     const struct tool_file *tf, struct tool_check *chk)
{
    const struct cbfs_index *const idx = &tf->idx;
    const uint64_t dropped = tf->rep.records_dropped;
    uint8_t buf[CBFS_INDEX_REC_SIZE];
    struct cbfs_index_rec r;
    cbfs_err e = cbfs_pread_full(tf->idx_fd, buf, sizeof buf, idx->index_end);
    const bool read = e == CBFS_OK;
    if (read) e = cbfs_index_rec_decode(buf, &r);
    if (!tf->rep.records_lost && (e == CBFS_E_TRUNCATED || (read && e))) {
        /* the loader's verdict (records_lost): zeros to the end, or less
         * than a record, are an append a crash cut short */
        tool_check_add(chk, side, idx->index_end,
                       "torn tail: %" PRIu64 " byte(s) past the last whole record (a crash cut "
                       "an append short; nothing there was acknowledged)",
                       (uint64_t)tf->idx_st.st_size - idx->index_end);
        return;
    }
    if (e) {
        tool_check_add(chk, side, idx->index_end,
                       "index record: %s (%" PRIu64 " record(s) from here not replayed)",
                       cbfs_err_str(e), dropped);
        return;
    }
    struct cbfs_frame_hdr h;
    const uint64_t dsize = (uint64_t)tf->data_st.st_size;
    e = cbfs_frame_read_hdr(tf->data_fd, r.offset, dsize, &h);
    if (e) {
        if (tf->rep.data_tail_bytes && r.offset == idx->data_end) return;
        tool_check_add(chk, display, r.offset,
                       "frame of block %" PRIu64 " (indexed by %s): %s (data file is %" PRIu64
                       " bytes; %" PRIu64 " index record(s) not replayed)",
                       r.block, side, cbfs_err_str(e), dsize, dropped);
    } else {
        tool_check_add(chk, side, idx->index_end,
                       "record for block %" PRIu64
                       " disagrees with its frame at data offset %" PRIu64
                       " (%" PRIu64 " record(s) from here not replayed)",
                       r.block, r.offset, dropped);
    }
}

/* Problems visible in the load report, pinpointed where possible. */
static void tool_check_report(const char *display, const struct tool_file *tf,
                              struct tool_check *chk)
{
    const struct cbfs_index_report *const rep = &tf->rep;
    const struct cbfs_index *const idx = &tf->idx;
    char side[4096];
    tool_file_side_display(tf, display, side, sizeof side);
    if (rep->sidecar_missing) {
        if (tf->idx_fd < 0)
            tool_check_add(chk, side, UINT64_MAX,
                           "missing (index rebuilt in memory from %" PRIu64 " frame(s))",
                           rep->frames_rescanned);
        else
            tool_check_add(chk, side, 0,
                           "header record unusable (index rebuilt in memory from %" PRIu64
                           " frame(s))",
                           rep->frames_rescanned);
    } else if (rep->records_dropped) {
        tool_check_first_dropped(display, side, tf, chk);
    }
    if (rep->torn_bytes_skipped)
        tool_check_add(chk, display, UINT64_MAX,
                       "%" PRIu64 " byte(s) of writes torn by a crash passed over by the load "
                       "(a later writer's frames behind them are indexed)",
                       rep->torn_bytes_skipped);
    if (!rep->sidecar_missing && rep->frames_rescanned && !chk->unindexed_ok)
        tool_check_add(chk, side, idx->index_end,
                       "index lags the data file: %" PRIu64
                       " frame(s) are not indexed (found again by scanning the frames)",
                       rep->frames_rescanned);
    if (rep->data_tail_bytes) {
        struct cbfs_frame_hdr h;
        const cbfs_err e =
            cbfs_frame_read_hdr(tf->data_fd, idx->data_end, (uint64_t)tf->data_st.st_size, &h);
        const char *const why = e ? cbfs_err_str(e) : "frame does not follow the last indexed one";
        if (rep->frames_unreachable)
            tool_check_add(chk, display, idx->data_end,
                           "no valid frame here (%s): the %" PRIu64 " byte(s) from here hold "
                           "frames of the file (or more than the load searches) it cannot "
                           "reach without the sidecar%s (kept, never cut; the daemon does not "
                           "serve the file)",
                           why, rep->data_tail_bytes,
                           rep->sidecar_missing ? "" : "'s lost records");
        else if (rep->records_lost && rep->lost_vouched > idx->data_end &&
                 !rep->sidecar_missing)
            tool_check_add(chk, display, idx->data_end,
                           "damaged frame (%s): %" PRIu64 " byte(s) from here are unreachable, "
                           "and index records behind the lost ones name frames up to offset "
                           "%" PRIu64,
                           why, rep->data_tail_bytes, rep->lost_vouched);
        else if (rep->tail_kept)
            tool_check_add(chk, display, idx->data_end,
                           "no valid frame here (%s): the %" PRIu64 " byte(s) from here are "
                           "kept, never cut: they may hold frames past a damaged header "
                           "(unreachable)",
                           why, rep->data_tail_bytes);
        else
            tool_check_add(chk, display, idx->data_end,
                           "no valid frame here (%s): torn tail of %" PRIu64 " byte(s)", why,
                           rep->data_tail_bytes);
    }
}

/* ---- parallel block reads ---- */

struct tool_slot {
    uint8_t *scratch, *out;
    size_t scratch_cap;
};

struct tool_blocks {
    const char *display;
    const struct tool_file *tf;
    struct tool_check *chk;
    uint64_t per_task;        /* blocks per task */
    struct tool_slot *slots;  /* one per pool thread; slot-private */
    pthread_mutex_t lock;     /* protects chk while workers add problems */
    uint64_t blocks, logical, frame_bytes; /* __atomic adds */
    uint64_t *progress;       /* caller's counter, __atomic adds (may be NULL) */
    void (*tick)(void *arg);
    void *tick_arg;
};

static void tool_blocks_problem(struct tool_blocks *tb, uint64_t off, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
static void tool_blocks_problem(struct tool_blocks *tb, uint64_t off, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    pthread_mutex_lock(&tb->lock);
    tool_check_vadd(tb->chk, tb->display, off, fmt, ap);
    tb->chk->unrepairable = true;
    pthread_mutex_unlock(&tb->lock);
    va_end(ap);
}

static void tool_blocks_task(void *arg, unsigned slot_no, size_t task)
{
    struct tool_blocks *const tb = arg;
    const struct cbfs_index *const idx = &tb->tf->idx;
    struct tool_slot *const s = &tb->slots[slot_no];
    const uint64_t first = (uint64_t)task * tb->per_task;
    const uint64_t end = first + tb->per_task < idx->nblocks ? first + tb->per_task : idx->nblocks;
    uint64_t blocks = 0, logical = 0, fbytes = 0;
    for (uint64_t b = first; b < end; b++) {
        const struct cbfs_index_entry *const e = cbfs_index_get(idx, b);
        if (!e) continue;
        const size_t need = CBFS_FRAME_HDR_SIZE + (size_t)e->plen;
        if (need > s->scratch_cap) {
            uint8_t *const p = realloc(s->scratch, need);
            if (!p) {
                tool_blocks_problem(tb, e->offset, "block %" PRIu64 ": not checked: %s", b,
                                    cbfs_err_str(CBFS_E_NOMEM));
                continue;
            }
            s->scratch = p;
            s->scratch_cap = need;
        }
        const cbfs_err err = cbfs_block_read(tb->tf->data_fd, e, b, s->scratch, s->out);
        if (err)
            tool_blocks_problem(tb, e->offset,
                                "block %" PRIu64 " (logical offset %" PRIu64 ", %u bytes): %s", b,
                                b * idx->block_size, e->ulen, cbfs_err_str(err));
        blocks++;
        logical += e->ulen;
        fbytes += (e->flags & CBFS_FRAME_HOLE) ? 0 : need;
    }
    __atomic_fetch_add(&tb->blocks, blocks, __ATOMIC_RELAXED);
    __atomic_fetch_add(&tb->logical, logical, __ATOMIC_RELAXED);
    __atomic_fetch_add(&tb->frame_bytes, fbytes, __ATOMIC_RELAXED);
    if (tb->progress) __atomic_fetch_add(tb->progress, fbytes, __ATOMIC_RELAXED);
}

static void tool_blocks_tick(void *arg)
{
    const struct tool_blocks *const tb = arg;
    if (tb->tick) tb->tick(tb->tick_arg);
}

static int tool_problem_cmp(const void *a, const void *b)
{
    const struct tool_problem *const x = a, *const y = b;
    return x->offset < y->offset ? -1 : x->offset > y->offset;
}

cbfs_err tool_check_file(struct cbfs_pool *pool, const char *display, const struct tool_file *tf,
                         struct tool_check *chk, uint64_t *progress, void (*tick)(void *arg),
                         void *tick_arg)
{
    if (!tf->is_cbfs) {
        if (tf->envelope_damaged) {
            tool_check_add(chk, display, 0, "%s", tool_envelope_damaged_msg);
            chk->unrepairable = true;
        }
        if (tf->frame_inside) {
            tool_check_add(chk, display, 0, TOOL_FRAME_INSIDE_FMT, tf->frame_inside);
            chk->unrepairable = true;
        }
        return CBFS_OK;
    }
    if (tf->load_err) {
        tool_check_add(chk, display, UINT64_MAX, "cannot load the index: %s%s",
                       cbfs_err_str(tf->load_err), tool_file_load_advice(tf));
        return CBFS_OK;
    }
    tool_check_report(display, tf, chk);
    const struct cbfs_index *const idx = &tf->idx;
    if (idx->nblocks == 0) return CBFS_OK;

    const unsigned threads = cbfs_pool_threads(pool);
    struct tool_blocks tb = {
        .display = display,
        .tf = tf,
        .chk = chk,
        .per_task = TOOL_CHECK_BATCH / idx->block_size ? TOOL_CHECK_BATCH / idx->block_size : 1,
        .progress = progress,
        .tick = tick,
        .tick_arg = tick_arg,
    };
    cbfs_err e = CBFS_E_NOMEM;
    tb.slots = calloc(threads, sizeof *tb.slots);
    if (!tb.slots) return e;
    for (unsigned t = 0; t < threads; t++)
        if (!(tb.slots[t].out = malloc(idx->block_size))) goto out;
    pthread_mutex_init(&tb.lock, NULL);
    const size_t first_problem = chk->n;
    const size_t tasks = (size_t)((idx->nblocks + tb.per_task - 1) / tb.per_task);
    e = tool_par_run(pool, tasks, tool_blocks_task, &tb, tool_blocks_tick);
    pthread_mutex_destroy(&tb.lock);
    /* Workers finish out of order: list damage in file order. */
    if (chk->n > first_problem)
        qsort(chk->v + first_problem, chk->n - first_problem, sizeof *chk->v, tool_problem_cmp);
    chk->blocks += tb.blocks;
    chk->logical_bytes += tb.logical;
    chk->frame_bytes += tb.frame_bytes;
out:
    for (unsigned t = 0; t < threads; t++) {
        free(tb.slots[t].scratch);
        free(tb.slots[t].out);
    }
    free(tb.slots);
    return e;
}

/* Takes chk back to before: the problems added since are freed, the counters
 * are before's. */
static void tool_check_rollback(struct tool_check *chk, const struct tool_check *before)
{
    for (size_t i = before->n; i < chk->n; i++) {
        free(chk->v[i].where);
        free(chk->v[i].what);
    }
    chk->n = before->n;
    chk->unlisted = before->unlisted;
    chk->unrepairable = before->unrepairable;
    chk->blocks = before->blocks;
    chk->logical_bytes = before->logical_bytes;
    chk->frame_bytes = before->frame_bytes;
}

cbfs_err tool_check_file_live(struct cbfs_pool *pool, const char *display, struct tool_file *tf,
                              struct tool_check *chk, uint64_t *progress,
                              void (*tick)(void *arg), void *tick_arg)
{
    unsigned looks = 0;
    for (;;) {
        const struct tool_check before = *chk; /* counters and n only: v may move */
        const cbfs_err e = tool_check_file(pool, display, tf, chk, progress, tick, tick_arg);
        if (e || tool_check_count(chk) == tool_check_count(&before)) return e;
        switch (tool_file_look_again(tf, &looks, NULL)) {
        case TOOL_LOOK_AGAIN: /* the check counts only from a load that saw it as it is */
            tool_check_rollback(chk, &before);
            continue;
        case TOOL_LOOK_GONE: /* removed while it was checked: no file, no problem */
            tool_check_rollback(chk, &before);
            return e;
        case TOOL_LOOK_KEPT_CHANGING:
            tool_check_add(chk, display, UINT64_MAX,
                           "the file changed under each of %u checks: a writer is at work, "
                           "and what is reported above may be its writes in flight; check it "
                           "again when it is quiet",
                           TOOL_LOOKS + 1);
            return e;
        case TOOL_LOOK_STANDS:
            return e;
        }
    }
}

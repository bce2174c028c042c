/* Per-file engine state: open blocks being filled by writes, sealed blocks
 * compressing on the pool, the in-order committer that appends their frames
 * and index records, and the read path (memory first, then cache, then the
 * store) with sequential read-ahead.
 *
 * Locking (see engine_impl.h for the global order): f->lock protects every
 * field marked "lock" below. The committer role (f->committing) is held by one
 * thread at a time; it owns append_off and idx.index_end and does its store
 * I/O without f->lock, so readers and writers keep going while frames are
 * written. Code holding f->lock never waits on the cache for another loader
 * (cbfs_cache_peek, private decode) — a pool thread that loads may itself be
 * waiting for f->lock. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/engine_impl.h"

#define CBFS_OPEN_MAX 4     /* open blocks per file: several sequential streams */
#define CBFS_COMMIT_BATCH 16

struct cbfs_oblock {
    uint64_t block;
    uint32_t len;         /* content bytes; bytes past len are undefined */
    uint64_t last_use;    /* f->use_clock at last write */
    bool dirty;           /* written since its content was last sealed */
    unsigned char *data;  /* block_size bytes, owned */
};

struct cbfs_wjob {
    struct cbfs_pool_job pj;
    struct cbfs_file *f;
    uint64_t block, gen;   /* immutable */
    uint32_t len;          /* immutable */
    unsigned char *data;   /* uncompressed content, owned; readable under f->lock until freed */
    unsigned char *frame;  /* encoded frame; written by the worker before done */
    size_t frame_len, frame_cap;
    struct cbfs_frame_hdr hdr;
    cbfs_err err;          /* set by worker before done; by the committer after */
    bool done;             /* lock */
    bool stored;           /* committer role */
    struct cbfs_wjob *next; /* pending list: lock */
};

/* A frame that became garbage: its payload can be punched out of the data
 * file once the frame that replaced it is durable. */
struct cbfs_dead {
    uint64_t offset;
    uint32_t plen;
};

struct cbfs_rajob {
    struct cbfs_pool_job pj;
    struct cbfs_file *f;
    uint64_t block;
    struct cbfs_index_entry e;
    struct cbfs_cache_ent *c;
};

struct cbfs_file {
    struct cbfs_engine *eng; /* immutable */
    uint64_t serial;         /* immutable: cache key */
    int data_fd, idx_fd;     /* immutable */
    bool writable;           /* immutable */
    const struct cbfs_codec_ops *codec; /* immutable: codec for new blocks */
    int level;               /* immutable */
    uint32_t bs;             /* immutable: this file's block size */
    uint64_t file_id;        /* immutable */
    char name[256];          /* set once before the file is shared */

    pthread_mutex_t lock;
    pthread_cond_t cond;     /* broadcast on every commit and read-ahead completion */
    struct cbfs_index idx;   /* lock; index_end/data_end advanced by the committer role */
    uint64_t size;           /* lock: logical size including data still in memory */
    struct cbfs_oblock open[CBFS_OPEN_MAX]; /* lock */
    unsigned nopen;          /* lock */
    uint64_t use_clock;      /* lock */
    struct cbfs_wjob *pend_head, *pend_tail; /* lock: sealed blocks, submission order */
    bool committing;         /* lock: some thread holds the committer role */
    uint64_t append_off;     /* committer role: where the next frame goes */
    cbfs_err err;            /* lock: first background error, until flush reports it */
    bool dirty;              /* lock: changed since the last fdatasync */
    uint64_t ra_last;        /* lock: last block a reader touched (UINT64_MAX: none) */
    uint64_t ra_issued;      /* lock: read-ahead issued for blocks below this */
    unsigned ra_window;      /* lock: current read-ahead window in blocks */
    unsigned ra_jobs;        /* lock: read-ahead jobs in flight; close waits for 0 */
    struct cbfs_dead *dead;  /* lock: garbage frames to punch after the next fdatasync */
    size_t ndead, dead_cap;  /* lock */
    bool no_punch;           /* lock: the store refused FALLOC_FL_PUNCH_HOLE */
};

void cbfs_file_set_name(struct cbfs_file *f, const char *name)
{
    pthread_mutex_lock(&f->lock);
    snprintf(f->name, sizeof f->name, "%s", name);
    pthread_mutex_unlock(&f->lock);
}

uint64_t cbfs_file_size(struct cbfs_file *f)
{
    pthread_mutex_lock(&f->lock);
    uint64_t s = f->size;
    pthread_mutex_unlock(&f->lock);
    return s;
}

/* ---- decoding one stored block ---- */

/* Reads and decodes block b (entry e) into a new buffer of e->ulen bytes.
 * Logs a line naming the file and offsets on a bad frame. Callable with or
 * without f->lock (touches only immutable fields). */
static cbfs_err cbfs_file_decode(struct cbfs_file *f, uint64_t b, const struct cbfs_index_entry *e,
                                 unsigned char **out)
{
    struct cbfs_engine *eng = f->eng;
    unsigned char *data = malloc(e->ulen ? e->ulen : 1);
    unsigned char *scratch = malloc(CBFS_FRAME_HDR_SIZE + (size_t)e->plen);
    cbfs_err err = CBFS_E_NOMEM;
    if (!data || !scratch) goto out;
    uint64_t t0 = cbfs_now_ns();
    err = CBFS_OK;
    if (!(e->flags & CBFS_FRAME_HOLE)) {
        err = cbfs_pread_full(f->data_fd, scratch, CBFS_FRAME_HDR_SIZE + (size_t)e->plen,
                              e->offset);
        CBFS_STAT_ADD(eng, st_physical_read, CBFS_FRAME_HDR_SIZE + (uint64_t)e->plen);
    }
    uint64_t t1 = cbfs_now_ns();
    CBFS_STAT_ADD(eng, st_ns_store_read, t1 - t0);
    if (!err) {
        err = cbfs_block_check_decode(e, b, scratch, data);
        CBFS_STAT_ADD(eng, st_ns_decompress, cbfs_now_ns() - t1);
    }
    if (err) {
        cbfs_log_err("%s: block %llu (logical offset %llu, %u bytes) at store offset %llu "
                     "is unreadable: %s",
                     f->name, (unsigned long long)b, (unsigned long long)(b * f->bs), e->ulen,
                     (unsigned long long)e->offset, cbfs_err_str(err));
        goto out;
    }
    *out = data;
    data = NULL;
out:
    free(scratch);
    free(data);
    return err;
}

/* A referenced, READY cache entry for block b, decoding it if needed.
 * Must be called WITHOUT f->lock (it may wait for another loader). */
static cbfs_err cbfs_file_load(struct cbfs_file *f, uint64_t b, const struct cbfs_index_entry *e,
                               struct cbfs_cache_ent **out)
{
    struct cbfs_engine *eng = f->eng;
    bool fill, ra_hit;
    struct cbfs_cache_ent *c = cbfs_cache_get(eng->cache, f->serial, b, e->generation, &fill,
                                              &ra_hit);
    if (!c) return CBFS_E_NOMEM;
    if (!fill) {
        CBFS_STAT_ADD(eng, st_cache_hits, 1);
        if (ra_hit) CBFS_STAT_ADD(eng, st_readahead_hits, 1);
        *out = c;
        return CBFS_OK;
    }
    CBFS_STAT_ADD(eng, st_cache_misses, 1);
    unsigned char *data = NULL;
    cbfs_err err = cbfs_file_decode(f, b, e, &data);
    cbfs_cache_fill(eng->cache, c, data, e->ulen, err == CBFS_OK, false);
    if (err) {
        cbfs_cache_put(eng->cache, c);
        return err;
    }
    *out = c;
    return CBFS_OK;
}

/* Copies [boff, boff+n) of a block whose content is data[0..len) into dst;
 * bytes past len read as zeros. */
static void cbfs_copy_part(unsigned char *dst, const unsigned char *data, uint32_t len,
                           uint32_t boff, uint32_t n)
{
    uint32_t have = boff < len ? len - boff : 0;
    if (have > n) have = n;
    if (have) memcpy(dst, data + boff, have);
    if (have < n) memset(dst + have, 0, n - have);
}

/* Newest in-memory content of block b (open block, else newest pending). */
static bool cbfs_file_mem_block(struct cbfs_file *f, uint64_t b, const unsigned char **data,
                                uint32_t *len)
{
    for (unsigned i = 0; i < f->nopen; i++) {
        if (f->open[i].block == b) {
            *data = f->open[i].data;
            *len = f->open[i].len;
            return true;
        }
    }
    bool found = false;
    for (struct cbfs_wjob *j = f->pend_head; j; j = j->next) {
        if (j->block == b) { /* keep looking: the last match is the newest */
            *data = j->data;
            *len = j->len;
            found = true;
        }
    }
    return found;
}

/* ---- write path: sealing, compressing, committing ---- */

/* Data buffers are always f->bs bytes and frame buffers frame_cap bytes, so
 * both go back to the engine's recycling lists. */
static void cbfs_wjob_free(struct cbfs_file *f, struct cbfs_wjob *j)
{
    cbfs_engine_buf_put(f->eng, j->data, f->bs);
    cbfs_engine_buf_put(f->eng, j->frame, j->frame_cap);
    free(j);
}

/* Stores a batch of encoded frames and their records. Committer role, no lock. */
static void cbfs_file_store_batch(struct cbfs_file *f, struct cbfs_wjob **batch, size_t n,
                                  cbfs_err poison, struct cbfs_index_rec *recs, size_t *nrecs)
{
    struct cbfs_engine *eng = f->eng;
    *nrecs = 0;
    uint64_t t0 = cbfs_now_ns();
    for (size_t i = 0; i < n; i++) {
        struct cbfs_wjob *j = batch[i];
        /* After the first failure nothing more is stored until the error has
         * been reported: a later, smaller frame that still fits would leave a
         * gap (zeros) in the file where the failed block was. */
        if (j->err || (j->err = poison)) {
            poison = j->err;
            continue;
        }
        cbfs_err e = cbfs_pwrite_full(f->data_fd, j->frame, j->frame_len, f->append_off);
        if (e) {
            j->err = poison = e;
            continue; /* append_off unchanged: the next frame overwrites the torn one */
        }
        cbfs_index_rec_from_frame(&j->hdr, f->append_off, &recs[(*nrecs)++]);
        f->append_off += j->frame_len;
        j->stored = true;
    }
    if (*nrecs) {
        cbfs_err e = cbfs_index_append(&f->idx, f->idx_fd, recs, *nrecs);
        if (e) {
            /* The frames are on disk and will be found by the rescan on the
             * next open; the caller still hears about the failure. */
            for (size_t i = 0; i < n; i++)
                if (batch[i]->stored && !batch[i]->err) batch[i]->err = e;
        }
    }
    CBFS_STAT_ADD(eng, st_ns_store_write, cbfs_now_ns() - t0);
}

/* Becomes the committer unless someone else is, and appends every finished
 * job at the head of the pending list, in submission order. Called and
 * returns with f->lock held (drops it around store I/O). */
static void cbfs_file_commit_locked(struct cbfs_file *f)
{
    struct cbfs_engine *eng = f->eng;
    if (f->committing) return;
    f->committing = true;
    while (f->pend_head && f->pend_head->done) {
        struct cbfs_wjob *batch[CBFS_COMMIT_BATCH];
        struct cbfs_index_rec recs[CBFS_COMMIT_BATCH];
        size_t n = 0, nrecs;
        for (struct cbfs_wjob *j = f->pend_head; j && j->done && n < CBFS_COMMIT_BATCH; j = j->next)
            batch[n++] = j;
        const cbfs_err poison = f->err;
        pthread_mutex_unlock(&f->lock);
        cbfs_file_store_batch(f, batch, n, poison, recs, &nrecs);
        pthread_mutex_lock(&f->lock);
        size_t r = 0;
        for (size_t i = 0; i < n; i++) {
            struct cbfs_wjob *j = batch[i];
            if (j->stored) {
                cbfs_index_apply(&f->idx, &recs[r++]);
                CBFS_STAT_ADD(eng, st_physical_written, j->frame_len);
            }
            if (j->err && !f->err) {
                f->err = j->err;
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
    pthread_mutex_lock(&f->lock);
    j->err = err;
    j->done = true;
    cbfs_file_commit_locked(f);
    pthread_mutex_unlock(&f->lock);
}

/* Turns open block i into a compression job. With keep, the job gets a copy
 * and the block stays open and clean (flush: the next small write into it
 * needs no read-back); without, the job takes the buffer and the slot is
 * freed. A clean block is just dropped: its content is already sealed.
 * Lock held. */
static cbfs_err cbfs_file_seal(struct cbfs_file *f, unsigned i, bool keep)
{
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

/* Seals every dirty open block; with keep (flush) they stay open and clean,
 * without (truncate, close) every slot is emptied. */
static cbfs_err cbfs_file_seal_all(struct cbfs_file *f, bool keep)
{
    for (unsigned i = f->nopen; i-- > 0;) {
        cbfs_err e = cbfs_file_seal(f, i, keep);
        if (e) return e;
    }
    return CBFS_OK;
}

/* Waits until every sealed block is committed. Lock held (released while waiting). */
static void cbfs_file_drain(struct cbfs_file *f)
{
    while (f->pend_head || f->committing) pthread_cond_wait(&f->cond, &f->lock);
}

/* Fills buf (block_size bytes) with the newest content of block b, up to
 * `want` bytes (the part of the block inside the file); returns that length.
 * Lock held: never waits on the cache. */
static cbfs_err cbfs_file_load_locked(struct cbfs_file *f, uint64_t b, unsigned char *buf,
                                      uint32_t want)
{
    const unsigned char *mem;
    uint32_t len = 0;
    if (cbfs_file_mem_block(f, b, &mem, &len)) {
        if (len > want) len = want;
        memcpy(buf, mem, len);
    } else {
        const struct cbfs_index_entry *e = cbfs_index_get(&f->idx, b);
        if (e && !(e->flags & CBFS_FRAME_HOLE) && e->ulen) {
            struct cbfs_cache_ent *c = cbfs_cache_peek(f->eng->cache, f->serial, b, e->generation);
            if (c) {
                len = c->len < want ? c->len : want;
                memcpy(buf, c->data, len);
                cbfs_cache_put(f->eng->cache, c);
            } else {
                unsigned char *data;
                cbfs_err err = cbfs_file_decode(f, b, e, &data);
                if (err) return err;
                len = e->ulen < want ? e->ulen : want;
                memcpy(buf, data, len);
                free(data);
            }
        }
    }
    if (len < want) memset(buf + len, 0, want - len);
    return CBFS_OK;
}

/* The open block for b, creating it (read-modify-write of existing content,
 * unless the caller is about to overwrite the whole block) and sealing the
 * least recently used one if all slots are taken. Lock held. */
static cbfs_err cbfs_file_open_block(struct cbfs_file *f, uint64_t b, bool whole,
                                     struct cbfs_oblock **out)
{
    for (unsigned i = 0; i < f->nopen; i++) {
        if (f->open[i].block == b) {
            *out = &f->open[i];
            return CBFS_OK;
        }
    }
    if (f->nopen == CBFS_OPEN_MAX) {
        unsigned lru = 0;
        for (unsigned i = 1; i < f->nopen; i++)
            if (f->open[i].last_use < f->open[lru].last_use) lru = i;
        cbfs_err e = cbfs_file_seal(f, lru, false);
        if (e) return e;
    }
    unsigned char *data = cbfs_engine_buf_get(f->eng, f->bs);
    if (!data) return CBFS_E_NOMEM;
    uint64_t start = b * f->bs;
    uint32_t exist = 0;
    if (f->size > start) exist = f->size - start >= f->bs ? f->bs : (uint32_t)(f->size - start);
    if (whole) exist = 0;
    if (exist) {
        cbfs_err e = cbfs_file_load_locked(f, b, data, exist);
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
    *out = ob;
    return CBFS_OK;
}

cbfs_err cbfs_file_write(struct cbfs_file *f, const void *buf, size_t len, uint64_t off)
{
    if (!f->writable) return CBFS_E_BADF;
    if (off + len < off || (off + len + f->bs - 1) / f->bs > CBFS_MAX_BLOCKS) return CBFS_E_FBIG;
    const unsigned char *src = buf;
    size_t left = len;
    cbfs_err err = CBFS_OK;
    pthread_mutex_lock(&f->lock);
    if (f->err) {
        err = f->err;
        goto out;
    }
    while (left) {
        uint64_t b = off / f->bs;
        uint32_t boff = (uint32_t)(off % f->bs);
        uint32_t n = f->bs - boff < left ? f->bs - boff : (uint32_t)left;
        struct cbfs_oblock *ob;
        err = cbfs_file_open_block(f, b, boff == 0 && n == f->bs, &ob);
        if (err) goto out;
        if (boff > ob->len) memset(ob->data + ob->len, 0, boff - ob->len);
        memcpy(ob->data + boff, src, n);
        if (boff + n > ob->len) ob->len = boff + n;
        ob->last_use = ++f->use_clock;
        ob->dirty = true;
        off += n;
        src += n;
        left -= n;
        if (off > f->size) f->size = off;
        f->dirty = true;
        /* A write that fills the block up to its last byte means the writer
         * moves on (sequential): compress it now. Overwrites inside a full
         * block keep it open, so small random writes share one frame. */
        if (boff + n == f->bs) {
            err = cbfs_file_seal(f, (unsigned)(ob - f->open), false);
            if (err) goto out;
        }
    }
out:
    pthread_mutex_unlock(&f->lock);
    CBFS_STAT_ADD(f->eng, st_logical_written, len - left);
    cbfs_engine_budget_wait(f->eng); /* backpressure, outside the file lock */
    return err;
}

/* cbfs_index hook, called under f->lock when a frame becomes garbage. If the
 * list cannot grow, the frame just stays (counted) garbage. */
static void cbfs_file_note_dead(void *arg, uint64_t offset, uint32_t plen)
{
    struct cbfs_file *f = arg;
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
 * frame). Only called after fdatasync made their replacements durable, so a
 * crash can never leave a block whose only copy was punched. This is cbfs's
 * compaction: no rewrite, no rename, no second copy of the file. */
static void cbfs_file_punch_dead(struct cbfs_file *f)
{
    pthread_mutex_lock(&f->lock);
    struct cbfs_dead *dead = f->dead;
    size_t n = f->ndead;
    f->dead = NULL;
    f->ndead = f->dead_cap = 0;
    pthread_mutex_unlock(&f->lock);
    for (size_t i = 0; i < n; i++) {
        uint64_t start = (dead[i].offset + CBFS_FRAME_HDR_SIZE + 4095) & ~4095ull;
        uint64_t end = (dead[i].offset + CBFS_FRAME_HDR_SIZE + dead[i].plen) & ~4095ull;
        if (end <= start) continue;
        if (fallocate(f->data_fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, (off_t)start,
                      (off_t)(end - start)) != 0) {
            if (errno == EOPNOTSUPP) {
                pthread_mutex_lock(&f->lock);
                f->no_punch = true; /* garbage stays until the file is rewritten */
                pthread_mutex_unlock(&f->lock);
            }
            break;
        }
    }
    free(dead);
}

cbfs_err cbfs_file_flush(struct cbfs_file *f)
{
    pthread_mutex_lock(&f->lock);
    cbfs_err err = cbfs_file_seal_all(f, true);
    cbfs_file_drain(f);
    if (f->err) {
        /* Reported now, once. What was not stored is gone: the file is what
         * the store holds (a correct prefix, see cbfs_file_store_batch). */
        if (!err) err = f->err;
        f->err = CBFS_OK;
        for (unsigned i = 0; i < f->nopen; i++) cbfs_engine_buf_put(f->eng, f->open[i].data, f->bs);
        f->nopen = 0;
        f->size = f->idx.size;
    }
    bool dirty = f->dirty;
    f->dirty = false;
    pthread_mutex_unlock(&f->lock);
    if (!err && dirty) {
        if (fdatasync(f->data_fd) != 0) err = cbfs_err_from_errno(errno);
        else if (fdatasync(f->idx_fd) != 0) err = cbfs_err_from_errno(errno);
        if (err) cbfs_log_err("%s: fdatasync failed: %s", f->name, cbfs_err_str(err));
        else cbfs_file_punch_dead(f);
    }
    return err;
}

/* Writes one frame synchronously (truncate's frames). Lock held, no commit
 * in progress (drained), so this thread acts as committer. */
static cbfs_err cbfs_file_store_one(struct cbfs_file *f, const void *frame, size_t frame_len,
                                    const struct cbfs_frame_hdr *h)
{
    cbfs_err e = cbfs_pwrite_full(f->data_fd, frame, frame_len, f->append_off);
    if (e) return e;
    struct cbfs_index_rec r;
    cbfs_index_rec_from_frame(h, f->append_off, &r);
    f->append_off += frame_len;
    e = cbfs_index_append(&f->idx, f->idx_fd, &r, 1);
    cbfs_index_apply(&f->idx, &r);
    CBFS_STAT_ADD(f->eng, st_physical_written, frame_len);
    return e;
}

cbfs_err cbfs_file_truncate(struct cbfs_file *f, uint64_t size)
{
    if (!f->writable) return CBFS_E_BADF;
    if ((size + f->bs - 1) / f->bs > CBFS_MAX_BLOCKS || size > (uint64_t)INT64_MAX)
        return CBFS_E_FBIG;
    pthread_mutex_lock(&f->lock);
    cbfs_err err = cbfs_file_seal_all(f, false);
    cbfs_file_drain(f);
    if (err || (err = f->err)) goto out;
    if (size == f->size) goto out;
    f->committing = true; /* keeps the role while we write below */
    uint32_t tail = (uint32_t)(size % f->bs);
    const struct cbfs_index_entry *e = cbfs_index_get(&f->idx, size / f->bs);
    if (size < f->size && tail && e && e->ulen > tail && !(e->flags & CBFS_FRAME_HOLE)) {
        /* The block straddling the new end keeps only its first `tail` bytes,
         * so a later extension reads zeros there (POSIX). */
        unsigned char *data = malloc(f->bs);
        size_t cap = cbfs_frame_bound(f->codec, tail);
        unsigned char *frame = malloc(cap);
        err = data && frame ? CBFS_OK : CBFS_E_NOMEM;
        if (!err) err = cbfs_file_load_locked(f, size / f->bs, data, tail);
        struct cbfs_frame_hdr h;
        size_t flen;
        if (!err)
            err = cbfs_frame_encode(f->codec, f->level, f->file_id, size / f->bs,
                                    f->idx.next_gen++, data, tail, frame, cap, &flen, &h);
        if (!err) err = cbfs_file_store_one(f, frame, flen, &h);
        free(data);
        free(frame);
    }
    if (!err) {
        struct cbfs_frame_hdr h = {.version = 1,
                                   .codec = f->codec->id,
                                   .flags = CBFS_FRAME_SIZE,
                                   .block = size,
                                   .generation = f->idx.next_gen++,
                                   .file_id = f->file_id};
        uint8_t frame[CBFS_FRAME_HDR_SIZE];
        cbfs_frame_hdr_encode(&h, frame);
        err = cbfs_file_store_one(f, frame, sizeof frame, &h);
    }
    if (!err) {
        f->size = size;
        f->dirty = true;
    }
    f->committing = false;
    pthread_cond_broadcast(&f->cond);
out:
    pthread_mutex_unlock(&f->lock);
    return err;
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
     * and whole-block writes skip the read-modify-write. */
    while (len && !err) {
        uint64_t n = f->bs - off % f->bs;
        if (n > len) n = len;
        err = cbfs_file_write(f, zeros, (size_t)n, off);
        off += n;
        len -= n;
    }
    free(zeros);
    return err;
}

cbfs_err cbfs_file_seek(struct cbfs_file *f, uint64_t off, bool data, uint64_t *out)
{
    cbfs_err err = CBFS_E_NXIO;
    pthread_mutex_lock(&f->lock);
    if (off < f->size) {
        uint64_t nblocks = (f->size + f->bs - 1) / f->bs;
        uint64_t b = off / f->bs;
        for (; b < nblocks; b++) {
            const unsigned char *mem;
            uint32_t mlen;
            const struct cbfs_index_entry *e = cbfs_index_get(&f->idx, b);
            bool is_data = cbfs_file_mem_block(f, b, &mem, &mlen)
                               ? !cbfs_is_zero(mem, mlen)
                               : e && !(e->flags & CBFS_FRAME_HOLE);
            if (is_data == data) break;
        }
        uint64_t pos = b * f->bs > off ? b * f->bs : off;
        if (b < nblocks) {
            *out = pos;
            err = CBFS_OK;
        } else if (!data) {
            *out = f->size; /* the virtual hole at end of file */
            err = CBFS_OK;
        }
    }
    pthread_mutex_unlock(&f->lock);
    return err;
}

/* ---- read path ---- */

static void cbfs_rajob_run(struct cbfs_pool_job *pj)
{
    struct cbfs_rajob *j = (struct cbfs_rajob *)pj;
    struct cbfs_file *f = j->f;
    unsigned char *data = NULL;
    cbfs_err err = cbfs_file_decode(f, j->block, &j->e, &data);
    cbfs_cache_fill(f->eng->cache, j->c, data, j->e.ulen, err == CBFS_OK, true);
    cbfs_cache_put(f->eng->cache, j->c);
    pthread_mutex_lock(&f->lock);
    f->ra_jobs--;
    pthread_cond_broadcast(&f->cond);
    pthread_mutex_unlock(&f->lock);
    free(j);
}

/* Sequential detection and read-ahead for a read of blocks [first, last].
 * The window starts at 2 blocks and doubles while the reader keeps going
 * forward, up to cfg.readahead, so a restore keeps every worker decoding.
 * Lock held; only non-blocking cache calls. */
static void cbfs_file_readahead(struct cbfs_file *f, uint64_t first, uint64_t last)
{
    struct cbfs_engine *eng = f->eng;
    unsigned max = eng->cfg.readahead;
    if (!max) return;
    bool seq = (f->ra_last == UINT64_MAX) ? first == 0
                                          : first >= f->ra_last && first <= f->ra_last + 2;
    if (!seq) {
        f->ra_window = 0;
        f->ra_issued = 0;
        f->ra_last = last;
        return;
    }
    if (f->ra_last == UINT64_MAX || last > f->ra_last)
        f->ra_window = f->ra_window ? (f->ra_window * 2 > max ? max : f->ra_window * 2)
                                    : (max < 2 ? max : 2);
    if (f->ra_last == UINT64_MAX || last > f->ra_last) f->ra_last = last;
    uint64_t nblocks = (f->size + f->bs - 1) / f->bs;
    uint64_t from = last + 1 > f->ra_issued ? last + 1 : f->ra_issued;
    uint64_t to = last + f->ra_window;
    for (uint64_t b = from; b <= to && b < nblocks; b++) {
        const unsigned char *mem;
        uint32_t mlen;
        const struct cbfs_index_entry *e = cbfs_index_get(&f->idx, b);
        if (!e || (e->flags & CBFS_FRAME_HOLE) || cbfs_file_mem_block(f, b, &mem, &mlen))
            continue;
        struct cbfs_cache_ent *c = cbfs_cache_reserve(eng->cache, f->serial, b, e->generation);
        if (!c) continue; /* cached or loading already */
        struct cbfs_rajob *j = malloc(sizeof *j);
        if (!j) {
            cbfs_cache_fill(eng->cache, c, NULL, 0, false, false);
            cbfs_cache_put(eng->cache, c);
            break;
        }
        j->pj.fn = cbfs_rajob_run;
        j->f = f;
        j->block = b;
        j->e = *e;
        j->c = c;
        f->ra_jobs++;
        cbfs_pool_submit(eng->pool, &j->pj);
    }
    if (to + 1 > f->ra_issued) f->ra_issued = to + 1;
}

cbfs_err cbfs_file_read(struct cbfs_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    unsigned char *dst = buf;
    cbfs_err err = CBFS_OK;
    size_t done = 0;
    pthread_mutex_lock(&f->lock);
    if (f->err) {
        /* Blocks failed to store and the writer has not been told yet: the
         * file's tail is uncertain until flush/fsync reports it. */
        err = f->err;
        len = 0;
    } else if (off >= f->size) len = 0;
    else if (len > f->size - off) len = (size_t)(f->size - off);
    if (len) cbfs_file_readahead(f, off / f->bs, (off + len - 1) / f->bs);
    while (done < len) {
        uint64_t pos = off + done;
        uint64_t b = pos / f->bs;
        uint32_t boff = (uint32_t)(pos % f->bs);
        uint32_t n = f->bs - boff < len - done ? f->bs - boff : (uint32_t)(len - done);
        const unsigned char *mem;
        uint32_t mlen;
        const struct cbfs_index_entry *ep = cbfs_index_get(&f->idx, b);
        if (cbfs_file_mem_block(f, b, &mem, &mlen)) {
            cbfs_copy_part(dst + done, mem, mlen, boff, n);
        } else if (!ep || (ep->flags & CBFS_FRAME_HOLE)) {
            memset(dst + done, 0, n);
        } else {
            struct cbfs_index_entry e = *ep;
            struct cbfs_cache_ent *c;
            pthread_mutex_unlock(&f->lock);
            err = cbfs_file_load(f, b, &e, &c);
            if (!err) {
                cbfs_copy_part(dst + done, c->data, c->len, boff, n);
                cbfs_cache_put(f->eng->cache, c);
            }
            pthread_mutex_lock(&f->lock);
            if (err) break;
        }
        done += n;
    }
    pthread_mutex_unlock(&f->lock);
    CBFS_STAT_ADD(f->eng, st_logical_read, done);
    *got = done;
    return err;
}

/* ---- open / close ---- */

cbfs_err cbfs_file_open(struct cbfs_engine *eng, int data_fd, int idx_fd, bool create,
                        bool writable, const struct cbfs_codec_ops *codec, int level,
                        struct cbfs_file **out)
{
    cbfs_err err = CBFS_E_NOMEM;
    if (!codec || codec->id == CBFS_CODEC_NONE) {
        err = CBFS_E_INVAL; /* codec=none files are plain files, not engine files */
        goto fail_fds;
    }
    struct cbfs_file *f = calloc(1, sizeof *f);
    if (!f) goto fail_fds;
    f->eng = eng;
    f->serial = cbfs_engine_new_serial(eng);
    f->data_fd = data_fd;
    f->idx_fd = idx_fd;
    f->writable = writable;
    f->codec = codec;
    f->level = level;
    f->ra_last = UINT64_MAX;
    snprintf(f->name, sizeof f->name, "(fd %d)", data_fd);
    pthread_mutex_init(&f->lock, NULL);
    pthread_cond_init(&f->cond, NULL);

    struct stat st, ist;
    bool empty = false;
    if (!create && fstat(data_fd, &st) == 0 && st.st_size == 0 &&
        (idx_fd < 0 || (fstat(idx_fd, &ist) == 0 && ist.st_size < CBFS_INDEX_REC_SIZE))) {
        /* An empty data file whose sidecar header never reached the disk
         * (crash right after create): it is simply an empty file. */
        if (writable) create = true;
        else empty = true;
    }
    if (empty) {
        cbfs_index_init(&f->idx, eng->cfg.block_size, 0);
    } else if (create) {
        if (!writable) {
            err = CBFS_E_BADF;
            goto fail;
        }
        cbfs_index_init(&f->idx, eng->cfg.block_size, cbfs_random64());
        err = cbfs_index_write_header(&f->idx, idx_fd);
        if (err) goto fail;
        f->dirty = true; /* the header must be durable at the first flush */
    } else {
        struct cbfs_index_report rep = {0};
        err = cbfs_index_open(data_fd, idx_fd, writable, &f->idx, &rep);
        if (err == CBFS_E_VERSION && rep.newer_version)
            cbfs_log_err("fd %d: sidecar has cbfs format version %u; this cbfs reads version %u "
                         "only: upgrade cbfs to read this file",
                         data_fd, rep.newer_version, CBFS_FORMAT_VERSION);
        if (err) goto fail;
        if (rep.frames_damaged)
            cbfs_log_err("fd %d: %llu frame header(s) damaged, first at store offset %llu: "
                         "those blocks will fail with EIO (run cbfs verify)",
                         data_fd, (unsigned long long)rep.frames_damaged,
                         (unsigned long long)rep.first_damaged_offset);
        if (rep.tail_kept)
            cbfs_log_err("fd %d: %llu bytes after the last readable frame hold damaged frames; "
                         "kept, not truncated (run cbfs fsck)",
                         data_fd, (unsigned long long)rep.data_tail_bytes);
        if (rep.sidecar_missing || rep.records_dropped || rep.frames_rescanned ||
            rep.data_tail_bytes)
            cbfs_log_info("fd %d: index recovered (sidecar %s, %llu records dropped, %llu "
                          "frames rescanned, %llu tail bytes%s)",
                          data_fd, rep.sidecar_missing ? "rebuilt" : "replayed",
                          (unsigned long long)rep.records_dropped,
                          (unsigned long long)rep.frames_rescanned,
                          (unsigned long long)rep.data_tail_bytes,
                          rep.repaired ? ", repaired" : "");
    }
    f->idx.on_dead = cbfs_file_note_dead;
    f->idx.on_dead_arg = f;
    f->bs = f->idx.block_size;
    f->file_id = f->idx.file_id;
    f->size = f->idx.size;
    /* After a kept (damaged) tail, append behind it: never over frames. */
    f->append_off = f->idx.data_end;
    if (!empty && fstat(data_fd, &st) == 0 && (uint64_t)st.st_size > f->append_off)
        f->append_off = (uint64_t)st.st_size;
    *out = f;
    return CBFS_OK;
fail:
    cbfs_index_free(&f->idx);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
fail_fds:
    close(data_fd);
    if (idx_fd >= 0) close(idx_fd);
    return err;
}

cbfs_err cbfs_file_close(struct cbfs_file *f)
{
    if (!f) return CBFS_OK;
    cbfs_err err = CBFS_OK;
    if (f->writable) err = cbfs_file_flush(f);
    pthread_mutex_lock(&f->lock);
    while (f->ra_jobs) pthread_cond_wait(&f->cond, &f->lock);
    for (unsigned i = 0; i < f->nopen; i++) /* clean after flush */
        cbfs_engine_buf_put(f->eng, f->open[i].data, f->bs);
    pthread_mutex_unlock(&f->lock);
    close(f->data_fd);
    if (f->idx_fd >= 0) close(f->idx_fd);
    cbfs_index_free(&f->idx);
    free(f->dead);
    pthread_cond_destroy(&f->cond);
    pthread_mutex_destroy(&f->lock);
    free(f);
    return err;
}

cbfs_err cbfs_file_peek_size(int data_fd, int idx_fd, uint64_t *size)
{
    struct cbfs_index idx;
    struct cbfs_index_report rep = {0};
    struct stat st;
    if (fstat(data_fd, &st) == 0 && st.st_size == 0) {
        *size = 0; /* nothing written yet (or the sidecar header only) */
        return CBFS_OK;
    }
    cbfs_index_init(&idx, CBFS_BLOCK_DEFAULT, 0);
    cbfs_err err = cbfs_index_open(data_fd, idx_fd, false, &idx, &rep);
    if (!err) *size = idx.size;
    cbfs_index_free(&idx);
    return err;
}

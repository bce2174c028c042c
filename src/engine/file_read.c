/* The read side of an engine file: a block's newest content comes from memory
 * (open or sealed blocks), then the decompressed-block cache, then the store;
 * sequential readers get read-ahead on the pool. Also SEEK_DATA/SEEK_HOLE. */
#include <stdlib.h>
#include <string.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

/* Immutable once submitted; the job owns it, and c's reference. */
struct cbfs_rajob {
    struct cbfs_pool_job pj;
    struct cbfs_file *f;
    uint64_t block;
    struct cbfs_index_entry e;
    struct cbfs_cache_ent *c;
};

/* ---- decoding one stored block ---- */

/* Is e still block b's entry? Lock held. */
static bool cbfs_file_entry_current(struct cbfs_file *f, uint64_t b,
                                    const struct cbfs_index_entry *e)
{
    cbfs_assert_held(&f->lock);
    const struct cbfs_index_entry *cur = cbfs_index_get(&f->idx, b);
    return cur && cur->generation == e->generation && cur->offset == e->offset;
}

/* cbfs_file_decode; quiet (read-ahead): a bad frame is neither logged nor
 * counted, since the reader that comes for the block decodes it again and
 * reports it then (one failed read, one log line, one read error). */
static cbfs_err cbfs_file_decode_as(struct cbfs_file *f, uint64_t b,
                                    const struct cbfs_index_entry *e, unsigned char **out,
                                    size_t *cap, bool quiet)
{
    struct cbfs_engine *eng = f->eng;
    /* The block comes from the engine's lists (a block's size, as the write
     * path's); so does the frame buffer when the frame fits the size of this
     * file's codec's frames. A bigger one (a block of another codec) gets a
     * buffer of its own, so no list takes an odd size. */
    const size_t dcap = f->bs; /* e->ulen <= block size: cbfs_index_apply */
    const size_t need = CBFS_FRAME_HDR_SIZE + (size_t)e->plen;
    const size_t fcap = cbfs_frame_bound(f->codec, f->bs);
    const bool own = need > fcap;
    unsigned char *data = cbfs_engine_buf_get(eng, dcap);
    unsigned char *scratch = own ? malloc(need) : cbfs_engine_buf_get(eng, fcap);
    cbfs_err err = CBFS_E_NOMEM;
    if (!data || !scratch) goto out;
    uint64_t t0 = cbfs_now_ns();
    err = CBFS_OK;
    if (!(e->flags & CBFS_FRAME_HOLE)) {
        err = cbfs_pread_full(f->data_fd, scratch, need, e->offset);
        if (!err) CBFS_STAT_ADD(eng, st_physical_read, need);
    }
    uint64_t t1 = cbfs_now_ns();
    CBFS_STAT_ADD(eng, st_ns_store_read, t1 - t0);
    if (!err) {
        err = cbfs_block_check_decode(e, b, scratch, data);
        CBFS_STAT_ADD(eng, st_ns_decompress, cbfs_now_ns() - t1);
    }
    if (err && !cbfs_mutex_held(&f->lock)) {
        /* An entry taken before the lock was dropped may have been replaced
         * (a rewrite, a truncate) and its frame punched since: no damage,
         * the caller looks again. */
        cbfs_mutex_lock(&f->lock);
        /* a code of its own: the store's ESTALE (an NFS store's stale
         * handle) is CBFS_E_STALE, an error to report, not a change to
         * look at again (a read would retry it for as long as it lasts) */
        if (!cbfs_file_entry_current(f, b, e)) err = CBFS_E_CHANGED;
        cbfs_mutex_unlock(&f->lock);
        if (err == CBFS_E_CHANGED) goto out;
    }
    if (err) {
        if (!quiet) {
            CBFS_STAT_ADD(eng, st_read_errors, 1);
            cbfs_log_err("%s: block %llu (logical offset %llu, %u bytes) at store offset %llu "
                         "is unreadable: %s",
                         f->name, (unsigned long long)b, (unsigned long long)(b * f->bs),
                         e->ulen, (unsigned long long)e->offset, cbfs_err_str(err));
        }
        goto out;
    }
    *out = data;
    *cap = dcap;
    data = NULL;
out:
    if (own)
        free(scratch);
    else
        cbfs_engine_buf_put(eng, scratch, fcap);
    cbfs_engine_buf_put(eng, data, dcap);
    return err;
}

cbfs_err cbfs_file_decode(struct cbfs_file *f, uint64_t b, const struct cbfs_index_entry *e,
                          unsigned char **out, size_t *cap)
{
    return cbfs_file_decode_as(f, b, e, out, cap, false);
}

/* A referenced, READY cache entry for block b, decoding it if needed.
 * Must be called WITHOUT f->lock (it may wait for another loader). */
static cbfs_err cbfs_file_load(struct cbfs_file *f, uint64_t b, const struct cbfs_index_entry *e,
                               struct cbfs_cache_ent **out)
{
    cbfs_assert_not_held(&f->lock);
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
    size_t cap = 0;
    cbfs_err err = cbfs_file_decode(f, b, e, &data, &cap);
    cbfs_cache_fill(eng->cache, c, data, e->ulen, cap, err == CBFS_OK);
    if (err) {
        cbfs_cache_put(eng->cache, c);
        return err;
    }
    *out = c;
    return CBFS_OK;
}

bool cbfs_file_mem_block(struct cbfs_file *f, uint64_t b, const unsigned char **data,
                         uint32_t *len)
{
    cbfs_assert_held(&f->lock);
    for (unsigned i = 0; i < f->nopen; i++) {
        if (f->open[i].block == b) {
            *data = f->open[i].data;
            *len = f->open[i].len;
            return true;
        }
    }
    bool found = false;
    for (struct cbfs_wjob *j = f->pend_head; j; j = j->next) {
        if (j->block == b && !j->dropped) { /* keep looking: the last match is the newest */
            *data = j->data;
            *len = j->len;
            found = true;
        }
    }
    return found;
}

cbfs_err cbfs_file_load_locked(struct cbfs_file *f, uint64_t b, unsigned char *buf,
                               uint32_t want, bool *stored)
{
    cbfs_assert_held(&f->lock);
    const unsigned char *mem;
    uint32_t len = 0;
    *stored = true;
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
                size_t cap;
                /* the write path's read: no read of the file (f->lock held,
                 * so no other such read meanwhile) */
                const int noatime = cbfs_noatime_begin(f->data_fd);
                cbfs_err err = cbfs_file_decode(f, b, e, &data, &cap);
                cbfs_noatime_end(f->data_fd, noatime);
                if (err) return err;
                len = e->ulen < want ? e->ulen : want;
                memcpy(buf, data, len);
                cbfs_engine_buf_put(f->eng, data, cap);
            }
        }
        *stored = e != NULL;
    }
    if (len < want) memset(buf + len, 0, want - len);
    return CBFS_OK;
}

/* ---- read path ---- */

static void cbfs_rajob_run(struct cbfs_pool_job *pj)
{
    struct cbfs_rajob *j = (struct cbfs_rajob *)pj;
    struct cbfs_file *f = j->f;
    unsigned char *data = NULL;
    size_t cap = 0;
    /* a failure (CBFS_E_CHANGED: the block changed since the job was
     * queued; or damage) fails the entry quietly: a reader decodes the
     * current entry itself, and reports damage then */
    cbfs_err err = cbfs_file_decode_as(f, j->block, &j->e, &data, &cap, true);
    cbfs_cache_fill(f->eng->cache, j->c, data, j->e.ulen, cap, err == CBFS_OK);
    cbfs_cache_put(f->eng->cache, j->c);
    cbfs_mutex_lock(&f->lock);
    f->ra_jobs--;
    pthread_cond_broadcast(&f->cond);
    cbfs_mutex_unlock(&f->lock);
    free(j);
}

/* Whether a read of blocks [first, last] continues the stream whose
 * furthest block read is f->ra_last. One reader's stream does not arrive in
 * order: the kernel's read-ahead keeps two or more of its READs in flight,
 * and the serving threads take them in any order, so the next read may come
 * after the one behind it. A read belongs to the stream when it starts at
 * most one read's length (plus 2 blocks) past the front, or behind it by at
 * most two such lengths plus the window. Before that, the stream had to go
 * strictly forward, and every swapped pair of READs restarted it at a window
 * of 0: reads swapped in pairs got no read-ahead at all. Lock held. */
static bool cbfs_file_ra_continues(const struct cbfs_file *f, uint64_t first, uint64_t last)
{
    cbfs_assert_held(&f->lock);
    if (f->ra_last == UINT64_MAX) return first == 0;
    const uint64_t slack = last - first + 3;
    return first <= f->ra_last + slack && first + 2 * slack + f->ra_window >= f->ra_last;
}

/* Sequential detection and read-ahead for a read of blocks [first, last].
 * The window starts at 2 blocks and doubles while the reader moves its
 * front forward, up to cfg.readahead, so a restore keeps every worker
 * decoding. Lock held; only non-blocking cache calls. */
static void cbfs_file_readahead(struct cbfs_file *f, uint64_t first, uint64_t last)
{
    cbfs_assert_held(&f->lock);
    struct cbfs_engine *eng = f->eng;
    unsigned max = eng->cfg.readahead;
    if (!max) return;
    const bool seq = cbfs_file_ra_continues(f, first, last);
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
        bool full;
        struct cbfs_cache_ent *c =
            cbfs_cache_reserve(eng->cache, f->serial, b, e->generation, f->bs, &full);
        if (full) { /* the cache's read-ahead budget: from b again at the next read */
            to = b - 1;
            break;
        }
        if (!c) continue; /* cached or loading already */
        struct cbfs_rajob *j = malloc(sizeof *j);
        if (!j) {
            cbfs_cache_fill(eng->cache, c, NULL, 0, 0, false);
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

/* The next n bytes of v in its own buffer, as a piece (merged with the last
 * piece when that one ends where these begin). NULL without memory. */
static unsigned char *cbfs_read_vec_own(struct cbfs_read_vec *v, size_t len, size_t n)
{
    if (!v->own && !(v->own = malloc(len ? len : 1))) return NULL;
    unsigned char *p = v->own + v->own_used;
    v->own_used += n;
    struct iovec *last = v->n ? &v->iov[v->n - 1] : NULL;
    if (last && (unsigned char *)last->iov_base + last->iov_len == p)
        last->iov_len += n;
    else
        v->iov[v->n++] = (struct iovec){p, n};
    return p;
}

/* Adds [boff, boff+n) of a block whose content is data[0..dlen): the content
 * by reference (pointing into data) unless copy, zeros past it in the vec's
 * buffer. @return false without memory. */
static bool cbfs_read_vec_part(struct cbfs_read_vec *v, size_t len, const unsigned char *data,
                               uint32_t dlen, uint32_t boff, uint32_t n, bool copy)
{
    uint32_t have = boff < dlen ? dlen - boff : 0;
    if (have > n) have = n;
    if (have) {
        if (copy) {
            unsigned char *p = cbfs_read_vec_own(v, len, have);
            if (!p) return false;
            memcpy(p, data + boff, have);
        } else {
            v->iov[v->n++] = (struct iovec){(void *)(data + boff), have};
        }
    }
    if (have < n) {
        unsigned char *p = cbfs_read_vec_own(v, len, n - have);
        if (!p) return false;
        memset(p, 0, n - have);
    }
    return true;
}

/* After a store failed (f->err), until a flush or fsync drops what was not
 * stored (cbfs_file_reset), the file reads as uncertain where that reset
 * will change it: past the prefix the store holds, and where a block's newer
 * version waits in memory, unstored. Is [off, off + len) clear of both, so
 * that it reads now as it will after (a reader of the part fsync'd before,
 * a mapping's page fault there: they failed with the writer's ENOSPC)?
 * Lock held. */
static bool cbfs_file_read_kept(struct cbfs_file *f, size_t len, uint64_t off)
{
    cbfs_assert_held(&f->lock);
    const uint64_t kept = f->idx.size < f->broken_size ? f->idx.size : f->broken_size;
    /* What the read gets is what lies below the size: a read of the file's
     * last page, or one longer than the file (cat, readahead, a mapping's
     * fault of the last page), asks for more. At or past the end it gets
     * nothing, and so it does after the reset where that end is the
     * reset's; one that reaches the end reads the same after only where the
     * reset leaves that end. */
    if (off >= f->size) return off >= kept;
    if (len >= f->size - off) {
        len = (size_t)(f->size - off);
        if (f->size != kept) return false;
    }
    if (!len || off >= kept || len > kept - off) return false;
    for (uint64_t b = off / f->bs; b <= (off + len - 1) / f->bs; b++) {
        const unsigned char *mem;
        uint32_t mlen;
        if (cbfs_file_mem_block(f, b, &mem, &mlen)) return false;
    }
    return true;
}

cbfs_err cbfs_file_read_vec(struct cbfs_file *f, size_t len, uint64_t off,
                            struct cbfs_read_vec *v, size_t *got)
{
    cbfs_err err = CBFS_OK;
    size_t done = 0;
    memset(v, 0, sizeof *v);
    v->cache = f->eng->cache;
    *got = 0;
    cbfs_mutex_lock(&f->lock);
    if (f->err && !cbfs_file_read_kept(f, len, off)) {
        /* Blocks failed to store and the writer has not been told yet: what
         * the read asks for is uncertain until flush/fsync reports it. */
        err = f->err;
        len = 0;
    } else if (off >= f->size) len = 0;
    else if (len > f->size - off) len = (size_t)(f->size - off);
    /* at most two pieces per block (content, zeros past it) */
    const size_t cap = len ? 2 * (len / f->bs + 2) : 0;
    if (cap) {
        v->iov = malloc(cap * sizeof *v->iov);
        v->held = malloc(cap * sizeof *v->held);
        if (!v->iov || !v->held) {
            err = CBFS_E_NOMEM;
            len = 0;
        }
    }
    if (len) cbfs_file_readahead(f, off / f->bs, (off + len - 1) / f->bs);
    while (done < len) {
        uint64_t pos = off + done;
        /* the lock was dropped for the last block: a truncate since makes a
         * short read, as if it came first */
        if (pos >= f->size) break;
        uint64_t b = pos / f->bs;
        uint32_t boff = (uint32_t)(pos % f->bs);
        uint32_t n = f->bs - boff < len - done ? f->bs - boff : (uint32_t)(len - done);
        if (n > f->size - pos) n = (uint32_t)(f->size - pos);
        const unsigned char *mem;
        uint32_t mlen;
        const struct cbfs_index_entry *ep = cbfs_index_get(&f->idx, b);
        if (cbfs_file_mem_block(f, b, &mem, &mlen)) {
            /* may change once the lock goes: copied */
            if (!cbfs_read_vec_part(v, len, mem, mlen, boff, n, true)) err = CBFS_E_NOMEM;
        } else if (!ep || (ep->flags & CBFS_FRAME_HOLE)) {
            if (!cbfs_read_vec_part(v, len, NULL, 0, boff, n, true)) err = CBFS_E_NOMEM;
        } else {
            struct cbfs_index_entry e = *ep;
            struct cbfs_cache_ent *c;
            cbfs_mutex_unlock(&f->lock);
            err = cbfs_file_load(f, b, &e, &c);
            if (!err) {
                v->held[v->nheld++] = c; /* READY: data immutable while held */
                if (!cbfs_read_vec_part(v, len, c->data, c->len, boff, n, false))
                    err = CBFS_E_NOMEM;
            }
            cbfs_mutex_lock(&f->lock);
            if (err == CBFS_E_CHANGED) { /* the block changed meanwhile: look again */
                err = CBFS_OK;
                continue;
            }
            /* a store that failed meanwhile: uncertain unless kept (as above) */
            if (!err && f->err && !cbfs_file_read_kept(f, n, pos)) err = f->err;
        }
        if (err) break;
        done += n;
    }
    cbfs_mutex_unlock(&f->lock);
    CBFS_STAT_ADD(f->eng, st_logical_read, done);
    *got = done;
    return err;
}

void cbfs_read_vec_free(struct cbfs_read_vec *v)
{
    for (unsigned i = 0; i < v->nheld; i++) cbfs_cache_put(v->cache, v->held[i]);
    free(v->held);
    free(v->iov);
    free(v->own);
    memset(v, 0, sizeof *v);
}

cbfs_err cbfs_file_read(struct cbfs_file *f, void *buf, size_t len, uint64_t off, size_t *got)
{
    struct cbfs_read_vec v;
    cbfs_err err = cbfs_file_read_vec(f, len, off, &v, got);
    unsigned char *dst = buf;
    for (unsigned i = 0; i < v.n; i++) {
        memcpy(dst, v.iov[i].iov_base, v.iov[i].iov_len);
        dst += v.iov[i].iov_len;
    }
    cbfs_read_vec_free(&v);
    return err;
}

cbfs_err cbfs_file_seek(struct cbfs_file *f, uint64_t off, bool data, uint64_t *out)
{
    cbfs_err err = CBFS_E_NXIO;
    cbfs_mutex_lock(&f->lock);
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
    cbfs_mutex_unlock(&f->lock);
    return err;
}

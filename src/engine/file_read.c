/* The read side of an engine file: a block's newest content comes from memory
 * (open or sealed blocks), then the decompressed-block cache, then the store;
 * sequential readers get read-ahead on the pool. Also SEEK_DATA/SEEK_HOLE. */
#include <stdlib.h>
#include <string.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

struct cbfs_rajob {
    struct cbfs_pool_job pj;
    struct cbfs_file *f;
    uint64_t block;
    struct cbfs_index_entry e;
    struct cbfs_cache_ent *c;
};

/* ---- decoding one stored block ---- */

cbfs_err cbfs_file_decode(struct cbfs_file *f, uint64_t b, const struct cbfs_index_entry *e,
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
        CBFS_STAT_ADD(eng, st_read_errors, 1);
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
        if (j->block == b) { /* keep looking: the last match is the newest */
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
                cbfs_err err = cbfs_file_decode(f, b, e, &data);
                if (err) return err;
                len = e->ulen < want ? e->ulen : want;
                memcpy(buf, data, len);
                free(data);
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
    cbfs_err err = cbfs_file_decode(f, j->block, &j->e, &data);
    cbfs_cache_fill(f->eng->cache, j->c, data, j->e.ulen, err == CBFS_OK, true);
    cbfs_cache_put(f->eng->cache, j->c);
    cbfs_mutex_lock(&f->lock);
    f->ra_jobs--;
    pthread_cond_broadcast(&f->cond);
    cbfs_mutex_unlock(&f->lock);
    free(j);
}

/* Sequential detection and read-ahead for a read of blocks [first, last].
 * The window starts at 2 blocks and doubles while the reader keeps going
 * forward, up to cfg.readahead, so a restore keeps every worker decoding.
 * Lock held; only non-blocking cache calls. */
static void cbfs_file_readahead(struct cbfs_file *f, uint64_t first, uint64_t last)
{
    cbfs_assert_held(&f->lock);
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
    cbfs_mutex_lock(&f->lock);
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
            cbfs_mutex_unlock(&f->lock);
            err = cbfs_file_load(f, b, &e, &c);
            if (!err) {
                cbfs_copy_part(dst + done, c->data, c->len, boff, n);
                cbfs_cache_put(f->eng->cache, c);
            }
            cbfs_mutex_lock(&f->lock);
            if (err) break;
        }
        done += n;
    }
    cbfs_mutex_unlock(&f->lock);
    CBFS_STAT_ADD(f->eng, st_logical_read, done);
    *got = done;
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

/* Engine lifetime, the in-flight byte budget that gives writers backpressure,
 * and the statistics snapshot. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/util.h"
#include "engine/engine_impl.h"

void cbfs_engine_get_config(const struct cbfs_engine *eng, struct cbfs_engine_config *cfg)
{
    *cfg = eng->cfg;
}

/* The cache's release hook: decoded blocks go back to the buffer lists, so a
 * restore reuses them instead of faulting in fresh memory for every block. */
static void cbfs_engine_buf_release(void *arg, void *data, size_t cap)
{
    cbfs_engine_buf_put(arg, data, cap);
}

cbfs_err cbfs_engine_create(const struct cbfs_engine_config *cfg, struct cbfs_engine **out)
{
    uint32_t bs = cfg->block_size;
    /* No cache size of its own: the settings table's cache_size is the one
     * default (src/store/settings.c), and a store beside the engine cannot be
     * included from here (ENGINE.md, Layers). */
    if (!cbfs_block_size_valid(bs) || !cfg->cache_bytes) return CBFS_E_INVAL;
    struct cbfs_engine *eng = calloc(1, sizeof *eng);
    if (!eng) return CBFS_E_NOMEM;
    eng->cfg = *cfg;
    if (!eng->cfg.workers) {
        long n = sysconf(_SC_NPROCESSORS_ONLN);
        eng->cfg.workers = n > 0 ? (unsigned)n : 1;
    }
    if (!eng->cfg.sync_lag_bytes) eng->cfg.sync_lag_bytes = CBFS_SYNC_LAG;
    /* The budget must cover what the workers compress plus what waits behind
     * the per-file committers (store writes, write-behind) and in the reorder
     * window: bytes, in proportion to the workers' throughput. Four blocks per
     * worker (the rule before) starved 16 workers: FUSE threads waited on the
     * budget while the pool idled; 16 MiB per worker measured best there
     * (docs/PERF.md, "16-core figures", point 1). At most CBFS_INFLIGHT_MAX for
     * many workers; blocks of 4 MiB and more keep four per worker. */
    if (!eng->cfg.inflight_bytes) {
        uint64_t b = CBFS_INFLIGHT_PER_WORKER * eng->cfg.workers;
        if (b > CBFS_INFLIGHT_MAX) b = CBFS_INFLIGHT_MAX;
        const uint64_t blocks = 4ull * bs * eng->cfg.workers;
        eng->cfg.inflight_bytes = b < blocks ? blocks : b;
    }
    pthread_mutex_init(&eng->lock, NULL);
    pthread_cond_init(&eng->budget, NULL);
    eng->next_serial = 1;
    cbfs_err e = cbfs_cache_create(eng->cfg.cache_bytes, cbfs_engine_buf_release, eng, &eng->cache);
    if (e) goto fail;
    e = cbfs_pool_create(eng->cfg.workers, &eng->pool);
    if (e) goto fail;
    *out = eng;
    return CBFS_OK;
fail:
    cbfs_engine_destroy(eng);
    return e;
}

void *cbfs_engine_buf_get(struct cbfs_engine *eng, size_t size)
{
    void *buf = NULL;
    pthread_mutex_lock(&eng->lock);
    for (int i = 0; i < CBFS_BUF_CLASSES; i++) {
        struct cbfs_bufclass *c = &eng->bufs[i];
        if (c->size == size && c->head) {
            buf = c->head;
            memcpy(&c->head, buf, sizeof c->head);
            c->count--;
            break;
        }
    }
    pthread_mutex_unlock(&eng->lock);
    return buf ? buf : malloc(size < sizeof(void *) ? sizeof(void *) : size);
}

void cbfs_engine_buf_put(struct cbfs_engine *eng, void *buf, size_t size)
{
    if (!buf) return;
    const uint64_t max = eng->cfg.inflight_bytes / (size ? size : 1) + 8;
    pthread_mutex_lock(&eng->lock);
    struct cbfs_bufclass *c = NULL;
    for (int i = 0; i < CBFS_BUF_CLASSES && !c; i++)
        if (eng->bufs[i].size == size) c = &eng->bufs[i];
    for (int i = 0; i < CBFS_BUF_CLASSES && !c; i++)
        if (eng->bufs[i].size == 0 || eng->bufs[i].count == 0) {
            c = &eng->bufs[i]; /* a free or drained class takes the new size */
            c->size = size;
        }
    if (c && size >= sizeof(void *) && c->count < max) {
        memcpy(buf, &c->head, sizeof c->head);
        c->head = buf;
        c->count++;
        buf = NULL;
    }
    pthread_mutex_unlock(&eng->lock);
    free(buf);
}

void cbfs_engine_destroy(struct cbfs_engine *eng)
{
    if (!eng) return;
    cbfs_pool_destroy(eng->pool);
    cbfs_cache_destroy(eng->cache);
    for (int i = 0; i < CBFS_BUF_CLASSES; i++) {
        void *b = eng->bufs[i].head;
        while (b) {
            void *next;
            memcpy(&next, b, sizeof next);
            free(b);
            b = next;
        }
    }
    pthread_cond_destroy(&eng->budget);
    pthread_mutex_destroy(&eng->lock);
    free(eng);
}

void cbfs_engine_budget_take(struct cbfs_engine *eng, uint64_t bytes)
{
    pthread_mutex_lock(&eng->lock);
    eng->inflight += bytes;
    pthread_mutex_unlock(&eng->lock);
}

void cbfs_engine_budget_wait(struct cbfs_engine *eng)
{
    pthread_mutex_lock(&eng->lock);
    if (eng->inflight > eng->cfg.inflight_bytes) {
        uint64_t t0 = cbfs_now_ns();
        eng->budget_waiters++;
        while (eng->inflight > eng->cfg.inflight_bytes) pthread_cond_wait(&eng->budget, &eng->lock);
        eng->budget_waiters--;
        CBFS_STAT_ADD(eng, st_ns_wait_slots, cbfs_now_ns() - t0);
    }
    pthread_mutex_unlock(&eng->lock);
}

void cbfs_engine_budget_drop(struct cbfs_engine *eng, uint64_t bytes)
{
    pthread_mutex_lock(&eng->lock);
    eng->inflight -= bytes;
    /* Only a drop to the bound can end a wait: the others would wake every
     * waiting writer (on a saturated machine, all of them, per block) to
     * find the budget still over and sleep again. */
    if (eng->budget_waiters && eng->inflight <= eng->cfg.inflight_bytes)
        pthread_cond_broadcast(&eng->budget);
    pthread_mutex_unlock(&eng->lock);
}

uint64_t cbfs_engine_new_serial(struct cbfs_engine *eng)
{
    pthread_mutex_lock(&eng->lock);
    uint64_t s = eng->next_serial++;
    pthread_mutex_unlock(&eng->lock);
    return s;
}

void cbfs_engine_count_write_error(struct cbfs_engine *eng)
{
    CBFS_STAT_ADD(eng, st_write_errors, 1);
}

void cbfs_engine_count_plain_write(struct cbfs_engine *eng, uint64_t bytes)
{
    CBFS_STAT_ADD(eng, st_logical_written, bytes);
    CBFS_STAT_ADD(eng, st_physical_written, bytes);
}

void cbfs_engine_count_plain_read(struct cbfs_engine *eng, uint64_t bytes)
{
    CBFS_STAT_ADD(eng, st_logical_read, bytes);
    CBFS_STAT_ADD(eng, st_physical_read, bytes);
}

void cbfs_engine_get_stats(struct cbfs_engine *eng, struct cbfs_engine_stats *st)
{
#define CBFS_LOAD_(name) st->name = atomic_load_explicit(&eng->st_##name, memory_order_relaxed);
    CBFS_ENGINE_COUNTERS(CBFS_LOAD_)
#undef CBFS_LOAD_
    pthread_mutex_lock(&eng->lock);
    st->inflight_bytes = eng->inflight;
    pthread_mutex_unlock(&eng->lock);
}

/* The worker pool: one FIFO, one mutex, one condition variable, a shutdown
 * flag (zstd's lib/common/pool.c, minus the bounded ring: cbfs bounds work by
 * bytes in flight, see engine.h). */
#include <errno.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

#include "cbfs/pool.h"

struct cbfs_pool {
    pthread_mutex_t lock;
    pthread_cond_t wake;              /* signalled on submit and shutdown */
    struct cbfs_pool_job *head, *tail; /* queued jobs: lock */
    bool shutdown;                    /* lock */
    unsigned nthreads;                /* immutable after create */
    pthread_t *threads;               /* immutable after create */
};

static void *cbfs_pool_main(void *arg)
{
    struct cbfs_pool *pool = arg;
    /* A name for profiles and /proc/PID/task (perf/ddbench tells pool CPU from the
     * FUSE threads' by it); failure only costs the name. */
    (void)pthread_setname_np(pthread_self(), "cbfs-pool");
    pthread_mutex_lock(&pool->lock);
    for (;;) {
        while (!pool->head && !pool->shutdown) pthread_cond_wait(&pool->wake, &pool->lock);
        struct cbfs_pool_job *job = pool->head;
        if (!job) break; /* shutdown and drained */
        pool->head = job->next;
        if (!pool->head) pool->tail = NULL;
        pthread_mutex_unlock(&pool->lock);
        job->fn(job);
        pthread_mutex_lock(&pool->lock);
    }
    pthread_mutex_unlock(&pool->lock);
    return NULL;
}

cbfs_err cbfs_pool_create(unsigned threads, struct cbfs_pool **out)
{
    if (threads == 0) return CBFS_E_INVAL;
    struct cbfs_pool *pool = calloc(1, sizeof *pool);
    if (!pool) return CBFS_E_NOMEM;
    pool->threads = calloc(threads, sizeof *pool->threads);
    if (!pool->threads) goto fail_alloc;
    pthread_mutex_init(&pool->lock, NULL);
    pthread_cond_init(&pool->wake, NULL);
    for (unsigned i = 0; i < threads; i++) {
        const int rc = pthread_create(&pool->threads[i], NULL, cbfs_pool_main, pool);
        if (rc != 0) {
            /* EAGAIN: a thread or process limit, or no memory for the
             * stack (helper-57, helper-58); not the store's I/O error this
             * used to say, which sent an admin to the disks */
            pool->nthreads = i;
            cbfs_pool_destroy(pool);
            return rc == EAGAIN ? CBFS_E_THREADS : cbfs_err_from_errno(rc);
        }
    }
    pool->nthreads = threads;
    *out = pool;
    return CBFS_OK;
fail_alloc:
    free(pool);
    return CBFS_E_NOMEM;
}

void cbfs_pool_submit(struct cbfs_pool *pool, struct cbfs_pool_job *job)
{
    job->next = NULL;
    pthread_mutex_lock(&pool->lock);
    if (pool->tail)
        pool->tail->next = job;
    else
        pool->head = job;
    pool->tail = job;
    pthread_cond_signal(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
}

unsigned cbfs_pool_threads(const struct cbfs_pool *pool)
{
    return pool->nthreads;
}

void cbfs_pool_destroy(struct cbfs_pool *pool)
{
    if (!pool) return;
    pthread_mutex_lock(&pool->lock);
    pool->shutdown = true;
    pthread_cond_broadcast(&pool->wake);
    pthread_mutex_unlock(&pool->lock);
    for (unsigned i = 0; i < pool->nthreads; i++) pthread_join(pool->threads[i], NULL);
    pthread_cond_destroy(&pool->wake);
    pthread_mutex_destroy(&pool->lock);
    free(pool->threads);
    free(pool);
}

/* Worker pool: N threads taking intrusive jobs from one FIFO. The pool does
 * not bound its queue; callers bound the work they submit (the engine's
 * in-flight byte budget), so submit never blocks and never allocates. */
#ifndef CBFS_POOL_H
#define CBFS_POOL_H

#include "cbfs/err.h"

struct cbfs_pool;

/* Embedded in the caller's job struct; fn recovers it with container_of-style
 * arithmetic. fn runs on a pool thread and owns the job from then on. */
struct cbfs_pool_job {
    void (*fn)(struct cbfs_pool_job *job);
    struct cbfs_pool_job *next; /* pool-private: protected by the pool mutex */
};

/* @return CBFS_E_INVAL for 0 threads, CBFS_E_NOMEM, or CBFS_E_THREADS if
 * threads cannot be created (any started ones are stopped again). */
cbfs_err cbfs_pool_create(unsigned threads, struct cbfs_pool **out);
void cbfs_pool_submit(struct cbfs_pool *pool, struct cbfs_pool_job *job);
unsigned cbfs_pool_threads(const struct cbfs_pool *pool);
/* Runs every job already queued, then joins the threads. NULL is a no-op. */
void cbfs_pool_destroy(struct cbfs_pool *pool);

#endif

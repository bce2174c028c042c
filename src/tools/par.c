/* Running many small tasks on the worker pool (include/cbfs/pool.h) from the
 * cbfs command: one job per pool thread, each taking the next task index from
 * a shared counter, so per-thread scratch buffers are reused and a task list
 * of any length costs no memory. The caller waits, ticking a progress hook. */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "cbfs/pool.h"
#include "tools/tool.h"

struct tool_par {
    void (*fn)(void *arg, unsigned slot, size_t i);
    void *arg;
    size_t n;
    atomic_size_t next;     /* next task index to hand out */
    pthread_mutex_t lock;
    pthread_cond_t done_cv;
    unsigned running;       /* jobs not finished yet; protected by lock */
};

struct tool_par_job {
    struct cbfs_pool_job job; /* first member: the pool hands this back */
    struct tool_par *par;
    unsigned slot;
};

static void tool_par_job_run(struct cbfs_pool_job *pj)
{
    struct tool_par_job *const j = (struct tool_par_job *)pj;
    struct tool_par *const p = j->par;
    for (;;) {
        const size_t i = atomic_fetch_add(&p->next, 1);
        if (i >= p->n) break;
        p->fn(p->arg, j->slot, i);
    }
    pthread_mutex_lock(&p->lock);
    if (--p->running == 0) pthread_cond_signal(&p->done_cv);
    pthread_mutex_unlock(&p->lock);
}

cbfs_err tool_par_run(struct cbfs_pool *pool, size_t n,
                      void (*fn)(void *arg, unsigned slot, size_t i), void *arg,
                      void (*tick)(void *arg))
{
    if (n == 0) return CBFS_OK;
    unsigned threads = cbfs_pool_threads(pool);
    if (threads > n) threads = (unsigned)n;
    struct tool_par_job *const jobs = calloc(threads, sizeof *jobs);
    if (!jobs) return CBFS_E_NOMEM;
    struct tool_par p = {.fn = fn, .arg = arg, .n = n, .running = threads};
    atomic_init(&p.next, 0);
    pthread_mutex_init(&p.lock, NULL);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&p.done_cv, &ca);
    pthread_condattr_destroy(&ca);
    for (unsigned t = 0; t < threads; t++) {
        jobs[t].job.fn = tool_par_job_run;
        jobs[t].par = &p;
        jobs[t].slot = t;
        cbfs_pool_submit(pool, &jobs[t].job);
    }
    pthread_mutex_lock(&p.lock);
    while (p.running > 0) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        ts.tv_nsec += 200 * 1000 * 1000;
        if (ts.tv_nsec >= 1000000000L) {
            ts.tv_sec++;
            ts.tv_nsec -= 1000000000L;
        }
        pthread_cond_timedwait(&p.done_cv, &p.lock, &ts);
        if (tick && p.running > 0) {
            pthread_mutex_unlock(&p.lock);
            tick(arg);
            pthread_mutex_lock(&p.lock);
        }
    }
    pthread_mutex_unlock(&p.lock);
    pthread_cond_destroy(&p.done_cv);
    pthread_mutex_destroy(&p.lock);
    free(jobs);
    return CBFS_OK;
}

unsigned tool_ncpus(void)
{
    const long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (unsigned)n : 1;
}

/* The worker pool (cbfs/pool.h) on its own: FIFO order, every queued job run
 * before destroy returns (also jobs queued by jobs), N threads busy at once,
 * jobs run on pool threads and own themselves (ASan: no leak). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cbfs/pool.h"
#include "aslimit.h"

struct pt_job {
    struct cbfs_pool_job pj; /* first: fn casts back */
    unsigned id;
    pthread_t ran_on;
};

static pthread_mutex_t pt_lock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t pt_cond = PTHREAD_COND_INITIALIZER;
static unsigned pt_order[1000], pt_count; /* pt_lock */
static bool pt_gate_open;                  /* pt_lock */
static unsigned pt_started;                /* pt_lock */

static void pt_record(struct cbfs_pool_job *pj)
{
    struct pt_job *j = (struct pt_job *)pj;
    pthread_mutex_lock(&pt_lock);
    pt_order[pt_count++] = j->id;
    pthread_mutex_unlock(&pt_lock);
    free(j); /* the job is the pool thread's from the moment fn runs */
}

static void pt_submit(struct cbfs_pool *pool, void (*fn)(struct cbfs_pool_job *), unsigned id)
{
    struct pt_job *j = calloc(1, sizeof *j);
    cr_assert_not_null(j);
    j->pj.fn = fn;
    j->id = id;
    cbfs_pool_submit(pool, &j->pj);
}

static unsigned pt_counted(void)
{
    pthread_mutex_lock(&pt_lock);
    const unsigned n = pt_count;
    pthread_mutex_unlock(&pt_lock);
    return n;
}

Test(pool, create_checks_its_argument)
{
    struct cbfs_pool *pool = NULL;
    cr_assert_eq(cbfs_pool_create(0, &pool), CBFS_E_INVAL);
    cr_assert_null(pool);
    cr_assert_eq(cbfs_pool_create(3, &pool), CBFS_OK);
    cr_assert_eq(cbfs_pool_threads(pool), 3);
    cbfs_pool_destroy(pool);
    cbfs_pool_destroy(NULL);
}

#ifndef CBFS_TD_SANITIZED /* aslimit.h */
/* A pool whose threads cannot get their stacks (the address space capped just
 * above what is mapped; a test is a process of its own) fails with
 * CBFS_E_THREADS, whose message says so, not with an I/O error of the store
 * (helper-57), and leaves nothing behind. */
Test(pool, create_without_memory_says_so)
{
    struct cbfs_pool *pool = NULL;
    const struct rlimit old = cbfs_td_as_squeeze(1u << 20);
    const cbfs_err e = cbfs_pool_create(4, &pool);
    cbfs_td_as_restore(old);
    cr_assert_eq(e, CBFS_E_THREADS, "got %s", cbfs_err_str(e));
    cr_assert_not_null(strstr(cbfs_err_str(e), "memory"), "%s", cbfs_err_str(e));
    cr_assert_null(pool);
}
#endif

Test(pool, one_thread_runs_jobs_in_submission_order)
{
    struct cbfs_pool *pool;
    cr_assert_eq(cbfs_pool_create(1, &pool), CBFS_OK);
    for (unsigned i = 0; i < 1000; i++) pt_submit(pool, pt_record, i);
    cbfs_pool_destroy(pool);
    cr_assert_eq(pt_count, 1000);
    for (unsigned i = 0; i < 1000; i++)
        cr_assert_eq(pt_order[i], i, "job %u ran at %u", pt_order[i], i);
}

/* Holds its pool thread until the gate opens. */
static void pt_blocker(struct cbfs_pool_job *pj)
{
    pthread_mutex_lock(&pt_lock);
    pt_started++;
    pthread_cond_broadcast(&pt_cond);
    while (!pt_gate_open) pthread_cond_wait(&pt_cond, &pt_lock);
    pthread_mutex_unlock(&pt_lock);
    free(pj);
}

static void pt_gate_set(bool open)
{
    pthread_mutex_lock(&pt_lock);
    pt_gate_open = open;
    pthread_cond_broadcast(&pt_cond);
    pthread_mutex_unlock(&pt_lock);
}

static void pt_wait_started(unsigned n)
{
    pthread_mutex_lock(&pt_lock);
    while (pt_started < n) pthread_cond_wait(&pt_cond, &pt_lock);
    pthread_mutex_unlock(&pt_lock);
}

Test(pool, destroy_runs_every_queued_job, .timeout = 30)
{
    struct cbfs_pool *pool;
    cr_assert_eq(cbfs_pool_create(2, &pool), CBFS_OK);
    pt_submit(pool, pt_blocker, 0);
    pt_submit(pool, pt_blocker, 0);
    pt_wait_started(2); /* both threads busy at once (else a timeout): the rest stays queued */
    for (unsigned i = 0; i < 500; i++) pt_submit(pool, pt_record, i);
    cr_assert_eq(pt_counted(), 0);
    pt_gate_set(true);
    cbfs_pool_destroy(pool);
    cr_assert_eq(pt_count, 500, "destroy returned with %u of 500 queued jobs run", pt_count);
}

/* Job i submits job i+1 until 50: a queue that refills during shutdown. It
 * records itself first: recording after the submit let job i+1 run on the
 * other worker and record before job i (a CI run failed the order check). */
static struct cbfs_pool *pt_chain_pool;

static void pt_chain(struct cbfs_pool_job *pj)
{
    struct pt_job *j = (struct pt_job *)pj;
    const unsigned next = j->id + 1;
    pt_record(pj);
    if (next < 50) pt_submit(pt_chain_pool, pt_chain, next);
}

Test(pool, jobs_queued_by_jobs_run_before_destroy_returns, .timeout = 30)
{
    cr_assert_eq(cbfs_pool_create(2, &pt_chain_pool), CBFS_OK);
    pt_submit(pt_chain_pool, pt_chain, 0);
    cbfs_pool_destroy(pt_chain_pool);
    cr_assert_eq(pt_count, 50);
    for (unsigned i = 0; i < 50; i++) cr_assert_eq(pt_order[i], i);
}

static void pt_where(struct cbfs_pool_job *pj)
{
    struct pt_job *j = (struct pt_job *)pj;
    j->ran_on = pthread_self();
}

Test(pool, jobs_run_on_pool_threads)
{
    struct cbfs_pool *pool;
    cr_assert_eq(cbfs_pool_create(2, &pool), CBFS_OK);
    struct pt_job j = {.pj.fn = pt_where, .ran_on = pthread_self()};
    cbfs_pool_submit(pool, &j.pj);
    cbfs_pool_destroy(pool); /* joins: j.ran_on is visible */
    cr_assert(!pthread_equal(j.ran_on, pthread_self()), "the job ran on the submitter");
}

/* struct cbfs_mutex (cbfs/mutex.h): cbfs_mutex_held is true exactly for the
 * thread that holds the lock, and a caller that breaks a "caller holds"
 * contract aborts (in builds with assert()). */
#include <criterion/criterion.h>
#include <pthread.h>
#include <signal.h>

#include "cbfs/mutex.h"

static struct cbfs_mutex mx_lock;
static pthread_cond_t mx_cond = PTHREAD_COND_INITIALIZER;
static bool mx_flag;

static void *mx_held_elsewhere(void *arg)
{
    (void)arg;
    return (void *)(uintptr_t)cbfs_mutex_held(&mx_lock);
}

Test(mutex, held_only_by_the_holder)
{
    cbfs_mutex_init(&mx_lock);
    cr_assert(!cbfs_mutex_held(&mx_lock));
    cbfs_mutex_lock(&mx_lock);
    cr_assert(cbfs_mutex_held(&mx_lock));
    pthread_t t;
    void *other;
    cr_assert_eq(pthread_create(&t, NULL, mx_held_elsewhere, NULL), 0);
    pthread_join(t, &other);
    cr_assert_eq((uintptr_t)other, 0, "another thread sees the lock as its own");
    cbfs_mutex_unlock(&mx_lock);
    cr_assert(!cbfs_mutex_held(&mx_lock));
    cbfs_mutex_destroy(&mx_lock);
}

static void *mx_signaller(void *arg)
{
    (void)arg;
    cbfs_mutex_lock(&mx_lock); /* possible only while the waiter sleeps */
    const bool mine = cbfs_mutex_held(&mx_lock);
    mx_flag = true;
    pthread_cond_signal(&mx_cond);
    cbfs_mutex_unlock(&mx_lock);
    return (void *)(uintptr_t)mine;
}

Test(mutex, wait_hands_the_lock_over_and_back)
{
    cbfs_mutex_init(&mx_lock);
    cbfs_mutex_lock(&mx_lock);
    pthread_t t;
    cr_assert_eq(pthread_create(&t, NULL, mx_signaller, NULL), 0);
    while (!mx_flag) cbfs_mutex_wait(&mx_lock, &mx_cond);
    cr_assert(cbfs_mutex_held(&mx_lock), "the waiter owns the lock again after the wait");
    cbfs_mutex_unlock(&mx_lock);
    void *mine;
    pthread_join(t, &mine);
    cr_assert_eq((uintptr_t)mine, 1, "the signaller owned the lock while the waiter slept");
    cbfs_mutex_destroy(&mx_lock);
}

#ifndef NDEBUG
Test(mutex, unlock_without_holding_aborts, .signal = SIGABRT)
{
    cbfs_mutex_init(&mx_lock);
    cbfs_mutex_unlock(&mx_lock);
}

Test(mutex, assert_held_aborts_when_not_held, .signal = SIGABRT)
{
    cbfs_mutex_init(&mx_lock);
    cbfs_assert_held(&mx_lock);
}
#endif

/* Signals that stop the daemon: stop.h. */
#include <errno.h>
#include <pthread.h>
#include <semaphore.h>
#include <signal.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "fuse/stop.h"

extern char **environ;

static const int cbfs_stop_sigs[] = {SIGTERM, SIGINT, SIGHUP};
#define CBFS_STOP_NSIGS (sizeof cbfs_stop_sigs / sizeof cbfs_stop_sigs[0])

/* Set by cbfs_stop_start before the handlers go in, read by them. */
static struct fuse_session *cbfs_stop_se;
static char *cbfs_stop_mnt;
static pthread_t cbfs_stop_loop; /* the thread that runs the loop */
static pthread_t cbfs_stop_thread;
static sem_t cbfs_stop_sem; /* posted by the first signal, and by cbfs_stop_finish */
static struct sigaction cbfs_stop_old[CBFS_STOP_NSIGS];
static bool cbfs_stop_running; /* the loop's thread only */

static atomic_uint cbfs_stop_signals; /* handlers: signals so far */
static volatile sig_atomic_t cbfs_stop_first; /* the first one's number */
static atomic_bool cbfs_stop_over; /* the loop ended: the thread leaves */

/* Async-signal-safe: sem_post, pthread_kill, and libfuse's flag store
 * (its own handler calls fuse_session_exit from here too). */
static void cbfs_stop_handler(int sig)
{
    if (atomic_fetch_add(&cbfs_stop_signals, 1) == 0) {
        cbfs_stop_first = sig;
        sem_post(&cbfs_stop_sem);
        return;
    }
    fuse_session_exit(cbfs_stop_se);
    /* the loop's thread waits in sem_wait, which only a signal to it ends */
    if (!pthread_equal(pthread_self(), cbfs_stop_loop)) pthread_kill(cbfs_stop_loop, sig);
}

/* Detaches the mount: umount2(MNT_DETACH) for root, else fusermount3 -u -z
 * (a user mount). @return 0 or errno. */
static int cbfs_stop_detach(const char *mnt)
{
    if (geteuid() == 0) return umount2(mnt, MNT_DETACH) == 0 ? 0 : errno;
    char *argv[] = {"fusermount3", "-u", "-z", (char *)mnt, NULL};
    pid_t pid;
    const int err = posix_spawnp(&pid, "fusermount3", NULL, NULL, argv, environ);
    if (err) return err;
    int status;
    while (waitpid(pid, &status, 0) == -1)
        if (errno != EINTR) return errno;
    return WIFEXITED(status) && WEXITSTATUS(status) == 0 ? 0 : EPERM;
}

static void *cbfs_stop_main(void *arg)
{
    (void)arg;
    sigset_t all;
    sigfillset(&all);
    pthread_sigmask(SIG_BLOCK, &all, NULL); /* signals go to the loop's thread */
    while (sem_wait(&cbfs_stop_sem) == -1 && errno == EINTR) {
    }
    if (atomic_load(&cbfs_stop_over)) return NULL;
    const int sig = cbfs_stop_first;
    cbfs_log_info("%s: detaching %s; files still open on it are served until they are "
                  "closed, then the daemon exits (a second signal stops it at once, losing what "
                  "the kernel still holds for them)",
                  strsignal(sig), cbfs_stop_mnt);
    const int err = cbfs_stop_detach(cbfs_stop_mnt);
    if (err) {
        cbfs_log_err("cannot detach %s (%s): stopping at once", cbfs_stop_mnt, strerror(err));
        atomic_fetch_add(&cbfs_stop_signals, 1); /* as a second signal */
        fuse_session_exit(cbfs_stop_se);
        pthread_kill(cbfs_stop_loop, sig);
    }
    return NULL;
}

int cbfs_stop_start(struct fuse_session *se, const char *mnt)
{
    cbfs_stop_se = se;
    cbfs_stop_loop = pthread_self();
    cbfs_stop_mnt = strdup(mnt);
    if (!cbfs_stop_mnt) return ENOMEM;
    if (sem_init(&cbfs_stop_sem, 0, 0) != 0 ||
        pthread_create(&cbfs_stop_thread, NULL, cbfs_stop_main, NULL) != 0) {
        free(cbfs_stop_mnt);
        cbfs_stop_mnt = NULL;
        return EAGAIN;
    }
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = cbfs_stop_handler;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < CBFS_STOP_NSIGS; i++)
        sigaction(cbfs_stop_sigs[i], &sa, &cbfs_stop_old[i]);
    cbfs_stop_running = true;
    return 0;
}

bool cbfs_stop_finish(void)
{
    if (!cbfs_stop_running) return false;
    for (size_t i = 0; i < CBFS_STOP_NSIGS; i++)
        sigaction(cbfs_stop_sigs[i], &cbfs_stop_old[i], NULL);
    atomic_store(&cbfs_stop_over, true);
    sem_post(&cbfs_stop_sem);
    pthread_join(cbfs_stop_thread, NULL);
    sem_destroy(&cbfs_stop_sem);
    free(cbfs_stop_mnt);
    cbfs_stop_mnt = NULL;
    cbfs_stop_running = false;
    return atomic_load(&cbfs_stop_signals) > 1;
}

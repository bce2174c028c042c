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
#include "cbfs/util.h"
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
 * (a user mount; libfuse's own place for it first, as libfuse looks, then
 * PATH). @return 0, EINVAL if mnt is no mount any more (an unmount came
 * first), or errno. */
static int cbfs_stop_detach(const char *mnt)
{
    if (geteuid() == 0) return umount2(mnt, MNT_DETACH) == 0 ? 0 : errno;
    char *argv[] = {"fusermount3", "-u", "-z", (char *)mnt, NULL};
    posix_spawnattr_t attr;
    sigset_t none;
    sigemptyset(&none);
    int err = posix_spawnattr_init(&attr);
    if (err) return err;
    posix_spawnattr_setsigmask(&attr, &none); /* not this thread's: all blocked */
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    err = posix_spawn(&pid, "/usr/bin/fusermount3", NULL, &attr, argv, environ);
    if (err == ENOENT) err = posix_spawnp(&pid, "fusermount3", NULL, &attr, argv, environ);
    posix_spawnattr_destroy(&attr);
    if (err) return err;
    int status;
    while (waitpid(pid, &status, 0) == -1)
        if (errno != EINTR) return errno;
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return 0;
    /* it fails alike whether the mount is busy or gone already */
    char dev[32];
    return cbfs_mount_fuse_dev(mnt, dev, sizeof dev) == CBFS_E_NOENT ? EINVAL : EPERM;
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
    /* an unmount may have come just before the signal: the loop is ending
     * on its own, and EINVAL below says so */
    cbfs_log_info("%s: detaching %s; files still open on it are served until they are "
                  "closed, then the daemon exits (a second signal stops it at once, losing what "
                  "the kernel still holds for them)",
                  strsignal(sig), cbfs_stop_mnt);
    const int err = cbfs_stop_detach(cbfs_stop_mnt);
    if (err == EINVAL || err == ENOENT || atomic_load(&cbfs_stop_over)) return NULL;
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
    for (size_t i = 0; i < CBFS_STOP_NSIGS; i++) sigaction(cbfs_stop_sigs[i], &sa, NULL);
    /* fusermount3's status is waited for: not reaped behind our back */
    signal(SIGCHLD, SIG_DFL);
    cbfs_stop_running = true;
    return 0;
}

bool cbfs_stop_finish(void)
{
    if (!cbfs_stop_running) return false;
    /* Ignored from here to the exit: the files are flushed after the loop,
     * and libfuse's handlers (back at exit) have no loop to end, while the
     * default action would kill the daemon mid-flush. */
    struct sigaction ign;
    memset(&ign, 0, sizeof ign);
    ign.sa_handler = SIG_IGN;
    sigemptyset(&ign.sa_mask);
    for (size_t i = 0; i < CBFS_STOP_NSIGS; i++) sigaction(cbfs_stop_sigs[i], &ign, NULL);
    atomic_store(&cbfs_stop_over, true);
    sem_post(&cbfs_stop_sem);
    pthread_join(cbfs_stop_thread, NULL);
    sem_destroy(&cbfs_stop_sem);
    free(cbfs_stop_mnt);
    cbfs_stop_mnt = NULL;
    cbfs_stop_running = false;
    return atomic_load(&cbfs_stop_signals) > 1;
}

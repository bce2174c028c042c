/* Fd cache tests (src/fuse/fdcache.c) on real files under /tmp: at most cap
 * idle fds stay open, an evicted object is reopened by its file handle,
 * pinned and kept objects are never evicted, and running out of fds closes
 * the idle ones. Reopening by handle needs CAP_DAC_READ_SEARCH (root); without it
 * the tests that need it skip and say so. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include "fdlimit.h"
#include "fuse/fdcache.h"

#define FC_FILES 10

static char fc_dir[64];
static int fc_root = -1;
static struct cbfs_fdcache fc;
static struct cbfs_storeobj fc_obj[FC_FILES];
static ino_t fc_ino[FC_FILES];
static bool fc_ready; /* fc is initialised: teardown releases and destroys */

static void fc_setup(void)
{
    snprintf(fc_dir, sizeof fc_dir, "/tmp/cbfs-fdcache-XXXXXX");
    cr_assert_not_null(mkdtemp(fc_dir));
    fc_root = open(fc_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(fc_root >= 0);
    for (int i = 0; i < FC_FILES; i++) {
        char name[16];
        struct stat st;
        snprintf(name, sizeof name, "f%d", i);
        const int fd = openat(fc_root, name, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
        cr_assert(fd >= 0);
        cr_assert_eq(fstat(fd, &st), 0);
        fc_ino[i] = st.st_ino;
        close(fd);
    }
}

/* Also called before a skip: criterion runs no fini for a skipped test. */
static void fc_teardown(void)
{
    if (fc_ready) {
        for (int i = 0; i < FC_FILES; i++) cbfs_storeobj_release(&fc, &fc_obj[i]);
        cbfs_fdcache_destroy(&fc); /* asserts that nothing is left open */
        fc_ready = false;
    }
    if (fc_root < 0) return;
    close(fc_root);
    fc_root = -1;
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", fc_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(fdcache, .init = fc_setup, .fini = fc_teardown, .timeout = 60);

/* Skips the test where this process cannot reopen objects by handle. */
static void fc_need_handles(void)
{
    struct file_handle *const fh = malloc(sizeof *fh + MAX_HANDLE_SZ);
    int mount_id;
    cr_assert_not_null(fh);
    fh->handle_bytes = MAX_HANDLE_SZ;
    if (name_to_handle_at(fc_root, "", fh, &mount_id, AT_EMPTY_PATH) == -1) {
        const int err = errno;
        free(fh);
        fc_teardown();
        cr_skip_test("name_to_handle_at on %s: %s (the store filesystem exports no handles)",
                     fc_dir, strerror(err));
    }
    const int dfd = open(fc_dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    const int fd = open_by_handle_at(dfd, fh, O_PATH | O_CLOEXEC);
    const int err = errno;
    free(fh);
    close(dfd);
    if (fd == -1 && err == EPERM) {
        fc_teardown();
        cr_skip_test("open_by_handle_at needs CAP_DAC_READ_SEARCH: run the unit tests as root");
    }
    cr_assert(fd >= 0, "open_by_handle_at: %s", strerror(err));
    close(fd);
}

/* Sets up the cache with cap idle fds and makes store objects of the first n
 * files, oldest first. */
static void fc_start(size_t cap, int n)
{
    cr_assert_eq(cbfs_fdcache_init(&fc, fc_root, cap), 0);
    fc_ready = true;
    for (int i = 0; i < FC_FILES; i++) fc_obj[i].fd = -1; /* releasable as never initialised */
    for (int i = 0; i < n; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        const int fd = openat(fc_root, name, O_PATH | O_CLOEXEC);
        cr_assert(fd >= 0);
        cr_assert_eq(cbfs_storeobj_init(&fc, &fc_obj[i], fd, false), 0);
    }
}

static int fc_open_fds(void)
{
    int n = 0;
    for (int i = 0; i < FC_FILES; i++) n += fc_obj[i].fd >= 0;
    return n;
}

/* Pins object i and checks that the fd reaches the right file. */
static int fc_pin_check(int i)
{
    struct stat st;
    int fd = -1;
    const int err = cbfs_storeobj_pin(&fc, &fc_obj[i], &fd);
    cr_assert_eq(err, 0, "pin f%d: %s", i, strerror(err));
    cr_assert_eq(fstat(fd, &st), 0);
    cr_assert_eq(st.st_ino, fc_ino[i], "f%d reopened as another file", i);
    return fd;
}

Test(fdcache, default_cap_is_a_quarter_of_the_fd_limit)
{
    struct rlimit rl, old;
    cr_assert_eq(getrlimit(RLIMIT_NOFILE, &old), 0);
    rl = old;
    rl.rlim_cur = 400;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    cr_assert_eq(cbfs_fdcache_default_cap(), 100);
    rl.rlim_cur = 40;
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
    cr_assert_eq(cbfs_fdcache_default_cap(), 16, "never below 16");
    if (old.rlim_max >= 20000) {
        rl.rlim_cur = 20000;
        cr_assert_eq(setrlimit(RLIMIT_NOFILE, &rl), 0);
        cr_assert_eq(cbfs_fdcache_default_cap(), 4096, "never above 4096");
    }
    cr_assert_eq(setrlimit(RLIMIT_NOFILE, &old), 0);
}

Test(fdcache, keeps_at_most_cap_idle_fds)
{
    fc_need_handles();
    fc_start(4, FC_FILES);
    cr_assert_eq(fc.open, 4);
    cr_assert_eq(fc_open_fds(), 4);
    for (int i = 0; i < FC_FILES; i++)
        cr_assert_eq(fc_obj[i].fd >= 0, i >= FC_FILES - 4, "f%d: the oldest go first", i);
}

Test(fdcache, reopens_an_evicted_object_by_handle)
{
    fc_need_handles();
    fc_start(2, 5);
    cr_assert_eq(fc_obj[0].fd, -1, "evicted");
    const int fd = fc_pin_check(0);
    cr_assert_eq(fc_obj[0].fd, fd);
    cr_assert_eq(fc.open, 2, "the pinned fd counts; an idle one made room");
    cbfs_storeobj_unpin(&fc, &fc_obj[0]);
    cr_assert_eq(fc_obj[0].fd, fd, "unpinned: idle, and the youngest");
}

Test(fdcache, never_evicts_a_pinned_object)
{
    fc_need_handles();
    fc_start(2, 1);
    const int fd = fc_pin_check(0);
    for (int i = 1; i < FC_FILES; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        const int ofd = openat(fc_root, name, O_PATH | O_CLOEXEC);
        cr_assert_eq(cbfs_storeobj_init(&fc, &fc_obj[i], ofd, false), 0);
    }
    cr_assert_eq(fc_obj[0].fd, fd, "pinned: still open");
    cr_assert_neq(fcntl(fd, F_GETFD), -1);
    cr_assert_eq(fc.open, 2);
    cbfs_storeobj_unpin(&fc, &fc_obj[0]);
}

Test(fdcache, out_of_fds_closes_the_idle_ones)
{
    fc_need_handles();
    fc_start(16, 6);
    cr_assert_eq(fc.open, 6);
    cr_assert_not(cbfs_fdcache_relieve(&fc, EINVAL), "only EMFILE/ENFILE call for relief");
    cr_assert_eq(fc.open, 6);
    const rlim_t old = cbfs_td_nofile_squeeze(0);
    cr_assert_eq(open("/dev/null", O_RDONLY | O_CLOEXEC), -1);
    cr_assert_eq(errno, EMFILE);
    cr_assert(cbfs_fdcache_relieve(&fc, EMFILE));
    const int fd = open("/dev/null", O_RDONLY | O_CLOEXEC);
    cbfs_td_nofile_restore(old);
    cr_assert(fd >= 0, "a freed fd is usable again");
    close(fd);
    cr_assert_eq(fc.open, 0);
    cr_assert_eq(fc_open_fds(), 0);
    cr_assert_not(cbfs_fdcache_relieve(&fc, EMFILE), "nothing left to close");
}

Test(fdcache, a_pin_out_of_fds_reopens_after_relief)
{
    fc_need_handles();
    fc_start(3, 6);
    cr_assert_eq(fc_obj[0].fd, -1);
    const rlim_t old = cbfs_td_nofile_squeeze(0);
    int fd = -1;
    const int err = cbfs_storeobj_pin(&fc, &fc_obj[0], &fd);
    cbfs_td_nofile_restore(old);
    cr_assert_eq(err, 0, "pin: %s", strerror(err));
    cr_assert_eq(fc_open_fds(), 1, "the idle fds made room for the pinned one");
    cbfs_storeobj_unpin(&fc, &fc_obj[0]);
    cbfs_storeobj_release(&fc, &fc_obj[0]);
    fc_pin_check(1); /* the others reopen as well */
    cbfs_storeobj_unpin(&fc, &fc_obj[1]);
}

/* An object that lost its last name keeps its fd once kept: never evicted,
 * closed at release; it takes its room in the cache from the idle ones. */
Test(fdcache, a_kept_object_is_never_evicted)
{
    fc_need_handles();
    fc_start(4, 2);
    const int fd = fc_pin_check(0);
    cr_assert_eq(unlinkat(fc_root, "f0", 0), 0);
    cr_assert(cbfs_storeobj_keep(&fc, &fc_obj[0], NULL));
    cr_assert(cbfs_storeobj_keep(&fc, &fc_obj[0], NULL), "kept already: no second slot");
    cr_assert_eq(fc.kept, 1);
    cr_assert_eq(fc.open, 1, "no longer the cache's");
    cbfs_storeobj_unpin(&fc, &fc_obj[0]);
    for (int i = 2; i < FC_FILES; i++) {
        char name[16];
        snprintf(name, sizeof name, "f%d", i);
        const int ofd = openat(fc_root, name, O_PATH | O_CLOEXEC);
        cr_assert_eq(cbfs_storeobj_init(&fc, &fc_obj[i], ofd, false), 0);
    }
    cr_assert_eq(fc.open, 3, "the kept one takes its room from the idle ones");
    cr_assert(cbfs_fdcache_relieve(&fc, EMFILE));
    cr_assert_eq(fc_obj[0].fd, fd, "still open: its handle would not open again");
    struct stat st;
    int pfd = -1;
    cr_assert_eq(cbfs_storeobj_pin(&fc, &fc_obj[0], &pfd), 0);
    cr_assert_eq(pfd, fd);
    cr_assert_eq(fstat(pfd, &st), 0);
    cr_assert_eq(st.st_nlink, 0);
    cbfs_storeobj_unpin(&fc, &fc_obj[0]);
    cr_assert_eq(fc_obj[0].fd, fd);
    cbfs_storeobj_release(&fc, &fc_obj[0]);
    cr_assert_eq(fc.kept, 0);
}

/* The pin of what is open now (cbfs_inode_hold_name's) never reopens: an
 * evicted object is not pinned, and costs no descriptor. */
Test(fdcache, pin_open_never_reopens)
{
    fc_need_handles();
    fc_start(1, 2); /* f1's init evicted f0 */
    int fd = -1;
    cr_assert_eq(fc_obj[0].fd, -1);
    cr_assert_eq(cbfs_storeobj_pin_open(&fc, &fc_obj[0], &fd), EAGAIN);
    cr_assert_eq(fc_obj[0].fd, -1, "not reopened");
    cr_assert_eq(cbfs_storeobj_pin_open(&fc, &fc_obj[1], &fd), 0);
    cr_assert_eq(fd, fc_obj[1].fd);
    cr_assert_eq(cbfs_fdcache_relieve(&fc, EMFILE), false, "pinned: not evicted");
    cbfs_storeobj_unpin(&fc, &fc_obj[1]);
    cr_assert_eq(fc_obj[1].fd, fd, "idle again, within the cap");
}

/* At most cap objects are kept at once, an object and its sidecar both or
 * neither. */
Test(fdcache, at_most_cap_objects_are_kept)
{
    fc_need_handles();
    fc_start(3, 4);
    int fd[4];
    for (int i = 0; i < 4; i++)
        fd[i] = fc_pin_check(i);
    cr_assert(cbfs_storeobj_keep(&fc, &fc_obj[0], &fc_obj[1]));
    cr_assert_not(cbfs_storeobj_keep(&fc, &fc_obj[2], &fc_obj[3]), "two more: past the cap");
    cr_assert_eq(fc.kept, 2);
    cr_assert_not(fc_obj[2].kept || fc_obj[3].kept, "neither");
    cr_assert(cbfs_storeobj_keep(&fc, &fc_obj[2], NULL));
    cr_assert_not(cbfs_storeobj_keep(&fc, &fc_obj[3], NULL));
    for (int i = 0; i < 4; i++)
        cbfs_storeobj_unpin(&fc, &fc_obj[i]);
    cr_assert_eq(fc.open, 0, "the kept ones fill the cap: the idle one was closed");
    cr_assert_not(cbfs_fdcache_relieve(&fc, EMFILE), "nothing left to close");
    for (int i = 0; i < 4; i++)
        cr_assert_eq(fc_obj[i].fd, i < 3 ? fd[i] : -1, "f%d: only the kept stay open", i);
}

Test(fdcache, an_object_pinned_for_life_keeps_its_fd)
{
    fc_start(2, 0);
    const int fd = openat(fc_root, "f0", O_PATH | O_CLOEXEC);
    cr_assert_eq(cbfs_storeobj_init(&fc, &fc_obj[0], fd, true), 0);
    cr_assert_null(fc_obj[0].fh);
    cr_assert_eq(fc.open, 0, "not the cache's to close");
    cr_assert_eq(cbfs_fdcache_relieve(&fc, EMFILE), false);
    cr_assert_eq(fc_pin_check(0), fd);
    cbfs_storeobj_unpin(&fc, &fc_obj[0]);
    cr_assert_eq(fc_obj[0].fd, fd);
}

/* On a store whose handles have another layout than ext4's (tmpfs here; XFS
 * with 64-bit inode numbers, btrfs, NFS), the generation was 0 for every
 * object: a new file that got a deleted one's inode number while the kernel
 * still held the old inode was taken for it. It is now a hash of the handle:
 * the same for the same object, another for another one, never 0. */
Test(fdcache, the_generation_tells_objects_apart_on_other_handle_layouts)
{
    char dir[] = "/tmp/cbfs-fdgen-XXXXXX";
    cr_assert_not_null(mkdtemp(dir));
    if (mount("tmpfs", dir, "tmpfs", 0, "size=1m") != 0) {
        rmdir(dir);
        cr_skip_test("cannot mount a tmpfs (needs root)");
    }
    char a[64], b[64];
    snprintf(a, sizeof a, "%s/a", dir);
    snprintf(b, sizeof b, "%s/b", dir);
    const int fa = open(a, O_CREAT | O_RDWR, 0600), fb = open(b, O_CREAT | O_RDWR, 0600);
    const int pa = open(a, O_PATH);
    const uint32_t ga = cbfs_fdcache_generation(fa), gb = cbfs_fdcache_generation(fb);
    const uint32_t ga2 = cbfs_fdcache_generation(pa);
    close(fa);
    close(fb);
    close(pa);
    umount2(dir, MNT_DETACH);
    rmdir(dir);
    cr_assert_neq(ga, 0, "tmpfs: generation 0");
    cr_assert_eq(ga, ga2, "the same object, another generation");
    cr_assert_neq(ga, gb, "two objects, one generation");
}

/* An inode number alone opens its object where the store allows it (ext4:
 * generation 0 matches any); the generation is the one in the handle. */
Test(fdcache, an_inode_number_alone_opens_the_object_on_ext4)
{
    struct stat rst, st;
    fc_need_handles();
    fc_start(4, 0);
    cr_assert_eq(fstat(fc_root, &rst), 0);
    const char *const why = cbfs_fdcache_ino_probe(&fc, fc_root, &rst);
    if (why && !strstr(why, "not the root of its filesystem")) {
        fc_teardown();
        cr_skip_test("%s", why);
    }
    int fd = -1;
    cr_assert_eq(cbfs_fdcache_open_ino(&fc, (uint32_t)fc_ino[3], &fd), 0);
    cr_assert_eq(fstat(fd, &st), 0);
    cr_assert_eq(st.st_ino, fc_ino[3]);
    cr_assert_neq(cbfs_fdcache_generation(fd), 0, "ext4 inodes have a random generation");
    close(fd);

    cr_assert_eq(unlinkat(fc_root, "f3", 0), 0);
    cr_assert_eq(cbfs_fdcache_open_ino(&fc, (uint32_t)fc_ino[3], &fd), ESTALE, "deleted");
}

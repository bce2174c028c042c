/* volatile: a disk with a volatile write cache, in userspace (libfuse3 low-level API).
 *
 * Serves ONE regular file, MOUNTPOINT/img, whose bytes live in BACKING (the "platter").
 * WRITE requests land in an in-memory overlay of SECTOR-sized sectors (the disk's
 * volatile cache); READs see the overlay over BACKING; FSYNC (which is what a loop
 * device sends for REQ_PREFLUSH and for emulated FUA: drivers/block/loop.c
 * lo_req_flush -> vfs_fsync) writes the overlay into BACKING and empties it.
 * FLUSH (close(2) of a descriptor) is no durability point and does nothing.
 *
 * A power cut (SIGUSR1, or --cut-fsync N: at the arrival of the Nth FSYNC, before it is
 * applied, or --cut-write N: at the arrival of the Nth WRITE) drops the overlay, except a
 * seeded random subset of its sectors (--keep PERCENT, default 0) which reach BACKING, as a
 * disk's cache may have written some of its lines back before the power went. From then
 * on the disk is dead: every READ, WRITE and FSYNC fails with EIO, so nothing issued
 * after the cut can reach BACKING. The cut is applied at the first request after the
 * signal (or at exit): requests are served one at a time (single-threaded loop), so an
 * FSYNC that arrives after the signal is never applied.
 *
 * --relative 1: --cut-fsync/--cut-write count from the arrival of SIGRTMIN (the writer's start).
 * SIGRTMIN+k (k 1..10) arms a cut at the k-th FSYNC that arrives from now on, SIGRTMIN+10+k
 * at the k-th WRITE (a writer picks its own moment: "during the next close").
 * SIGUSR2 prints the counters to stderr. At exit the counters go to stderr too.
 *
 * Usage: volatile [--sector N] [--keep PCT] [--seed S] [--cut-fsync N] [--cut-write N]
 *                 [--pidfile F] BACKING MOUNTPOINT [-f] [-d] [-o opt]
 * cc -O2 -Wall -o volatile volatile.c $(pkg-config --cflags --libs fuse3)
 */
#define FUSE_USE_VERSION 34
#include <fuse_lowlevel.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define IMG_INO 2
static const char *img_name = "img";

static int bfd = -1;                 /* BACKING */
static uint64_t img_size;
static uint32_t sector = 4096;
static uint64_t nsect;
static unsigned char **ov;           /* overlay: one pointer per sector, NULL = not cached */
static uint64_t ov_count;            /* sectors in the overlay */
static uint64_t *ov_list;            /* their numbers, in first-write order */
static int keep_pct;
static uint64_t seed = 1;
static uint64_t cut_fsync, cut_write;
static volatile sig_atomic_t cut_req, stats_req, arm_fsync_k, arm_write_k, epoch_req;
static int relative; /* --relative: --cut-fsync/--cut-write count from SIGRTMIN on */
static int dead;
static struct {
    uint64_t writes, write_bytes, reads, read_bytes, fsyncs, fsync_sectors, flushes, fsyncdirs,
        dead_writes, dead_fsyncs, dead_reads;
} st;
static uint64_t cut_dropped, cut_kept, cut_at_writes = UINT64_MAX, cut_at_fsyncs;

static uint64_t rng(void)
{ /* splitmix64 */
    uint64_t z = (seed += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

static void stats(const char *why)
{
    fprintf(stderr,
            "volatile: %s: writes %" PRIu64 " (%" PRIu64 " B) reads %" PRIu64 " (%" PRIu64
            " B) fsyncs %" PRIu64 " (sectors made durable %" PRIu64 ") flushes %" PRIu64
            " overlay %" PRIu64 " dead: writes %" PRIu64 " fsyncs %" PRIu64 " reads %" PRIu64
            "%s",
            why, st.writes, st.write_bytes, st.reads, st.read_bytes, st.fsyncs, st.fsync_sectors,
            st.flushes, ov_count, st.dead_writes, st.dead_fsyncs, st.dead_reads,
            dead ? "" : "\n");
    if (dead)
        fprintf(stderr, " | cut after %" PRIu64 " writes, %" PRIu64 " fsyncs: dropped %" PRIu64
                        " kept %" PRIu64 " sectors\n",
                cut_at_writes, cut_at_fsyncs, cut_dropped, cut_kept);
}

static int put_sector(uint64_t s, const unsigned char *buf)
{
    uint64_t off = s * sector, len = sector;
    if (off + len > img_size) len = img_size - off;
    ssize_t n = pwrite(bfd, buf, len, (off_t)off);
    if (n != (ssize_t)len) {
        perror("volatile: pwrite backing");
        return -1;
    }
    return 0;
}

static void do_cut(void)
{
    if (dead) return;
    cut_at_writes = st.writes;
    cut_at_fsyncs = st.fsyncs;
    for (uint64_t i = 0; i < ov_count; i++) {
        uint64_t s = ov_list[i];
        if (keep_pct > 0 && (int)(rng() % 100) < keep_pct) {
            put_sector(s, ov[s]);
            cut_kept++;
        } else {
            cut_dropped++;
        }
        free(ov[s]);
        ov[s] = NULL;
    }
    ov_count = 0;
    fsync(bfd);
    dead = 1;
    stats("CUT");
}

static void check_signals(void)
{
    if (epoch_req) { /* SIGRTMIN: the counts of --cut-fsync/--cut-write start now */
        epoch_req = 0;
        if (relative && cut_fsync) cut_fsync += st.fsyncs;
        if (relative && cut_write) cut_write += st.writes;
        relative = 0;
        fprintf(stderr, "volatile: epoch at write %" PRIu64 " fsync %" PRIu64 ": cut at fsync %" PRIu64
                        " write %" PRIu64 "\n", st.writes, st.fsyncs, cut_fsync, cut_write);
    }
    if (arm_fsync_k) { /* cut at the arrival of the k-th FSYNC from now */
        cut_fsync = st.fsyncs + (uint64_t)arm_fsync_k;
        fprintf(stderr, "volatile: armed: cut at fsync %" PRIu64 "\n", cut_fsync);
        arm_fsync_k = 0;
    }
    if (arm_write_k) { /* cut at the arrival of the k-th WRITE from now */
        cut_write = st.writes + (uint64_t)arm_write_k;
        fprintf(stderr, "volatile: armed: cut at write %" PRIu64 "\n", cut_write);
        arm_write_k = 0;
    }
    if (cut_req) do_cut();
    if (stats_req) {
        stats_req = 0;
        stats("stats");
    }
}

static int make_durable(void)
{
    for (uint64_t i = 0; i < ov_count; i++) {
        uint64_t s = ov_list[i];
        if (put_sector(s, ov[s]) < 0) return -1;
        free(ov[s]);
        ov[s] = NULL;
        st.fsync_sectors++;
    }
    ov_count = 0;
    return 0;
}

static void fill_attr(fuse_ino_t ino, struct stat *a)
{
    memset(a, 0, sizeof *a);
    a->st_ino = ino;
    if (ino == FUSE_ROOT_ID) {
        a->st_mode = S_IFDIR | 0755;
        a->st_nlink = 2;
    } else {
        a->st_mode = S_IFREG | 0600;
        a->st_nlink = 1;
        a->st_size = (off_t)img_size;
        a->st_blocks = (blkcnt_t)(img_size / 512);
    }
    a->st_blksize = 4096;
}

static void op_lookup(fuse_req_t req, fuse_ino_t parent, const char *name)
{
    check_signals();
    if (parent != FUSE_ROOT_ID || strcmp(name, img_name) != 0) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    struct fuse_entry_param e = {0};
    e.ino = IMG_INO;
    e.generation = 1;
    fill_attr(IMG_INO, &e.attr);
    e.attr_timeout = 3600;
    e.entry_timeout = 3600;
    fuse_reply_entry(req, &e);
}

static void op_getattr(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)fi;
    check_signals();
    struct stat a;
    if (ino != FUSE_ROOT_ID && ino != IMG_INO) {
        fuse_reply_err(req, ENOENT);
        return;
    }
    fill_attr(ino, &a);
    fuse_reply_attr(req, &a, 3600);
}

static void op_setattr(fuse_req_t req, fuse_ino_t ino, struct stat *attr, int to_set,
                       struct fuse_file_info *fi)
{
    (void)attr;
    check_signals();
    /* the image's size is fixed; accept (and ignore) times/modes, refuse size changes */
    if ((to_set & FUSE_SET_ATTR_SIZE) && (uint64_t)attr->st_size != img_size) {
        fuse_reply_err(req, EPERM);
        return;
    }
    op_getattr(req, ino, fi);
}

static void op_open(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    check_signals();
    if (ino != IMG_INO) {
        fuse_reply_err(req, EISDIR);
        return;
    }
    fi->direct_io = 1; /* no page cache: every write(2) of the loop driver is a WRITE now */
    fi->keep_cache = 0;
    fuse_reply_open(req, fi);
}

static void op_read(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                    struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    check_signals();
    if (dead) {
        st.dead_reads++;
        fuse_reply_err(req, EIO);
        return;
    }
    if ((uint64_t)off >= img_size) {
        fuse_reply_buf(req, NULL, 0);
        return;
    }
    if ((uint64_t)off + size > img_size) size = img_size - (uint64_t)off;
    unsigned char *buf = malloc(size ? size : 1);
    if (!buf) {
        fuse_reply_err(req, ENOMEM);
        return;
    }
    size_t done = 0;
    while (done < size) {
        uint64_t pos = (uint64_t)off + done, s = pos / sector, in = pos % sector;
        size_t n = sector - in;
        if (n > size - done) n = size - done;
        if (ov[s]) {
            memcpy(buf + done, ov[s] + in, n);
        } else {
            ssize_t r = pread(bfd, buf + done, n, (off_t)pos);
            if (r < 0) {
                free(buf);
                fuse_reply_err(req, EIO);
                return;
            }
            if ((size_t)r < n) memset(buf + done + r, 0, n - (size_t)r);
        }
        done += n;
    }
    st.reads++;
    st.read_bytes += size;
    fuse_reply_buf(req, (const char *)buf, size);
    free(buf);
}

static void op_write(fuse_req_t req, fuse_ino_t ino, const char *data, size_t size, off_t off,
                     struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    check_signals();
    if (!dead && !relative && cut_write && st.writes + 1 == cut_write) do_cut();
    if (dead) {
        st.dead_writes++;
        fuse_reply_err(req, EIO);
        return;
    }
    if ((uint64_t)off + size > img_size) {
        fuse_reply_err(req, ENOSPC);
        return;
    }
    size_t done = 0;
    while (done < size) {
        uint64_t pos = (uint64_t)off + done, s = pos / sector, in = pos % sector;
        size_t n = sector - in;
        if (n > size - done) n = size - done;
        if (!ov[s]) {
            unsigned char *b = malloc(sector);
            if (!b) {
                fuse_reply_err(req, ENOMEM);
                return;
            }
            if (in != 0 || n != sector) { /* partial sector: start from what is there */
                ssize_t r = pread(bfd, b, sector, (off_t)(s * sector));
                if (r < 0) r = 0;
                if ((size_t)r < sector) memset(b + r, 0, sector - (size_t)r);
            }
            ov[s] = b;
            ov_list[ov_count++] = s;
        }
        memcpy(ov[s] + in, data + done, n);
        done += n;
    }
    st.writes++;
    st.write_bytes += size;
    fuse_reply_write(req, size);
}

static void op_flush(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    check_signals();
    st.flushes++; /* close(2): no durability point */
    fuse_reply_err(req, 0);
}

static void op_fsync(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    check_signals();
    if (!dead && !relative && cut_fsync && st.fsyncs + 1 == cut_fsync) do_cut();
    if (dead) {
        st.dead_fsyncs++;
        fuse_reply_err(req, EIO);
        return;
    }
    st.fsyncs++;
    fuse_reply_err(req, make_durable() < 0 ? EIO : 0);
}

static void op_release(fuse_req_t req, fuse_ino_t ino, struct fuse_file_info *fi)
{
    (void)ino;
    (void)fi;
    fuse_reply_err(req, 0);
}

static void op_readdir(fuse_req_t req, fuse_ino_t ino, size_t size, off_t off,
                       struct fuse_file_info *fi)
{
    (void)fi;
    check_signals();
    if (ino != FUSE_ROOT_ID) {
        fuse_reply_err(req, ENOTDIR);
        return;
    }
    char buf[512];
    size_t len = 0;
    struct stat a;
    const char *names[3] = {".", "..", img_name};
    fuse_ino_t inos[3] = {FUSE_ROOT_ID, FUSE_ROOT_ID, IMG_INO};
    for (int i = (int)off; i < 3; i++) {
        fill_attr(inos[i], &a);
        size_t n = fuse_add_direntry(req, buf + len, sizeof buf - len, names[i], &a, i + 1);
        if (len + n > sizeof buf || len + n > size) break;
        len += n;
    }
    fuse_reply_buf(req, buf, len);
}

static void op_fsyncdir(fuse_req_t req, fuse_ino_t ino, int datasync, struct fuse_file_info *fi)
{
    (void)ino;
    (void)datasync;
    (void)fi;
    st.fsyncdirs++;
    fuse_reply_err(req, 0);
}

static void op_destroy(void *u)
{
    (void)u;
    check_signals();
}

static const struct fuse_lowlevel_ops ops = {
    .lookup = op_lookup,
    .getattr = op_getattr,
    .setattr = op_setattr,
    .open = op_open,
    .read = op_read,
    .write = op_write,
    .flush = op_flush,
    .fsync = op_fsync,
    .release = op_release,
    .readdir = op_readdir,
    .fsyncdir = op_fsyncdir,
    .destroy = op_destroy,
};

static void on_cut(int sig)
{
    (void)sig;
    cut_req = 1;
}
static void on_arm(int sig)
{
    int k = sig - SIGRTMIN;
    if (k == 0) epoch_req = 1;
    if (k >= 11 && k <= 20) arm_write_k = k - 10;
    else if (k >= 1 && k <= 10) arm_fsync_k = k;
}
static void on_stats(int sig)
{
    (void)sig;
    stats_req = 1;
}

static void usage(void)
{
    fprintf(stderr, "usage: volatile [--sector N] [--keep PCT] [--seed S] [--cut-fsync N] "
                    "[--cut-write N] [--relative 0|1] [--pidfile F] BACKING MOUNTPOINT [-f] [-d] [-o opt]\n");
    exit(2);
}

int main(int argc, char **argv)
{
    const char *pidfile = NULL;
    int i = 1;
    for (; i < argc && strncmp(argv[i], "--", 2) == 0; i += 2) {
        if (i + 1 >= argc) usage();
        const char *v = argv[i + 1];
        if (!strcmp(argv[i], "--sector")) sector = (uint32_t)strtoul(v, NULL, 0);
        else if (!strcmp(argv[i], "--keep")) keep_pct = atoi(v);
        else if (!strcmp(argv[i], "--seed")) seed = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--cut-fsync")) cut_fsync = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--cut-write")) cut_write = strtoull(v, NULL, 0);
        else if (!strcmp(argv[i], "--pidfile")) pidfile = v;
        else if (!strcmp(argv[i], "--relative")) relative = atoi(v);
        else usage();
    }
    if (argc - i < 2 || sector < 512 || (sector & (sector - 1))) usage();
    const char *backing = argv[i];
    bfd = open(backing, O_RDWR);
    if (bfd < 0) {
        perror(backing);
        return 1;
    }
    struct stat bst;
    fstat(bfd, &bst);
    img_size = (uint64_t)bst.st_size;
    nsect = (img_size + sector - 1) / sector;
    ov = calloc(nsect, sizeof *ov);
    ov_list = calloc(nsect, sizeof *ov_list);
    if (!ov || !ov_list) return 1;
    fprintf(stderr, "volatile: %s, %" PRIu64 " bytes, sector %u, keep %d%%, seed %" PRIu64
                    ", cut at fsync %" PRIu64 " write %" PRIu64 "\n",
            backing, img_size, sector, keep_pct, seed, cut_fsync, cut_write);

    /* fuse args: argv[0], then MOUNTPOINT and options after BACKING */
    char **fa = calloc((size_t)argc + 4, sizeof *fa);
    int fc = 0;
    fa[fc++] = argv[0];
    for (int j = i + 1; j < argc; j++) fa[fc++] = argv[j];
    struct fuse_args args = FUSE_ARGS_INIT(fc, fa);
    struct fuse_cmdline_opts opts;
    if (fuse_parse_cmdline(&args, &opts) != 0 || !opts.mountpoint) usage();
    struct fuse_session *se = fuse_session_new(&args, &ops, sizeof ops, NULL);
    if (!se) return 1;
    if (fuse_set_signal_handlers(se) != 0) return 1;
    struct sigaction sa = {0};
    sa.sa_handler = on_cut;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGUSR1, &sa, NULL);
    sa.sa_handler = on_stats;
    sigaction(SIGUSR2, &sa, NULL);
    sa.sa_handler = on_arm; /* SIGRTMIN+k: cut at the k-th FSYNC from now, +10+k: k-th WRITE */
    for (int k = 0; k <= 20; k++) sigaction(SIGRTMIN + k, &sa, NULL);
    if (fuse_session_mount(se, opts.mountpoint) != 0) return 1;
    if (pidfile) {
        FILE *p = fopen(pidfile, "w");
        if (p) {
            fprintf(p, "%d\n", (int)getpid());
            fclose(p);
        }
    }
    int rc = fuse_session_loop(se); /* single-threaded: one request at a time */
    check_signals();
    stats("exit");
    fuse_session_unmount(se);
    fuse_remove_signal_handlers(se);
    fuse_session_destroy(se);
    fuse_opt_free_args(&args);
    free(opts.mountpoint);
    close(bfd);
    return rc ? 1 : 0;
}

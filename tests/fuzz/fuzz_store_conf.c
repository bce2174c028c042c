/* libFuzzer target: the store's own metadata file, STORE/.cbfs/store.conf
 * (docs/FORMAT.md; src/store/store.c), which every mount, cbfs mkfs, cbfs
 * upgrade and every cbfs tool (cbfs_store_read_layout) read before anything
 * else. The input is the whole file. It is read through the store's own
 * calls on a scratch store in $TMPDIR or /dev/shm (made once, removed at
 * exit; a crash leaves it behind): locked, as the daemon reads it
 * (cbfs_store_read_conf), and unlocked, as the tools do
 * (cbfs_store_read_layout). Contracts: the verdict is OK or a clean
 * error (INVAL, VERSION, CODEC_*, NOMEM) with one sentence in msg; both
 * readers agree; an accepted file gives a known format version and layout,
 * a uuid of 32 lower-case hex digits (or none), a built codec, a level in
 * its range and a valid block size; and what was accepted, written back
 * with cbfs_store_write_conf (as cbfs upgrade does), reads back the same. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <sys/stat.h>

#include "cbfs/codec.h"
#include "cbfs/store.h"
#include "fuzz_common.h"

static struct cbfs_store *cbfs_fuzz_st; /* the scratch store, locked */
static char cbfs_fuzz_dir[PATH_MAX];

static void cbfs_fuzz_cleanup(void)
{
    if (!cbfs_fuzz_st) return;
    const int root = cbfs_store_fd(cbfs_fuzz_st);
    (void)unlinkat(root, CBFS_STORE_DIR "/" CBFS_STORE_CONF, 0);
    (void)unlinkat(root, CBFS_STORE_DIR "/" CBFS_STORE_CONF ".tmp", 0);
    (void)unlinkat(root, CBFS_STORE_DIR "/" CBFS_STORE_LOCK, 0);
    (void)unlinkat(root, CBFS_STORE_DIR, AT_REMOVEDIR);
    cbfs_store_close(cbfs_fuzz_st);
    cbfs_fuzz_st = NULL;
    (void)rmdir(cbfs_fuzz_dir);
}

int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    /* $TMPDIR, else /dev/shm: the write-back fsyncs, which tmpfs makes free */
    const char *tmp = getenv("TMPDIR");
    struct stat sb;
    if (!tmp || !*tmp)
        tmp = stat("/dev/shm", &sb) == 0 && S_ISDIR(sb.st_mode) ? "/dev/shm" : "/tmp";
    snprintf(cbfs_fuzz_dir, sizeof cbfs_fuzz_dir, "%s/cbfs-fuzz-conf.XXXXXX", tmp);
    pid_t holder;
    if (!mkdtemp(cbfs_fuzz_dir) || cbfs_store_open(cbfs_fuzz_dir, &cbfs_fuzz_st) != CBFS_OK ||
        cbfs_store_lock(cbfs_fuzz_st, false, &holder) != CBFS_OK) {
        fprintf(stderr, "cbfs-fuzz: cannot make a scratch store in %s: %s\n", cbfs_fuzz_dir,
                strerror(errno));
        exit(1);
    }
    atexit(cbfs_fuzz_cleanup);
    return 0;
}

/* Replaces store.conf with len bytes of buf. @return 0, or -1 (not the library's fault). */
static int cbfs_fuzz_put_conf(const void *buf, size_t len)
{
    const int fd = openat(cbfs_store_fd(cbfs_fuzz_st), CBFS_STORE_DIR "/" CBFS_STORE_CONF,
                          O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
    if (fd < 0) return -1;
    const int ok = !len || cbfs_pwrite_full(fd, buf, len, 0) == CBFS_OK;
    close(fd);
    return ok ? 0 : -1;
}

static int cbfs_fuzz_err_ok(cbfs_err e)
{
    return e == CBFS_E_INVAL || e == CBFS_E_VERSION || e == CBFS_E_CODEC_LEVEL ||
           e == CBFS_E_CODEC_MISSING || e == CBFS_E_CODEC_UNKNOWN || e == CBFS_E_NOMEM;
}

/* Reads store.conf both ways; checks the verdict and what it accepted.
 * @return the verdict, conf filled when CBFS_OK. */
static cbfs_err cbfs_fuzz_read(struct cbfs_store_conf *conf, const char *what)
{
    char msg[256], msg2[256];
    bool found = false;
    memset(msg, 'x', sizeof msg);
    const cbfs_err e = cbfs_store_read_conf(cbfs_fuzz_st, conf, &found, msg, sizeof msg);
    CBFS_FUZZ_CHECK(memchr(msg, '\0', sizeof msg), "%s: msg not terminated", what);
    if (e != CBFS_OK) {
        CBFS_FUZZ_CHECK(cbfs_fuzz_err_ok(e), "%s: unexpected error %d (%s)", what, (int)e,
                        cbfs_err_str(e));
        CBFS_FUZZ_CHECK(e == CBFS_E_NOMEM || msg[0], "%s: %s without a message", what,
                        cbfs_err_str(e));
    } else {
        CBFS_FUZZ_CHECK(found, "%s: an existing store.conf read as none", what);
    }

    /* The tools' unlocked reader: the same verdict and the same layout (the
     * scratch store holds no index directory: nothing contradicts the file). */
    static struct cbfs_store_layout lay;
    const cbfs_err e2 = cbfs_store_read_layout(cbfs_store_fd(cbfs_fuzz_st), &lay, msg2, sizeof msg2);
    CBFS_FUZZ_CHECK(e2 == e, "%s: read_layout says %s, read_conf %s", what, cbfs_err_str(e2),
                    cbfs_err_str(e));
    if (e != CBFS_OK) return e;
    CBFS_FUZZ_CHECK(lay.state == CBFS_LAYOUT_CONF && lay.layout == conf->layout &&
                        lay.block_size == conf->block_size,
                    "%s: read_layout gives state %d layout %u bs %u, read_conf %u %u", what,
                    (int)lay.state, lay.layout, lay.block_size, conf->layout, conf->block_size);

    /* What an accepted store.conf may say. */
    CBFS_FUZZ_CHECK(conf->format_version >= 1 && conf->format_version <= CBFS_STORE_CONF_VERSION,
                    "%s: format_version %u accepted", what, conf->format_version);
    CBFS_FUZZ_CHECK(cbfs_store_layout_known(conf->layout), "%s: layout %u accepted", what,
                    conf->layout);
    const size_t ul = strnlen(conf->uuid, sizeof conf->uuid);
    CBFS_FUZZ_CHECK(ul < sizeof conf->uuid, "%s: uuid not terminated", what);
    CBFS_FUZZ_CHECK(ul == 0 || (ul == 32 && strspn(conf->uuid, "0123456789abcdef") == 32),
                    "%s: uuid '%s' accepted", what, conf->uuid);
    CBFS_FUZZ_CHECK(strnlen(conf->created, sizeof conf->created) < sizeof conf->created,
                    "%s: created not terminated", what);
    CBFS_FUZZ_CHECK(conf->codec != NULL, "%s: no codec", what);
    CBFS_FUZZ_CHECK(conf->level >= conf->codec->min_level && conf->level <= conf->codec->max_level,
                    "%s: level %d of %s accepted", what, conf->level, conf->codec->name);
    CBFS_FUZZ_CHECK(cbfs_block_size_valid(conf->block_size), "%s: block size %u accepted", what,
                    conf->block_size);
    return CBFS_OK;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (cbfs_fuzz_put_conf(data, size) != 0) return 0;
    struct cbfs_store_conf conf, back;
    if (cbfs_fuzz_read(&conf, "read") != CBFS_OK) return 0;

    /* Written back (cbfs upgrade rewrites the file it read), it reads the same. */
    const cbfs_err w = cbfs_store_write_conf(cbfs_fuzz_st, &conf);
    CBFS_FUZZ_CHECK(w == CBFS_OK, "write_conf of an accepted conf: %s", cbfs_err_str(w));
    const cbfs_err r = cbfs_fuzz_read(&back, "reread");
    CBFS_FUZZ_CHECK(r == CBFS_OK, "the store.conf write_conf wrote is refused: %s",
                    cbfs_err_str(r));
    CBFS_FUZZ_CHECK(back.format_version == conf.format_version && back.layout == conf.layout &&
                        strcmp(back.uuid, conf.uuid) == 0 &&
                        strcmp(back.created, conf.created) == 0 && back.codec == conf.codec &&
                        back.level == conf.level && back.block_size == conf.block_size,
                    "written back, it reads otherwise: version %u/%u layout %u/%u uuid '%s'/'%s' "
                    "created '%s'/'%s' codec %s/%s level %d/%d bs %u/%u",
                    conf.format_version, back.format_version, conf.layout, back.layout,
                    conf.uuid, back.uuid, conf.created, back.created, conf.codec->name,
                    back.codec->name, conf.level, back.level, conf.block_size, back.block_size);
    return 0;
}

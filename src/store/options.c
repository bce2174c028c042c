/* mount.cbfs argument parsing: positional STORE/MOUNTPOINT, -f/-d and the
 * mount(8) flags, and every -o option sorted into cbfs options, FUSE options
 * for libfuse, or fstab noise. Values are validated here, before anything is
 * opened or mounted, each failure described in one sentence. */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cbfs/format.h"
#include "cbfs/store.h"
#include "cbfs/util.h"
#include "fuse/options.h"

/* Options handed to libfuse unchanged (kernel mount flags and libfuse's own).
 * ro/rw are not here: they set o->readonly and main passes "ro" once. */
static const char *const cbfs_fuse_flags[] = {
    "allow_other", "allow_root", "auto_unmount", "nosuid", "suid",  "nodev", "dev",
    "noexec",      "exec",       "noatime",      "atime",  "sync",  "async", "dirsync",
};

/* fstab/mount(8) userspace options that mean nothing to the daemon. */
static const char *const cbfs_noise_flags[] = {
    "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "noowner",
    "group",    "nogroup", "_netdev", "nofail", "default_permissions", /* always added */
    "relatime", /* what a FUSE mount gets anyway; libfuse 3.14 rejects the word */
};

static bool cbfs_in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return true;
    return false;
}
#define CBFS_IN_LIST(s, list) cbfs_in_list((s), (list), sizeof(list) / sizeof((list)[0]))

/* Appends ",opt" (or "opt") to *list, escaping ',' and '\' in the way
 * libfuse's option parser undoes. */
static cbfs_err cbfs_options_append(char **list, const char *opt)
{
    const size_t old = *list ? strlen(*list) : 0;
    char *p = realloc(*list, old + 2 * strlen(opt) + 2);
    if (!p) return CBFS_E_NOMEM;
    *list = p;
    p += old;
    if (old) *p++ = ',';
    for (const char *s = opt; *s; s++) {
        if (*s == ',' || *s == '\\') *p++ = '\\';
        *p++ = *s;
    }
    *p = '\0';
    return CBFS_OK;
}

static cbfs_err cbfs_options_add_fuse(struct cbfs_options *o, const char *opt)
{
    return cbfs_options_append(&o->fuse_opts, opt);
}

static cbfs_err cbfs_options_uint(const char *key, const char *val, unsigned min, unsigned max,
                                  unsigned *out, char *msg, size_t cap)
{
    char *end;
    errno = 0;
    const unsigned long v = strtoul(val, &end, 10);
    if (errno || end == val || *end || val[0] == '-' || v < min || v > max) {
        snprintf(msg, cap, "%s=%s: give a whole number from %u to %u", key, val, min, max);
        return CBFS_E_INVAL;
    }
    *out = (unsigned)v;
    return CBFS_OK;
}

static cbfs_err cbfs_options_size(const char *key, const char *val, uint64_t *out, char *msg,
                                  size_t cap)
{
    if (cbfs_parse_size(val, out) != CBFS_OK) {
        snprintf(msg, cap, "%s=%s is not a size; write it like 64M or 1G", key, val);
        return CBFS_E_INVAL;
    }
    return CBFS_OK;
}

/* Does the codec have a level worth choosing? (none has a single level) */
static bool cbfs_codec_has_levels(const struct cbfs_codec_ops *c)
{
    return c->min_level < c->max_level;
}

/* One key[=value] item of an -o list (already unescaped). */
static cbfs_err cbfs_options_one(struct cbfs_options *o, char *item, char *msg, size_t cap)
{
    if (*item == '\0') return CBFS_OK; /* "a,,b": harmless */
    char *val = strchr(item, '=');
    if (val) *val++ = '\0';
    const char *key = item;
    cbfs_err e;

#define CBFS_NEED_VALUE()                                                                      \
    do {                                                                                       \
        if (!val || !*val) {                                                                   \
            snprintf(msg, cap, "option %s needs a value (%s=...)", key, key);                  \
            return CBFS_E_INVAL;                                                               \
        }                                                                                      \
    } while (0)
#define CBFS_NO_VALUE()                                                                        \
    do {                                                                                       \
        if (val) {                                                                             \
            snprintf(msg, cap, "option %s takes no value; write just '%s'", key, key);         \
            return CBFS_E_INVAL;                                                               \
        }                                                                                      \
    } while (0)

    if (strcmp(key, "codec") == 0) {
        CBFS_NEED_VALUE();
        e = cbfs_codec_parse(val, &o->codec, &o->level, msg, cap);
        if (e) return e;
        o->codec_set = true;
        o->level_set = strchr(val, ':') != NULL;
        return CBFS_OK;
    }
    if (strcmp(key, "level") == 0) {
        CBFS_NEED_VALUE();
        char *end;
        errno = 0;
        const long lv = strtol(val, &end, 10);
        if (errno || end == val || *end || lv < -1000000 || lv > 1000000) {
            snprintf(msg, cap, "level=%s is not a whole number", val);
            return CBFS_E_INVAL;
        }
        o->level_pending = true;
        o->level_pending_value = (int)lv;
        return CBFS_OK;
    }
    if (strcmp(key, "block_size") == 0) {
        CBFS_NEED_VALUE();
        uint64_t bs;
        if (cbfs_parse_size(val, &bs) != CBFS_OK || bs < CBFS_BLOCK_MIN || bs > CBFS_BLOCK_MAX ||
            (bs & (bs - 1))) {
            snprintf(msg, cap,
                     "block_size=%s is not a power of two from 4K to 16M; use e.g. 64K, 1M or 4M",
                     val);
            return CBFS_E_INVAL;
        }
        o->block_size = (uint32_t)bs;
        o->block_size_set = true;
        return CBFS_OK;
    }
    if (strcmp(key, "workers") == 0) {
        CBFS_NEED_VALUE();
        return cbfs_options_uint(key, val, 0, CBFS_OPT_WORKERS_MAX, &o->workers, msg, cap);
    }
    if (strcmp(key, "readahead") == 0) {
        CBFS_NEED_VALUE();
        return cbfs_options_uint(key, val, 0, CBFS_OPT_READAHEAD_MAX, &o->readahead, msg, cap);
    }
    if (strcmp(key, "cache_size") == 0) {
        CBFS_NEED_VALUE();
        return cbfs_options_size(key, val, &o->cache_bytes, msg, cap);
    }
    if (strcmp(key, "inflight") == 0) {
        CBFS_NEED_VALUE();
        return cbfs_options_size(key, val, &o->inflight_bytes, msg, cap);
    }
    if (strcmp(key, "attr_timeout") == 0) {
        CBFS_NEED_VALUE();
        char *end;
        errno = 0;
        const double t = strtod(val, &end);
        if (errno || end == val || *end || !isfinite(t) || t < 0 || t > 86400.0) {
            snprintf(msg, cap, "attr_timeout=%s: give seconds from 0 to 86400, e.g. 1 or 0.5",
                     val);
            return CBFS_E_INVAL;
        }
        o->attr_timeout = t;
        return CBFS_OK;
    }
    if (strcmp(key, "writeback_cache") == 0) {
        CBFS_NO_VALUE();
        o->writeback_cache = true;
        return CBFS_OK;
    }
    if (strcmp(key, "debug") == 0) {
        CBFS_NO_VALUE();
        o->debug = true;
        o->foreground = true;
        return CBFS_OK;
    }
    if (strcmp(key, "ro") == 0 || strcmp(key, "rw") == 0) {
        CBFS_NO_VALUE();
        o->readonly = key[1] == 'o';
        return CBFS_OK;
    }
    if (CBFS_IN_LIST(key, cbfs_fuse_flags)) {
        CBFS_NO_VALUE();
        return cbfs_options_add_fuse(o, key);
    }
    if (strcmp(key, "fsname") == 0 || strcmp(key, "subtype") == 0) {
        CBFS_NEED_VALUE();
        if (key[0] == 'f')
            o->fsname_set = true;
        else
            o->subtype_set = true;
        char buf[4200];
        if (snprintf(buf, sizeof buf, "%s=%s", key, val) >= (int)sizeof buf) {
            snprintf(msg, cap, "option %s: value too long", key);
            return CBFS_E_INVAL;
        }
        return cbfs_options_add_fuse(o, buf);
    }
    /* fstab noise: mount(8) and systemd options, user=NAME from user mounts,
     * x-* (x-systemd.automount, ...) and comment=... */
    if (CBFS_IN_LIST(key, cbfs_noise_flags) || strncmp(key, "x-", 2) == 0 ||
        strcmp(key, "comment") == 0 || strcmp(key, "user") == 0)
        return CBFS_OK;

    snprintf(msg, cap, "unknown mount option '%s'; see mount.cbfs(8) for the supported options",
             key);
    return CBFS_E_INVAL;
#undef CBFS_NEED_VALUE
#undef CBFS_NO_VALUE
}

/* Splits one -o argument at unescaped commas ("\," is a literal comma). */
static cbfs_err cbfs_options_list(struct cbfs_options *o, const char *list, char *msg,
                                  size_t cap)
{
    char *item = malloc(strlen(list) + 1);
    if (!item) return CBFS_E_NOMEM;
    cbfs_err e = CBFS_OK;
    size_t n = 0;
    for (const char *s = list;; s++) {
        if (*s == '\\' && s[1]) {
            item[n++] = *++s;
            continue;
        }
        if (*s == ',' || *s == '\0') {
            item[n] = '\0';
            e = cbfs_options_one(o, item, msg, cap);
            n = 0;
            if (e || *s == '\0') break;
            continue;
        }
        item[n++] = *s;
    }
    free(item);
    return e;
}

/* A pending level=N: check it against the codec it applies to, then make it
 * the level (it wins over codec=NAME:N, whatever the order). */
static cbfs_err cbfs_options_apply_level(struct cbfs_options *o, char *msg, size_t cap)
{
    if (!cbfs_codec_has_levels(o->codec)) {
        snprintf(msg, cap,
                 "level=%d given, but codec %s has no levels; choose a codec with levels "
                 "(e.g. codec=zstd) or drop level=",
                 o->level_pending_value, o->codec->name);
        return CBFS_E_CODEC_LEVEL;
    }
    const cbfs_err e = cbfs_codec_check_level(o->codec, o->level_pending_value, msg, cap);
    if (e) return e;
    o->level = o->level_pending_value;
    o->level_set = true;
    o->level_pending = false;
    return CBFS_OK;
}

cbfs_err cbfs_options_parse(int argc, char *const argv[], struct cbfs_options *o, char *msg,
                            size_t msg_cap)
{
    static const struct option longopts[] = {
        {"help", no_argument, NULL, 'h'},
        {"version", no_argument, NULL, 'V'},
        {"foreground", no_argument, NULL, 'f'},
        {"debug", no_argument, NULL, 'd'},
        {NULL, 0, NULL, 0},
    };
    cbfs_err e = CBFS_OK;
    const char *pos[3];
    int npos = 0;

    memset(o, 0, sizeof *o);
    o->readahead = CBFS_OPT_READAHEAD_DEFAULT;
    o->attr_timeout = CBFS_OPT_ATTR_TIMEOUT_DEFAULT;
    if (msg_cap) msg[0] = '\0';

    /* Leading '-': positionals come back in order as option 1, so the mount(8)
     * order "SOURCE DIR -o OPTS" works even with POSIXLY_CORRECT set. */
    opterr = 0;
    optind = 0; /* glibc: full re-initialisation */
    int c;
    while ((c = getopt_long(argc, argv, "-fdsnvo:t:hV", longopts, NULL)) != -1) {
        switch (c) {
        case 1:
            if (npos < 3) pos[npos] = optarg;
            npos++;
            break;
        case 'f': o->foreground = true; break;
        case 'd':
            o->debug = true;
            o->foreground = true;
            break;
        case 's': /* mount(8): sloppy, no mtab, verbose: accepted and ignored */
        case 'n':
        case 'v': break;
        case 't': /* mount(8) passes -t type.subtype only for such types, e.g. as
                   * /sbin/mount.fuse.cbfs for fstab type fuse.cbfs */
            if (strcmp(optarg, "cbfs") != 0 && strncmp(optarg, "cbfs.", 5) != 0 &&
                strcmp(optarg, "fuse.cbfs") != 0) {
                snprintf(msg, msg_cap, "-t %s: this helper mounts only types cbfs and fuse.cbfs",
                         optarg);
                e = CBFS_E_INVAL;
                goto out;
            }
            break;
        case 'o':
            e = cbfs_options_list(o, optarg, msg, msg_cap);
            if (e) goto out;
            break;
        case 'h': o->help = true; return CBFS_OK;
        case 'V': o->version = true; return CBFS_OK;
        case ':':
        case '?':
        default:
            if (optopt == 'o')
                snprintf(msg, msg_cap, "-o needs an option list, e.g. -o codec=zstd:3");
            else if (optopt)
                snprintf(msg, msg_cap, "unknown flag -%c; run mount.cbfs --help", optopt);
            else
                snprintf(msg, msg_cap, "unknown flag %s; run mount.cbfs --help",
                         argv[optind - 1]);
            e = CBFS_E_INVAL;
            goto out;
        }
    }
    if (npos == 0) {
        snprintf(msg, msg_cap,
                 "no mount point given; usage: mount.cbfs [-o OPTS] [STORE] MOUNTPOINT");
        e = CBFS_E_INVAL;
        goto out;
    }
    if (npos > 2) {
        snprintf(msg, msg_cap, "too many arguments ('%s'); give [STORE] MOUNTPOINT only", pos[2]);
        e = CBFS_E_INVAL;
        goto out;
    }
    o->store = pos[0];
    o->mountpoint = pos[npos - 1];

    /* With codec= on the command line, level= is checked now; otherwise the
     * codec comes from store.conf and cbfs_options_resolve checks it. */
    if (o->level_pending && o->codec_set && (e = cbfs_options_apply_level(o, msg, msg_cap)))
        goto out;
    return CBFS_OK;
out:
    cbfs_options_free(o);
    return e;
}

cbfs_err cbfs_options_resolve(struct cbfs_options *o, const struct cbfs_store_conf *conf,
                              char *msg, size_t msg_cap)
{
    cbfs_err e;
    if (!o->codec_set) {
        if (conf) {
            o->codec = conf->codec;
            o->level = conf->level;
        } else {
            e = cbfs_codec_by_name("lz4", &o->codec);
            if (e) e = cbfs_codec_by_name("none", &o->codec);
            if (e) {
                snprintf(msg, msg_cap, "no default codec is built into this cbfs");
                return e;
            }
            o->level = o->codec->id == CBFS_CODEC_LZ4 ? 1 : o->codec->default_level;
        }
    }
    if (o->level_pending && (e = cbfs_options_apply_level(o, msg, msg_cap))) return e;
    if (!o->block_size_set) o->block_size = conf ? conf->block_size : CBFS_BLOCK_DEFAULT;
    if (o->inflight_bytes && o->inflight_bytes < o->block_size) {
        snprintf(msg, msg_cap,
                 "inflight=%llu bytes is less than one block (%u bytes); give at least the "
                 "block size, or 0 for the default",
                 (unsigned long long)o->inflight_bytes, o->block_size);
        return CBFS_E_INVAL;
    }
    return CBFS_OK;
}

cbfs_err cbfs_options_fuse_list(const struct cbfs_options *o, const char *store_path, char **out)
{
    char *list = NULL;
    cbfs_err e = cbfs_options_append(&list, "default_permissions");
    if (!e && !o->subtype_set) e = cbfs_options_append(&list, "subtype=cbfs");
    if (!e && !o->fsname_set) {
        char *fsname = malloc(strlen(store_path) + sizeof "fsname=");
        if (!fsname) {
            e = CBFS_E_NOMEM;
        } else {
            strcpy(fsname, "fsname=");
            strcat(fsname, store_path);
            e = cbfs_options_append(&list, fsname);
            free(fsname);
        }
    }
    if (!e && o->readonly) e = cbfs_options_append(&list, "ro");
    if (!e && o->fuse_opts) {
        /* Already escaped: append verbatim. */
        char *p = realloc(list, strlen(list) + strlen(o->fuse_opts) + 2);
        if (!p) {
            e = CBFS_E_NOMEM;
        } else {
            list = p;
            strcat(list, ",");
            strcat(list, o->fuse_opts);
        }
    }
    if (e) {
        free(list);
        return e;
    }
    *out = list;
    return CBFS_OK;
}

void cbfs_options_usage(FILE *out, const char *prog)
{
    fprintf(out,
            "usage: %s [-f] [-d] [-o OPTION[,OPTION...]]... [STORE] MOUNTPOINT\n"
            "       %s STORE MOUNTPOINT [-sfnv] -o OPTIONS     (mount(8) helper form)\n"
            "\n"
            "Mounts a cbfs compressed backup filesystem. With one directory the store is\n"
            "that directory itself (mounted over in place); with two, STORE backs MOUNTPOINT.\n"
            "\n"
            "  -f               stay in the foreground (logs to stderr)\n"
            "  -d, -o debug     debug logging and FUSE request tracing (implies -f)\n"
            "  -s, -n, -v       accepted from mount(8) and ignored\n"
            "  -h, --help       this text;  -V, --version  the version\n"
            "\n"
            "cbfs options (defaults come from STORE/.cbfs/store.conf):\n"
            "  codec=none|lz4|zstd|xz|bzip2[:LEVEL]   codec for new files (first mount: lz4)\n"
            "  level=N            compression level, checked against the codec's range\n"
            "  block_size=SIZE    power of two, 4K..16M (first mount: 1M)\n"
            "  workers=N          compression threads, 0..256 (0 = online CPUs)\n"
            "  cache_size=SIZE    decompressed-block cache (default 64M)\n"
            "  readahead=N        blocks decoded ahead of a sequential reader (default 8, 0 off)\n"
            "  inflight=SIZE      bound on data waiting for compression (default: automatic)\n"
            "  writeback_cache    let the kernel cache writes (default off)\n"
            "  attr_timeout=SEC   kernel attribute cache time (default 1.0)\n"
            "FUSE/kernel options: allow_other allow_root ro rw nosuid suid nodev dev noexec\n"
            "  exec noatime atime sync async dirsync auto_unmount fsname= subtype=\n"
            "fstab options dropped silently: defaults auto noauto user users nouser _netdev\n"
            "  nofail relatime x-* comment=*\n"
            "\n"
            "Exit status: 0 after a clean unmount (or when the mount succeeded, for the\n"
            "background form); 1 on any error. See mount.cbfs(8).\n",
            prog, prog);
}

void cbfs_options_free(struct cbfs_options *o)
{
    free(o->fuse_opts);
    o->fuse_opts = NULL;
}

/* mount.cbfs argument parsing: positional STORE/MOUNTPOINT, -f/-d and the
 * mount(8) flags, and every -o option sorted into cbfs settings (parsed by
 * settings.c), FUSE options for libfuse, or fstab noise. Values are validated
 * here, before anything is opened or mounted, each failure described in one
 * sentence. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>

#include "cbfs/options.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

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

/* One key[=value] item of an -o list (already unescaped). */
static cbfs_err cbfs_options_one(struct cbfs_options *o, char *item, char *msg, size_t cap)
{
    if (*item == '\0') return CBFS_OK; /* "a,,b": harmless */
    char *val = strchr(item, '=');
    if (val) *val++ = '\0';
    const char *key = item;
    if (cbfs_settings_known(key, CBFS_SCOPE_MOUNT))
        return cbfs_settings_set(&o->set, CBFS_SCOPE_MOUNT, key, val, msg, cap);

    const bool fsname = strcmp(key, "fsname") == 0, subtype = strcmp(key, "subtype") == 0;
    const bool flag = strcmp(key, "debug") == 0 || strcmp(key, "ro") == 0 ||
                      strcmp(key, "rw") == 0 || CBFS_IN_LIST(key, cbfs_fuse_flags);
    if (fsname || subtype || flag) {
        const cbfs_err e = cbfs_settings_check_value(key, val, !flag, msg, cap);
        if (e) return e;
    }
    if (strcmp(key, "debug") == 0) {
        o->debug = true;
        o->foreground = true;
        return CBFS_OK;
    }
    if (strcmp(key, "ro") == 0 || strcmp(key, "rw") == 0) {
        o->readonly = key[1] == 'o';
        return CBFS_OK;
    }
    if (flag) return cbfs_options_add_fuse(o, key);
    if (fsname || subtype) {
        if (fsname)
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
    cbfs_settings_init(&o->set);
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
    if ((o->set.given & (1u << CBFS_SET_CODEC)) &&
        (e = cbfs_settings_check_level(&o->set, msg, msg_cap)))
        goto out;
    return CBFS_OK;
out:
    cbfs_options_free(o);
    return e;
}

cbfs_err cbfs_options_resolve(struct cbfs_options *o, const struct cbfs_store_conf *conf,
                              char *msg, size_t msg_cap)
{
    return cbfs_settings_resolve(&o->set, conf, msg, msg_cap);
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

/* Prints title, the n words of list and extra, wrapped. */
static void cbfs_options_words(FILE *out, const char *title, const char *const *list, size_t n,
                               const char *extra)
{
    char text[512];
    size_t len = 0;
    for (size_t i = 0; i < n && len < sizeof text; i++)
        len += (size_t)snprintf(text + len, sizeof text - len, "%s ", list[i]);
    if (len < sizeof text) snprintf(text + len, sizeof text - len, "%s", extra);
    cbfs_print_wrapped(out, fprintf(out, "%s", title), 2, text);
}
#define CBFS_OPTIONS_WORDS(out, title, list, extra)                                            \
    cbfs_options_words((out), (title), (list), sizeof(list) / sizeof((list)[0]), (extra))
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
            "cbfs options. codec, level and block_size default to what the store's\n"
            "%s/%s records; the defaults shown are those of its first mount.\n",
            prog, prog, CBFS_STORE_DIR, CBFS_STORE_CONF);
    cbfs_settings_help(out, CBFS_SCOPE_MOUNT);
    CBFS_OPTIONS_WORDS(out, "FUSE/kernel options: ro rw", cbfs_fuse_flags, "fsname= subtype=");
    CBFS_OPTIONS_WORDS(out, "fstab options dropped silently:", cbfs_noise_flags,
                       "user= x-* comment=*");
    fprintf(out, "\n"
                 "Exit status: 0 after a clean unmount (or when the mount succeeded, for the\n"
                 "background form); 1 on any error. See mount.cbfs(8).\n");
}

void cbfs_options_free(struct cbfs_options *o)
{
    free(o->fuse_opts);
    o->fuse_opts = NULL;
}

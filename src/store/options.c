/* mount.cbfs argument parsing: positional STORE/MOUNTPOINT, -f/-d and the
 * mount(8) flags, and every -o option sorted into cbfs settings (parsed by
 * settings.c), kernel mount flags, FUSE options for libfuse, or fstab noise.
 * Values are validated here, before anything is opened or mounted, each
 * failure described in one sentence. */
#include <getopt.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mount.h>
#include <sys/statvfs.h>

#include "cbfs/options.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

/* Kernel mount flags by their mount(8) names: the MS_* bit each sets or
 * clears, and whether it is handed to libfuse at mount as given. ro and
 * noatime are handed on once, as they end up (cbfs_options_fuse_list), so
 * that the kernel shows what the daemon does. libfuse 3.14 refuses the other
 * atime words: the daemon honours nodiratime itself (cbfs_options_nodiratime),
 * and relatime, strictatime and lazytime change nothing on a FUSE mount,
 * whose atimes are the store's (mount.cbfs(8)). A remount gives the kernel
 * every one. */
static const struct cbfs_mount_flag {
    const char *name;
    unsigned long flag;
    bool set;     /* sets the bit (else clears it) */
    bool libfuse; /* passed to libfuse at mount */
} cbfs_mount_flags[] = {
    {"ro", MS_RDONLY, true, false},
    {"rw", MS_RDONLY, false, false},
    {"nosuid", MS_NOSUID, true, true},
    {"suid", MS_NOSUID, false, true},
    {"nodev", MS_NODEV, true, true},
    {"dev", MS_NODEV, false, true},
    {"noexec", MS_NOEXEC, true, true},
    {"exec", MS_NOEXEC, false, true},
    {"sync", MS_SYNCHRONOUS, true, true},
    {"async", MS_SYNCHRONOUS, false, true},
    {"dirsync", MS_DIRSYNC, true, true},
    {"noatime", MS_NOATIME, true, false},
    {"atime", MS_NOATIME, false, false},
    {"nodiratime", MS_NODIRATIME, true, false},
    {"diratime", MS_NODIRATIME, false, false},
    {"relatime", MS_RELATIME, true, false},
    {"norelatime", MS_RELATIME, false, false},
    {"strictatime", MS_STRICTATIME, true, false},
    {"nostrictatime", MS_STRICTATIME, false, false},
    {"lazytime", MS_LAZYTIME, true, false},
    {"nolazytime", MS_LAZYTIME, false, false},
};
#define CBFS_NFLAGS_ (sizeof cbfs_mount_flags / sizeof cbfs_mount_flags[0])

/* Options handed to libfuse unchanged (libfuse's own). */
static const char *const cbfs_fuse_flags[] = {"allow_other", "allow_root", "auto_unmount"};

/* What the kernel shows for a FUSE mount besides the flags; mount(8) copies
 * them from the mount table into a remount's options. */
static const char *const cbfs_kernel_shown[] = {"user_id", "group_id", "rootmode",
                                                "max_read", "blksize"};

/* fstab/mount(8) userspace options that mean nothing to the daemon. */
static const char *const cbfs_noise_flags[] = {
    "defaults", "auto", "noauto", "user", "users", "nouser", "owner", "noowner",
    "group",    "nogroup", "_netdev", "nofail", "default_permissions", /* always added */
};

/* @return the entry of list equal to s, or NULL. */
static const char *cbfs_in_list(const char *s, const char *const *list, size_t n)
{
    for (size_t i = 0; i < n; i++)
        if (strcmp(s, list[i]) == 0) return list[i];
    return NULL;
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

/* One key[=value] item of an -o list (cbfs_settings_item_fn; ctx is the
 * struct cbfs_options). */
static cbfs_err cbfs_options_one(void *ctx, const char *key, const char *val, char *msg,
                                 size_t cap)
{
    struct cbfs_options *const o = ctx;
    if (cbfs_settings_known(key, CBFS_SCOPE_MOUNT))
        return cbfs_settings_set(&o->set, CBFS_SCOPE_MOUNT, key, val, msg, cap);

    const struct cbfs_mount_flag *mf = NULL;
    for (size_t i = 0; i < CBFS_NFLAGS_ && !mf; i++)
        if (strcmp(key, cbfs_mount_flags[i].name) == 0) mf = &cbfs_mount_flags[i];
    const bool fsname = strcmp(key, "fsname") == 0, subtype = strcmp(key, "subtype") == 0;
    const char *const shown = CBFS_IN_LIST(key, cbfs_kernel_shown);
    const bool flag = mf || strcmp(key, "debug") == 0 || strcmp(key, "remount") == 0 ||
                      CBFS_IN_LIST(key, cbfs_fuse_flags);
    if (fsname || subtype || shown || flag) {
        const cbfs_err e = cbfs_settings_check_value(key, val, !flag, msg, cap);
        if (e) return e;
    }
    if (strcmp(key, "debug") == 0) {
        o->debug = true;
        o->foreground = true;
        return CBFS_OK;
    }
    if (strcmp(key, "remount") == 0) {
        o->remount = true;
        return CBFS_OK;
    }
    if (shown) {
        if (!o->kernel_shown) o->kernel_shown = shown; /* refused later unless remount */
        return CBFS_OK;
    }
    if (mf) {
        o->mflags_given |= mf->flag;
        if (mf->set)
            o->mflags |= mf->flag;
        else
            o->mflags &= ~mf->flag;
        return mf->libfuse ? cbfs_options_add_fuse(o, key) : CBFS_OK;
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
    if (CBFS_IN_LIST(key, cbfs_noise_flags)) {
        /* flags, but user=NAME (a user mount's): a value is a mistake that
         * would pass for a setting (default_permissions=0 turns nothing off) */
        return strcmp(key, "user") == 0 ? CBFS_OK
                                         : cbfs_settings_check_value(key, val, false, msg, cap);
    }
    if (strncmp(key, "x-", 2) == 0 || strcmp(key, "comment") == 0) {
        return CBFS_OK;
    }

    snprintf(msg, cap, "unknown mount option '%s'; see mount.cbfs(8) for the supported options",
             key);
    return CBFS_E_INVAL;
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
            if (strcmp(optarg, CBFS_FS_SUBTYPE) != 0 &&
                strncmp(optarg, CBFS_FS_SUBTYPE ".", sizeof CBFS_FS_SUBTYPE) != 0 &&
                strcmp(optarg, CBFS_FS_TYPE) != 0) {
                snprintf(msg, msg_cap,
                         "-t %s: this helper mounts only types " CBFS_FS_SUBTYPE
                         " and " CBFS_FS_TYPE,
                         optarg);
                e = CBFS_E_INVAL;
                goto out;
            }
            break;
        case 'o':
            e = cbfs_settings_split_list(optarg, cbfs_options_one, o, msg, msg_cap);
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
    /* "--" ends the flags: in the '-' mode getopt stops there, and what
     * follows is positional (it was dropped: "S -- M" mounted S in place) */
    for (; optind < argc; optind++) {
        if (npos < 3) pos[npos] = argv[optind];
        npos++;
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
    if (o->kernel_shown && !o->remount) {
        snprintf(msg, msg_cap,
                 "option %s= is the kernel's to set on a FUSE mount; drop it (it is accepted "
                 "only with remount, where mount(8) copies it from the mount table)",
                 o->kernel_shown);
        e = CBFS_E_INVAL;
        goto out;
    }

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

bool cbfs_options_readonly(const struct cbfs_options *o)
{
    return (o->mflags & MS_RDONLY) != 0;
}

bool cbfs_options_noatime(const struct cbfs_options *o)
{
    return (o->mflags & MS_NOATIME) && !(o->mflags & MS_STRICTATIME);
}

bool cbfs_options_nodiratime(const struct cbfs_options *o)
{
    return (o->mflags & MS_NODIRATIME) != 0;
}

unsigned long cbfs_options_remount_flags(const struct cbfs_options *o, unsigned long cur_st_flag)
{
    /* statvfs(3) reports the per-mount flags as ST_* bits */
    static const struct {
        unsigned long st, ms;
    } cur[] = {
        {ST_RDONLY, MS_RDONLY},         {ST_NOSUID, MS_NOSUID},
        {ST_NODEV, MS_NODEV},           {ST_NOEXEC, MS_NOEXEC},
        {ST_SYNCHRONOUS, MS_SYNCHRONOUS}, {ST_NOATIME, MS_NOATIME},
        {ST_NODIRATIME, MS_NODIRATIME}, {ST_RELATIME, MS_RELATIME},
    };
    unsigned long flags = 0;
    for (size_t i = 0; i < sizeof cur / sizeof cur[0]; i++)
        if (cur_st_flag & cur[i].st) flags |= cur[i].ms;
    return MS_REMOUNT | (flags & ~o->mflags_given) | o->mflags;
}

cbfs_err cbfs_options_fuse_list(const struct cbfs_options *o, const char *store_path, char **out)
{
    char *list = NULL;
    cbfs_err e = cbfs_options_append(&list, "default_permissions");
    if (!e && !o->subtype_set) e = cbfs_options_append(&list, "subtype=" CBFS_FS_SUBTYPE);
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
    if (!e && cbfs_options_readonly(o)) e = cbfs_options_append(&list, "ro");
    if (!e && cbfs_options_noatime(o)) e = cbfs_options_append(&list, "noatime");
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
            "  -f, --foreground stay in the foreground (logs to stderr)\n"
            "  -d, --debug      debug logging and FUSE request tracing (implies -f); also\n"
            "                   -o debug\n"
            "  -s, -n, -v       accepted from mount(8) and ignored\n"
            "  -t TYPE          passed by mount(8): " CBFS_FS_SUBTYPE ", " CBFS_FS_SUBTYPE
            ".SUBTYPE or " CBFS_FS_TYPE " only\n"
            "  -o remount,...   change the flags of a running mount (mount -o remount,ro)\n"
            "  -h, --help       this text;  -V, --version  the version\n"
            "\n"
            "cbfs options. codec, level and block_size default to what the store's\n"
            "%s/%s records; the defaults shown are those of its first mount.\n",
            prog, prog, CBFS_STORE_DIR, CBFS_STORE_CONF);
    cbfs_settings_help(out, CBFS_SCOPE_MOUNT);
    const char *flags[CBFS_NFLAGS_];
    for (size_t i = 0; i < CBFS_NFLAGS_; i++) flags[i] = cbfs_mount_flags[i].name;
    CBFS_OPTIONS_WORDS(out, "Kernel mount flags:", flags, "remount");
    CBFS_OPTIONS_WORDS(out, "FUSE options:", cbfs_fuse_flags, "fsname= subtype=");
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

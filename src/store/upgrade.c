/* Offline conversion of a layout-1 store (NAME.cbfsidx beside NAME) to layout
 * 2 (.cbfsidx/NAME): every sidecar is renamed into its directory's index
 * directory, the directories are fsynced, and only then store.conf records
 * layout 2. Each step is a rename or a mkdir, so a run cut short leaves every
 * sidecar at one of its two homes, and a rerun finishes the job. */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "cbfs/util.h"

struct cbfs_upgrade {
    uint64_t moved;
    char *msg;
    size_t cap;
    unsigned depth; /* directories below the root being converted now */
};

static cbfs_err cbfs_upgrade_dir(struct cbfs_upgrade *u, int dirfd, const char *display,
                                 bool in_root);

/* A regular file of directory dirfd: a layout-1 sidecar is moved to its
 * layout-2 home. Not inlined into cbfs_upgrade_entry, which recurses: its
 * buffers would be in every level's frame. @return CBFS_OK or the error (msg
 * written). */
__attribute__((noinline)) static cbfs_err cbfs_upgrade_file(struct cbfs_upgrade *u, int dirfd,
                                                            const char *display,
                                                            const char *name)
{
    char data[NAME_MAX + 1], sub[PATH_MAX];
    cbfs_err e;
    snprintf(sub, sizeof sub, "%s/%s", display, name);
    if (!cbfs_store_is_sidecar_name(name)) return CBFS_OK;
    if (cbfs_store_data_name(name, data, sizeof data) != CBFS_OK) return CBFS_OK;
    if (data[0] == '\0') { /* ".cbfsidx": the sidecar of no file, and layout 2's name */
        if (unlinkat(dirfd, name, 0) != 0) goto fail;
        return CBFS_OK;
    }
    char to[CBFS_STORE_SIDECAR_PATH_MAX];
    e = cbfs_store_sidecar_path(CBFS_LAYOUT_INDEXDIR, data, to, sizeof to);
    if (e == CBFS_OK) e = cbfs_store_sidecar_dir(CBFS_LAYOUT_INDEXDIR, dirfd);
    if (e) {
        snprintf(u->msg, u->cap, "%s: %s", sub, cbfs_err_str(e));
        return e;
    }
    /* replaces a copy an earlier run moved, if the daemon made this one since */
    if (cbfs_store_renameat2(dirfd, name, dirfd, to, 0) != 0) goto fail; /* no symlink */
    u->moved++;
    return CBFS_OK;
fail:
    e = cbfs_err_from_errno(errno);
    snprintf(u->msg, u->cap, "%s: %s", sub, cbfs_err_str(e));
    return e;
}

/* One entry of directory dirfd: a layout-1 sidecar is moved, a directory
 * is converted in turn. Its frame is small: it is one per level of the tree
 * (the path of a directory is on the heap). @return CBFS_OK or the error (msg
 * written). */
static cbfs_err cbfs_upgrade_entry(struct cbfs_upgrade *u, int dirfd, const char *display,
                                   const char *name, bool in_root)
{
    struct stat st;
    if (fstatat(dirfd, name, &st, AT_SYMLINK_NOFOLLOW) != 0) return CBFS_OK; /* raced away */
    if (in_root && strcmp(name, CBFS_STORE_DIR) == 0) return CBFS_OK;
    if (S_ISREG(st.st_mode)) return cbfs_upgrade_file(u, dirfd, display, name);
    if (!S_ISDIR(st.st_mode) || strcmp(name, CBFS_INDEX_DIR) == 0)
        return CBFS_OK; /* the index directory: ours, from an earlier run */
    const size_t len = strlen(display) + strlen(name) + 2;
    char *const sub = malloc(len);
    if (!sub) return CBFS_E_NOMEM;
    snprintf(sub, len, "%s/%s", display, name);
    cbfs_err e;
    if (u->depth >= CBFS_STORE_DEPTH_MAX) {
        snprintf(u->msg, u->cap, "%s: more than %u directories deep", sub,
                 CBFS_STORE_DEPTH_MAX);
        e = CBFS_E_INVAL;
    } else {
        const int fd = openat(dirfd, name, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
        if (fd < 0) {
            e = cbfs_err_from_errno(errno);
            snprintf(u->msg, u->cap, "%s: %s", sub, cbfs_err_str(e));
        } else {
            u->depth++;
            e = cbfs_upgrade_dir(u, fd, sub, false);
            u->depth--;
            close(fd);
        }
    }
    free(sub);
    return e;
}

/* fsync of directory dirfd's index directory (if any) and of dirfd itself:
 * the renames out of it and into the index are durable. */
static cbfs_err cbfs_upgrade_sync(int dirfd)
{
    const cbfs_err e = cbfs_store_sync_dir(dirfd, CBFS_INDEX_DIR);
    if (e != CBFS_OK && e != CBFS_E_NOENT) return e;
    return cbfs_store_sync_dir(dirfd, ".");
}

/* Converts directory dirfd (O_RDONLY) and everything below it. */
static cbfs_err cbfs_upgrade_dir(struct cbfs_upgrade *u, int dirfd, const char *display,
                                 bool in_root)
{
    /* names first: renames while reading the directory may show entries twice */
    char **names;
    size_t n;
    const int fd = openat(dirfd, ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    cbfs_err e = fd < 0 ? cbfs_err_from_errno(errno) : cbfs_dir_read_names(fd, &names, &n);
    if (e) {
        snprintf(u->msg, u->cap, "%s: cannot read directory: %s", display, cbfs_err_str(e));
        return e;
    }
    /* A file named CBFS_INDEX_DIR (the sidecar of no file) first: it is in
     * the way of the index directory, which a sidecar sorted before it
     * ("-x.cbfsidx") could not be moved into, on every run again. */
    for (size_t i = 0; i < n && e == CBFS_OK; i++)
        if (strcmp(names[i], CBFS_INDEX_DIR) == 0)
            e = cbfs_upgrade_entry(u, dirfd, display, names[i], in_root);
    for (size_t i = 0; i < n && e == CBFS_OK; i++)
        if (strcmp(names[i], CBFS_INDEX_DIR) != 0)
            e = cbfs_upgrade_entry(u, dirfd, display, names[i], in_root);
    cbfs_dir_free_names(names, n);
    if (e == CBFS_E_NOMEM) snprintf(u->msg, u->cap, "%s: out of memory", display);
    if (e == CBFS_OK && (e = cbfs_upgrade_sync(dirfd)) != CBFS_OK)
        snprintf(u->msg, u->cap, "%s: fsync: %s", display, cbfs_err_str(e));
    return e;
}

cbfs_err cbfs_store_upgrade(struct cbfs_store *st, const char *display, uint64_t *moved,
                            char *msg, size_t msg_cap)
{
    struct cbfs_store_conf conf;
    bool found;
    *moved = 0;
    cbfs_err e = cbfs_store_read_conf(st, &conf, &found, msg, msg_cap);
    if (e) return e;
    if (!found) {
        snprintf(msg, msg_cap, "no store.conf: not a store yet (mount it once, or cbfs mkfs)");
        return CBFS_E_INVAL;
    }
    if (conf.layout == CBFS_LAYOUT_NEWEST) return CBFS_OK;
    const int root = openat(cbfs_store_fd(st), ".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (root < 0) {
        snprintf(msg, msg_cap, "%s: %s", display, strerror(errno));
        return cbfs_err_from_errno(errno);
    }
    struct cbfs_upgrade u = {.msg = msg, .cap = msg_cap};
    e = cbfs_upgrade_dir(&u, root, display, true);
    close(root);
    *moved = u.moved;
    if (e) return e;
    /* every sidecar is at its new home, durably: now the store may say so */
    conf.layout = CBFS_LAYOUT_INDEXDIR;
    e = cbfs_store_write_conf(st, &conf);
    if (e) snprintf(msg, msg_cap, "cannot write store.conf: %s", cbfs_err_str(e));
    return e;
}

/* Store layout: which names in a store are cbfs's own (the metadata directory
 * in the root, sidecar names everywhere) and which regular files are cbfs
 * files. The rules are written out in include/cbfs/store.h and
 * docs/FORMAT.md; this file is their only implementation, with the one
 * rule for a sidecar's owner, mode and ACL. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cbfs/store.h"
#include "cbfs/util.h"

bool cbfs_store_is_sidecar_name(const char *name)
{
    const size_t n = strlen(name);
    return n >= CBFS_STORE_SUFFIX_LEN &&
           memcmp(name + n - CBFS_STORE_SUFFIX_LEN, CBFS_INDEX_SUFFIX, CBFS_STORE_SUFFIX_LEN) == 0;
}

bool cbfs_store_name_hidden(const char *name, bool in_root)
{
    if (in_root && strcmp(name, CBFS_STORE_DIR) == 0) return true;
    return cbfs_store_is_sidecar_name(name);
}

cbfs_err cbfs_store_sidecar_name(const char *name, char *buf, size_t cap)
{
    const size_t n = strlen(name);
    if (n > CBFS_STORE_NAME_MAX || n + CBFS_STORE_SUFFIX_LEN >= cap) return CBFS_E_NAMETOOLONG;
    memcpy(buf, name, n);
    memcpy(buf + n, CBFS_INDEX_SUFFIX, CBFS_STORE_SUFFIX_LEN + 1);
    return CBFS_OK;
}

cbfs_err cbfs_store_data_name(const char *sidecar, char *buf, size_t cap)
{
    if (!cbfs_store_is_sidecar_name(sidecar)) return CBFS_E_INVAL;
    const size_t n = strlen(sidecar) - CBFS_STORE_SUFFIX_LEN;
    if (n >= cap) return CBFS_E_NAMETOOLONG;
    memcpy(buf, sidecar, n);
    buf[n] = '\0';
    return CBFS_OK;
}

cbfs_err cbfs_store_has_frame_envelope(int fd, bool *framed)
{
    uint8_t head[CBFS_FRAME_ENVELOPE_SIZE];
    const cbfs_err e = cbfs_pread_full(fd, head, sizeof head, 0);
    *framed = e == CBFS_OK && cbfs_frame_is_envelope(head, sizeof head);
    return e == CBFS_E_TRUNCATED ? CBFS_OK : e;
}

bool cbfs_store_is_root(int dirfd)
{
    struct stat st;
    return fstatat(dirfd, CBFS_STORE_DIR, &st, AT_SYMLINK_NOFOLLOW) == 0 && S_ISDIR(st.st_mode);
}

/* "/proc/self/fd/N": xattrs and chmod of an O_PATH fd go through its path. */
static void cbfs_store_fdpath(char *buf, size_t cap, int fd)
{
    (void)snprintf(buf, cap, "/proc/self/fd/%d", fd);
}

/* Copies the access ACL of the data file (path dpath) to the sidecar (ipath),
 * or removes the sidecar's where the data file has none. @return 0 or errno;
 * a store without ACLs (ENOTSUP) is not an error. */
static int cbfs_store_sidecar_acl(const char *dpath, const char *ipath)
{
    const ssize_t n = getxattr(dpath, CBFS_STORE_XATTR_ACL, NULL, 0);
    if (n == -1 && (errno == ENODATA || errno == ENOTSUP)) {
        if (removexattr(ipath, CBFS_STORE_XATTR_ACL) == -1 && errno != ENODATA && errno != ENOTSUP)
            return errno;
        return 0;
    }
    if (n == -1) return errno;
    char *const acl = malloc((size_t)n + 1); /* + 1: never malloc(0) */
    if (!acl) return ENOMEM;
    int err = 0;
    const ssize_t got = getxattr(dpath, CBFS_STORE_XATTR_ACL, acl, (size_t)n);
    if (got == -1)
        err = errno; /* ERANGE if it grew meanwhile: the caller's next change syncs again */
    else if (setxattr(ipath, CBFS_STORE_XATTR_ACL, acl, (size_t)got, 0) == -1)
        err = errno;
    free(acl);
    return err;
}

cbfs_err cbfs_store_sidecar_match(int data_fd, int idx_fd)
{
    char dpath[32], ipath[32];
    struct stat st;
    if (fstat(data_fd, &st) == -1) return cbfs_err_from_errno(errno);
    if (geteuid() == 0 && fchownat(idx_fd, "", st.st_uid, st.st_gid, AT_EMPTY_PATH) == -1)
        return cbfs_err_from_errno(errno);
    cbfs_store_fdpath(dpath, sizeof dpath, data_fd);
    cbfs_store_fdpath(ipath, sizeof ipath, idx_fd);
    /* the ACL first: setting one rewrites the group bits of the mode, and
     * chmod with the data file's bits then leaves the copied ACL as it is */
    const int err = cbfs_store_sidecar_acl(dpath, ipath);
    if (err) return cbfs_err_from_errno(err);
    if (chmod(ipath, st.st_mode & 0777) == -1) return cbfs_err_from_errno(errno);
    return CBFS_OK;
}

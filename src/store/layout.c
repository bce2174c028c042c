/* Store layout: which names in a store are cbfs's own (the metadata directory
 * in the root, sidecar names everywhere) and which regular files are cbfs
 * files. The rules are written out in include/cbfs/store.h and
 * docs/FORMAT.md; this file is their only implementation. */
#include <fcntl.h>
#include <string.h>
#include <sys/stat.h>

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

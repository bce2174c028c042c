/* Error messages and errno mapping generated from the one CBFS_ERRORS list. */
#include <errno.h>

#include "cbfs/err.h"

static const struct {
    int eno;
    const char *msg;
} cbfs_err_table[] = {
#define CBFS_ERR_ROW_(name, eno, msg) {eno, msg},
    CBFS_ERRORS(CBFS_ERR_ROW_)
#undef CBFS_ERR_ROW_
};

const char *cbfs_err_str(cbfs_err e)
{
    if ((unsigned)e >= CBFS_E_COUNT_) return "unknown cbfs error";
    return cbfs_err_table[e].msg;
}

int cbfs_err_errno(cbfs_err e)
{
    if ((unsigned)e >= CBFS_E_COUNT_) return EIO;
    return cbfs_err_table[e].eno;
}

cbfs_err cbfs_err_from_errno(int eno)
{
    switch (eno) {
    case 0: return CBFS_OK;
    case ENOMEM: return CBFS_E_NOMEM;
    case EINVAL: return CBFS_E_INVAL;
    case ENOSPC: return CBFS_E_NOSPC;
    case EDQUOT: return CBFS_E_DQUOT;
    case EFBIG: return CBFS_E_FBIG;
    case EROFS: return CBFS_E_ROFS;
    case EACCES: return CBFS_E_ACCES;
    case EPERM: return CBFS_E_PERM;
    case ENOENT: return CBFS_E_NOENT;
    case EEXIST: return CBFS_E_EXIST;
    case ENOTEMPTY: return CBFS_E_NOTEMPTY;
    case ENOTDIR: return CBFS_E_NOTDIR;
    case ENAMETOOLONG: return CBFS_E_NAMETOOLONG;
    case EBADF: return CBFS_E_BADF;
    case EMFILE: return CBFS_E_MFILE;
    case ENFILE: return CBFS_E_NFILE;
    case ESTALE: return CBFS_E_STALE;
    case EBUSY:
    case EWOULDBLOCK: return CBFS_E_BUSY;
    case EOPNOTSUPP: return CBFS_E_NOTSUP;
    default: return CBFS_E_IO;
    }
}

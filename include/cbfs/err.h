/* cbfs error codes: one X-macro list gives the enum, the message and the errno
 * used at the FUSE boundary. Every cbfs function returns cbfs_err (0 = success)
 * and passes sizes back through pointer arguments. errno values are produced
 * only by cbfs_err_errno(), called from src/fuse. */
#ifndef CBFS_ERR_H
#define CBFS_ERR_H

#include <stdbool.h>

/* X(name, errno at the FUSE boundary, message) */
#define CBFS_ERRORS(X)                                                                  \
    X(OK, 0, "success")                                                                 \
    X(NOMEM, ENOMEM, "out of memory")                                                   \
    X(INVAL, EINVAL, "invalid argument")                                                \
    X(IO, EIO, "input/output error on the store")                                       \
    X(NOSPC, ENOSPC, "no space left on the store")                                      \
    X(DQUOT, EDQUOT, "disk quota exceeded on the store")                                \
    X(FBIG, EFBIG, "file too large")                                                    \
    X(ROFS, EROFS, "store is read-only")                                                \
    X(ACCES, EACCES, "permission denied")                                               \
    X(PERM, EPERM, "operation not permitted")                                           \
    X(NOENT, ENOENT, "no such file or directory")                                       \
    X(EXIST, EEXIST, "file exists")                                                     \
    X(NOTEMPTY, ENOTEMPTY, "directory not empty")                                       \
    X(NOTDIR, ENOTDIR, "not a directory")                                               \
    X(NAMETOOLONG, ENAMETOOLONG, "file name too long")                                  \
    X(BADF, EBADF, "bad file descriptor")                                               \
    X(MFILE, EMFILE,                                                                    \
      "too many open files (the daemon: raise its LimitNOFILE; the cbfs tool: ulimit -n)") \
    X(NFILE, ENFILE, "too many open files in the system")                               \
    X(STALE, ESTALE, "the object is gone from the store")                               \
    X(BUSY, EBUSY, "store is busy (another cbfs daemon holds its lock)")                \
    X(NOTSUP, EOPNOTSUPP, "operation not supported")                                    \
    X(NXIO, ENXIO, "no data at or after this offset")                                   \
    X(CORRUPT, EIO, "corrupt data: checksum mismatch")                                  \
    X(TRUNCATED, EIO, "truncated data: frame or record ends early")                     \
    X(BAD_MAGIC, EIO, "not a cbfs frame or index record")                               \
    X(VERSION, EIO, "unsupported cbfs format version (written by a newer cbfs?)")       \
    X(WRONG_FILE, EIO, "index sidecar belongs to another data file")                    \
    X(BLOCK_SIZE, EIO, "block size of a lost index cannot be told from its frames")     \
    X(UNREACHABLE, EIO, "frames past damage cannot be reached without the sidecar's records") \
    X(CODEC_UNKNOWN, EINVAL, "unknown codec")                                           \
    X(CODEC_LEVEL, EINVAL, "compression level out of range for the codec")              \
    X(CODEC_MISSING, EOPNOTSUPP, "codec not built into this cbfs")                      \
    X(CODEC_FAIL, EIO, "codec reported an internal failure")                            \
    X(DST_SMALL, EIO, "output buffer too small (internal error)")                       \
    X(SHUTDOWN, EIO, "cbfs is shutting down")                                           \
    X(NOT_REGULAR, EINVAL,                                                              \
      "not a regular file where cbfs keeps one (a FIFO, device, socket, symlink or "     \
      "directory put in the store)")                                                    \
    X(PLAIN_FRAMED, EINVAL,                                                             \
      "a plain (codec=none) file cannot start with a cbfs frame header: it would read "  \
      "back as a compressed file")                                                       \
    X(CHANGED, EIO, "the block changed while it was read (internal: look again)")          \
    X(THREADS, EAGAIN,                                                                  \
      "cannot start a thread (a limit on processes or threads: ulimit -u, the service's " \
      "TasksMax, a cgroup's pids.max; or no memory for its stack)")

typedef enum cbfs_err {
#define CBFS_ERR_ENUM_(name, eno, msg) CBFS_E_##name,
    CBFS_ERRORS(CBFS_ERR_ENUM_)
#undef CBFS_ERR_ENUM_
        CBFS_E_COUNT_
} cbfs_err;

#define CBFS_OK CBFS_E_OK

/* @return a static, human-readable message; never NULL (unknown codes too). */
const char *cbfs_err_str(cbfs_err e);
/* @return the errno to hand to the kernel for e (0 for CBFS_OK). FUSE layer only. */
int cbfs_err_errno(cbfs_err e);

/* Errors that mean "no valid frame or record here" (what was read is not
 * one: stop scanning, or look elsewhere) rather than "could not look" (an
 * I/O error, no memory), which must never be taken for the first. */
static inline bool cbfs_err_is_format(cbfs_err e)
{
    return e == CBFS_E_TRUNCATED || e == CBFS_E_BAD_MAGIC || e == CBFS_E_CORRUPT ||
           e == CBFS_E_FBIG;
}
/* Maps an errno from a failed system call to the nearest cbfs_err (EIO-like
 * errors to CBFS_E_IO). Used right where a syscall fails, so errno never
 * travels further up than one line. */
cbfs_err cbfs_err_from_errno(int eno);

#endif

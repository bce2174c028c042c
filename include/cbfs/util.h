/* Small shared helpers: little-endian field access for the on-disk format,
 * the block hash, size parsing, full-length pread/pwrite and a directory's
 * names. */
#ifndef CBFS_UTIL_H
#define CBFS_UTIL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#include "cbfs/err.h"

static inline void cbfs_put_le16(uint8_t *p, uint16_t v)
{
    p[0] = (uint8_t)v;
    p[1] = (uint8_t)(v >> 8);
}
static inline void cbfs_put_le32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline void cbfs_put_le64(uint8_t *p, uint64_t v)
{
    for (int i = 0; i < 8; i++) p[i] = (uint8_t)(v >> (8 * i));
}
static inline uint16_t cbfs_get_le16(const uint8_t *p)
{
    return (uint16_t)(p[0] | (p[1] << 8));
}
static inline uint32_t cbfs_get_le32(const uint8_t *p)
{
    uint32_t v = 0;
    for (int i = 3; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}
static inline uint64_t cbfs_get_le64(const uint8_t *p)
{
    uint64_t v = 0;
    for (int i = 7; i >= 0; i--) v = (v << 8) | p[i];
    return v;
}

/* XXH3-64 (seed 0): the one hash of the on-disk format. */
uint64_t cbfs_hash64(const void *data, size_t len);

/* @return 1 if all len bytes are zero (len 0 counts as zero). */
int cbfs_is_zero(const void *data, size_t len);

/* Parses "123", "64K", "4M", "1G" (binary units) into *out.
 * @return CBFS_E_INVAL on syntax error or overflow. */
cbfs_err cbfs_parse_size(const char *s, uint64_t *out);
/* Parses seconds: digits and one point only (strtod would also take " 1", hex,
 * 1e3, inf and nan), min <= value <= max. @return true on success. */
bool cbfs_parse_seconds(const char *s, double min, double max, double *out);
/* Parses a whole number in [min, max]: digits, '-' only for a negative range
 * (strtol would also take " 5", "+5", and strtoul wraps "-1"). @return true
 * on success. */
bool cbfs_parse_long(const char *s, long min, long max, long *out);
/* The reverse: n in the largest unit that divides it exactly ("256K", "16M",
 * "1G", "1000"), as cbfs_parse_size reads it back. @return buf. */
const char *cbfs_format_size(uint64_t n, char *buf, size_t cap);
/* Prints text's words to out, the cursor being at column col, breaking lines
 * before column 80 and indenting continuation lines by indent spaces; ends
 * the line. For help texts. */
void cbfs_print_wrapped(FILE *out, int col, int indent, const char *text);

/* The reads cbfs makes for itself (an index load, a stored block read to
 * rewrite part of it) leave a file's atime alone, as a local filesystem's
 * own reads do; reads for a user go through the fd as it was opened, under
 * the store's atime policy. O_NOATIME is a flag of the open file
 * description: cbfs_noatime_begin turns it on where it is off and returns
 * the flags to put back (-1: it changed nothing), cbfs_noatime_end(fd,
 * saved) puts them back. A read of fd by another thread in between leaves
 * the atime too. Where the process may not (EPERM: neither the file's owner
 * nor CAP_FOWNER), nothing changes and the atime moves as before. */
int cbfs_noatime_begin(int fd);
void cbfs_noatime_end(int fd, int saved);

/* pread/pwrite that loop until len bytes moved: a store may move fewer
 * bytes than asked in one call anywhere (NFS, CIFS, a FUSE store; ENOSPC
 * after part of a write), not only at the end. *moved (where given): the
 * bytes moved, also on an error. pread_upto stops early only at the end of
 * the file; pread_full calls that CBFS_E_TRUNCATED. EINTR is retried; a
 * write of 0 bytes is CBFS_E_IO; other errors mapped. */
cbfs_err cbfs_pread_upto(int fd, void *buf, size_t len, uint64_t off, size_t *moved);
cbfs_err cbfs_pread_full(int fd, void *buf, size_t len, uint64_t off);
cbfs_err cbfs_pwrite_upto(int fd, const void *buf, size_t len, uint64_t off, size_t *moved);
cbfs_err cbfs_pwrite_full(int fd, const void *buf, size_t len, uint64_t off);

/* Reads the entry names of directory fd (consumed: closed on every path), "."
 * and ".." left out, into a sorted malloc'd array of malloc'd strings (NULL
 * for an empty directory): a list taken before the caller renames entries
 * (readdir may then show one twice), in the same order on every run. On
 * error *names is NULL and *count 0. @return 0 or the error of reading. */
cbfs_err cbfs_dir_read_names(int fd, char ***names, size_t *count);
/* Frees what cbfs_dir_read_names gave; NULL is a no-op. */
void cbfs_dir_free_names(char **names, size_t count);

/* Undoes the octal escapes of /proc/self/mounts and mountinfo fields (\040
 * for a space, \011, \012, \134) in place. */
void cbfs_mounts_unescape(char *s);

/* The fields of one line of /proc/self/mountinfo ("ID PARENT MAJ:MIN ROOT
 * POINT OPTIONS [TAGS...] - TYPE SOURCE SUPER_OPTIONS"), pointing into the
 * line, root, point and source unescaped. */
struct cbfs_mountinfo {
    const char *dev;    /* MAJ:MIN */
    const char *root;   /* the directory of its file system it shows ("/"; a bind
                           mount's directory) */
    const char *point;  /* where it is mounted */
    const char *type;   /* "ext4", "fuse.cbfs", ... */
    const char *source; /* the file system's source (a FUSE mount's fsname) */
    const char *super;  /* its super options (a FUSE mount's user_id=, ...) */
};
/* Splits line, one line of /proc/self/mountinfo (changed in place; a trailing
 * newline is cut), into *m: the one reader of that format. @return false
 * where it is not such a line. */
bool cbfs_mountinfo_parse(char *line, struct cbfs_mountinfo *m);

/* The device (MAJ:MIN, cap bytes) of the topmost FUSE mount at mnt (an
 * absolute path without symlinks), from /proc/self/mountinfo. @return
 * CBFS_E_NOENT if no FUSE mount is at mnt, else 0 or the error of reading. */
cbfs_err cbfs_mount_fuse_dev(const char *mnt, char *dev, size_t cap);

/* Sets the kernel read-ahead of the mount at mnt (an absolute path without
 * symlinks) to bytes, in whole KiB: its bdi's read_ahead_kb, found through the
 * topmost FUSE mount at mnt in /proc/self/mountinfo (no request reaches the
 * mount, so its own daemon may call this). Needs root. @return CBFS_E_NOENT
 * if no FUSE mount is at mnt, CBFS_E_NOTSUP if its bdi has no read_ahead_kb,
 * else 0 or the error of writing it. */
cbfs_err cbfs_mount_set_read_ahead(const char *mnt, uint64_t bytes);

/* 64 random bits from getrandom(2) (file ids, store uuids). */
uint64_t cbfs_random64(void);

/* Monotonic clock in nanoseconds (stage timers). */
uint64_t cbfs_now_ns(void);

/* "/proc/self/fd/N": the path through which the calls that take no fd (xattrs,
 * chmod, ACLs, linkat with AT_SYMLINK_FOLLOW, a reopen of an O_PATH fd) reach
 * the file that fd names. The one formatter for the daemon, store and tools. */
#define CBFS_PROCFD_MAX 32
void cbfs_procfd(char buf[CBFS_PROCFD_MAX], int fd);
/* The path the kernel gives for what fd names (readlink of its /proc/self/fd
 * path) into buf, NUL-terminated. @return CBFS_OK, CBFS_E_NAMETOOLONG where it
 * does not fit in cap (buf then holds it cut), or the readlink's error. */
cbfs_err cbfs_procfd_path(int fd, char *buf, size_t cap);

#endif

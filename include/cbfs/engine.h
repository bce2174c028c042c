/* Engine: the worker pool, per-file block state (open block, pending frames,
 * in-order committer), the decompressed-block cache and read-ahead. The FUSE
 * layer maps inodes to struct cbfs_file and calls only what is declared here;
 * the engine knows nothing of FUSE (no errno, no fuse_req).
 *
 * Thread safety: every function may be called from any thread concurrently,
 * on the same or different files. The lock order, and the lock that guards
 * each shared field, are written at the top of src/engine/engine_impl.h. */
#ifndef CBFS_ENGINE_H
#define CBFS_ENGINE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"

struct cbfs_engine;
struct cbfs_file;

struct cbfs_engine_config {
    uint32_t block_size;     /* power of two, CBFS_BLOCK_MIN..CBFS_BLOCK_MAX */
    unsigned workers;        /* compression/decompression threads; 0 = online CPUs */
    uint64_t cache_bytes;    /* decompressed-block LRU, bytes of buffers; not 0 (the
                                daemon's default is the settings table's cache_size) */
    unsigned readahead;      /* max blocks decoded ahead of a sequential reader; 0 = off */
    uint64_t inflight_bytes; /* uncompressed bytes queued or compressing, all files;
                                0 = default: CBFS_INFLIGHT_PER_WORKER per worker, at most
                                CBFS_INFLIGHT_MAX, or 4 blocks per worker where that is
                                more */
    uint64_t sync_lag_bytes; /* a file's frames wait for their sidecar records until its
                                next sync (a record goes down only once its frame is
                                durable); a writer that has this many frame bytes waiting
                                (or one record per CBFS_SYNC_LAG_PER_REC of it) makes them
                                durable and appends the records itself, which bounds their
                                memory and what the next open rescans after a crash;
                                0 = default CBFS_SYNC_LAG */
};
#define CBFS_INFLIGHT_PER_WORKER (16ull << 20)
#define CBFS_INFLIGHT_MAX (1ull << 30)
#define CBFS_SYNC_LAG (64ull << 20)
#define CBFS_SYNC_LAG_PER_REC 4096u

/* Starts the worker pool. @return CBFS_E_INVAL for a bad block size or no cache. */
cbfs_err cbfs_engine_create(const struct cbfs_engine_config *cfg, struct cbfs_engine **out);
/* Stops the pool. Every file must already be closed. NULL is a no-op. */
void cbfs_engine_destroy(struct cbfs_engine *eng);
/* The configuration in force, defaults filled in (workers, cache, budget). */
void cbfs_engine_get_config(const struct cbfs_engine *eng, struct cbfs_engine_config *cfg);

/* Statistics for `cbfs stats`, X(name): each is a uint64_t field of struct
 * cbfs_engine_stats and, in this order, a line of the user.cbfs.stats text
 * (cbfs/stats.h). Counters are monotonic totals since the engine started
 * (relaxed atomics in the engine); gauges are current values. */
#define CBFS_ENGINE_COUNTERS(X)                                                         \
    X(logical_written) X(physical_written) /* bytes in, frame (plain: same) bytes out */ \
    X(logical_read) X(physical_read)                                                    \
    X(blocks_compressed) X(blocks_raw) X(blocks_hole)                                   \
    X(ns_compress) X(ns_store_write) X(ns_wait_slots) X(ns_decompress) X(ns_store_read) \
    X(cache_hits) X(cache_misses) X(readahead_hits)                                     \
    X(write_errors) /* blocks not stored, failed fdatasyncs, plain files' too */        \
    X(read_errors)  /* stored blocks that failed their checksum or could not be read */ \
    X(stream_gaps)  /* a sequential stream's reorder window gave up waiting for a block  \
                       and stored later ones first (logged once per open file) */
#define CBFS_ENGINE_GAUGES(X) X(inflight_bytes) /* sealed, not yet committed */
#define CBFS_ENGINE_STATS(X) CBFS_ENGINE_COUNTERS(X) CBFS_ENGINE_GAUGES(X)

struct cbfs_engine_stats {
#define CBFS_ENGINE_STATS_FIELD_(name) uint64_t name;
    CBFS_ENGINE_STATS(CBFS_ENGINE_STATS_FIELD_)
#undef CBFS_ENGINE_STATS_FIELD_
};
void cbfs_engine_get_stats(struct cbfs_engine *eng, struct cbfs_engine_stats *st);
/* Counts a write the store refused outside the engine (a plain file's, in
 * src/fuse), so that write_errors covers every file of the mount. */
void cbfs_engine_count_write_error(struct cbfs_engine *eng);
/* Counts a plain (codec=none) file's bytes written to or read from the store,
 * which are its logical bytes as well, so that the byte counters (and the
 * ratio, the mount's as a whole) cover every file of the mount. */
void cbfs_engine_count_plain_write(struct cbfs_engine *eng, uint64_t bytes);
void cbfs_engine_count_plain_read(struct cbfs_engine *eng, uint64_t bytes);

/* Opens the engine state of a compressed file. data_fd and idx_fd (the
 * sidecar) become owned by the file and are closed by cbfs_file_close, also
 * on failure. With create, both files must be empty: a sidecar header is
 * written. Otherwise the index is loaded (replay + rescan of frames the index
 * lags; with writable, torn tails are repaired). codec/level apply to blocks
 * written from now on; old blocks keep their own codec. A lost sidecar is
 * rebuilt with the engine's block size as the candidate (cbfs_bs_hint).
 * @return CBFS_E_VERSION, CBFS_E_WRONG_FILE, CBFS_E_BAD_MAGIC,
 * CBFS_E_BLOCK_SIZE (lost sidecar, block size not provable), I/O errors. */
cbfs_err cbfs_file_open(struct cbfs_engine *eng, int data_fd, int idx_fd, bool create,
                        bool writable, const struct cbfs_codec_ops *codec, int level,
                        struct cbfs_file **out);

/* Reads up to len bytes at off; *got < len only at end of file. Data still in
 * memory (open or queued blocks) is returned as written. A block failing its
 * checksum gives CBFS_E_CORRUPT and a log line naming the file and offset. */
cbfs_err cbfs_file_read(struct cbfs_file *f, void *buf, size_t len, uint64_t off, size_t *got);

/* A read answered without copying decompressed data: iov[0..n) are the bytes
 * in order, pointing into decompressed blocks the vec holds references to in
 * the cache, or into its own buffer (data still in memory for writing, holes,
 * zeros past a block's content). Valid until cbfs_read_vec_free, which must
 * follow every cbfs_file_read_vec, failed or not. The other fields are
 * private. */
struct cbfs_cache;
struct cbfs_cache_ent;
struct cbfs_read_vec {
    struct iovec *iov;
    unsigned n;
    struct cbfs_cache *cache;     /* of the engine, which outlives the file */
    struct cbfs_cache_ent **held; /* references the pieces point into */
    unsigned nheld;
    unsigned char *own;           /* the vec's buffer, len bytes, made on first need */
    size_t own_used;
};

/* cbfs_file_read, as pieces (above): *got < len only at end of file. */
cbfs_err cbfs_file_read_vec(struct cbfs_file *f, size_t len, uint64_t off,
                            struct cbfs_read_vec *v, size_t *got);
/* Needs no file: callable after the file was closed (a reply sent from the
 * pieces lets the kernel release the file before this runs). */
void cbfs_read_vec_free(struct cbfs_read_vec *v);

/* Copies len bytes at off into the file; may wait while the in-flight bound
 * is reached (backpressure). Returns an earlier background error (ENOSPC of a
 * commit, say) if one is pending, without clearing it, and fails (nothing
 * after the piece it was at is written) if a flush dropped what the file held
 * open while it waited for room. */
cbfs_err cbfs_file_write(struct cbfs_file *f, const void *buf, size_t len, uint64_t off);

/* close(2)/fsync(2): compresses the partial tail block, writes everything
 * pending, fdatasyncs the data file and then the sidecar; returns only once
 * what was written before it is durable (also when another flush is in its
 * fdatasync). A background error (ENOSPC of a commit, say) stops storing
 * until a flush finds it: the file then drops what was not stored and is
 * what the store holds. Errors are reported as the kernel's errseq does:
 * each failure to store or to sync counts once, and seen (a handle's count,
 * cbfs_file_err_seq when it opened) gets the newest failure it has not heard
 * of and is moved up, so every handle open then hears of it once. With NULL,
 * only the failures this call finds. */
cbfs_err cbfs_file_flush(struct cbfs_file *f, uint64_t *seen);
/* cbfs_file_flush with three more things to say. With peek (a close's
 * flush), seen's failures are reported but seen stays where it was: they are
 * the fsync's to take (cbfs_errseq_peek). settle (if not NULL) runs once
 * what was written is stored and before the syncs, without the file's lock:
 * the caller's last change of the files' metadata (the daemon puts back the
 * times the kernel set), which the syncs then cover. With meta (fsync(2),
 * not fdatasync) that metadata (mode, owner, times) is made durable too:
 * fsync instead of fdatasync, also when nothing was written since the last
 * sync. @return as cbfs_file_flush, else settle's error. */
cbfs_err cbfs_file_sync(struct cbfs_file *f, uint64_t *seen, bool peek, bool meta,
                        cbfs_err (*settle)(void *arg), void *arg);

/* A write that cbfs_file_write refused (e) and whose caller is not waiting
 * for the answer (a page the kernel writes back): counted as a failure every
 * handle hears at its next fsync and every close until then, as a failed
 * store is, and in write_errors. */
void cbfs_file_count_lost_write(struct cbfs_file *f, cbfs_err e);

/* A new handle's seen for cbfs_file_flush: the file's failure count now, less
 * the newest failure if no flush has reported it to anyone yet (as the
 * kernel's errseq_sample: that one is the new handle's to hear too). */
uint64_t cbfs_file_err_seq(struct cbfs_file *f);

/* Sets the logical size (shrink or extend); blocks past it are dropped.
 * Atomic against cbfs_file_write: writes under way finish first, and writes
 * that come meanwhile wait for it. */
cbfs_err cbfs_file_truncate(struct cbfs_file *f, uint64_t size);

/* cbfs_file_truncate for a size that may only grow (fallocate without
 * KEEP_SIZE): a file already that long, also by a write that came after the
 * caller looked at the size, is left as it is. */
cbfs_err cbfs_file_extend(struct cbfs_file *f, uint64_t size);

uint64_t cbfs_file_size(struct cbfs_file *f);

/* This file's block size (from its index; new files get the engine's). */
uint32_t cbfs_file_block_size(const struct cbfs_file *f);
/* The data file's and the sidecar's descriptors the file was opened with
 * (cbfs_file_open's; the sidecar's -1 where it has none), fixed while it is
 * open: a stat of an open file, or a change of its times, mode or owner
 * through its handle, needs no descriptor of its own, which a daemon out of
 * descriptors has not (EMFILE from an fstat or an fsync of an open file:
 * helper-51; from the kernel's SETATTR of its times: helper-65). Not to be
 * closed, read or written by the caller. */
int cbfs_file_data_fd(const struct cbfs_file *f);
int cbfs_file_idx_fd(const struct cbfs_file *f);

/* lseek(2) SEEK_DATA (data true) / SEEK_HOLE at block granularity: a block is
 * a hole if it was never written or is all zeros. @return CBFS_E_NXIO if off
 * is at or past the end (or, for SEEK_DATA, no data follows). */
cbfs_err cbfs_file_seek(struct cbfs_file *f, uint64_t off, bool data, uint64_t *out);

/* fallocate(2) PUNCH_HOLE|KEEP_SIZE: [off, off+len) reads as zeros afterwards;
 * blocks wholly inside become hole frames. The size never changes. */
cbfs_err cbfs_file_punch(struct cbfs_file *f, uint64_t off, uint64_t len);

/* Name for log lines (set by the FUSE layer, e.g. the store-relative path).
 * Only before the file is shared with another thread: readers (the pool's
 * decodes, flush) take it without the lock. */
void cbfs_file_set_name(struct cbfs_file *f, const char *name);

/* Flushes, then frees the state and closes both fds. @return the flush error
 * (release(2) cannot report it; the caller logs). NULL is a no-op. */
cbfs_err cbfs_file_close(struct cbfs_file *f);

/* Logical size and block size of a compressed file that is not open, from
 * its index (no repair, read-only fds borrowed, not closed); a file whose
 * first flush never completed (cbfs_index_unborn) has the size 0 and the
 * engine's block size, as cbfs_file_open gives it. */
cbfs_err cbfs_file_peek(const struct cbfs_engine *eng, int data_fd, int idx_fd, uint64_t *size,
                        uint32_t *block_size);

#endif

/* Private to the file module of the engine: the per-file state shared by
 * file.c (open/close), file_write.c (open blocks, seal, truncate), file_commit.c
 * (the committer: frames stored in order, the size's store), file_sync.c
 * (flush, fsync, catch-up, revert, punching garbage) and file_read.c (read,
 * cache lookups, read-ahead, seek).
 *
 * Locking (see engine_impl.h for the global order): f->lock protects every
 * field marked "lock" below. The committer role (f->committing) is held by one
 * thread at a time; it owns append_off and does its store I/O without
 * f->lock, so readers and writers keep going while frames are written. The
 * sync role (f->syncing) is held by one thread at a time too; it owns the
 * sidecar's tail (idx.index_end, idx.torn): records are appended only by a
 * sync, once their frames are durable (cbfs_file_sync_io). Code holding
 * f->lock never waits on the cache for another loader (cbfs_cache_peek,
 * private decode) — a pool thread that loads may itself be waiting for
 * f->lock. */
#ifndef CBFS_ENGINE_FILE_IMPL_H
#define CBFS_ENGINE_FILE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

#include "cbfs/errseq.h"
#include "cbfs/format.h"
#include "cbfs/mutex.h"
#include "engine/engine_impl.h"

/* Open blocks per file: room for a few sequential streams, and the reorder
 * window of one stream whose requests arrive out of order: the kernel's
 * writeback cache keeps up to max_background 1 MiB requests in flight,
 * handed to as many daemon threads, which take the file lock in any order.
 * A file keeps up to CBFS_OPEN_WINDOW bytes' worth open (open_max, at least
 * CBFS_OPEN_MIN blocks); the write that fills the stream's gap, and while
 * blocks are held any write behind it, may use the spare slots up to
 * CBFS_OPEN_MAX (cbfs_file_open_block); so may a block part written while
 * every slot holds one and other writers are in sight (two per writer: the
 * ends of its request). Slots are only taken while writes arrive out of
 * order. A writer that finds the slots full of blocks waiting for a gap
 * waits up to CBFS_GAP_WAIT_NS for the writer carrying it. */
#define CBFS_OPEN_MAX 64
#define CBFS_OPEN_MIN 4
#define CBFS_OPEN_WINDOW (8u << 20)
#define CBFS_GAP_WAIT_NS 200000000L /* 200 ms in all */
#define CBFS_GAP_WAIT_STEP_NS 5000000L
#define CBFS_COMMIT_BATCH 16
/* Store data is handed to the disk (sync_file_range) every this many bytes
 * appended: see cbfs_file_write_behind. */
#define CBFS_WRITE_BEHIND (8u << 20)
/* The sidecar is allocated ahead of its records in steps of this many bytes
 * (cbfs_file_reserve_records), so that the records of frames already stored
 * find room on a store that has filled up since. */
#define CBFS_IDX_RESERVE (16u << 10)

#define CBFS_OBLOCK_RUNS 6      /* written pieces of an open block that are tracked */
#define CBFS_OBLOCK_UNTRACKED 0xff

struct cbfs_oblock {
    uint64_t block;
    uint32_t len;         /* content bytes; bytes past len are undefined (unwritten
                             bytes below len are zeros) */
    uint8_t nruns;        /* pieces in runs, or CBFS_OBLOCK_UNTRACKED (too many) */
    uint32_t runs[CBFS_OBLOCK_RUNS][2]; /* [lo, hi) that hold written or loaded content,
                             sorted, disjoint: the block is complete at [0, bs) */
    uint64_t last_use;    /* f->use_clock at last write */
    bool dirty;           /* written since its content was last sealed */
    unsigned char *data;  /* block_size bytes, owned */
};

struct cbfs_wjob {
    struct cbfs_pool_job pj; /* the pool's while queued */
    struct cbfs_file *f;   /* immutable */
    uint64_t block, gen;   /* immutable */
    uint32_t len;          /* immutable */
    unsigned char *data;   /* uncompressed content, owned; readable under f->lock until freed */
    unsigned char *frame;  /* encoded frame; written by the worker before done */
    size_t frame_len, frame_cap; /* as frame */
    struct cbfs_frame_hdr hdr;   /* as frame */
    cbfs_err err;          /* set by worker before done; by the committer after */
    bool done;             /* lock */
    bool stored;           /* committer role */
    bool dropped;          /* lock (and stable while a committer holds the job): a failed
                              sync took back what it was made from (cbfs_file_revert) */
    struct cbfs_wjob *next; /* pending list: lock */
};

/* A frame that became garbage: its payload can be punched out of the data
 * file once the frame that replaced it is durable. */
struct cbfs_dead {
    uint64_t offset;
    uint32_t plen;
};

struct cbfs_file {
    struct cbfs_engine *eng; /* immutable */
    uint64_t serial;         /* immutable: cache key */
    int data_fd, idx_fd;     /* immutable */
    bool writable;           /* immutable */
    const struct cbfs_codec_ops *codec; /* immutable: codec for new blocks */
    int level;               /* immutable */
    uint32_t bs;             /* immutable: this file's block size */
    uint64_t file_id;        /* immutable */
    char name[256];          /* written only before the file is shared (cbfs_file_set_name),
                                then read without the lock */

    struct cbfs_mutex lock;
    pthread_cond_t cond;     /* broadcast on every commit and read-ahead completion */
    struct cbfs_index idx;   /* lock, but idx.torn and idx.index_end: the sync role alone
                                (cbfs_index_append) */
    uint64_t size;           /* lock: logical size including data still in memory */
    uint64_t size_set;       /* lock: the size the store or a truncate last gave the file (not
                                a write): a write that starts there, inside a block no write
                                has touched, starts after a hole (cbfs_file_write_at); never
                                above size (the hole's assert) */
    bool set_below;          /* lock: a write since size_set was set began below it: the
                                bytes below size_set in its block may be on their way (the
                                stream reached it from below), so no hole is taken there */
    struct cbfs_oblock open[CBFS_OPEN_MAX]; /* lock */
    unsigned nopen;          /* lock */
    unsigned open_max;       /* immutable: slots this file uses (see CBFS_OPEN_WINDOW) */
    uint64_t wnext;          /* lock: the next block of the sequential stream; full blocks
                                after it wait open until it is sealed, so frames land
                                in block order (stock-decodable) */
    _Atomic unsigned writers; /* atomic: threads inside cbfs_file_write (counted before they take
                                 the lock: the writer that fills a gap may be among them) */
    unsigned slot_waiters;   /* lock: writers waiting in cbfs_file_free_slot */
    unsigned in_write;       /* lock: writes past the truncate gate and not done (they may
                                drop the lock to wait for a slot) */
    bool truncating;         /* lock: a truncate holds the gate: no write starts, and it
                                waits for in_write to reach 0 (cbfs_file_truncate) */
    uint64_t gap_block;      /* lock: the gap the stream last moved on past (UINT64_MAX:
                                none, or it was filled late) */
    bool gap_wait;           /* lock: wait for a gap even with no other writer in sight
                                (false once a gap we moved on past never came) */
    bool gap_logged;         /* lock: the log has heard of this open file's first gap */
    uint64_t use_clock;      /* lock */
    struct cbfs_wjob *pend_head, *pend_tail; /* lock: sealed blocks, submission order */
    bool committing;         /* lock: some thread holds the committer role */
    uint64_t append_off;     /* committer role: where the next frame goes */
    uint64_t behind_off;     /* committer role: data below this was handed to the disk's
                                writeback (cbfs_file_write_behind) */
    cbfs_err err;            /* lock: first background error; nothing more is stored until a
                                flush finds it and drops what was not stored (a reset) */
    uint64_t resets;         /* lock: resets so far (a write that waited checks it) */
    struct cbfs_errseq errs; /* lock: each failure to store or to sync, for every handle
                                to hear once (cbfs/errseq.h; cbfs_file_flush's seen) */
    bool dirty;              /* lock: frames or records stored since the last fdatasync
                                began (set where they are, not by the write) */
    bool syncing;            /* lock: the sync role: a flush, or a writer's catching up of the
                                records (cbfs_file_catch_up), is under way */
    uint64_t ra_last;        /* lock: the stream's front, its furthest block read (UINT64_MAX: none) */
    uint64_t ra_issued;      /* lock: read-ahead issued for blocks below this */
    unsigned ra_window;      /* lock: current read-ahead window in blocks */
    unsigned ra_jobs;        /* lock: read-ahead jobs in flight; close waits for 0 */
    struct cbfs_dead *dead;  /* lock: garbage frames to punch after the next fdatasync */
    size_t ndead, dead_cap;  /* lock */
    bool no_punch;           /* lock: the store refused FALLOC_FL_PUNCH_HOLE */
    /* Records of stored frames that are not in the sidecar yet: a record is
     * appended only once its frame is durable (cbfs_file_sync_io), so
     * that a power cut never leaves a record whose frame did not land (the
     * block would read as damage where its previous, acknowledged frame was
     * whole). After a kill -9 the next open's rescan finds those frames. */
    struct cbfs_index_rec *prec; /* lock: in log order, their frames in file order */
    size_t nprec, prec_cap;  /* lock */
    uint64_t durable_end;    /* lock: frames below it are durable with their records in the
                                sidecar; a failed sync cuts the data file back to it */
    uint64_t idx_need;       /* lock: the sidecar's length once the pending records are in */
    uint64_t idx_reserved;   /* committer role: sidecar bytes allocated ahead (fallocate) */
    bool no_reserve;         /* committer role: the store cannot allocate ahead */
    bool head_durable;       /* committer role: this open made the sidecar's header durable
                                (cbfs_file_secure_head) */
    _Atomic bool head_lost;  /* a sync of the sidecar failed before its header was known
                                durable: Linux may have dropped the header's page, and the
                                next sync succeeds all the same (it reports a writeback error
                                once), so cbfs_file_secure_head writes the header again first */
    bool sync_late;          /* lock: a failed sync took back a frame stored while it ran,
                                whose writer heard no error yet: the next flush reports one */
    cbfs_err stop;           /* lock: a failed sync took the file back to what its sidecar
                                holds: writes fail with it and nothing is stored until a
                                flush reports it (reads go on) */
    bool broken;             /* lock: a failed sync could not take the file back to what
                                its sidecar holds: nothing more is stored (EIO) */
    uint64_t broken_size;    /* lock: UINT64_MAX, or what a broken file's size stays under
                                (a truncate it could not store again) until it is reopened */
};

/* ---- file.c ---- */

/* cbfs_index_open for the daemon: a file rebuilt without a usable sidecar
 * whose frames go on past damage is CBFS_E_UNREACHABLE (see file.c). */
cbfs_err cbfs_file_load_index(const struct cbfs_engine *eng, int data_fd, int idx_fd, bool repair,
                              struct cbfs_index *idx, struct cbfs_index_report *rep);

/* ---- file_read.c ---- */

/* Reads and decodes block b (entry e) into a new buffer holding e->ulen
 * bytes, of *cap bytes from the engine's lists (give it back with
 * cbfs_engine_buf_put, or to the cache with that cap). Logs a line naming the
 * file and offsets on a bad frame. With f->lock held e is b's current entry;
 * without it, e may have been replaced and its frame punched since it was
 * taken: a failure is then CBFS_E_CHANGED, not logged, not damage (the caller
 * looks at b again). */
cbfs_err cbfs_file_decode(struct cbfs_file *f, uint64_t b, const struct cbfs_index_entry *e,
                          unsigned char **out, size_t *cap);

/* Newest in-memory content of block b (open block, else newest pending).
 * Lock held. */
bool cbfs_file_mem_block(struct cbfs_file *f, uint64_t b, const unsigned char **data,
                         uint32_t *len);

/* Fills buf (block_size bytes) with the newest content of block b, up to
 * `want` bytes (the part of the block inside the file), zeros where there is
 * none. *stored: false if b was never written (no frame, not in memory): its
 * zeros are a gap, not content. Lock held: never waits on the cache. */
cbfs_err cbfs_file_load_locked(struct cbfs_file *f, uint64_t b, unsigned char *buf,
                               uint32_t want, bool *stored);

/* ---- file_commit.c ---- */

/* Where the frames of the pending records end (records are pending in file
 * order): durable_end when none is. Lock held. */
uint64_t cbfs_file_pending_end(const struct cbfs_file *f);

/* Counts failure e (a store or a sync that failed): every handle open now
 * hears of it once (cbfs_file_flush), and one opened before anyone has too
 * (cbfs_file_err_seq). Lock held. */
void cbfs_file_count_failure(struct cbfs_file *f, cbfs_err e);

/* The pool's job function for a sealed block (struct cbfs_wjob, submitted by
 * file_write.c): compresses it into a frame, then, under f->lock, marks it
 * done and commits every finished job at the head of the pending list. */
void cbfs_wjob_run(struct cbfs_pool_job *pj);

/* Stores a new size: the SIZE frame, after a frame of the block straddling a
 * new, lower end that keeps only its first bytes (a later extension reads
 * zeros there, POSIX), both stored as one (one write), so that a failure or
 * a kill leaves the block as it was. Sets f->size. reserve: as cbfs_file_store_frames's. Lock held,
 * committer role. */
cbfs_err cbfs_file_store_size(struct cbfs_file *f, uint64_t size, bool reserve);

/* ---- file_write.c ---- */

/* Seals every dirty open block in block order; with keep (flush) they stay
 * open and clean, without (truncate, close) every slot is emptied. */
cbfs_err cbfs_file_seal_all(struct cbfs_file *f, bool keep);

/* Waits until every sealed block is committed. Lock held (released while waiting). */
void cbfs_file_drain(struct cbfs_file *f);

/* ---- file_sync.c ---- */

/* cbfs_index hook, called under f->lock when a frame becomes garbage. If the
 * list cannot grow, the frame just stays (counted) garbage. */
void cbfs_file_note_dead(void *arg, uint64_t offset, uint32_t plen);

/* One sync of the records: a copy of the records pending when it began,
 * whose frames its fdatasync makes durable, and where those frames end. */
struct cbfs_rsync {
    struct cbfs_index_rec *recs;
    size_t n;
    uint64_t end;
};

/* A writer that does not sync: once the engine's sync_lag_bytes of frames
 * (or one record per CBFS_SYNC_LAG_PER_REC of it) wait for their records,
 * and no sync runs, it makes them durable and appends their records (not
 * synced: that is a flush's). Lock held; @return true with the sync role
 * taken and rs filled, for cbfs_file_catch_up. */
bool cbfs_file_lagging(struct cbfs_file *f, struct cbfs_rsync *rs);

/* The catch-up cbfs_file_lagging began: the data fdatasync, then the records
 * appended (the sidecar not synced). No lock held; takes it to end the role. */
void cbfs_file_catch_up(struct cbfs_file *f, struct cbfs_rsync *rs);

#endif

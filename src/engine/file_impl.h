/* Private to the file module of the engine: the per-file state shared by
 * file.c (open/close), file_write.c (seal, commit, flush, truncate) and
 * file_read.c (read, cache lookups, read-ahead, seek).
 *
 * Locking (see engine_impl.h for the global order): f->lock protects every
 * field marked "lock" below. The committer role (f->committing) is held by one
 * thread at a time; it owns append_off and idx.index_end and does its store
 * I/O without f->lock, so readers and writers keep going while frames are
 * written. Code holding f->lock never waits on the cache for another loader
 * (cbfs_cache_peek, private decode) — a pool thread that loads may itself be
 * waiting for f->lock. */
#ifndef CBFS_ENGINE_FILE_IMPL_H
#define CBFS_ENGINE_FILE_IMPL_H

#include <stdbool.h>
#include <stdint.h>

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
 * CBFS_OPEN_MAX (cbfs_file_open_block). Slots are only taken while writes
 * arrive out of order. A writer that finds the slots full of blocks waiting for a
 * gap waits up to CBFS_GAP_WAIT_NS for the writer carrying it. */
#define CBFS_OPEN_MAX 64
#define CBFS_OPEN_MIN 4
#define CBFS_OPEN_WINDOW (8u << 20)
#define CBFS_GAP_WAIT_NS 200000000L /* 200 ms in all */
#define CBFS_GAP_WAIT_STEP_NS 5000000L
#define CBFS_COMMIT_BATCH 16
/* Store data is handed to the disk (sync_file_range) every this many bytes
 * appended: see cbfs_file_write_behind. */
#define CBFS_WRITE_BEHIND (8u << 20)
/* Most blocks whose earlier entries a file keeps between good syncs
 * (cbfs_file_undo): 56 bytes each, 3.5 MiB; 16 GiB of rewrites at 256K blocks.
 * A file that rewrites more between two syncs is not taken back. */
#define CBFS_UNDO_MAX 65536

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
    struct cbfs_wjob *next; /* pending list: lock */
};

/* A frame that became garbage: its payload can be punched out of the data
 * file once the frame that replaced it is durable. */
struct cbfs_dead {
    uint64_t offset;
    uint32_t plen;
};

/* A block's entry before its first rewrite since the last good sync. */
struct cbfs_undo {
    uint64_t block;
    struct cbfs_index_entry prev;
    bool provisional; /* prev is durable only if the sync running when it was noted
                         succeeds (it lies below that sync's sync_end0) */
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
    struct cbfs_index idx;   /* lock, but idx.torn and the sidecar's tail: the committer
                                role alone (cbfs_index_append, cbfs_file_unstore) */
    uint64_t size;           /* lock: logical size including data still in memory */
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
    /* Errors as Linux's errseq reports them: each failure to store or to sync
     * counts once, and every handle open then hears the newest once
     * (cbfs_file_flush's seen). */
    uint64_t err_seq;        /* lock: failures so far */
    cbfs_err err_last;       /* lock: the newest of them */
    bool err_heard;          /* lock: some flush has returned the newest (a handle opened
                                before that hears it too: cbfs_file_err_seq) */
    bool dirty;              /* lock: frames or records stored since the last fdatasync
                                began (set where they are, not by the write) */
    bool syncing;            /* lock: a flush is in fdatasync (one at a time) */
    uint64_t ra_last;        /* lock: the stream's front, its furthest block read (UINT64_MAX: none) */
    uint64_t ra_issued;      /* lock: read-ahead issued for blocks below this */
    unsigned ra_window;      /* lock: current read-ahead window in blocks */
    unsigned ra_jobs;        /* lock: read-ahead jobs in flight; close waits for 0 */
    struct cbfs_dead *dead;  /* lock: garbage frames to punch after the next fdatasync */
    size_t ndead, dead_cap;  /* lock */
    bool no_punch;           /* lock: the store refused FALLOC_FL_PUNCH_HOLE */
    /* What a failed fdatasync of the data file takes back (cbfs_file_undo):
     * the kernel may have dropped the frames written since the last good
     * one, while their records stay in the sidecar. */
    uint64_t synced_end;     /* lock: the data file's end when the last good sync began (or
                                at open): frames below it are durable */
    uint64_t synced_size;    /* lock: the logical size then */
    uint64_t sync_end0;      /* lock: while syncing, the data end that sync makes durable */
    struct cbfs_undo *undo;  /* lock: blocks rewritten since, each with the entry it had
                                then (its first rewrite's), whose frame lies below synced_end */
    size_t nundo, undo_cap;  /* lock */
    bool undo_lost;          /* lock: a change since cannot be taken back (no memory to note a
                                rewrite, or a SIZE record: a truncate or an extend) */
    bool undo_late;          /* lock: an undo took back a frame stored while the failed sync
                                ran, whose writer heard no error yet: the next flush reports one */
};

/* ---- file_read.c ---- */

/* Reads and decodes block b (entry e) into a new buffer holding e->ulen
 * bytes, of *cap bytes from the engine's lists (give it back with
 * cbfs_engine_buf_put, or to the cache with that cap). Logs a line naming the
 * file and offsets on a bad frame. With f->lock held e is b's current entry;
 * without it, e may have been replaced and its frame punched since it was
 * taken: a failure is then CBFS_E_STALE, not logged, not damage (the caller
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

/* ---- file_write.c ---- */

/* cbfs_index hook, called under f->lock when a frame becomes garbage. If the
 * list cannot grow, the frame just stays (counted) garbage. */
void cbfs_file_note_dead(void *arg, uint64_t offset, uint32_t plen);

#endif

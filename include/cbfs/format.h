/* On-disk format, version 1 (docs/FORMAT.md is the byte-level spec).
 *
 * A data file is a sequence of frames, each a 64-byte header wrapped as a
 * zstd/lz4 skippable frame, followed by plen payload bytes. Every frame names
 * its block and generation, so the frames alone are the truth; the sidecar
 * (data file name + CBFS_INDEX_SUFFIX) is an append-only log of 64-byte
 * records, one per frame plus one header record, that accelerates open and
 * records the logical size. Nothing here does FUSE or threading; the index
 * table is not thread-safe (the engine locks around it). */
#ifndef CBFS_FORMAT_H
#define CBFS_FORMAT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cbfs/codec.h"
#include "cbfs/err.h"

#define CBFS_FORMAT_VERSION 1
#define CBFS_FRAME_HDR_SIZE 64
#define CBFS_INDEX_REC_SIZE 64
#define CBFS_INDEX_SUFFIX ".cbfsidx" /* reserved: hidden and refused by the mount */
#define CBFS_BLOCK_MIN (4u << 10)
#define CBFS_BLOCK_MAX (16u << 20)
/* 256 KiB: on a TPC-H pg_basebackup corpus the ratio is within 0.5% of 1 MiB
 * blocks while sequential writes are faster and a 4 KiB random read decodes
 * 4x less (docs/PERF.md, "Choosing the defaults"). */
#define CBFS_BLOCK_DEFAULT (256u << 10)
/* The block size rule, for every reader of a user's block size. */
static inline bool cbfs_block_size_valid(uint64_t bs)
{
    return bs >= CBFS_BLOCK_MIN && bs <= CBFS_BLOCK_MAX && (bs & (bs - 1)) == 0;
}
/* The in-memory table is a dense array (40 bytes a block, 0.015% of the data
 * at 256 KiB), so a file holds at most 2^26 blocks: 16 TiB at the default
 * 256 KiB block size, 64 TiB at 1 MiB, 256 GiB at 4 KiB. A block past it is
 * CBFS_E_FBIG (EFBIG), never an attempt to allocate a table for a huge sparse
 * offset. */
#define CBFS_MAX_BLOCKS (1ull << 26)
/* Whether a file of size bytes in blocks of bs (a valid block size) stays
 * within CBFS_MAX_BLOCKS: the writer's limit (write, truncate) and the
 * loader's for a SIZE record, one rule. No overflow for any uint64_t size. */
_Static_assert(CBFS_MAX_BLOCKS * CBFS_BLOCK_MAX <= (uint64_t)INT64_MAX,
               "a file that fits stays within off_t");
static inline bool cbfs_size_fits(uint64_t size, uint32_t bs)
{
    return size / bs + (size % bs != 0) <= CBFS_MAX_BLOCKS;
}

#define CBFS_SKIPPABLE_MAGIC 0x184D2A5Cu /* zstd/lz4 skippable frame, nibble C */
#define CBFS_SKIPPABLE_CONTENT (CBFS_FRAME_HDR_SIZE - 8) /* its size field: the rest */
#define CBFS_FRAME_MAGIC 0x52464243u     /* "CBFR" little-endian */
#define CBFS_INDEX_MAGIC 0x58494243u     /* "CBIX" little-endian */

/* Frame flags. Unknown bits make a header invalid (CBFS_E_VERSION). */
enum {
    CBFS_FRAME_RAW = 1u << 0,  /* payload is the block's bytes verbatim */
    CBFS_FRAME_HOLE = 1u << 1, /* block is all zeros; payload (if any) is ignored */
    CBFS_FRAME_SIZE = 1u << 2, /* not a block: sets the logical size to `block` */
    CBFS_FRAME_FLAGS_KNOWN = 0x7u
};

struct cbfs_frame_hdr {
    uint8_t version;     /* header version, 1 */
    uint8_t codec;       /* enum cbfs_codec_id of the payload */
    uint8_t flags;       /* CBFS_FRAME_* */
    int8_t level;        /* level used (informational) */
    uint64_t block;      /* logical block number; new size for SIZE frames */
    uint64_t generation; /* per file, strictly increasing in file order */
    uint32_t ulen;       /* uncompressed bytes of the block (<= block size) */
    uint32_t plen;       /* payload bytes following the header */
    uint64_t hash;       /* XXH3-64 of the ulen uncompressed bytes (0 for SIZE) */
    uint64_t file_id;    /* random id shared with the sidecar header */
};

/* The frame envelope: the first 12 bytes of every frame (skippable magic,
 * skippable content size 56, frame magic). It tells a cbfs data file from any
 * other file even when the rest of the header is damaged. */
#define CBFS_FRAME_ENVELOPE_SIZE 12
/* @return true if head (n bytes) starts with the frame envelope; false when
 * n < CBFS_FRAME_ENVELOPE_SIZE. The one test of it: decode, the store's
 * file classification and the fuzzers all call this. */
bool cbfs_frame_is_envelope(const uint8_t *head, size_t n);
/* Not the envelope, but two of its three fields are there: what a damaged
 * first frame header leaves. A compressed file that lost its sidecar as well
 * is plain by the store's rule (docs/FORMAT.md 1); the tools say so. */
bool cbfs_frame_envelope_damaged(const uint8_t *head, size_t n);

/* Does the file-id field of a frame header (head, n bytes; it may fail to
 * decode) hold file_id? */
bool cbfs_frame_hdr_names(const uint8_t *head, size_t n, uint64_t file_id);

/* Does a frame header that fails to decode (head, n bytes) still show that it
 * was a frame of file file_id: the envelope intact, or file_id in its file-id
 * field? The loader's test of whether a sidecar's damaged frames are its own
 * (docs/FORMAT.md, "Leftover sidecars"). */
bool cbfs_frame_hdr_trace(const uint8_t *head, size_t n, uint64_t file_id);

void cbfs_frame_hdr_encode(const struct cbfs_frame_hdr *h, uint8_t out[CBFS_FRAME_HDR_SIZE]);
/* @return CBFS_E_BAD_MAGIC (not a cbfs frame), CBFS_E_CORRUPT (header checksum),
 * CBFS_E_VERSION (newer header version or unknown flags). */
cbfs_err cbfs_frame_hdr_decode(const uint8_t in[CBFS_FRAME_HDR_SIZE], struct cbfs_frame_hdr *h);

/* Worst-case frame size (header + payload) for a block of block_len bytes. */
size_t cbfs_frame_bound(const struct cbfs_codec_ops *codec, size_t block_len);

/* Encodes one block into a whole frame (header + payload) at out.
 * All-zero blocks become HOLE frames (for stock_stream codecs the payload is
 * the native encoding of the zeros, so stock decoders stay exact; for others
 * plen is 0). A payload that would not be smaller than the block is stored
 * RAW, except for stock_stream codecs. h->{block, generation, file_id} are
 * taken from the arguments; on success *h describes the frame written.
 * out_cap must be >= cbfs_frame_bound(). */
cbfs_err cbfs_frame_encode(const struct cbfs_codec_ops *codec, int level, uint64_t file_id,
                           uint64_t block, uint64_t generation, const void *data, size_t len,
                           void *out, size_t out_cap, size_t *out_len,
                           struct cbfs_frame_hdr *h);

/* Encodes the header of a SIZE frame (no payload): "the logical size is now
 * size". *h (if not NULL) describes it, for cbfs_index_rec_from_frame. */
void cbfs_frame_size_encode(uint64_t file_id, uint64_t generation, uint64_t size,
                            uint8_t out[CBFS_FRAME_HDR_SIZE], struct cbfs_frame_hdr *h);

/* Decodes a frame's payload into out (h->ulen bytes) and checks the XXH3.
 * HOLE frames give zeros without reading payload. @return CBFS_E_CORRUPT on
 * any mismatch (never wrong bytes), CBFS_E_CODEC_MISSING if the codec is not
 * built in. */
cbfs_err cbfs_frame_decode(const struct cbfs_frame_hdr *h, const void *payload, void *out);

/* ---- index sidecar records ---- */

enum cbfs_rec_type { CBFS_REC_HEADER = 1, CBFS_REC_BLOCK = 2, CBFS_REC_SIZE = 3 };

struct cbfs_index_rec {
    uint8_t type; /* enum cbfs_rec_type */
    /* HEADER */
    uint16_t version;    /* CBFS_FORMAT_VERSION */
    uint32_t block_size; /* bytes per logical block */
    uint64_t file_id;
    uint64_t created_ns; /* CLOCK_REALTIME at creation (informational) */
    /* BLOCK and SIZE: the frame this record indexes */
    uint8_t codec, flags;
    uint64_t block;  /* block number; for SIZE: the new logical size */
    uint64_t offset; /* data-file offset of the frame header */
    uint32_t plen, ulen;
    uint64_t generation;
    uint64_t hash;
};

void cbfs_index_rec_encode(const struct cbfs_index_rec *r, uint8_t out[CBFS_INDEX_REC_SIZE]);
/* @return CBFS_E_BAD_MAGIC, CBFS_E_CORRUPT (checksum) or CBFS_E_VERSION
 * (header record of a newer format version; unknown record type). */
cbfs_err cbfs_index_rec_decode(const uint8_t in[CBFS_INDEX_REC_SIZE], struct cbfs_index_rec *r);

/* The header record of sidecar idx_fd (its first record) into *hdr.
 * @return CBFS_OK; CBFS_E_BAD_MAGIC where the first record is another kind,
 * or cbfs_index_rec_decode's or cbfs_pread_full's error (CBFS_E_TRUNCATED:
 * shorter than a record). */
cbfs_err cbfs_index_read_header(int idx_fd, struct cbfs_index_rec *hdr);

/* Builds the index record that describes frame h written at offset. */
void cbfs_index_rec_from_frame(const struct cbfs_frame_hdr *h, uint64_t offset,
                               struct cbfs_index_rec *r);

/* ---- in-memory index table ---- */

struct cbfs_index_entry {
    uint64_t offset;     /* data-file offset of the frame header */
    uint64_t generation; /* 0 = no frame: block never written (reads as zeros) */
    uint64_t hash;
    uint32_t plen, ulen;
    uint8_t codec, flags;
};

struct cbfs_index {
    uint32_t block_size;
    uint64_t file_id;
    uint64_t size;       /* logical file size */
    uint64_t next_gen;   /* generation for the next frame */
    uint64_t data_end;   /* end of the last valid frame = append offset */
    uint64_t index_end;  /* end of the last valid sidecar record = append offset */
    bool torn;           /* a failed append may have left records past index_end */
    uint64_t nblocks;    /* entries in use: block numbers < nblocks */
    uint64_t cap;        /* allocated entries */
    struct cbfs_index_entry *v;
    uint64_t live_frames, live_bytes;   /* frames referenced by v (header + payload) */
    uint64_t dead_frames, dead_bytes;   /* superseded or truncated frames: garbage */
    /* Optional: called when a block frame becomes garbage (superseded or cut
     * off by a SIZE record), so the engine can reclaim its payload once the
     * replacement is durable. NULL after cbfs_index_init. */
    void (*on_dead)(void *arg, uint64_t offset, uint32_t plen);
    void *on_dead_arg;
};

/* Initialises an empty table (no allocation). */
void cbfs_index_init(struct cbfs_index *idx, uint32_t block_size, uint64_t file_id);
void cbfs_index_free(struct cbfs_index *idx); /* NULL-safe, re-init needed after */

/* Makes the table hold blocks [0, n) (new entries: never written), so that
 * applying a BLOCK record of a block below n cannot fail for memory.
 * @return CBFS_E_NOMEM. */
cbfs_err cbfs_index_reserve(struct cbfs_index *idx, uint64_t n);

/* Applies one BLOCK or SIZE record (in log order): a block entry replaces any
 * older one (counted as garbage); a SIZE record drops blocks wholly past the
 * new size. Updates data_end, next_gen and counters. */
cbfs_err cbfs_index_apply(struct cbfs_index *idx, const struct cbfs_index_rec *r);

/* @return the entry for block b, or NULL if b was never written (a hole). */
const struct cbfs_index_entry *cbfs_index_get(const struct cbfs_index *idx, uint64_t b);

/* What cbfs_index_load found and did. */
struct cbfs_index_report {
    bool sidecar_missing;     /* rebuilt from frames alone */
    uint64_t records_replayed;
    uint64_t records_dropped; /* bytes of torn/corrupt sidecar tail / 64, rounded up */
    uint64_t frames_rescanned; /* frames after the last indexed one, re-added */
    uint64_t data_tail_bytes;  /* garbage after the last valid frame */
    uint64_t frames_damaged;   /* indexed frames whose header is unreadable: kept in the
                                  table (their reads fail with CBFS_E_CORRUPT) */
    uint64_t first_damaged_offset; /* data-file offset of the first of them */
    bool records_lost;         /* replay stopped at a damaged record (it fails its checksum
                                  and is not zeros, a torn append's): records past it, of
                                  frames a flush may have acknowledged, were lost */
    uint64_t lost_vouched;     /* records_lost: where the frames named by the records
                                  behind the loss end (0: no record there) */
    bool tail_kept;            /* the tail holds frame magic (damage, not a torn write),
                                  or no frame of the file is intact: never truncated;
                                  appends go after it */
    bool leftover;             /* with CBFS_E_WRONG_FILE: the data file holds no frame of
                                  the sidecar's file, intact or damaged, and no other
                                  frame: the sidecar is a leftover of another file */
    uint16_t newer_version;    /* with CBFS_E_VERSION: the version found */
    bool repaired;            /* sidecar/data were rewritten (repair mode) */
    uint64_t torn_bytes_skipped; /* bytes of writes torn by a crash, with a later writer's
                                    frames behind them, passed over: by a rebuild (3.3),
                                    or by the rescan past records lost (3.1) */
    bool frames_unreachable;     /* frames of the file, or bytes more than the search
                                    reads, lie past damage the load cannot pass: a rebuild
                                    with no sidecar file (3.3), or the rescan past records
                                    lost, short of the frames of those behind them (3.1);
                                    nothing is repaired, the daemon serves no such file */
    bool unborn;                 /* cbfs_index_unborn: an empty file whose first flush
                                    never completed; nothing to repair */
};

/* The one rule for a file of which nothing was ever stored: its data file is
 * empty (every block written and every size change appends a frame, and no
 * repair empties a data file once a frame of it is durable, so an empty one
 * means a logical size of 0) and its sidecar is missing (idx_fd -1) or
 * shorter than a header record (its header, written at the create, became
 * durable with no flush: a crash right after the create). Such a file is an
 * empty file, not damage (docs/FORMAT.md 3.3); cbfs_index_load takes the
 * sidecar case so, and leaves the one without a sidecar to its caller, who
 * knows whether the file is cbfs at all (CBFS_E_BAD_MAGIC). @return false
 * where an fstat fails (the load that follows reports it). */
bool cbfs_index_unborn(int data_fd, int idx_fd);

/* Does a sidecar of isize bytes hold no index record (at most its header, or
 * part of one)? Such a sidecar indexes nothing: beside no data file (an
 * orphan) it is what a crash leaves of a file created and never flushed (its
 * sidecar's name became durable before its data file's: btrfs logs each
 * directory on its own, helper-26), and no acknowledged byte depends on it. */
static inline bool cbfs_index_holds_no_record(uint64_t isize)
{
    return isize < 2 * CBFS_INDEX_REC_SIZE;
}

/* What a caller knows about the block size of a file whose index has to be
 * rebuilt from its frames (no usable sidecar): frame headers do not record
 * it. size 0: nothing known. Otherwise size is a candidate: the store's or
 * the mount's block size (not proof: a mount may have used another one), or,
 * with asserted, one the user stated for this file (cbfs cat --block-size).
 * otherwise (0: none): one the user stated for a whole store (cbfs fsck
 * --block-size), for the files whose frames tell no size: it never overrides
 * one they tell. */
struct cbfs_bs_hint {
    uint32_t size;
    bool asserted;
    uint32_t otherwise;
};

/* The one rule for the block size of a rebuilt index (docs/FORMAT.md, 3.3),
 * from the records of the frames found (r[0..n), SIZE records included) and
 * the caller's hint (NULL: none). A size is taken only where the frames
 * prove it or agree with a candidate; any other case is
 * CBFS_E_BLOCK_SIZE, never a guess. @return CBFS_OK with *bs set, or
 * CBFS_E_BLOCK_SIZE. */
cbfs_err cbfs_index_rebuild_block_size(const struct cbfs_index_rec *r, size_t n,
                                       const struct cbfs_bs_hint *hint, uint32_t *bs);

/* Loads a file's index: replays the sidecar (idx_fd, or -1 if there is none),
 * stops at the first torn or corrupt record, then scans the data file for
 * frames after the last indexed one and applies them too (the frames are the
 * truth; the index may lag). With repair set (fds writable), a bad sidecar
 * tail is truncated, rescanned frames are appended as records, garbage after
 * the last valid frame is truncated from the data file, and both are
 * fdatasync'd; with idx_fd == -1 and repair, nothing is created (the caller
 * creates sidecars). @return CBFS_E_VERSION for a sidecar of a newer format,
 * CBFS_E_WRONG_FILE if the sidecar's file id does not match the frames, or
 * (rep->leftover) if a non-empty data file shows nothing of the sidecar's
 * file (docs/FORMAT.md, "Leftover sidecars"),
 * CBFS_E_BAD_MAGIC if neither sidecar nor data file is cbfs (also for an
 * empty data file without a sidecar, or with one whose header is there but
 * damaged; with a sidecar shorter than its header it is CBFS_OK, an empty
 * table of block size bs->size (else CBFS_BLOCK_DEFAULT) and rep->unborn,
 * nothing written: cbfs_index_unborn), CBFS_E_BLOCK_SIZE if there is
 * no usable sidecar and cbfs_index_rebuild_block_size refuses with hint bs
 * (NULL: none; used only for a rebuild); for these four nothing is
 * written. On any failure *idx is empty (no need to free). rep may be NULL. */
cbfs_err cbfs_index_load(int data_fd, int idx_fd, bool repair, const struct cbfs_bs_hint *bs,
                         struct cbfs_index *idx, struct cbfs_index_report *rep);

/* cbfs_index_load for opening files on the hot path: the same result for any
 * sidecar cbfs wrote, but it reads the frame headers of only the first and
 * the last record (every record is still checksummed and bounds-checked;
 * each frame header is checked when its block is read). If the last record
 * does not match its frame, it falls back to the full check. A checksum-valid
 * record pointing at the wrong frame (a bug, never a crash) is then seen as
 * CBFS_E_CORRUPT on that block's read instead of being dropped here; verify
 * and fsck use cbfs_index_load, which checks every record. */
cbfs_err cbfs_index_open(int data_fd, int idx_fd, bool repair, const struct cbfs_bs_hint *bs,
                         struct cbfs_index *idx, struct cbfs_index_report *rep);

/* Encodes and appends records to the sidecar at idx->index_end (pwrite, no
 * fsync) and advances index_end. On failure none of r counts as appended, and
 * the sidecar is cut back to index_end (else, first thing in the next call):
 * a torn write's whole records must not outlive a later, shorter append,
 * after which a replay would apply them. */
cbfs_err cbfs_index_append(struct cbfs_index *idx, int idx_fd, const struct cbfs_index_rec *r,
                           size_t n);

/* Encodes and writes the n records r to the sidecar from offset at (pwrite,
 * no fsync). On failure a part of them may be written; nothing is cut. */
cbfs_err cbfs_index_write_recs(int idx_fd, const struct cbfs_index_rec *r, size_t n,
                               uint64_t at);

/* Writes a fresh sidecar header record at offset 0 (for a new file) and sets
 * idx->index_end. */
cbfs_err cbfs_index_write_header(struct cbfs_index *idx, int idx_fd);
/* Writes idx's header record at offset 0 again (pwrite, no fsync), the records
 * after it untouched: for a header a failed sync may have dropped. Its
 * creation time is now's (informational). */
cbfs_err cbfs_index_put_header(const struct cbfs_index *idx, int idx_fd);

/* Reads and checks the frame header at off; on success *h is valid and the
 * whole frame (header + plen) lies within file_size. */
cbfs_err cbfs_frame_read_hdr(int data_fd, uint64_t off, uint64_t file_size,
                             struct cbfs_frame_hdr *h);

/* Looks for a frame header that decodes (cbfs_frame_read_hdr: any file's) at
 * an offset in (from, to) of the data file of size dsize: from itself is
 * skipped. @return CBFS_OK with *found (and *at), or a read error. */
cbfs_err cbfs_frame_find_header(int data_fd, uint64_t dsize, uint64_t from, uint64_t to,
                                uint64_t *at, bool *found);

/* Called for each frame of a walk, in file order: off is the frame header's
 * offset, h its decoded header. Setting *stop ends the walk there with
 * CBFS_OK. @return CBFS_OK to go on; anything else stops the walk, which
 * returns it. */
typedef cbfs_err (*cbfs_frame_visit_fn)(void *arg, uint64_t off, const struct cbfs_frame_hdr *h,
                                        bool *stop);

/* The one frame scanner (load, rescan, rebuild and the stock-decode check):
 * reads frame headers back to back from off while each is valid and wholly
 * inside the data file (dsize bytes) and calls fn on it. *end (if not NULL)
 * gets the offset where the walk stopped: dsize when frames fill the file,
 * else the start of the first torn or invalid header (or of the frame fn
 * stopped at, with an error or *stop). @return fn's error, an I/O error, or CBFS_E_VERSION (a newer
 * writer's frame, never treated as garbage); a torn or invalid header ends
 * the walk with CBFS_OK. */
cbfs_err cbfs_frame_walk(int data_fd, uint64_t dsize, uint64_t off, cbfs_frame_visit_fn fn,
                         void *arg, uint64_t *end);

/* Reads block entry e's frame (one pread of header + payload into scratch,
 * which must hold CBFS_FRAME_HDR_SIZE + e->plen bytes), checks the header
 * against e, decodes into out (e->ulen bytes). Holes: zeros, no I/O. */
cbfs_err cbfs_block_read(int data_fd, const struct cbfs_index_entry *e, uint64_t block,
                         void *scratch, void *out);

/* The second half of cbfs_block_read, for callers that read the frame
 * themselves (to time I/O apart from decoding): checks the frame bytes
 * (header + payload, as read from e->offset) against e and decodes. */
cbfs_err cbfs_block_check_decode(const struct cbfs_index_entry *e, uint64_t block,
                                 const void *frame, void *out);

/* ---- decoding with stock tools (docs/FORMAT.md, section 4) ---- */

/* Does stock `zstd -d -c` / `lz4 -d -c` of the data file output exactly the
 * file's logical content? */
struct cbfs_stock {
    bool yes;
    char tool[24]; /* yes: "zstd -d", "lz4 -d", or "zstd -d or lz4 -d" (no block frame) */
    char why[128]; /* no: the first reason, met walking the frames in file order */
};

/* Decides it from the frames in file order: the live ones as idx describes
 * them, and the headers of the frames between them (cbfs_frame_walk, one
 * 64-byte read each; payloads are not read), so a file written in one pass
 * is checked without reading its data file. Yes needs: one codec whose payload is a
 * stock stream (zstd or lz4), no RAW frame, no hole frame without payload,
 * every block frame live (no rewritten or truncated-away frame: its header,
 * even punched, still makes the stock tool output or fail on it), blocks 0,
 * 1, 2, ... in this order with none missing, every block but the last full,
 * the last one ending at the logical size, and nothing after the last frame.
 * SIZE frames are skipped by stock tools: they count only through what they
 * do to the blocks and the size. idx is the table cbfs_index_load or
 * cbfs_index_open built from the same data file; the live frames' headers
 * and payloads are taken to be intact as it describes them (cbfs verify
 * checks them). @return an I/O error, CBFS_E_VERSION, or
 * CBFS_E_CODEC_MISSING (a frame's codec is not built in, so whether its
 * payload is a stock stream is not known); on CBFS_OK *v is the verdict. */
cbfs_err cbfs_stock_check(int data_fd, const struct cbfs_index *idx, struct cbfs_stock *v);

#endif

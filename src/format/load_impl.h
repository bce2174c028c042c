/* What the two halves of opening an index share (src/format/): load.c
 * replays the sidecar, applies and repairs; scan.c walks the frames of the
 * data file (the rescan past the records, the rebuild's passes over torn
 * writes). Not a public header: include/cbfs/format.h is. */
#ifndef CBFS_FORMAT_LOAD_IMPL_H
#define CBFS_FORMAT_LOAD_IMPL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "cbfs/format.h"

/* Records found by scanning frames, kept to be appended on repair (and, for a
 * rebuild, applied once the block size is known). */
struct cbfs_recvec {
    struct cbfs_index_rec *v;
    size_t n, cap;
};

/* Where the sidecar lost records (cbfs_index_report.records_lost): what its
 * slots behind the loss say (cbfs_load_records_lost), what the rescan past
 * them needs, and what it tells back (cbfs_load_scan). */
struct cbfs_load_lost {
    uint64_t vouched;     /* the frames of the records behind the loss end here: the
                             rescan must reach it (0: no record there) */
    bool clean_end;       /* only zeros behind those records: a frame from vouched on
                             that does not decode is torn all the same */
    bool damage_last;     /* the last frame taken did not decode: damage in place */
    bool undecided;       /* the scan stopped at a frame (fh) that does not decode and
                             whose length reaches over no later frame of the file */
    bool stop_torn;       /* the scan stopped at a frame whose header decodes, torn */
    struct cbfs_frame_hdr fh;
};

/* Where the rebuild's passes over torn writes stand: the highest generation
 * among rv->v[0, upto), and how many passes were made. */
struct cbfs_load_resync {
    uint64_t gen;
    size_t upto;
    unsigned passes;
};

/* The bytes a search for frames past damage reads at most (tails kept
 * unscanned beyond it, 3.2 of docs/FORMAT.md); what lies beyond, unread,
 * counts as unreachable unless it is a hole (cbfs_load_data_after). */
#define CBFS_LOAD_SCAN_MAX (64ull << 20)

/* Each @return CBFS_OK, I/O errors or CBFS_E_NOMEM (and what each names). */

/* Walks the frames of the data file (dsize bytes) from off, pushing a record
 * for each onto rv; *end: where the frames stopped. check_id, verify and lost
 * as described at the definition (scan.c). CBFS_E_WRONG_FILE for a frame of
 * another file where the id is checked. */
cbfs_err cbfs_load_scan(int data_fd, uint64_t dsize, uint64_t off, bool check_id, bool verify,
                        struct cbfs_load_lost *lost, uint64_t *file_id, struct cbfs_recvec *rv,
                        uint64_t *end);

/* A walk from start stopped at end, short of dsize: were the bytes there
 * writes torn by a crash that a later writer appended behind (the proof in
 * the generations, docs/FORMAT.md 3.3)? *next: that writer's first frame, or
 * 0 (damage; *unreachable says whether frames of the file lie past it). */
cbfs_err cbfs_load_past_torn(int data_fd, uint64_t dsize, uint64_t start, uint64_t end,
                             uint64_t file_id, struct cbfs_recvec *rv, struct cbfs_load_resync *st,
                             uint64_t *next, uint64_t *skipped, bool *unreachable);

/* The rescan past the replayed records (docs/FORMAT.md 3.1, rule 3): the
 * frames from idx->data_end into rv; lost where the sidecar lost records
 * (NULL otherwise); sets rep->frames_unreachable and adds to
 * rep->torn_bytes_skipped. */
cbfs_err cbfs_load_rescan(int data_fd, uint64_t dsize, const struct cbfs_index *idx,
                          struct cbfs_load_lost *lost, uint64_t *fid, struct cbfs_recvec *rv,
                          struct cbfs_index_report *rep);

/* *has: does [from, dsize) hold the frame magic anywhere (true, unread, for
 * more than CBFS_LOAD_SCAN_MAX bytes)? A tail with it is never cut. */
cbfs_err cbfs_load_tail_has_frames(int data_fd, uint64_t from, uint64_t dsize, bool *has);

#endif

/* cbfs_index_load: opening a file's index. Replays the sidecar up to its
 * first bad record, rescans the data file for frames the sidecar lags, or
 * rebuilds the table from the frames alone when there is no usable sidecar;
 * in repair mode also truncates torn tails and appends the missing records.
 * The frames are the truth: a record counts only if its frame is there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/util.h"

/* Records found by scanning frames, kept to be appended on repair (and, for a
 * rebuild, applied once the block size is known). */
struct cbfs_recvec {
    struct cbfs_index_rec *v;
    size_t n, cap;
};

static cbfs_err cbfs_recvec_push(struct cbfs_recvec *rv, const struct cbfs_index_rec *r)
{
    if (rv->n == rv->cap) {
        const size_t cap = rv->cap ? rv->cap * 2 : 64;
        if (cap > SIZE_MAX / sizeof *rv->v) return CBFS_E_NOMEM;
        struct cbfs_index_rec *const v = realloc(rv->v, cap * sizeof *v);
        if (!v) return CBFS_E_NOMEM;
        rv->v = v;
        rv->cap = cap;
    }
    rv->v[rv->n++] = *r;
    return CBFS_OK;
}

/* Errors that mean "no valid frame/record here" (stop scanning) rather than
 * "could not look" (give up: I/O error, out of memory). */
static bool cbfs_load_is_format_err(cbfs_err e)
{
    return e == CBFS_E_TRUNCATED || e == CBFS_E_BAD_MAGIC || e == CBFS_E_CORRUPT ||
           e == CBFS_E_FBIG;
}

static cbfs_err cbfs_load_fsize(int fd, uint64_t *size)
{
    struct stat st;
    if (fstat(fd, &st) != 0) return cbfs_err_from_errno(errno);
    *size = (uint64_t)st.st_size;
    return CBFS_OK;
}

/* Does record r describe exactly the frame header fh? */
static bool cbfs_load_rec_matches(const struct cbfs_index_rec *r, const struct cbfs_frame_hdr *fh)
{
    if (r->block != fh->block || r->generation != fh->generation) return false;
    if (r->type == CBFS_REC_SIZE) return fh->flags == CBFS_FRAME_SIZE;
    return fh->flags == r->flags && fh->codec == r->codec && fh->plen == r->plen &&
           fh->ulen == r->ulen && fh->hash == r->hash;
}

/* Where the sidecar lost records (cbfs_index_report.records_lost): what its
 * slots behind the loss say (cbfs_load_records_lost), what the rescan past
 * them needs, and what it tells back (cbfs_load_scan). */
struct cbfs_load_lost {
    uint64_t torn_from;   /* a frame from here on that does not decode is torn all the
                             same; UINT64_MAX where that is not known */
    uint64_t vouched;     /* the frames of the records behind the loss end here: the
                             rescan must reach it (0: no record there) */
    bool damage_last;     /* the last frame taken did not decode: damage in place */
    bool undecided;       /* the scan stopped at a frame (fh) that does not decode and
                             whose length reaches over no later frame of the file */
    bool stop_torn;       /* the scan stopped at a frame whose header decodes, torn */
    struct cbfs_frame_hdr fh;
};

/* The sidecar from the slot at off, where the replay stopped, to its end
 * (isize). @return false where it holds nothing but zeros: appends a crash
 * cut short (a record lies in one sector), a clean end. Otherwise records are
 * lost, behind which acknowledged records may lie: damage, or zeros with
 * records after them (a power cut landed a later page of the sidecar and
 * not this one, or a failed sync dropped it: helper-13). Every record is
 * appended once its frame is durable, in frame order, so lost->vouched,
 * where the frames of the records behind the loss end, is durable data that
 * the rescan must reach. Where every slot behind the last of those records
 * is zeros (a torn append at most), lost->torn_from is that end too: an
 * acknowledged record is durable, and the record of a frame past them would
 * lie behind theirs, so no frame past them was acknowledged, and the rescan
 * may call one that does not decode torn. It stays UINT64_MAX where a slot
 * behind the last record is neither zeros nor a record, or no record is
 * there. */
static bool cbfs_load_records_lost(int idx_fd, uint64_t off, uint64_t isize,
                                   struct cbfs_load_lost *lost)
{
    uint8_t buf[64 * CBFS_INDEX_REC_SIZE];
    uint64_t end = 0;
    bool zeros = true;   /* all zero so far */
    bool tail_ok = true; /* every slot since the last record that decodes is zeros */
    for (uint64_t at = off; at < isize;) {
        const size_t n = isize - at < sizeof buf ? (size_t)(isize - at) : sizeof buf;
        if (cbfs_pread_full(idx_fd, buf, n, at) != CBFS_OK) return true;
        for (size_t i = 0; i < n; i += CBFS_INDEX_REC_SIZE) {
            const size_t k = n - i < CBFS_INDEX_REC_SIZE ? n - i : CBFS_INDEX_REC_SIZE;
            if (cbfs_is_zero(buf + i, k)) continue;
            zeros = false;
            struct cbfs_index_rec r;
            if (k < CBFS_INDEX_REC_SIZE) {
                /* the last slot, in part: an append a crash cut short */
            } else if (at + i == off || cbfs_index_rec_decode(buf + i, &r) != CBFS_OK ||
                       r.type == CBFS_REC_HEADER) {
                tail_ok = false; /* a slot that is neither zeros nor a record */
            } else {
                tail_ok = true;
                if (r.offset + CBFS_FRAME_HDR_SIZE + r.plen > end)
                    end = r.offset + CBFS_FRAME_HDR_SIZE + r.plen;
            }
        }
        at += n;
    }
    lost->vouched = end;
    if (end && tail_ok) lost->torn_from = end;
    return !zeros;
}

/* Replays sidecar records from offset 64 while each is valid and its frame is
 * in the data file; sets idx->index_end past the last good one. With records
 * lost (rep->records_lost), *lost: cbfs_load_records_lost's. */
static cbfs_err cbfs_load_replay(int data_fd, uint64_t dsize, int idx_fd, uint64_t isize,
                                 bool check_all, struct cbfs_index *idx,
                                 struct cbfs_index_report *rep, struct cbfs_load_lost *lost)
{
    uint8_t buf[256 * CBFS_INDEX_REC_SIZE];
    uint64_t off = CBFS_INDEX_REC_SIZE;
    idx->index_end = off;
    while (isize - off >= CBFS_INDEX_REC_SIZE) {
        uint64_t chunk = (isize - off) / CBFS_INDEX_REC_SIZE * CBFS_INDEX_REC_SIZE;
        if (chunk > sizeof buf) chunk = sizeof buf;
        cbfs_err e = cbfs_pread_full(idx_fd, buf, (size_t)chunk, off);
        if (e) return e;
        for (uint64_t i = 0; i < chunk; i += CBFS_INDEX_REC_SIZE, off += CBFS_INDEX_REC_SIZE) {
            struct cbfs_index_rec r;
            if (cbfs_index_rec_decode(buf + i, &r) != CBFS_OK || r.type == CBFS_REC_HEADER) {
                rep->records_lost = cbfs_load_records_lost(idx_fd, off, isize, lost);
                return CBFS_OK;
            }
            if (!check_all && rep->records_replayed > 0) {
                /* Fast path: trust our own checksummed record if its frame
                 * lies inside the data file; the frame header is checked
                 * when the block is read (and the last one below). */
                if (r.offset > dsize || dsize - r.offset < CBFS_FRAME_HDR_SIZE + (uint64_t)r.plen)
                    return CBFS_OK;
                e = cbfs_index_apply(idx, &r);
                if (cbfs_load_is_format_err(e)) return CBFS_OK;
                if (e) return e;
                rep->records_replayed++;
                idx->index_end = off + CBFS_INDEX_REC_SIZE;
                continue;
            }
            struct cbfs_frame_hdr fh;
            e = cbfs_frame_read_hdr(data_fd, r.offset, dsize, &fh);
            if (e == CBFS_OK && fh.file_id != idx->file_id) return CBFS_E_WRONG_FILE;
            bool damaged = false;
            if ((e == CBFS_E_CORRUPT || e == CBFS_E_BAD_MAGIC) &&
                r.offset + CBFS_FRAME_HDR_SIZE + r.plen <= dsize) {
                /* A record we wrote (its checksum holds) whose frame header
                 * was damaged on disk: keep the record, so only this block
                 * fails (EIO at read time) and the frames after it stay
                 * reachable — stopping here would make the file look
                 * shorter and let a repair cut off good frames. */
                damaged = true;
            } else {
                if (e == CBFS_E_VERSION || cbfs_load_is_format_err(e)) return CBFS_OK;
                if (e) return e;
                if (!cbfs_load_rec_matches(&r, &fh)) return CBFS_OK;
            }
            e = cbfs_index_apply(idx, &r);
            if (cbfs_load_is_format_err(e)) return CBFS_OK;
            if (e) return e;
            /* counted once applied: frames_damaged is a part of
             * records_replayed (the leftover test compares the two) */
            if (damaged && rep->frames_damaged++ == 0) rep->first_damaged_offset = r.offset;
            rep->records_replayed++;
            idx->index_end = off + CBFS_INDEX_REC_SIZE;
        }
    }
    return CBFS_OK;
}

cbfs_err cbfs_frame_walk(int data_fd, uint64_t dsize, uint64_t off, cbfs_frame_visit_fn fn,
                         void *arg, uint64_t *end)
{
    cbfs_err e = CBFS_OK;
    while (off < dsize) {
        struct cbfs_frame_hdr fh;
        e = cbfs_frame_read_hdr(data_fd, off, dsize, &fh);
        if (cbfs_load_is_format_err(e)) {
            e = CBFS_OK; /* torn or garbage tail: the frames end here */
            break;
        }
        if (e) break; /* I/O error, or CBFS_E_VERSION: a newer writer's frame */
        bool stop = false;
        e = fn(arg, off, &fh, &stop);
        if (e || stop) break;
        off += CBFS_FRAME_HDR_SIZE + (uint64_t)fh.plen;
    }
    if (end) *end = off;
    return e;
}

/* What cbfs_load_scan collects while walking the frames. */
struct cbfs_load_scan_ctx {
    bool check_id, verify;
    struct cbfs_load_lost *lost; /* verify: the sidecar lost records; NULL where not */
    int data_fd;
    uint64_t dsize;
    uint64_t *file_id;
    struct cbfs_recvec *rv;
    unsigned char *buf; /* verify: payload, then the decoded block */
    size_t cap;
};

/* Reads and decodes the frame at off (header fh) and checks its hash, in
 * *buf (grown as needed; the caller frees it). @return CBFS_OK (SIZE frames:
 * nothing to check), a format error (torn or damaged), CBFS_E_CODEC_MISSING,
 * I/O errors, CBFS_E_NOMEM. */
static cbfs_err cbfs_load_verify(int data_fd, uint64_t off, const struct cbfs_frame_hdr *fh,
                                 unsigned char **buf, size_t *cap)
{
    if (fh->flags & CBFS_FRAME_SIZE) return CBFS_OK;
    const size_t need = (size_t)fh->plen + fh->ulen + 1; /* never 0: *buf is not NULL */
    if (need > *cap) {
        unsigned char *const b = realloc(*buf, need);
        if (!b) return CBFS_E_NOMEM;
        *buf = b;
        *cap = need;
    }
    cbfs_err e = CBFS_OK;
    if (fh->plen) e = cbfs_pread_full(data_fd, *buf, fh->plen, off + CBFS_FRAME_HDR_SIZE);
    if (!e) e = cbfs_frame_decode(fh, *buf, *buf + fh->plen);
    return e;
}

/* The first 8 bytes of every frame: the skippable magic and its content
 * size, little-endian (what cbfs_frame_is_envelope checks first). */
#define CBFS_LOAD_LE32(v) \
    (uint8_t)((v) & 0xFF), (uint8_t)(((v) >> 8) & 0xFF), (uint8_t)(((v) >> 16) & 0xFF), \
        (uint8_t)(((v) >> 24) & 0xFF)
static const uint8_t cbfs_load_magic[8] = {CBFS_LOAD_LE32(CBFS_SKIPPABLE_MAGIC),
                                           CBFS_LOAD_LE32(CBFS_SKIPPABLE_CONTENT)};
#undef CBFS_LOAD_LE32

/* Looks for the frame magic in (from, to): from itself is skipped, a frame
 * there starts with it. Each place found is offered to accept (NULL: any
 * place will do) until one is taken; *found says whether one was. */
static cbfs_err cbfs_load_find_magic(int data_fd, uint64_t from, uint64_t to,
                                     cbfs_err (*accept)(void *arg, uint64_t at, bool *take),
                                     void *arg, bool *found)
{
    uint8_t buf[65536];
    const size_t m = sizeof cbfs_load_magic;
    size_t chunk = 4096; /* grows: a search often ends a few bytes on */
    *found = false;
    for (uint64_t off = from + 1; off + m <= to;) {
        const size_t want = to - off < chunk ? (size_t)(to - off) : chunk;
        cbfs_err e = cbfs_pread_full(data_fd, buf, want, off);
        if (e) return e;
        for (size_t i = 0; i + m <= want; i++) {
            if (buf[i] != cbfs_load_magic[0] || memcmp(buf + i, cbfs_load_magic, m) != 0)
                continue;
            bool take = true;
            if (accept && (e = accept(arg, off + i, &take)) != CBFS_OK) return e;
            if (take) {
                *found = true;
                return CBFS_OK;
            }
        }
        if (off + want >= to) break;
        off += want - (m - 1); /* the last m - 1 bytes again, with what follows */
        if (chunk < sizeof buf) chunk *= 2;
    }
    return CBFS_OK;
}

/* What cbfs_load_is_frame_of looks for: a frame header of file_id; at says
 * where the one taken is. With take_newer, a header of a newer format
 * version is taken too (newer set): its frame's file id cannot be read. With
 * take_damaged, a header that does not decode but whose file-id field holds
 * file_id is taken too. */
struct cbfs_load_frame_of {
    int data_fd;
    uint64_t dsize, file_id;
    bool take_newer, take_damaged, newer;
    uint64_t at;
};

static cbfs_err cbfs_load_is_frame_of(void *arg, uint64_t at, bool *take)
{
    struct cbfs_load_frame_of *const w = arg;
    struct cbfs_frame_hdr h;
    cbfs_err e = cbfs_frame_read_hdr(w->data_fd, at, w->dsize, &h);
    *take = e == CBFS_OK && h.file_id == w->file_id;
    if (e == CBFS_E_VERSION && w->take_newer) *take = w->newer = true;
    if ((e == CBFS_E_CORRUPT || e == CBFS_E_BAD_MAGIC) && w->take_damaged) {
        uint8_t head[CBFS_FRAME_HDR_SIZE];
        const uint64_t n = w->dsize - at < sizeof head ? w->dsize - at : sizeof head;
        e = cbfs_pread_full(w->data_fd, head, (size_t)n, at);
        if (e) return e;
        *take = cbfs_frame_hdr_names(head, (size_t)n, w->file_id);
    }
    if (*take) w->at = at;
    return e && !cbfs_load_is_format_err(e) && e != CBFS_E_VERSION ? e : CBFS_OK;
}

/* Does the range the frame at off (header fh) claims hold the start of
 * another frame of file_id? Then its length reaches over a frame written
 * after it: it was torn (cut short by a crash, later frames appended behind
 * it), not damaged in place. A later frame's header damaged as well still
 * counts where it names the file (the frame magic, then its file id): taken
 * for damage in place, the torn frame would be applied, and the frames
 * behind the two could be taken for a later writer's with the damaged
 * frame's block missing (its generation is the torn frame's). */
static cbfs_err cbfs_load_overlaps_frame(int data_fd, uint64_t off,
                                         const struct cbfs_frame_hdr *fh, uint64_t dsize,
                                         uint64_t file_id, bool *overlaps)
{
    struct cbfs_load_frame_of w = {
        .data_fd = data_fd, .dsize = dsize, .file_id = file_id, .take_damaged = true};
    return cbfs_load_find_magic(data_fd, off, off + CBFS_FRAME_HDR_SIZE + (uint64_t)fh->plen,
                                cbfs_load_is_frame_of, &w, overlaps);
}

static cbfs_err cbfs_load_scan_one(void *arg, uint64_t off, const struct cbfs_frame_hdr *fh,
                                   bool *stop)
{
    struct cbfs_load_scan_ctx *const c = arg;
    if (!c->check_id && c->rv->n == 0) *c->file_id = fh->file_id;
    if (fh->file_id != *c->file_id) return CBFS_E_WRONG_FILE;
    if (c->verify) {
        cbfs_err e = cbfs_load_verify(c->data_fd, off, fh, &c->buf, &c->cap);
        const bool undecoded = cbfs_load_is_format_err(e);
        if (undecoded) {
            /* Torn: never written whole, the frames end here. So is every
             * such frame past records that ended cleanly (or in a torn
             * append's zeros): a flush syncs the sidecar before it returns,
             * so no frame past them was ever acknowledged, and a power cut
             * leaves a rewrite's header on disk with zeros after it where
             * the block's previous, acknowledged frame is whole (helper-8).
             * Past a damaged record, acknowledged frames may lie: one whose
             * length reaches over a later frame is torn; any other is left
             * to the caller (lost->undecided): torn where a later writer's
             * generations show it never loaded it, else damage in place
             * (bit rot under a lost record), applied, so that its block
             * reads as damage rather than as an older version. That is only
             * up to the frames of the records behind the loss where nothing
             * but zeros lies behind those records (torn_from): a power cut
             * landed a later sidecar page and not an earlier one, say. */
            bool torn = !c->lost || off >= c->lost->torn_from;
            e = torn ? CBFS_OK
                     : cbfs_load_overlaps_frame(c->data_fd, off, fh, c->dsize, *c->file_id, &torn);
            if (e) return e;
            if (c->lost) {
                c->lost->undecided = !torn;
                c->lost->stop_torn = torn;
                c->lost->fh = *fh;
            }
            *stop = true;
            return CBFS_OK;
        } else if (e && e != CBFS_E_CODEC_MISSING) {
            return e; /* I/O, memory; a codec not built in: cannot tell, taken */
        }
        if (c->lost) c->lost->damage_last = false;
    }
    struct cbfs_index_rec r;
    cbfs_index_rec_from_frame(fh, off, &r);
    return cbfs_recvec_push(c->rv, &r);
}

/* Walks the frames from off, collecting a record for each. With check_id, a
 * frame of another file id is CBFS_E_WRONG_FILE; otherwise the first frame's
 * id is taken (rebuild). With verify (frames past the sidecar's records), a
 * frame that does not decode to its hash ends the frames before it: frames
 * there were written by a writer that may have been cut off. With lost
 * (the sidecar lost records, and acknowledged frames may lie there), only
 * past lost->torn_from or where its length reaches over the start of a later
 * frame: a torn frame whose header landed gets a length that fits the file
 * once later frames are appended behind it (a kept tail), so a header that
 * checks is not enough. The walk stops at any other, lost->undecided, for
 * the caller to tell a torn write from damage in place. */
static cbfs_err cbfs_load_scan(int data_fd, uint64_t dsize, uint64_t off, bool check_id,
                               bool verify, struct cbfs_load_lost *lost, uint64_t *file_id,
                               struct cbfs_recvec *rv, uint64_t *end)
{
    struct cbfs_load_scan_ctx c = {.check_id = check_id,
                                   .verify = verify,
                                   .lost = lost,
                                   .data_fd = data_fd,
                                   .dsize = dsize,
                                   .file_id = file_id,
                                   .rv = rv};
    const cbfs_err e = cbfs_frame_walk(data_fd, dsize, off, cbfs_load_scan_one, &c, end);
    free(c.buf);
    return e;
}

/* What cbfs_load_restart_one looks for along a walk: the first frame of
 * file_id with a generation of at most gen_max (found, at, generation);
 * last: the last frame of file_id the walk visited. */
struct cbfs_load_restart {
    uint64_t file_id, gen_max;
    bool found;
    uint64_t at, generation, last;
};

static cbfs_err cbfs_load_restart_one(void *arg, uint64_t off, const struct cbfs_frame_hdr *fh,
                                      bool *stop)
{
    struct cbfs_load_restart *const r = arg;
    if (fh->file_id != r->file_id) {
        *stop = true; /* another file's frame: not this file's chain */
        return CBFS_OK;
    }
    r->last = off;
    if (fh->generation <= r->gen_max) {
        r->found = true;
        r->at = off;
        r->generation = fh->generation;
        *stop = true;
    }
    return CBFS_OK;
}

/* A crash leaves one torn stretch per restart of a writer. More stretches
 * than this in one file are not a crash history but damage or crafted
 * bytes: the rebuild ends its frames there, as at any damage, and counts
 * what follows as unreachable, instead of searching on (each search reads
 * at least a few KiB). */
#define CBFS_LOAD_RESYNC_MAX 1024

/* The bytes a search for frames past damage reads at most (tails kept
 * unscanned beyond it, 3.2 of docs/FORMAT.md); what lies beyond, unread,
 * counts as unreachable unless it is a hole (cbfs_load_data_after). */
#define CBFS_LOAD_SCAN_MAX (64ull << 20)

/* The search for frames past damage gave up at `to`, short of the data's
 * end, having found none. A crash's stretch of zeros (a size made durable
 * before the pages: XFS, ext4 data=writeback) is a hole or unwritten
 * extents, which SEEK_DATA passes: with no data after `to` the frames end at
 * the damage. Anything else there (on a filesystem without SEEK_DATA, all of
 * it) is bytes the search did not read, where frames of the file may lie:
 * *unreachable, as for frames seen past the stop. */
static cbfs_err cbfs_load_data_after(int data_fd, uint64_t to, bool *unreachable)
{
    if (lseek(data_fd, (off_t)to, SEEK_DATA) != (off_t)-1)
        *unreachable = true;
    else if (errno != ENXIO)
        return cbfs_err_from_errno(errno);
    return CBFS_OK;
}

/* Where the rebuild's passes over torn writes stand: the highest generation
 * among rv->v[0, upto), and how many passes were made. */
struct cbfs_load_resync {
    uint64_t gen;
    size_t upto;
    unsigned passes;
};

/* The walk of the frames from start (0 for a rebuild, docs/FORMAT.md 3.3;
 * past the replayed records where records were lost, 3.1 rule 3; in either,
 * where the last pass went on; rv holds the frames taken, st->gen counts
 * those replayed too) stopped at end, short of the data's end. Where writes
 * torn by a crash stopped it and a later writer appended frames behind them
 * (a kept tail, 3.2), *next is the
 * first of those, *skipped the bytes passed over, and a torn frame the walk
 * took (the last one, if it does not decode and its length reaches over a
 * later frame of the file) is dropped from rv; otherwise *next is 0: damage,
 * and the frames end at end; *unreachable then says whether a frame of the
 * file (or of a newer format) was seen past them, or bytes the search did not
 * read lie there. Where nothing can be told (I/O, memory, a codec not built
 * in for the frame the walk ended on) the error is returned: the load fails
 * rather than serve, or write a sidecar of, the frames before the stop.
 *
 * The proof is in the generations. A writer appends its frames in
 * generation order, and one that opens the file goes on at one past the
 * highest generation it loaded (every record it replayed counts, a damaged
 * frame's too, and a frame made durable by a flush has its record durable
 * too). Let F be the first frame of the file behind the bytes that stopped
 * the walk whose generation is at most one past the last good frame before
 * them (frames between are followed header by header, damage between them
 * searched past). If F's generation is exactly that, F's writer loaded
 * nothing of what lies between: no frame there was ever made durable, they
 * are writes cut short by a crash (whole ones included, whose pages landed
 * while an earlier frame's did not). Otherwise, or with no such F, a frame
 * in between may have counted, and its loss cannot be told from a torn
 * write. */
static cbfs_err cbfs_load_past_torn(int data_fd, uint64_t dsize, uint64_t start, uint64_t end,
                                    uint64_t file_id, struct cbfs_recvec *rv,
                                    struct cbfs_load_resync *st, uint64_t *next,
                                    uint64_t *skipped, bool *unreachable)
{
    *next = 0;
    if (st->passes >= CBFS_LOAD_RESYNC_MAX) {
        *unreachable = true; /* not a crash history: nothing past here is vouched for */
        return CBFS_OK;
    }
    size_t keep = rv->n;
    uint64_t from = end;
    cbfs_err e = CBFS_OK;
    if (keep > 0) {
        const struct cbfs_index_rec *const last = &rv->v[keep - 1];
        struct cbfs_frame_hdr h;
        unsigned char *buf = NULL;
        size_t cap = 0;
        e = cbfs_frame_read_hdr(data_fd, last->offset, dsize, &h); /* the walk read it */
        if (e) return e;
        e = cbfs_load_verify(data_fd, last->offset, &h, &buf, &cap);
        free(buf);
        if (cbfs_load_is_format_err(e)) {
            /* a frame superseded and punched, or rotten in place, was loaded
             * by its writer and counts; only a torn one does not */
            bool torn;
            e = cbfs_load_overlaps_frame(data_fd, last->offset, &h, dsize, file_id, &torn);
            if (e) return e;
            if (torn) {
                keep--;
                from = last->offset;
            }
        } else if (e) {
            return e; /* a codec not built in, I/O, memory: whether it is torn is not known */
        }
    }
    for (; st->upto < keep; st->upto++)
        if (rv->v[st->upto].generation > st->gen) st->gen = rv->v[st->upto].generation;
    const uint64_t gen = st->gen;
    uint64_t good_end = start; /* a stretch passed before start is not counted again */
    if (keep && rv->v[keep - 1].offset + CBFS_FRAME_HDR_SIZE + rv->v[keep - 1].plen > start)
        good_end = rv->v[keep - 1].offset + CBFS_FRAME_HDR_SIZE + rv->v[keep - 1].plen;
    struct cbfs_load_frame_of w = {
        .data_fd = data_fd, .dsize = dsize, .file_id = file_id, .take_newer = true};
    struct cbfs_load_restart r = {.file_id = file_id, .gen_max = gen + 1};
    uint64_t budget = CBFS_LOAD_SCAN_MAX;
    for (uint64_t pos = from; !r.found;) {
        const uint64_t to = dsize - pos > budget ? pos + budget : dsize;
        bool found;
        e = cbfs_load_find_magic(data_fd, pos, to, cbfs_load_is_frame_of, &w, &found);
        if (e) return e;
        if (!found) return to < dsize ? cbfs_load_data_after(data_fd, to, unreachable) : CBFS_OK;
        *unreachable = true; /* a frame of the file, or a newer writer's, lies past the stop */
        if (w.newer) return CBFS_OK; /* cannot be read here */
        budget -= w.at - pos;
        r.last = w.at;
        e = cbfs_frame_walk(data_fd, dsize, w.at, cbfs_load_restart_one, &r, &pos);
        if (e == CBFS_E_VERSION) return CBFS_OK; /* a newer writer's frame: unreachable */
        if (e) return e;
        if (pos >= dsize) break;
        /* The walk ended inside the length of the last frame it took: a torn
         * one reaches over the frames appended behind it (a second torn
         * write of the same crash, helper-21), so the search goes on inside
         * it. */
        if (!r.found) pos = r.last;
    }
    if (!r.found || r.generation != gen + 1) return CBFS_OK;
    *unreachable = false;
    st->passes++;
    rv->n = keep;
    *next = r.at;
    *skipped = r.at - good_end;
    return CBFS_OK;
}

/* Failed proofs (cbfs_load_past_torn for a frame the walk left undecided)
 * one rescan makes at most: each may walk the frame headers to the data's
 * end. A crash leaves one torn write per restart; more undecided frames that
 * cbfs_load_must_fail cannot settle are damage, or crafted. */
#define CBFS_LOAD_PROOFS_MAX 64

/* What cbfs_load_tail_low looks for: the lowest generation of a header of
 * file_id; newer: a header of a newer format version was seen. */
struct cbfs_load_low {
    int data_fd;
    uint64_t file_id, low;
    bool newer;
};

static cbfs_err cbfs_load_low_one(void *arg, uint64_t at, bool *take)
{
    struct cbfs_load_low *const l = arg;
    struct cbfs_frame_hdr h;
    const cbfs_err e = cbfs_frame_read_hdr(l->data_fd, at, UINT64_MAX, &h);
    if (e == CBFS_OK && h.file_id == l->file_id && h.generation < l->low) l->low = h.generation;
    if (e == CBFS_E_VERSION) l->newer = true;
    *take = false; /* every one */
    return e && !cbfs_load_is_format_err(e) && e != CBFS_E_VERSION ? e : CBFS_OK;
}

/* The lowest generation of any frame header of file_id at or past end (where
 * a walk stopped): a bound on what a proof's walk past the stop can find.
 * 0 where it cannot be told: a newer writer's header, or more than the
 * search reads. */
static cbfs_err cbfs_load_tail_low(int data_fd, uint64_t dsize, uint64_t end, uint64_t file_id,
                                   uint64_t *low)
{
    struct cbfs_load_low l = {.data_fd = data_fd, .file_id = file_id, .low = UINT64_MAX};
    *low = 0;
    if (dsize - end > CBFS_LOAD_SCAN_MAX) return CBFS_OK;
    bool found;
    cbfs_err e = cbfs_load_low_one(&l, end, &found); /* the search skips where it starts */
    if (!e) e = cbfs_load_find_magic(data_fd, end, dsize, cbfs_load_low_one, &l, &found);
    if (e) return e;
    if (!l.newer) *low = l.low;
    return CBFS_OK;
}

/* What cbfs_load_must_fail tells of an undecided frame: the highest
 * generation loaded before it (the proof's g) and whether the proof must
 * fail. */
struct cbfs_load_fate {
    uint64_t gen;
    bool fail;
};

/* For each rv->v[und[k]] (a frame the rescan took as damage in place),
 * fate[k]: must cbfs_load_past_torn's proof for it fail? rv behind it holds
 * every frame the proof's own walk would find before the walk's stop (none
 * of the file starts inside it: it overlaps nothing), tail_low bounds the
 * generations of those past the stop (UINT64_MAX where the walk reached the
 * data's end: cbfs_load_tail_low), and the proof takes the first with a
 * generation of at most one past those before it (gen0: the replayed ones',
 * and rv's before it): with none such behind it, it fails. (Without the
 * bound past a stop, every punched frame before it took a proof, and 64 of
 * them used the proofs up before a torn write behind them: helper-21.) */
static cbfs_err cbfs_load_must_fail(const struct cbfs_recvec *rv, uint64_t gen0,
                                    uint64_t tail_low, const size_t *und, size_t nund,
                                    struct cbfs_load_fate *fate)
{
    uint64_t *const low = malloc((rv->n + 1) * sizeof *low); /* lowest generation from i on */
    if (!low) return CBFS_E_NOMEM;
    low[rv->n] = tail_low;
    for (size_t i = rv->n; i-- > 0;)
        low[i] = rv->v[i].generation < low[i + 1] ? rv->v[i].generation : low[i + 1];
    uint64_t g = gen0;
    size_t i = 0;
    for (size_t k = 0; k < nund; k++) {
        for (; i < und[k]; i++)
            if (rv->v[i].generation > g) g = rv->v[i].generation;
        fate[k] = (struct cbfs_load_fate){.gen = g, .fail = low[und[k] + 1] > g + 1};
    }
    free(low);
    return CBFS_OK;
}

/* The rescan past the replayed records (docs/FORMAT.md 3.1, rule 3): the
 * frames from idx->data_end into rv. Where records were lost (lost), the
 * walk leaves undecided a frame that does not decode and reaches over no
 * later frame: taken as damage in place, and the walk goes on behind it.
 * Once it ends, each such frame gets the rebuild's proof
 * (cbfs_load_past_torn): a write torn by an earlier crash, kept as a tail,
 * that the writer behind it never loaded is dropped with what follows it up
 * to that writer's first frame, and the walk goes on from there. Where the
 * walk reached the data's end and no frame it took behind the undecided one
 * has a generation the proof could take (cbfs_load_must_fail), no proof is
 * made: a punched frame (superseded, then its payload freed) is one, and a
 * file that is rewritten has many, each proof a walk to the data's end. The
 * rescan must also reach the frames of the records behind the loss
 * (lost->vouched): a walk that stops short of them stopped at a torn write
 * with such a writer's frames behind it, passed the same way, or at damage,
 * past which those frames are rep->frames_unreachable (a repair that cut the
 * records there would lose acknowledged blocks for good, helper-17). Where
 * the walk stopped at a header that does not decode right behind a frame
 * taken as damage, that frame may be the torn write with the header behind
 * it damaged as well: its generation proves nothing, and the frames past the
 * stop are unreachable. */
static cbfs_err cbfs_load_rescan(int data_fd, uint64_t dsize, const struct cbfs_index *idx,
                                 struct cbfs_load_lost *lost, uint64_t *fid,
                                 struct cbfs_recvec *rv, struct cbfs_index_report *rep)
{
    struct cbfs_load_resync st = {.gen = idx->next_gen - 1};
    uint64_t pos = idx->data_end, start = pos; /* where this pass began */
    size_t *und = NULL, nund = 0, cap = 0;     /* rv indices taken as damage, in order */
    struct cbfs_load_fate *fate = NULL;
    unsigned proofs = 0;
    cbfs_err e = CBFS_OK;
    for (;;) {
        uint64_t end, next = 0, skipped = 0;
        bool unreachable = false;
        if (lost) lost->undecided = lost->stop_torn = false;
        e = cbfs_load_scan(data_fd, dsize, pos, true, true, lost, fid, rv, &end);
        if (e || !lost) break;
        if (lost->undecided) {
            struct cbfs_index_rec r;
            cbfs_index_rec_from_frame(&lost->fh, end, &r);
            if (nund == cap) {
                const size_t c = cap ? cap * 2 : 16;
                size_t *const u = realloc(und, c * sizeof *u);
                if (!u) {
                    e = CBFS_E_NOMEM;
                    break;
                }
                und = u;
                cap = c;
            }
            und[nund++] = rv->n;
            if ((e = cbfs_recvec_push(rv, &r)) != CBFS_OK) break;
            lost->damage_last = true;
            pos = end + CBFS_FRAME_HDR_SIZE + (uint64_t)lost->fh.plen;
            continue;
        }
        if (nund) {
            uint64_t tail_low = UINT64_MAX;
            if (end < dsize && (e = cbfs_load_tail_low(data_fd, dsize, end, *fid, &tail_low)))
                break;
            free(fate);
            if (!(fate = malloc(nund * sizeof *fate))) {
                e = CBFS_E_NOMEM;
                break;
            }
            if ((e = cbfs_load_must_fail(rv, idx->next_gen - 1, tail_low, und, nund, fate)))
                break;
        }
        for (size_t k = 0; k < nund && !next && proofs < CBFS_LOAD_PROOFS_MAX; k++) {
            if (fate[k].fail) continue;
            /* the proof as if the walk had stopped at it: the frames before
             * it kept, their generations counted by cbfs_load_must_fail (the
             * last of them decodes, or overlaps nothing: none is dropped) */
            struct cbfs_recvec before = {.v = rv->v, .n = und[k], .cap = rv->cap};
            struct cbfs_load_resync ks = {
                .gen = fate[k].gen, .upto = und[k], .passes = st.passes};
            bool ku = false;
            e = cbfs_load_past_torn(data_fd, dsize, start, rv->v[und[k]].offset, *fid, &before,
                                    &ks, &next, &skipped, &ku);
            if (e) break;
            if (next) {
                rv->n = before.n; /* the torn write and what the walk took behind it */
                st = (struct cbfs_load_resync){.gen = idx->next_gen - 1, .passes = st.passes + 1};
            } else {
                proofs++;
            }
        }
        if (e) break;
        nund = 0;
        if (!next && end < lost->vouched && end < dsize) {
            if (!lost->stop_torn) {
                /* a header that decodes whose length reaches past the data's
                 * end (the walk stops there without a look) was never whole:
                 * torn all the same (helper-21) */
                struct cbfs_frame_hdr h;
                lost->stop_torn =
                    cbfs_frame_read_hdr(data_fd, end, UINT64_MAX, &h) == CBFS_OK &&
                    h.file_id == *fid && CBFS_FRAME_HDR_SIZE + (uint64_t)h.plen > dsize - end;
            }
            unreachable = lost->damage_last && !lost->stop_torn;
            if (!unreachable) {
                e = cbfs_load_past_torn(data_fd, dsize, start, end, *fid, rv, &st, &next,
                                        &skipped, &unreachable);
                if (e) break;
            }
            rep->frames_unreachable = unreachable;
        }
        if (!next) break;
        rep->torn_bytes_skipped += skipped;
        lost->damage_last = false;
        pos = start = next;
    }
    free(und);
    free(fate);
    return e;
}

/* Applies scanned records in order; stops (keeping what was applied) at the
 * first one the table refuses, e.g. a ulen larger than the block size. */
static cbfs_err cbfs_load_apply_scanned(struct cbfs_index *idx, struct cbfs_recvec *rv,
                                        struct cbfs_index_report *rep)
{
    for (size_t i = 0; i < rv->n; i++) {
        const cbfs_err e = cbfs_index_apply(idx, &rv->v[i]);
        if (cbfs_load_is_format_err(e)) {
            rv->n = i;
            break;
        }
        if (e) return e;
    }
    rep->frames_rescanned = rv->n;
    return CBFS_OK;
}

static int cbfs_load_rec_by_block_gen(const void *a, const void *b)
{
    const struct cbfs_index_rec *const x = *(const struct cbfs_index_rec *const *)a;
    const struct cbfs_index_rec *const y = *(const struct cbfs_index_rec *const *)b;
    if (x->block != y->block) return x->block < y->block ? -1 : 1;
    return x->generation < y->generation ? -1 : x->generation > y->generation;
}

/* Do the block frames r[0, n) look like full blocks of a size below s: two or
 * more blocks below the highest one, each of whose newest frame holds exactly
 * one valid block size? (The newest: a block flushed part-way has older,
 * shorter frames.) Not a proof of that size (a sparse file can look so), but
 * enough not to take s for them on a store-wide word. @return true also when
 * out of memory to tell: s is then not taken. */
static bool cbfs_load_looks_smaller(const struct cbfs_index_rec *r, size_t n, uint32_t s)
{
    const struct cbfs_index_rec **v = malloc((n ? n : 1) * sizeof *v);
    if (!v) return true;
    size_t m = 0;
    for (size_t i = 0; i < n; i++)
        if (r[i].type == CBFS_REC_BLOCK) v[m++] = &r[i];
    qsort(v, m, sizeof *v, cbfs_load_rec_by_block_gen);
    uint32_t ulen = 0;
    size_t blocks = 0;
    bool same = true;
    /* v[i] is a block's newest frame where the next one is of another block;
     * the highest block (v[m - 1]'s) may be partial and is left out */
    for (size_t i = 0; i + 1 < m && same; i++) {
        if (v[i]->block == v[i + 1]->block || v[i]->block == v[m - 1]->block) continue;
        if (blocks++ == 0) ulen = v[i]->ulen;
        same = v[i]->ulen == ulen;
    }
    free(v);
    return same && blocks >= 2 && ulen < s && cbfs_block_size_valid(ulen);
}

/* Frames do not record the block size, and block b's bytes start at
 * b * block size: a wrong size moves every block but block 0. So a size is
 * taken only when it cannot change the bytes, is the only one possible, or
 * agrees with what the caller knows (docs/FORMAT.md 3.3 states the rule and
 * the one case where a candidate is trusted). */
cbfs_err cbfs_index_rebuild_block_size(const struct cbfs_index_rec *r, size_t n,
                                       const struct cbfs_bs_hint *hint, uint32_t *bs)
{
    uint32_t max_ulen = 0;
    bool past_block0 = false;
    for (size_t i = 0; i < n; i++) {
        if (r[i].type != CBFS_REC_BLOCK) continue; /* a SIZE frame is in bytes */
        if (r[i].ulen > max_ulen) max_ulen = r[i].ulen;
        past_block0 |= r[i].block > 0;
    }
    if (max_ulen > CBFS_BLOCK_MAX) return CBFS_E_BLOCK_SIZE;
    const uint32_t cand = hint ? hint->size : 0;
    const bool cand_fits = cbfs_block_size_valid(cand) && cand >= max_ulen;
    /* 1: the user's word, as long as no frame contradicts it */
    if (hint && hint->asserted) {
        if (!cand_fits) return CBFS_E_BLOCK_SIZE;
        *bs = cand;
        return CBFS_OK;
    }
    /* 2: only block 0 (at offset 0 whatever the size): every fitting size
     * gives the same bytes; the candidate keeps the file's future blocks as
     * its store writes them */
    if (!past_block0) {
        uint32_t small = CBFS_BLOCK_MIN;
        while (small < max_ulen) small <<= 1;
        *bs = cand_fits ? cand : small;
        return CBFS_OK;
    }
    /* 3: the candidate, backed by a frame that holds a whole block of it */
    if (cand_fits)
        for (size_t i = 0; i < n; i++)
            if (r[i].type == CBFS_REC_BLOCK && r[i].ulen == cand) {
                *bs = cand;
                return CBFS_OK;
            }
    /* 4: a block larger than half the largest size leaves only that size */
    if (max_ulen > CBFS_BLOCK_MAX / 2) {
        *bs = CBFS_BLOCK_MAX;
        return CBFS_OK;
    }
    /* 5: the size stated for a whole store, unless this file's frames
     * contradict it: a larger block, or every block but the highest holding
     * exactly one smaller size (they look like full blocks of that size;
     * the user means the files written with theirs) */
    const uint32_t s = hint ? hint->otherwise : 0;
    if (s && cbfs_block_size_valid(s) && s >= max_ulen && !cbfs_load_looks_smaller(r, n, s)) {
        *bs = s;
        return CBFS_OK;
    }
    return CBFS_E_BLOCK_SIZE;
}

/* Does the tail [from, dsize) contain the frame envelope magic anywhere? A
 * torn write leaves at most a partial frame; a damaged header followed by
 * good frames leaves magic further on — that tail must never be cut. Tails
 * too big to scan are treated as holding frames (kept). */
static cbfs_err cbfs_load_tail_has_frames(int data_fd, uint64_t from, uint64_t dsize,
                                          bool *has)
{
    *has = true;
    if (dsize - from > (64ull << 20)) return CBFS_OK;
    return cbfs_load_find_magic(data_fd, from, dsize, NULL, NULL, has);
}

/* May the rescanned records rv be written over the sidecar's slots from
 * idx->index_end (isize its size) in place? Only where each of those slots
 * is zeros, damage (a lost record) or the very record rv puts there, and rv
 * covers every record among them: then a write that lands in part leaves
 * each slot as it was or as it is meant to be, never a record out of its
 * place (helper-18: frames that never had a record, taken by the rescan,
 * would move every record after them). *ok: the answer. */
static cbfs_err cbfs_load_slots_match(int idx_fd, uint64_t isize, const struct cbfs_index *idx,
                                      const struct cbfs_recvec *rv, bool *ok)
{
    uint8_t buf[64 * CBFS_INDEX_REC_SIZE], want[CBFS_INDEX_REC_SIZE];
    *ok = true;
    size_t i = 0;
    for (uint64_t at = idx->index_end; at < isize && *ok;) {
        const size_t n = isize - at < sizeof buf ? (size_t)(isize - at) : sizeof buf;
        const cbfs_err e = cbfs_pread_full(idx_fd, buf, n, at);
        if (e) return e;
        for (size_t k = 0; k + CBFS_INDEX_REC_SIZE <= n && *ok; k += CBFS_INDEX_REC_SIZE, i++) {
            struct cbfs_index_rec r;
            const uint8_t *const slot = buf + k;
            if (cbfs_is_zero(slot, CBFS_INDEX_REC_SIZE) ||
                cbfs_index_rec_decode(slot, &r) != CBFS_OK)
                continue; /* a lost record: whatever is written over it */
            if (i >= rv->n) {
                *ok = false; /* a record rv does not reach */
                break;
            }
            cbfs_index_rec_encode(&rv->v[i], want);
            *ok = memcmp(slot, want, sizeof want) == 0;
        }
        at += n;
    }
    return CBFS_OK;
}

/* Repairs what the load found (docs/FORMAT.md 3.2). lost: the replay
 * stopped at records lost (cbfs_load_records_lost), with records behind
 * them whose frames the rescan found again. */
static cbfs_err cbfs_load_repair(int data_fd, int idx_fd, bool have_hdr, uint64_t isize,
                                 bool lost, struct cbfs_index *idx, const struct cbfs_recvec *rv,
                                 struct cbfs_index_report *rep)
{
    bool wrote_idx = false, wrote_data = false;
    cbfs_err e = CBFS_OK;
    /* A rebuild that passed over torn writes cuts its tail only once the new
     * sidecar is durable: until then the next load rebuilds again, and a cut
     * could change what it passes over (a frame reaching into the tail would
     * no longer fit the file). With no sidecar to write, it cuts nothing. */
    const bool cut = rep->data_tail_bytes && !rep->tail_kept;
    const bool cut_late = cut && !have_hdr && rep->torn_bytes_skipped;
    if (cut && !cut_late) {
        if (ftruncate(data_fd, (off_t)idx->data_end) != 0) return cbfs_err_from_errno(errno);
        rep->data_tail_bytes = 0;
        wrote_data = true;
    }
    /* Data first, then the records that point into it, then the sidecar
     * durable. The frames the rescan found may still be only in the page
     * cache (the writer was killed before its flush), and no record may
     * reach the disk before its frame: after a power loss it would point at
     * a frame that never landed, and its block read as damage where the
     * previous version was whole. And the data's sync comes before the
     * sidecar is touched at all: records behind lost ones (zeros) are cut
     * off below, and a repair that failed after that cut left the next load
     * a sidecar that ends cleanly, past which the acknowledged frames of
     * those records were taken for torn (helper-17). */
    const bool append = idx_fd >= 0 && rv->n;
    if ((wrote_data || append) && fdatasync(data_fd) != 0) return cbfs_err_from_errno(errno);
    /* Where records were lost, the rescanned records are the lost ones and
     * those behind them, slot for slot (one record a frame, in frame order,
     * from data_end; a torn write passed over never had one), checked: they
     * are written over them before anything is cut, so that an append the
     * store cannot take (ENOSPC) leaves the records behind the loss where
     * the next load finds them, not a sidecar that ends cleanly before their
     * frames. */
    bool in_place = false;
    if (lost && append && have_hdr) {
        e = cbfs_load_slots_match(idx_fd, isize, idx, rv, &in_place);
        if (e) return e;
    }
    if (idx_fd >= 0) {
        if (!have_hdr) {
            e = cbfs_index_write_header(idx, idx_fd);
            if (e) return e;
            isize = isize > CBFS_INDEX_REC_SIZE ? isize : CBFS_INDEX_REC_SIZE;
            wrote_idx = true;
        }
        if (isize != idx->index_end && !in_place) {
            if (ftruncate(idx_fd, (off_t)idx->index_end) != 0) return cbfs_err_from_errno(errno);
            wrote_idx = true;
        }
    }
    if (in_place) {
        e = cbfs_index_write_recs(idx_fd, rv->v, rv->n, idx->index_end);
        if (e) return e;
        idx->index_end += (uint64_t)rv->n * CBFS_INDEX_REC_SIZE;
        if (isize > idx->index_end && ftruncate(idx_fd, (off_t)idx->index_end) != 0)
            return cbfs_err_from_errno(errno);
        wrote_idx = true;
    } else if (append) {
        e = cbfs_index_append(idx, idx_fd, rv->v, rv->n);
        if (e) return e;
        wrote_idx = true;
    }
    if (wrote_idx && fdatasync(idx_fd) != 0) return cbfs_err_from_errno(errno);
    if (cut_late && wrote_idx) {
        if (ftruncate(data_fd, (off_t)idx->data_end) != 0 || fdatasync(data_fd) != 0)
            return cbfs_err_from_errno(errno);
        rep->data_tail_bytes = 0;
        wrote_data = true;
    }
    rep->repaired = wrote_idx || wrote_data;
    return CBFS_OK;
}

/* Does the frame at the last replayed record match it? (Fast replay trusts
 * everything before; a mismatch at the end means the sidecar ran ahead of
 * the data — a crash — and the full check must find where.) */
static bool cbfs_load_last_matches(int data_fd, int idx_fd, uint64_t dsize,
                                   const struct cbfs_index *idx)
{
    if (idx->index_end <= CBFS_INDEX_REC_SIZE) return true;
    uint8_t buf[CBFS_INDEX_REC_SIZE];
    struct cbfs_index_rec r;
    struct cbfs_frame_hdr fh;
    return cbfs_pread_full(idx_fd, buf, sizeof buf, idx->index_end - CBFS_INDEX_REC_SIZE) ==
               CBFS_OK &&
           cbfs_index_rec_decode(buf, &r) == CBFS_OK &&
           cbfs_frame_read_hdr(data_fd, r.offset, dsize, &fh) == CBFS_OK &&
           fh.file_id == idx->file_id && cbfs_load_rec_matches(&r, &fh);
}

/* What a non-empty data file shows of the sidecar's file when none of the
 * sidecar's frames is intact and the rescan found none (docs/FORMAT.md,
 * "Leftover sidecars"). */
enum cbfs_load_claim {
    CBFS_CLAIM_FRAMES, /* some frame of the file is intact, or (no record) the
                          data begins with the envelope: a torn first frame,
                          which repair may cut as any torn tail. The usual load */
    CBFS_CLAIM_TRACE,  /* a damaged frame still shows it was the file's: ours,
                          but nothing proves the rest is, so no tail is cut */
    CBFS_CLAIM_NONE    /* nothing of the file: the sidecar is a leftover */
};

/* Called when no record's frame is intact and the rescan found no frame in a
 * data file of dsize > 0 bytes; the records replayed (all of them damaged)
 * end at idx->index_end. A record is only written after its frame, so the
 * frame position of a record is a trace of the file when it shows the
 * envelope or the file id, or is all zeros (what a crash leaves on XFS or
 * ext4 data=writeback). With no record, only offset 0 can tell, and zeros
 * there are no trace: a first frame torn to zeros committed nothing, and
 * calling it ours would let a repair cut another file's data. */
static cbfs_err cbfs_load_claim_of(int data_fd, int idx_fd, uint64_t dsize,
                                   const struct cbfs_index *idx, enum cbfs_load_claim *claim)
{
    uint8_t head[CBFS_FRAME_HDR_SIZE], buf[CBFS_INDEX_REC_SIZE];
    cbfs_err e;
    *claim = CBFS_CLAIM_NONE;
    if (idx->index_end <= CBFS_INDEX_REC_SIZE) {
        const size_t n = dsize < sizeof head ? (size_t)dsize : sizeof head;
        e = cbfs_pread_full(data_fd, head, n, 0);
        if (e) return e;
        if (cbfs_frame_is_envelope(head, n))
            *claim = CBFS_CLAIM_FRAMES;
        else if (cbfs_frame_hdr_trace(head, n, idx->file_id))
            *claim = CBFS_CLAIM_TRACE;
        return CBFS_OK;
    }
    for (uint64_t off = CBFS_INDEX_REC_SIZE; off < idx->index_end; off += sizeof buf) {
        struct cbfs_index_rec r;
        e = cbfs_pread_full(idx_fd, buf, sizeof buf, off);
        if (e) return e;
        /* replayed a moment ago: it decodes, and its frame lies inside */
        e = cbfs_index_rec_decode(buf, &r);
        if (e) return e;
        e = cbfs_pread_full(data_fd, head, sizeof head, r.offset);
        if (e) return e;
        if (cbfs_frame_hdr_trace(head, sizeof head, idx->file_id) ||
            cbfs_is_zero(head, sizeof head)) {
            *claim = CBFS_CLAIM_TRACE;
            return CBFS_OK;
        }
    }
    return CBFS_OK;
}

static cbfs_err cbfs_index_load_impl(int data_fd, int idx_fd, bool repair, bool check_all,
                                     const struct cbfs_bs_hint *bs, struct cbfs_index *idx,
                                     struct cbfs_index_report *rep);

/* cbfs_index_unborn's rule on sizes already taken (isize 0 without a sidecar). */
static bool cbfs_load_unborn(uint64_t dsize, uint64_t isize)
{
    return dsize == 0 && isize < CBFS_INDEX_REC_SIZE;
}

bool cbfs_index_unborn(int data_fd, int idx_fd)
{
    uint64_t dsize, isize = 0;
    return cbfs_load_fsize(data_fd, &dsize) == CBFS_OK &&
           (idx_fd < 0 || cbfs_load_fsize(idx_fd, &isize) == CBFS_OK) &&
           cbfs_load_unborn(dsize, isize);
}

cbfs_err cbfs_index_load(int data_fd, int idx_fd, bool repair, const struct cbfs_bs_hint *bs,
                         struct cbfs_index *idx, struct cbfs_index_report *rep)
{
    return cbfs_index_load_impl(data_fd, idx_fd, repair, true, bs, idx, rep);
}

cbfs_err cbfs_index_open(int data_fd, int idx_fd, bool repair, const struct cbfs_bs_hint *bs,
                         struct cbfs_index *idx, struct cbfs_index_report *rep)
{
    return cbfs_index_load_impl(data_fd, idx_fd, repair, false, bs, idx, rep);
}

static cbfs_err cbfs_index_load_impl(int data_fd, int idx_fd, bool repair, bool check_all,
                                     const struct cbfs_bs_hint *bs, struct cbfs_index *idx,
                                     struct cbfs_index_report *rep)
{
    struct cbfs_index_report rp;
    memset(&rp, 0, sizeof rp);
    struct cbfs_recvec rv = {0};
    uint64_t dsize = 0, isize = 0;
    struct cbfs_index_rec hdr;
    memset(&hdr, 0, sizeof hdr);
    bool have_hdr = false;
    enum cbfs_load_claim claim = CBFS_CLAIM_FRAMES;
    struct cbfs_load_lost lost = {.torn_from = UINT64_MAX}; /* cbfs_load_records_lost's */

    cbfs_index_init(idx, 0, 0);
    cbfs_err e = cbfs_load_fsize(data_fd, &dsize);
    if (e) goto fail;
    if (idx_fd >= 0) {
        e = cbfs_load_fsize(idx_fd, &isize);
        if (e) goto fail;
        if (cbfs_load_unborn(dsize, isize)) {
            /* (without a sidecar the caller decides whether the file is cbfs
             * at all: CBFS_E_BAD_MAGIC below, as for any data without frames) */
            cbfs_index_init(idx, bs && bs->size ? bs->size : CBFS_BLOCK_DEFAULT, 0);
            rp.unborn = true;
            if (rep) *rep = rp;
            return CBFS_OK;
        }
        if (isize >= CBFS_INDEX_REC_SIZE) {
            uint8_t buf[CBFS_INDEX_REC_SIZE];
            e = cbfs_pread_full(idx_fd, buf, sizeof buf, 0);
            if (e) goto fail;
            e = cbfs_index_rec_decode(buf, &hdr);
            if (e == CBFS_E_VERSION) { /* newer cbfs: touch nothing */
                rp.newer_version = cbfs_get_le16(buf + 8);
                goto fail;
            }
            have_hdr = e == CBFS_OK && hdr.type == CBFS_REC_HEADER;
            e = CBFS_OK;
        }
    }

    if (have_hdr) {
        cbfs_index_init(idx, hdr.block_size, hdr.file_id);
        e = cbfs_load_replay(data_fd, dsize, idx_fd, isize, check_all, idx, &rp, &lost);
        if (e) goto fail;
        if (!check_all && !cbfs_load_last_matches(data_fd, idx_fd, dsize, idx)) {
            cbfs_index_free(idx);
            memset(&rp, 0, sizeof rp);
            cbfs_index_init(idx, hdr.block_size, hdr.file_id);
            lost = (struct cbfs_load_lost){.torn_from = UINT64_MAX};
            e = cbfs_load_replay(data_fd, dsize, idx_fd, isize, true, idx, &rp, &lost);
            if (e) goto fail;
        }
        rp.records_dropped = (isize - idx->index_end + CBFS_INDEX_REC_SIZE - 1) /
                             CBFS_INDEX_REC_SIZE;
        uint64_t fid = idx->file_id;
        e = cbfs_load_rescan(data_fd, dsize, idx, rp.records_lost ? &lost : NULL, &fid, &rv, &rp);
        if (e) goto fail;
        if (dsize > 0 && rv.n == 0 && rp.records_replayed == rp.frames_damaged) {
            e = cbfs_load_claim_of(data_fd, idx_fd, dsize, idx, &claim);
            if (e) goto fail;
            if (claim == CBFS_CLAIM_NONE) {
                rp.leftover = true; /* nothing is repaired: the data is not ours */
                e = CBFS_E_WRONG_FILE;
                goto fail;
            }
        }
    } else {
        /* No usable sidecar: the frames alone, from offset 0. */
        rp.sidecar_missing = true;
        rp.records_dropped = (isize + CBFS_INDEX_REC_SIZE - 1) / CBFS_INDEX_REC_SIZE;
        uint64_t fid = 0;
        uint32_t block_size = 0;
        uint64_t end;
        e = cbfs_load_scan(data_fd, dsize, 0, false, false, NULL, &fid, &rv, &end);
        if (e) goto fail;
        /* A frame header at offset 0 whose length reaches past the data
         * (torn) still names the file: later frames may be its writer's. */
        struct cbfs_frame_hdr h0;
        bool named = rv.n > 0;
        if (!named && dsize >= CBFS_FRAME_HDR_SIZE &&
            cbfs_frame_read_hdr(data_fd, 0, UINT64_MAX, &h0) == CBFS_OK) {
            fid = h0.file_id;
            named = true;
        }
        struct cbfs_load_resync st = {0};
        while (end < dsize && named) { /* torn writes, with a later writer's frames behind? */
            uint64_t next, skipped;
            bool unreachable = false;
            e = cbfs_load_past_torn(data_fd, dsize, 0, end, fid, &rv, &st, &next, &skipped,
                                    &unreachable);
            /* Not counted where the sidecar is there but shorter than its
             * header: a file whose first flush never completed (it makes the
             * header durable), so nothing of it was acknowledged, and its
             * frames past a crash's damage are no more owed than any
             * unflushed write. A sidecar that is gone, or whose header is
             * there but damaged, says nothing of the kind. */
            rp.frames_unreachable = unreachable && (idx_fd < 0 || isize >= CBFS_INDEX_REC_SIZE);
            if (e) goto fail;
            if (!next) break;
            rp.torn_bytes_skipped += skipped;
            e = cbfs_load_scan(data_fd, dsize, next, true, false, NULL, &fid, &rv, &end);
            if (e) goto fail;
        }
        if (rv.n == 0) {
            e = CBFS_E_BAD_MAGIC; /* offset 0 is not a cbfs frame */
            goto fail;
        }
        e = cbfs_index_rebuild_block_size(rv.v, rv.n, bs, &block_size);
        if (e) goto fail; /* before repair: a refused rebuild writes nothing */
        cbfs_index_init(idx, block_size, fid);
    }
    e = cbfs_load_apply_scanned(idx, &rv, &rp);
    if (e) goto fail;
    if (!have_hdr && rv.n == 0) {
        /* the table refused even the first frame (a size past the limit):
         * nothing of the file to index, and cutting the "tail" would
         * truncate the data file to nothing */
        e = CBFS_E_BAD_MAGIC;
        goto fail;
    }
    rp.data_tail_bytes = dsize - idx->data_end;
    if (rp.data_tail_bytes && claim == CBFS_CLAIM_TRACE) {
        rp.tail_kept = true; /* ours, but nothing proves the rest is: nothing is cut */
    } else if (rp.data_tail_bytes) {
        e = cbfs_load_tail_has_frames(data_fd, idx->data_end, dsize, &rp.tail_kept);
        if (e) goto fail;
    }

    /* A sidecar made from the frames before them would lose them for good. */
    if (repair && !rp.frames_unreachable) {
        e = cbfs_load_repair(data_fd, idx_fd, have_hdr, isize, rp.records_lost, idx, &rv, &rp);
        if (e) goto fail;
    }
    free(rv.v);
    if (rep) *rep = rp;
    return CBFS_OK;
fail:
    free(rv.v);
    cbfs_index_free(idx);
    if (rep) *rep = rp;
    return e;
}

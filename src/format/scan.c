/* The frames of a data file, walked: the rescan of frames past the sidecar's
 * records, the rebuild's walk from offset 0, and the proofs that tell a
 * write torn by a crash from damage in place (docs/FORMAT.md 3.1 rule 3,
 * 3.3). load.c replays the sidecar and decides what to make of what these
 * find. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/util.h"
#include "format/load_impl.h"

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

cbfs_err cbfs_frame_walk(int data_fd, uint64_t dsize, uint64_t off, cbfs_frame_visit_fn fn,
                         void *arg, uint64_t *end)
{
    cbfs_err e = CBFS_OK;
    while (off < dsize) {
        struct cbfs_frame_hdr fh;
        e = cbfs_frame_read_hdr(data_fd, off, dsize, &fh);
        if (cbfs_err_is_format(e)) {
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
    return e && !cbfs_err_is_format(e) && e != CBFS_E_VERSION ? e : CBFS_OK;
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
        const bool undecoded = cbfs_err_is_format(e);
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
             * but zeros lies behind those records (clean_end): a power cut
             * landed a later sidecar page and not an earlier one, say. */
            bool torn = !c->lost || (c->lost->clean_end && off >= c->lost->vouched);
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
 * past lost->vouched where lost->clean_end, or where its length reaches over
 * the start of a later frame: a torn frame whose header landed gets a length
 * that fits the file once later frames are appended behind it (a kept
 * tail), so a header that checks is not enough. The walk stops at any other,
 * lost->undecided, for the caller to tell a torn write from damage in place. */
cbfs_err cbfs_load_scan(int data_fd, uint64_t dsize, uint64_t off, bool check_id,
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
cbfs_err cbfs_load_past_torn(int data_fd, uint64_t dsize, uint64_t start, uint64_t end,
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
        if (cbfs_err_is_format(e)) {
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
    return e && !cbfs_err_is_format(e) && e != CBFS_E_VERSION ? e : CBFS_OK;
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
cbfs_err cbfs_load_rescan(int data_fd, uint64_t dsize, const struct cbfs_index *idx,
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

/* cbfs_frame_find_header's accept: a header that decodes, of any file. */
static cbfs_err cbfs_frame_find_one(void *arg, uint64_t at, bool *take)
{
    struct cbfs_load_frame_of *const w = arg;
    struct cbfs_frame_hdr h;
    const cbfs_err e = cbfs_frame_read_hdr(w->data_fd, at, w->dsize, &h);
    *take = e == CBFS_OK;
    if (*take) w->at = at;
    return e && !cbfs_err_is_format(e) && e != CBFS_E_VERSION ? e : CBFS_OK;
}

cbfs_err cbfs_frame_find_header(int data_fd, uint64_t dsize, uint64_t from, uint64_t to,
                                uint64_t *at, bool *found)
{
    struct cbfs_load_frame_of w = {.data_fd = data_fd, .dsize = dsize};
    if (to > dsize) to = dsize;
    const cbfs_err e = cbfs_load_find_magic(data_fd, from, to, cbfs_frame_find_one, &w, found);
    *at = w.at;
    return e;
}

/* Does the tail [from, dsize) contain the frame envelope magic anywhere? A
 * torn write leaves at most a partial frame; a damaged header followed by
 * good frames leaves magic further on — that tail must never be cut. Tails
 * too big to scan are treated as holding frames (kept). */
cbfs_err cbfs_load_tail_has_frames(int data_fd, uint64_t from, uint64_t dsize,
                                   bool *has)
{
    *has = true;
    if (dsize - from > CBFS_LOAD_SCAN_MAX) return CBFS_OK;
    return cbfs_load_find_magic(data_fd, from, dsize, NULL, NULL, has);
}

/* cbfs_index_load: opening a file's index. Replays the sidecar up to its
 * first bad record, has the data file's frames past it rescanned (scan.c)
 * where the sidecar lags, or the table rebuilt from the frames alone where
 * there is no usable sidecar; in repair mode also truncates torn tails and
 * appends the missing records. The frames are the truth: a record counts
 * only if its frame is there. */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/util.h"
#include "format/load_impl.h"

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

/* The sidecar from the slot at off, where the replay stopped, to its end
 * (isize). @return false where it holds nothing but zeros: appends a crash
 * cut short (a record lies in one sector), a clean end. Otherwise records are
 * lost, behind which acknowledged records may lie: damage, or zeros with
 * records after them (a power cut landed a later page of the sidecar and
 * not this one, or a failed sync dropped it: helper-13). Every record is
 * appended once its frame is durable, in frame order, so lost->vouched,
 * where the frames of the records behind the loss end, is durable data that
 * the rescan must reach. lost->clean_end: there are such records, and
 * every slot behind the last of them is zeros (a torn append at most): an
 * acknowledged record is durable, and the record of a frame past them would
 * lie behind theirs, so no frame past lost->vouched was acknowledged, and
 * the rescan may call one that does not decode torn. */
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
    lost->clean_end = end && tail_ok;
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
                rep->lost_vouched = lost->vouched;
                return CBFS_OK;
            }
            if (!check_all && rep->records_replayed > 0) {
                /* Fast path: trust our own checksummed record if its frame
                 * lies inside the data file; the frame header is checked
                 * when the block is read (and the last one below). */
                if (r.offset > dsize || dsize - r.offset < CBFS_FRAME_HDR_SIZE + (uint64_t)r.plen)
                    return CBFS_OK;
                e = cbfs_index_apply(idx, &r);
                if (cbfs_err_is_format(e)) return CBFS_OK;
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
                if (e == CBFS_E_VERSION || cbfs_err_is_format(e)) return CBFS_OK;
                if (e) return e;
                if (!cbfs_load_rec_matches(&r, &fh)) return CBFS_OK;
            }
            e = cbfs_index_apply(idx, &r);
            if (cbfs_err_is_format(e)) return CBFS_OK;
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

/* Applies scanned records in order; stops (keeping what was applied) at the
 * first one the table refuses, e.g. a ulen larger than the block size. */
static cbfs_err cbfs_load_apply_scanned(struct cbfs_index *idx, struct cbfs_recvec *rv,
                                        struct cbfs_index_report *rep)
{
    for (size_t i = 0; i < rv->n; i++) {
        const cbfs_err e = cbfs_index_apply(idx, &rv->v[i]);
        if (cbfs_err_is_format(e)) {
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
    /* A rebuild's header goes down last, once its records are durable: until
     * then the sidecar has no usable header (zeros, or the damaged one) and
     * the next load rebuilds from the frames again. Written first, a kill, a
     * power cut or ENOSPC before the records left a header alone: a sidecar
     * of no record, from which the next load rescanned and stopped at a torn
     * write the rebuild had passed over, and acknowledged frames behind it
     * were no longer read (helper-64's kills of fsck --repair). */
    const bool head_last = idx_fd >= 0 && !have_hdr;
    if (head_last) {
        idx->index_end = CBFS_INDEX_REC_SIZE;
        if (isize != idx->index_end && ftruncate(idx_fd, (off_t)idx->index_end) != 0)
            return cbfs_err_from_errno(errno);
        wrote_idx = true;
    } else if (idx_fd >= 0 && isize != idx->index_end && !in_place) {
        if (ftruncate(idx_fd, (off_t)idx->index_end) != 0) return cbfs_err_from_errno(errno);
        wrote_idx = true;
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
    if (head_last) {
        e = cbfs_index_put_header(idx, idx_fd);
        if (e) return e;
        if (fdatasync(idx_fd) != 0) return cbfs_err_from_errno(errno);
    }
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

/* Reads the up to CBFS_FRAME_HDR_SIZE bytes at off (< dsize) of the data
 * file into head; *n: how many. */
static cbfs_err cbfs_load_head_at(int data_fd, uint64_t dsize, uint64_t off,
                                  uint8_t head[CBFS_FRAME_HDR_SIZE], size_t *n)
{
    *n = dsize - off < CBFS_FRAME_HDR_SIZE ? (size_t)(dsize - off) : CBFS_FRAME_HDR_SIZE;
    return cbfs_pread_full(data_fd, head, *n, off);
}

/* What a non-empty data file shows of the sidecar's file when none of the
 * sidecar's frames is intact and the table took no rescanned one
 * (docs/FORMAT.md, "Leftover sidecars"). */
enum cbfs_load_claim {
    CBFS_CLAIM_FRAMES, /* some frame of the file is intact, or (no record) the
                          data begins with the envelope: a torn first frame,
                          which repair may cut as any torn tail. The usual load */
    CBFS_CLAIM_TRACE,  /* a damaged frame still shows it was the file's: ours,
                          but nothing proves the rest is, so no tail is cut */
    CBFS_CLAIM_NONE    /* nothing of the file: the sidecar is a leftover */
};

/* Called when no record's frame is intact and the table took no rescanned
 * frame in a data file of dsize > 0 bytes; the records replayed (all of them
 * damaged) end at idx->index_end. A record is only written after its frame,
 * so the frame position of a record is a trace of the file when it shows the
 * envelope or the file id, or is all zeros (what a crash leaves on XFS or
 * ext4 data=writeback). So is the envelope or the file id where the frames
 * of the records end (idx->data_end): the frame the rescan stopped at, torn
 * or refused by the table; not cut, for with it gone the records alone
 * would tell, and the next load would call the file a leftover. With no
 * record, only offset 0 can tell, and zeros there are no trace: a first
 * frame torn to zeros committed nothing, and calling it ours would let a
 * repair cut another file's data. */
static cbfs_err cbfs_load_claim_of(int data_fd, int idx_fd, uint64_t dsize,
                                   const struct cbfs_index *idx, enum cbfs_load_claim *claim)
{
    uint8_t head[CBFS_FRAME_HDR_SIZE], buf[CBFS_INDEX_REC_SIZE];
    size_t n;
    cbfs_err e;
    *claim = CBFS_CLAIM_NONE;
    if (idx->index_end <= CBFS_INDEX_REC_SIZE) {
        e = cbfs_load_head_at(data_fd, dsize, 0, head, &n);
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
    if (idx->data_end < dsize) {
        e = cbfs_load_head_at(data_fd, dsize, idx->data_end, head, &n);
        if (e) return e;
        if (cbfs_frame_hdr_trace(head, n, idx->file_id)) *claim = CBFS_CLAIM_TRACE;
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
    struct cbfs_load_lost lost = {0}; /* cbfs_load_records_lost's */

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
            lost = (struct cbfs_load_lost){0};
            e = cbfs_load_replay(data_fd, dsize, idx_fd, isize, true, idx, &rp, &lost);
            if (e) goto fail;
        }
        rp.records_dropped = (isize - idx->index_end + CBFS_INDEX_REC_SIZE - 1) /
                             CBFS_INDEX_REC_SIZE;
        uint64_t fid = idx->file_id;
        e = cbfs_load_rescan(data_fd, dsize, idx, rp.records_lost ? &lost : NULL, &fid, &rv, &rp);
        if (e) goto fail;
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
    /* Asked of the frames the table took, not of those the rescan walked: a
     * frame the table refuses (a ulen past the block size) ends the frames
     * as a torn one does, and whether the walk takes it depends on what a
     * repair changes (past records lost it walks on over a frame that does
     * not decode, past a clean end it stops there; a tail cut takes it
     * away). The reload of a repaired pair must give the same verdict
     * (docs/FORMAT.md 3.2). */
    if (have_hdr && dsize > 0 && rv.n == 0 && rp.records_replayed == rp.frames_damaged) {
        e = cbfs_load_claim_of(data_fd, idx_fd, dsize, idx, &claim);
        if (e) goto fail;
        if (claim == CBFS_CLAIM_NONE) {
            rp.leftover = true; /* nothing is repaired: the data is not ours */
            e = CBFS_E_WRONG_FILE;
            goto fail;
        }
    }
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

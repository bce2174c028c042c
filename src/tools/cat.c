/* `cbfs cat`: decodes a stored file to stdout without a mount (disaster
 * recovery). Blocks are decoded on the pool a window at a time and written
 * in order; holes and bytes past a block's ulen (within the logical size)
 * are zeros. Plain files are copied as they are. */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cbfs/pool.h"
#include "cbfs/util.h"
#include "tools/tool.h"

static const char tool_cat_help[] =
    "usage: cbfs cat [--range OFF:LEN] [--keep-going] [--block-size SIZE] STORE/PATH\n"
    "Decodes a stored file to stdout without a mount (plain files are copied).\n"
    "  --range OFF:LEN    only LEN bytes from OFF (K/M/G suffixes; 'OFF:' = to the end;\n"
    "                     from past the end: nothing, as a read there)\n"
    "  --keep-going       write zeros for a damaged block, report it, go on; also print\n"
    "                     a file whose index cannot reach all its frames\n"
    "  --block-size SIZE  the block size the file was written with, for a file whose\n"
    "                     sidecar is lost and whose frames do not prove it\n"
    "exit status: 0 ok, 1 a block was damaged, frames were unreachable or the file\n"
    "             changed while it was printed, 2 usage or I/O error, or the index\n"
    "             cannot be loaded (nothing is written then)\n";

/* Blocks decoded per pool round: enough to keep every worker busy. */
#define TOOL_CAT_WINDOW 32u

struct tool_cat {
    struct tool_file *tf;
    uint64_t first;          /* first block of the current window */
    uint8_t *buf;            /* TOOL_CAT_WINDOW blocks, decoded */
    uint8_t **scratch;       /* per pool slot: header + payload */
    size_t *scratch_cap;
    cbfs_err err[TOOL_CAT_WINDOW];
};

static void tool_cat_block(void *arg, unsigned slot, size_t i)
{
    struct tool_cat *const c = arg;
    const struct cbfs_index *const idx = &c->tf->idx;
    const uint64_t b = c->first + i;
    uint8_t *const out = c->buf + i * (size_t)idx->block_size;
    const struct cbfs_index_entry *const e = cbfs_index_get(idx, b);
    c->err[i] = CBFS_OK;
    if (!e) {
        memset(out, 0, idx->block_size);
        return;
    }
    const size_t need = CBFS_FRAME_HDR_SIZE + (size_t)e->plen;
    if (need > c->scratch_cap[slot]) {
        uint8_t *const p = realloc(c->scratch[slot], need);
        if (!p) {
            c->err[i] = CBFS_E_NOMEM;
            return;
        }
        c->scratch[slot] = p;
        c->scratch_cap[slot] = need;
    }
    c->err[i] = cbfs_block_read(c->tf->data_fd, e, b, c->scratch[slot], out);
    if (c->err[i])
        memset(out, 0, idx->block_size);
    else
        memset(out + e->ulen, 0, idx->block_size - e->ulen);
}

static cbfs_err tool_cat_plain(const struct tool_file *tf, uint64_t off, uint64_t end)
{
    static uint8_t buf[1u << 20];
    while (off < end) {
        const size_t n = end - off < sizeof buf ? (size_t)(end - off) : sizeof buf;
        cbfs_err e = cbfs_pread_full(tf->data_fd, buf, n, off);
        if (!e) e = tool_out_write(buf, n);
        if (e) return e;
        off += n;
    }
    return CBFS_OK;
}

/* No sidecar file, and the data file ends in bytes that are no whole frame:
 * nothing tells where the file ended (the records would), so what the frames
 * reach may be a prefix of it (the data file cut short) as well as all that
 * was ever written (a torn last write). verify reports both; cat refuses it
 * as the other cases of an end it cannot tell, and --keep-going prints what
 * the frames reach, which is what the mount serves. */
static bool tool_cat_end_unknown(const struct tool_file *tf)
{
    return tf->idx_fd < 0 && tf->rep.data_tail_bytes && !tf->rep.tail_kept;
}

/* Sidecar records that point at frames the data file does not hold. */
static bool tool_cat_records_dropped(const struct cbfs_index_report *r)
{
    return !r->sidecar_missing && r->records_dropped > r->frames_rescanned;
}

/* Does the index cat loaded (r its report) reach every frame of the file? Not
 * where frames may lie past a damaged header, records point at frames that
 * are not there, or a rebuild could not pass damage: then the file could come
 * out short or with older versions of blocks (tool_cat_unreachable says
 * which). */
static bool tool_cat_reaches_all(const struct tool_file *tf)
{
    const struct cbfs_index_report *const r = &tf->rep;
    return !(r->data_tail_bytes && r->tail_kept) && !tool_cat_records_dropped(r) &&
           !r->frames_unreachable && !tool_cat_end_unknown(tf);
}

/* After a reload (tool_file_look_again): is what cat printed from the old
 * index, blocks [from, upto) of a range that ends at end, still the file's in
 * tf's new one? Each block the same content (its XXH3 and length, or a hole
 * of the same length: a block a writer stored again with the same bytes, as
 * a tool rewriting a file in place does, is no change), the same block size,
 * the file still reaching end, and every frame reached (the start's rule). */
static bool tool_cat_printed_same(const struct cbfs_index *old, const struct tool_file *tf,
                                  uint64_t from, uint64_t upto, uint64_t end)
{
    const struct cbfs_index *const now = &tf->idx;
    if (now->block_size != old->block_size || now->size < end || !tool_cat_reaches_all(tf))
        return false;
    for (uint64_t b = from; b < upto; b++) {
        const struct cbfs_index_entry *const x = cbfs_index_get(old, b);
        const struct cbfs_index_entry *const y = cbfs_index_get(now, b);
        if (!x != !y) return false;
        if (!x || (x->offset == y->offset && x->generation == y->generation)) continue;
        const bool xh = x->flags & CBFS_FRAME_HOLE, yh = y->flags & CBFS_FRAME_HOLE;
        if (x->ulen != y->ulen || xh != yh || (!xh && x->hash != y->hash)) return false;
    }
    return true;
}

/* @return CBFS_OK (also where it stopped at a damaged block without
 * keep_going, after printing it: *damaged counts damaged blocks), or a
 * write, memory or pool error. */
static cbfs_err tool_cat_frames(const char *display, struct tool_file *tf, uint64_t off,
                                uint64_t end, bool keep_going, unsigned *damaged)
{
    const struct cbfs_index *const idx = &tf->idx;
    const uint64_t bs = idx->block_size;
    struct cbfs_pool *pool = NULL;
    struct tool_cat c = {.tf = tf};
    cbfs_err e = cbfs_pool_create(tool_ncpus(), &pool);
    if (e) return e;
    const unsigned threads = cbfs_pool_threads(pool);
    c.buf = malloc(TOOL_CAT_WINDOW * (size_t)bs);
    c.scratch = calloc(threads, sizeof *c.scratch);
    c.scratch_cap = calloc(threads, sizeof *c.scratch_cap);
    e = CBFS_E_NOMEM;
    if (!c.buf || !c.scratch || !c.scratch_cap) goto out;
    e = CBFS_OK;
    bool stop = false;
    unsigned looks = 0; /* at this window */
    struct cbfs_index old;
    for (c.first = off / bs; c.first * bs < end && !e && !stop; c.first += TOOL_CAT_WINDOW) {
        uint64_t n = (end - c.first * bs + bs - 1) / bs;
        if (n > TOOL_CAT_WINDOW) n = TOOL_CAT_WINDOW;
        e = tool_par_run(pool, (size_t)n, tool_cat_block, &c, NULL);
        bool bad = false;
        for (uint64_t i = 0; i < n && !e; i++) bad |= c.err[i] != CBFS_OK;
        const enum tool_look look = bad ? tool_file_look_again(tf, &looks, &old)
                                        : TOOL_LOOK_STANDS;
        if (look == TOOL_LOOK_AGAIN) {
            /* a writer moved blocks under us: the window again from the index
             * as it is now, unless what is printed already is no longer the
             * file's (a rewrite, a truncate): then the output would be a mix
             * of versions that never existed as one */
            const bool same = tool_cat_printed_same(&old, tf, off / bs, c.first, end);
            cbfs_index_free(&old);
            if (same) {
                c.first -= TOOL_CAT_WINDOW; /* (unsigned: wraps back with the += ) */
                continue;
            }
            tool_err("cat", "%s: it changed while it was printed (a writer is at work): the "
                     "output may mix its versions; print it again when it is quiet",
                     display);
            (*damaged)++;
            break;
        }
        if (look == TOOL_LOOK_GONE)
            tool_err("cat", "%s: it was removed while it was printed; what failed below is "
                     "what its index named then",
                     display);
        if (look == TOOL_LOOK_KEPT_CHANGING)
            tool_err("cat", "%s: it changed under each of %u looks at the block(s) below: a "
                     "writer is at work; print it again when it is quiet",
                     display, TOOL_LOOKS + 1);
        for (uint64_t i = 0; i < n && !e; i++) {
            const uint64_t b = c.first + i;
            if (c.err[i]) {
                const struct cbfs_index_entry *const ent = cbfs_index_get(idx, b);
                tool_err("cat",
                         "%s: offset %" PRIu64 ": block %" PRIu64 " (logical offset %" PRIu64
                         "): %s%s",
                         display, ent ? ent->offset : 0, b, b * bs, cbfs_err_str(c.err[i]),
                         keep_going ? " (written as zeros)" : "");
                (*damaged)++;
                if (!keep_going) {
                    stop = true;
                    break;
                }
            }
            const uint64_t lo = b * bs > off ? b * bs : off;
            const uint64_t hi = (b + 1) * bs < end ? (b + 1) * bs : end;
            e = tool_out_write(c.buf + i * bs + (lo - b * bs), (size_t)(hi - lo));
        }
        looks = 0; /* the next window may look again */
    }
out:
    cbfs_pool_destroy(pool);
    for (unsigned t = 0; c.scratch && t < threads; t++) free(c.scratch[t]);
    free(c.scratch);
    free(c.scratch_cap);
    free(c.buf);
    return e;
}

/* Says on stderr what the index load could not reach of tf (frames past a
 * damaged header, records pointing at frames that are not there): such a
 * file may print short, or with an older version of a block whose newer
 * frame lies past the damage. @return true if there is any (the file is
 * damaged: exit 1). A torn tail alone (no frame magic in it, no record
 * pointing into it) is a write that never completed: nothing is lost. */
static bool tool_cat_unreachable(const char *display, const struct tool_file *tf)
{
    const struct cbfs_index_report *const r = &tf->rep;
    const bool dropped = tool_cat_records_dropped(r);
    if (r->data_tail_bytes && r->tail_kept)
        tool_err("cat",
                 "%s: offset %" PRIu64 ": no valid frame here; the %" PRIu64
                 " byte(s) from here may hold frames that cannot be reached (damaged frame "
                 "header)",
                 display, tf->idx.data_end, r->data_tail_bytes);
    else if (r->data_tail_bytes && dropped)
        tool_err("cat",
                 "%s: offset %" PRIu64 ": damaged frame: %" PRIu64
                 " byte(s) from here are unreachable, %" PRIu64 " index record(s) point into them",
                 display, tf->idx.data_end, r->data_tail_bytes, r->records_dropped);
    else if (dropped)
        tool_err("cat", "%s: %" PRIu64 " index record(s) point at frames the data file does not "
                 "hold: those writes are lost",
                 display, r->records_dropped - r->frames_rescanned);
    else if (r->frames_unreachable)
        tool_err("cat", "%s: frames of the file lie past damage that the load cannot pass (no "
                 "sidecar, or its records lost)",
                 display);
    else if (tool_cat_end_unknown(tf))
        tool_err("cat",
                 "%s: offset %" PRIu64 ": no sidecar, and the data file ends in %" PRIu64
                 " byte(s) that are no whole frame: where the file ended cannot be told (the "
                 "data file cut short, or its last write torn)",
                 display, tf->idx.data_end, r->data_tail_bytes);
    return !tool_cat_reaches_all(tf);
}

/* "OFF:LEN" or "OFF:" (to the end). */
static bool tool_cat_range(const char *s, uint64_t *off, uint64_t *len)
{
    const char *const colon = strchr(s, ':');
    if (!colon) return false;
    char head[64];
    if ((size_t)(colon - s) >= sizeof head) return false;
    snprintf(head, sizeof head, "%.*s", (int)(colon - s), s);
    if (cbfs_parse_size(head, off) != CBFS_OK) return false;
    *len = UINT64_MAX;
    return colon[1] == '\0' || cbfs_parse_size(colon + 1, len) == CBFS_OK;
}

int tool_cat_main(int argc, char **argv)
{
    static const struct option opts[] = {{"range", required_argument, NULL, 'r'},
                                         {"keep-going", no_argument, NULL, 'k'},
                                         {"block-size", required_argument, NULL, 'b'},
                                         {"help", no_argument, NULL, 'h'},
                                         {NULL, 0, NULL, 0}};
    uint64_t off = 0, len = UINT64_MAX;
    bool keep_going = false;
    struct cbfs_bs_hint block_size = {0};
    int ch;
    optind = 1;
    while ((ch = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
        if (ch == 'r' && tool_cat_range(optarg, &off, &len)) continue;
        if (ch == 'r') {
            tool_err("cat", "--range wants OFF:LEN (e.g. 1M:64K), not '%s'", optarg);
            return TOOL_EXIT_USAGE;
        }
        if (ch == 'k') {
            keep_going = true;
            continue;
        }
        if (ch == 'b') {
            if (!tool_block_size_arg("cat", optarg, &block_size)) return TOOL_EXIT_USAGE;
            continue;
        }
        return tool_usage(tool_cat_help, ch == 'h');
    }
    if (optind + 1 != argc) return tool_usage(tool_cat_help, false);
    struct tool_loc loc;
    char msg[512];
    if (tool_loc_resolve(argv[optind], true, &loc, msg, sizeof msg) != CBFS_OK) {
        tool_err("cat", "%s", msg);
        return TOOL_EXIT_USAGE;
    }
    /* cat salvages: a store that neither mounts nor verifies until its upgrade
     * is run again is still read, as layout 1, whose reads do not depend on
     * where a sidecar went (one not found is rebuilt from the frames, never
     * guessed) */
    if (loc.layout_state == CBFS_LAYOUT_CUT_SHORT)
        tool_err("cat", "%s: its store's upgrade to layout 2 was cut short (run cbfs fsck "
                 "--upgrade on it): read as layout 1, a moved sidecar as a lost one",
                 loc.display);
    if (block_size.asserted) loc.store.bs = block_size;
    int rc = TOOL_EXIT_USAGE;
    struct tool_file tf;
    cbfs_err e = CBFS_E_INVAL;
    if (loc.is_dir) {
        tool_err("cat", "%s is a directory", loc.display);
        goto out_loc;
    }
    e = tool_file_open(&loc.store, loc.dirfd, loc.name, TOOL_LOAD_FULL, &tf);
    if (e) {
        tool_file_open_err("cat", &loc.store, loc.display, &tf, e);
        goto out_loc;
    }
    if (tf.is_cbfs && tf.load_err) {
        tool_err("cat", "%s: cannot load the index: %s%s", loc.display,
                 cbfs_err_str(tf.load_err), tool_file_load_advice(&tf));
        goto out_file;
    }
    if (!tf.is_cbfs && !loc.in_store) {
        tool_err("cat", "%s is not a cbfs file (no sidecar, no frames) and not in a store",
                 loc.display);
        goto out_file;
    }
    if (loc.via_mount) /* the store's bytes, not the daemon's memory */
        tool_err("cat", "%s: read from the store behind its mount: what a writer has not yet "
                 "closed or fsync'd is not there (cat(1) through the mount reads it)",
                 loc.display);
    unsigned damaged = 0;
    /* Printed, as a plain file is: it may be one (a disk image that holds a
     * store), and cat is how its bytes are got out. Said, so that raw frames
     * are not taken for the file unwarned. */
    if (tf.frame_inside)
        tool_err("cat", "%s: " TOOL_FRAME_INSIDE_FMT "; printed as it is", loc.display,
                 tf.frame_inside);
    if (tf.envelope_damaged) { /* its bytes are most likely raw frames */
        damaged++;
        tool_err("cat", "%s: %s%s", loc.display, tool_envelope_damaged_msg,
                 keep_going ? " (copied as it is)" : "; not printed (--keep-going copies it "
                                                     "as it is)");
        if (!keep_going) {
            rc = TOOL_EXIT_PROBLEMS;
            goto out_file;
        }
    }
    /* A load beside a writer can meet its frames half appended (a header and
     * part of its payload: a tail that looks like a damaged header): look
     * again, as verify does, before calling the file damaged. */
    enum tool_look look = TOOL_LOOK_STANDS;
    unsigned looks = 0;
    while (tf.is_cbfs && !tool_cat_reaches_all(&tf) &&
           (look = tool_file_look_again(&tf, &looks, NULL)) == TOOL_LOOK_AGAIN)
        continue; /* tf holds the index as it is now */
    if (look == TOOL_LOOK_GONE)
        tool_err("cat", "%s: it was removed while it was loaded; what failed below is what its "
                 "index named then", loc.display);
    if (look == TOOL_LOOK_KEPT_CHANGING)
        tool_err("cat", "%s: it changed under each of %u loads: a writer is at work, and what "
                 "is reported below may be its writes in flight; print it again when it is quiet",
                 loc.display, TOOL_LOOKS + 1);
    const uint64_t size = tf.is_cbfs ? tf.idx.size : (uint64_t)tf.data_st.st_size;
    /* a range from past the end prints nothing, as a read there does */
    if (off > size) off = size;
    const uint64_t end = len > size - off ? size : off + len;
    if (tf.is_cbfs && tool_cat_unreachable(loc.display, &tf)) {
        damaged++;
        if (!keep_going) {
            /* which blocks it touches is not known: print none of them */
            tool_err("cat", "%s: not printed (it may come out short, or with older versions "
                     "of blocks); --keep-going prints what can be reached",
                     loc.display);
            rc = TOOL_EXIT_PROBLEMS;
            goto out_file;
        }
    }
    e = off == end  ? CBFS_OK
        : tf.is_cbfs ? tool_cat_frames(loc.display, &tf, off, end, keep_going, &damaged)
                     : tool_cat_plain(&tf, off, end);
    /* an error (the output is short) outranks damage; it is said even after
     * damage was */
    if (e && tool_out_errno())
        tool_err("cat", "%s: writing to stdout: %s", loc.display, strerror(tool_out_errno()));
    else if (e)
        tool_err("cat", "%s: %s", loc.display, cbfs_err_str(e));
    rc = e ? TOOL_EXIT_USAGE : damaged ? TOOL_EXIT_PROBLEMS : TOOL_EXIT_OK;
out_file:
    tool_file_close(&tf);
out_loc:
    tool_loc_free(&loc);
    return rc;
}

/* Lifetime of an engine file: open (index load or create), close, the name
 * used in log lines and the logical size. The read and write sides live in
 * file_read.c, file_write.c, file_commit.c and file_sync.c; the shared state in
 * file_impl.h. */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/log.h"
#include "cbfs/util.h"
#include "engine/file_impl.h"

void cbfs_file_set_name(struct cbfs_file *f, const char *name)
{
    snprintf(f->name, sizeof f->name, "%s", name);
}

uint64_t cbfs_file_size(struct cbfs_file *f)
{
    cbfs_mutex_lock(&f->lock);
    uint64_t s = f->size;
    cbfs_mutex_unlock(&f->lock);
    return s;
}

uint32_t cbfs_file_block_size(const struct cbfs_file *f)
{
    return f->bs;
}

int cbfs_file_data_fd(const struct cbfs_file *f)
{
    return f->data_fd;
}

int cbfs_file_idx_fd(const struct cbfs_file *f)
{
    return f->idx_fd;
}

/* ---- open / close ---- */

/* cbfs_index_open for the daemon: a file whose frames go on past damage the
 * load cannot pass (rep->frames_unreachable: rebuilt without a usable sidecar,
 * docs/FORMAT.md 3.3, or rescanned past records lost, 3.1) is not served.
 * Its blocks could read as versions older than the unreachable frames, or the
 * file end before them, with no error; the loader repaired nothing, and cbfs
 * cat --keep-going copies out what can be reached. */
cbfs_err cbfs_file_load_index(const struct cbfs_engine *eng, int data_fd, int idx_fd, bool repair,
                              struct cbfs_index *idx, struct cbfs_index_report *rep)
{
    /* a lost sidecar's block size: the mount's, where the frames agree */
    const struct cbfs_bs_hint hint = {.size = eng->cfg.block_size};
    /* no read of the file (a read through the fd by another thread meanwhile,
     * in a revert's reload, leaves the atime too) */
    const int noatime = cbfs_noatime_begin(data_fd);
    cbfs_err err = cbfs_index_open(data_fd, idx_fd, repair, &hint, idx, rep);
    cbfs_noatime_end(data_fd, noatime);
    if (!err && rep->frames_unreachable) {
        cbfs_index_free(idx);
        err = CBFS_E_UNREACHABLE;
    }
    return err;
}

cbfs_err cbfs_file_open(struct cbfs_engine *eng, int data_fd, int idx_fd, bool create,
                        bool writable, const struct cbfs_codec_ops *codec, int level,
                        struct cbfs_file **out)
{
    cbfs_err err = CBFS_E_NOMEM;
    if (!codec || codec->id == CBFS_CODEC_NONE) {
        err = CBFS_E_INVAL; /* codec=none files are plain files, not engine files */
        goto fail_fds;
    }
    struct cbfs_file *f = calloc(1, sizeof *f);
    if (!f) goto fail_fds;
    f->eng = eng;
    f->serial = cbfs_engine_new_serial(eng);
    f->data_fd = data_fd;
    f->idx_fd = idx_fd;
    f->writable = writable;
    f->codec = codec;
    f->level = level;
    f->ra_last = UINT64_MAX;
    f->broken_size = UINT64_MAX;
    snprintf(f->name, sizeof f->name, "(fd %d)", data_fd);
    cbfs_mutex_init(&f->lock);
    pthread_cond_init(&f->cond, NULL);

    struct stat st;
    bool empty = false;
    if (!create && cbfs_index_unborn(data_fd, idx_fd)) {
        /* its first flush never completed (a crash right after create): an
         * empty file, made again as a new one where it may be written */
        if (writable) create = true;
        else empty = true;
    }
    if (empty) {
        cbfs_index_init(&f->idx, eng->cfg.block_size, 0);
    } else if (create) {
        if (!writable) {
            err = CBFS_E_BADF;
            goto fail;
        }
        cbfs_index_init(&f->idx, eng->cfg.block_size, cbfs_random64());
        err = cbfs_index_write_header(&f->idx, idx_fd);
        if (err) goto fail;
        f->dirty = true; /* the header must be durable at the first flush */
    } else {
        struct cbfs_index_report rep = {0};
        err = cbfs_file_load_index(eng, data_fd, idx_fd, writable, &f->idx, &rep);
        if (err == CBFS_E_UNREACHABLE)
            cbfs_log_err("fd %d: the frames of the file stop at damage with frames of the file "
                         "(or bytes too many to search) behind it, and no usable sidecar, or "
                         "records lost from it, to reach them: not served, since blocks could "
                         "read old or the file end early (cbfs cat --keep-going copies out what "
                         "can be reached; restore the sidecar to read it all)",
                         data_fd);
        if (err == CBFS_E_VERSION && rep.newer_version)
            cbfs_log_err("fd %d: sidecar has cbfs format version %u; this cbfs reads version %u "
                         "only: upgrade cbfs to read this file",
                         data_fd, rep.newer_version, CBFS_FORMAT_VERSION);
        if (err) goto fail;
        if (rep.frames_damaged)
            cbfs_log_err("fd %d: %llu frame header(s) damaged, first at store offset %llu: "
                         "those blocks will fail with EIO (run cbfs verify)",
                         data_fd, (unsigned long long)rep.frames_damaged,
                         (unsigned long long)rep.first_damaged_offset);
        if (rep.tail_kept)
            cbfs_log_err("fd %d: %llu bytes after the last readable frame hold damaged frames; "
                         "kept, not truncated (run cbfs fsck)",
                         data_fd, (unsigned long long)rep.data_tail_bytes);
        if (rep.sidecar_missing || rep.records_dropped || rep.frames_rescanned ||
            rep.data_tail_bytes)
            cbfs_log_info("fd %d: index recovered (sidecar %s, %llu records dropped, %llu "
                          "frames rescanned, %llu tail bytes, %llu bytes of torn writes "
                          "passed over%s)",
                          data_fd, rep.sidecar_missing ? "rebuilt" : "replayed",
                          (unsigned long long)rep.records_dropped,
                          (unsigned long long)rep.frames_rescanned,
                          (unsigned long long)rep.data_tail_bytes,
                          (unsigned long long)rep.torn_bytes_skipped,
                          rep.repaired ? ", repaired" : "");
    }
    f->idx.on_dead = cbfs_file_note_dead;
    f->idx.on_dead_arg = f;
    f->bs = f->idx.block_size;
    f->file_id = f->idx.file_id;
    f->size = f->size_set = f->idx.size;
    f->wnext = f->size / f->bs; /* an append completes the last block first */
    f->gap_block = UINT64_MAX;
    f->gap_wait = true;
    f->open_max = CBFS_OPEN_WINDOW / f->bs;
    if (f->open_max > CBFS_OPEN_MAX / 2) f->open_max = CBFS_OPEN_MAX / 2;
    if (f->open_max < CBFS_OPEN_MIN) f->open_max = CBFS_OPEN_MIN;
    /* After a kept (damaged) tail, append behind it: never over frames. */
    f->append_off = f->idx.data_end;
    if (!empty && fstat(data_fd, &st) == 0 && (uint64_t)st.st_size > f->append_off)
        f->append_off = (uint64_t)st.st_size;
    f->behind_off = f->append_off;
    f->durable_end = f->append_off; /* what the open found counts as durable */
    f->idx_need = f->idx_reserved = f->idx.index_end;
    *out = f;
    return CBFS_OK;
fail:
    cbfs_index_free(&f->idx);
    pthread_cond_destroy(&f->cond);
    cbfs_mutex_destroy(&f->lock);
    free(f);
fail_fds:
    close(data_fd);
    if (idx_fd >= 0) close(idx_fd);
    return err;
}

cbfs_err cbfs_file_close(struct cbfs_file *f)
{
    if (!f) return CBFS_OK;
    cbfs_err err = CBFS_OK;
    if (f->writable) err = cbfs_file_flush(f, NULL);
    cbfs_mutex_lock(&f->lock);
    while (f->ra_jobs) cbfs_mutex_wait(&f->lock, &f->cond);
    for (unsigned i = 0; i < f->nopen; i++) /* clean after flush */
        cbfs_engine_buf_put(f->eng, f->open[i].data, f->bs);
    const bool trim = f->writable && !err && !f->nprec && !f->broken;
    cbfs_mutex_unlock(&f->lock);
    /* the sidecar's room allocated ahead and not used (cbfs_file_reserve_records;
     * also what a revert or a crash left): a cut to its own length frees it */
    struct stat st;
    if (trim && fstat(f->idx_fd, &st) == 0 && (uint64_t)st.st_size == f->idx.index_end &&
        (uint64_t)st.st_blocks * 512 > (f->idx.index_end + 4095) / 4096 * 4096 &&
        ftruncate(f->idx_fd, st.st_size) != 0)
        cbfs_log_warn("%s: cannot free the sidecar's unused room: %s", f->name, strerror(errno));
    close(f->data_fd);
    if (f->idx_fd >= 0) close(f->idx_fd);
    cbfs_index_free(&f->idx);
    free(f->dead);
    free(f->prec);
    pthread_cond_destroy(&f->cond);
    cbfs_mutex_destroy(&f->lock);
    free(f);
    return err;
}

cbfs_err cbfs_file_peek(const struct cbfs_engine *eng, int data_fd, int idx_fd, uint64_t *size,
                        uint32_t *block_size)
{
    struct cbfs_index idx;
    struct cbfs_index_report rep = {0};
    if (cbfs_index_unborn(data_fd, idx_fd)) { /* as cbfs_file_open takes it */
        *size = 0;
        *block_size = eng->cfg.block_size;
        return CBFS_OK;
    }
    cbfs_err err = cbfs_file_load_index(eng, data_fd, idx_fd, false, &idx, &rep);
    if (!err) {
        *size = idx.size;
        *block_size = idx.block_size;
    }
    cbfs_index_free(&idx);
    return err;
}

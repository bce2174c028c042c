/* The daemon's live counters for `cbfs stats`, read as the xattr
 * user.cbfs.stats of the mount root (getfattr -n user.cbfs.stats MNT). A
 * virtual xattr needs no hidden file in the namespace and no extra request
 * type: one getxattr is one consistent snapshot. */
#include <stdio.h>

#include "cbfs/util.h"
#include "fuse/ops.h"

size_t cbfs_stats_format(const struct cbfs_fs *fs, char *buf, size_t cap)
{
    struct cbfs_engine_stats st;
    struct cbfs_engine_config cfg;
    cbfs_engine_get_stats(fs->opt.eng, &st);
    cbfs_engine_get_config(fs->opt.eng, &cfg);
    const int n = snprintf(
        buf, cap,
        "uptime_ns=%llu\nworkers=%u\ncodec=%s\nlevel=%d\nblock_size=%u\n"
        "logical_written=%llu\nphysical_written=%llu\nlogical_read=%llu\nphysical_read=%llu\n"
        "blocks_compressed=%llu\nblocks_raw=%llu\nblocks_hole=%llu\n"
        "ns_compress=%llu\nns_store_write=%llu\nns_wait_slots=%llu\n"
        "ns_decompress=%llu\nns_store_read=%llu\n"
        "cache_hits=%llu\ncache_misses=%llu\nreadahead_hits=%llu\ninflight_bytes=%llu\n",
        (unsigned long long)(cbfs_now_ns() - fs->started_ns), cfg.workers,
        fs->opt.codec ? fs->opt.codec->name : "none", fs->opt.level, cfg.block_size,
        (unsigned long long)st.logical_written, (unsigned long long)st.physical_written,
        (unsigned long long)st.logical_read, (unsigned long long)st.physical_read,
        (unsigned long long)st.blocks_compressed, (unsigned long long)st.blocks_raw,
        (unsigned long long)st.blocks_hole, (unsigned long long)st.ns_compress,
        (unsigned long long)st.ns_store_write, (unsigned long long)st.ns_wait_slots,
        (unsigned long long)st.ns_decompress, (unsigned long long)st.ns_store_read,
        (unsigned long long)st.cache_hits, (unsigned long long)st.cache_misses,
        (unsigned long long)st.readahead_hits, (unsigned long long)st.inflight_bytes);
    return n < 0 ? 0 : (size_t)n;
}

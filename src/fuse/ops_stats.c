/* The daemon's live counters for `cbfs stats`, as the text (cbfs/stats.h) of
 * the virtual xattr user.cbfs.stats on the mount root: no hidden file, no
 * extra request type, and one getxattr is one consistent snapshot. */
#include <stdio.h>

#include "cbfs/stats.h"
#include "cbfs/util.h"
#include "fuse/ops.h"

size_t cbfs_ops_stats_format(const struct cbfs_fs *fs, char *buf, size_t cap)
{
    struct cbfs_stats s;
    struct cbfs_engine_config cfg;
    cbfs_engine_get_stats(fs->opt.eng, &s.st);
    cbfs_engine_get_config(fs->opt.eng, &cfg);
    s.uptime_ns = cbfs_now_ns() - fs->started_ns;
    s.workers = cfg.workers;
    snprintf(s.codec, sizeof s.codec, "%s", fs->opt.codec ? fs->opt.codec->name : "none");
    s.level = fs->opt.level;
    s.block_size = cfg.block_size;
    size_t n;
    (void)cbfs_stats_encode(&s, buf, cap, &n); /* too small: n >= cap tells the caller */
    return n;
}

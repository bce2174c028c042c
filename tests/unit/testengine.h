/* Opening an engine file in tests (the unit tests, the TSan stress): the data
 * file and its sidecar made or opened beside each other, as the daemon does.
 * Header-only; no test framework, so callers decide what a failure means. */
#ifndef CBFS_TESTENGINE_H
#define CBFS_TESTENGINE_H

#include <fcntl.h>
#include <stdbool.h>
#include <unistd.h>

#include "cbfs/codec.h"
#include "cbfs/engine.h"

/* Opens (create: makes) the data file at p and the sidecar at q as one
 * engine file of eng, writing new blocks as spec says ("zstd", "lz4:1": a
 * codec spec, cbfs_codec_parse). *ifd (if not NULL) gets the sidecar's fd,
 * which the file owns. @return CBFS_OK, CBFS_E_IO if a file would not open,
 * or what cbfs_codec_parse or cbfs_file_open returned. */
static inline cbfs_err cbfs_te_open(struct cbfs_engine *eng, const char *p, const char *q,
                                    bool create, const char *spec, int *ifd,
                                    struct cbfs_file **out)
{
    const struct cbfs_codec_ops *codec;
    int level;
    cbfs_err e = cbfs_codec_parse(spec, &codec, &level, NULL, 0);
    if (e) return e;
    const int dfd = open(p, O_RDWR | O_CREAT, 0644), xfd = open(q, O_RDWR | O_CREAT, 0644);
    if (dfd < 0 || xfd < 0) {
        if (dfd >= 0) close(dfd);
        if (xfd >= 0) close(xfd);
        return CBFS_E_IO;
    }
    if (ifd) *ifd = xfd;
    return cbfs_file_open(eng, dfd, xfd, create, true, codec, level, out);
}

#endif

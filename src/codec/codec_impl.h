/* Internal to src/codec: the ops tables each codec file defines. Only the
 * registry includes this; everyone else reaches codecs through cbfs/codec.h
 * (cbfs_codec_by_id / by_name), which lists only the codecs that were built. */
#ifndef CBFS_CODEC_IMPL_H
#define CBFS_CODEC_IMPL_H

#include "cbfs/codec.h"

/* Always built: the registry needs a codec for plain files. */
extern const struct cbfs_codec_ops cbfs_codec_none_ops;

/* Each defined only when its CBFS_HAVE_<X> is set (see CMakeLists.txt). */
#ifdef CBFS_HAVE_LZ4
extern const struct cbfs_codec_ops cbfs_codec_lz4_ops;
#endif
#ifdef CBFS_HAVE_ZSTD
extern const struct cbfs_codec_ops cbfs_codec_zstd_ops;
#endif
#ifdef CBFS_HAVE_XZ
extern const struct cbfs_codec_ops cbfs_codec_xz_ops;
#endif
#ifdef CBFS_HAVE_BZIP2
extern const struct cbfs_codec_ops cbfs_codec_bzip2_ops;
#endif

#endif

/* Inode table tests (src/fuse/inode.c, export.c) on a real store directory
 * under /tmp, no mount: lookups and refs, hard links, the locations that say
 * where a file's sidecar lives, how a regular file's kind is decided, node
 * ids, and the "." and ".." lookups of NFS export. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "cbfs/engine.h"
#include "cbfs/format.h"
#include "cbfs/store.h"
#include "fdlimit.h"
#include "fuse/export.h"
#include "fuse/inode.h"
#include "testdata.h"


/* The fixture engine's block size (the mount's, to the fs). */
#define IT_BLOCK_SIZE (16u << 10)
static char it_dir[64];
static int it_root = -1;
static struct cbfs_fs *it_fs;
static struct cbfs_engine *it_eng; /* the fs's, as the daemon gives it one */

static void it_setup(void)
{
    snprintf(it_dir, sizeof it_dir, "/tmp/cbfs-inode-XXXXXX");
    cr_assert_not_null(mkdtemp(it_dir));
    it_root = open(it_dir, O_PATH | O_DIRECTORY | O_CLOEXEC);
    cr_assert(it_root >= 0);
    /* 16K: files written by it_write_compressed (64K) keep their own */
    const struct cbfs_engine_config cfg = {
        .block_size = IT_BLOCK_SIZE, .workers = 1, .cache_bytes = 8 << 20};
    cr_assert_eq(cbfs_engine_create(&cfg, &it_eng), CBFS_OK);
    const struct cbfs_fs_options opt = {
        .store_fd = it_root, .store_path = it_dir, .layout = CBFS_LAYOUT_SUFFIX, .eng = it_eng};
    it_fs = cbfs_fs_new(&opt);
    cr_assert_not_null(it_fs);
}

/* Also called before a skip: criterion runs no fini for a skipped test. */
static void it_teardown(void)
{
    if (!it_fs) return;
    cr_assert_eq(cbfs_fs_free(it_fs), 0);
    it_fs = NULL;
    cbfs_engine_destroy(it_eng);
    close(it_root);
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", it_dir);
    cr_assert_eq(system(cmd), 0);
}

TestSuite(inode, .init = it_setup, .fini = it_teardown, .timeout = 60);

/* Creates a file (with size bytes of zeros) in the store, behind the table's back. */
static void it_touch(const char *name, off_t size)
{
    const int fd = openat(it_root, name, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    cr_assert(fd >= 0, "create %s: %s", name, strerror(errno));
    cr_assert_eq(ftruncate(fd, size), 0);
    close(fd);
}

static struct cbfs_inode *it_lookup(struct cbfs_inode *dir, const char *name, struct stat *st)
{
    struct cbfs_inode *inode = NULL;
    struct stat sb;
    const int err = cbfs_inode_lookup(it_fs, dir, name, &inode, st ? st : &sb);
    cr_assert_eq(err, 0, "lookup %s: %s", name, strerror(err));
    cr_assert_not_null(inode);
    return inode;
}

/* @return whether the table still holds the object whose stat is st. */
static bool it_in_table(const struct stat *st)
{
    struct cbfs_inode *const inode = cbfs_inode_find(it_fs, st->st_dev, st->st_ino);
    cbfs_inode_unref(it_fs, inode, 1);
    return inode != NULL;
}

/* Writes a compressed file (data + sidecar) of size bytes through an engine
 * of block size bs with the first codec this build has. */
static void it_write_compressed(const char *name, size_t size, uint32_t bs)
{
    char sc[NAME_MAX + 1];
    snprintf(sc, sizeof sc, "%s%s", name, CBFS_INDEX_SUFFIX);
    const struct cbfs_codec_ops *codec = NULL;
    for (unsigned id = CBFS_CODEC_NONE + 1; id <= CBFS_CODEC_MAX_ID && !codec; id++)
        codec = cbfs_codec_by_id(id);
    if (!codec) {
        it_teardown();
        cr_skip_test("no compressing codec built");
    }
    const struct cbfs_engine_config cfg = {.block_size = bs, .workers = 1, .cache_bytes = 8 << 20};
    struct cbfs_engine *eng;
    cr_assert_eq(cbfs_engine_create(&cfg, &eng), CBFS_OK);
    const int dfd = openat(it_root, name, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    const int ifd = openat(it_root, sc, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    cr_assert(dfd >= 0 && ifd >= 0);
    struct cbfs_file *f;
    cr_assert_eq(cbfs_file_open(eng, dfd, ifd, true, true, codec, codec->default_level, &f),
                 CBFS_OK);
    unsigned char *const data = malloc(size);
    cbfs_td_rows(data, size, 1);
    cr_assert_eq(cbfs_file_write(f, data, size, 0), CBFS_OK);
    cr_assert_eq(cbfs_file_close(f), CBFS_OK);
    free(data);
    cbfs_engine_destroy(eng);
}

Test(inode, lookup_creates_an_inode_with_one_ref)
{
    struct stat st, sb;
    it_touch("a", 123);
    cr_assert_eq(fstatat(it_root, "a", &sb, 0), 0);
    struct cbfs_inode *const a = it_lookup(it_fs->root, "a", &st);
    cr_assert_eq(a->refs, 1);
    cr_assert_eq(a->type, S_IFREG);
    cr_assert_eq(a->kind, CBFS_KIND_PLAIN);
    cr_assert_eq(a->ino, sb.st_ino);
    cr_assert_eq(st.st_ino, sb.st_ino);
    cr_assert_eq(st.st_size, 123);
    cr_assert_eq(it_fs->count, 2); /* the root and a */
    cr_assert_eq(cbfs_inode_get(it_fs, cbfs_inode_nodeid(it_fs, a)), a);
    cr_assert_eq(cbfs_inode_nodeid(it_fs, it_fs->root), FUSE_ROOT_ID);
    cbfs_inode_unref(it_fs, a, 1);
    cr_assert_eq(it_fs->count, 1);
}

Test(inode, the_same_object_twice_is_the_same_inode)
{
    struct stat st;
    it_touch("a", 0);
    struct cbfs_inode *const a1 = it_lookup(it_fs->root, "a", &st);
    struct cbfs_inode *const a2 = it_lookup(it_fs->root, "a", NULL);
    cr_assert_eq(a1, a2);
    cr_assert_eq(a1->refs, 2);
    cr_assert_eq(it_fs->count, 2);
    cbfs_inode_unref(it_fs, a1, 1);
    cr_assert(it_in_table(&st), "one ref left: still in the table");
    cbfs_inode_unref(it_fs, a1, 1);
    cr_assert_not(it_in_table(&st), "no ref left: freed");
}

Test(inode, unref_frees_and_releases_the_location_directory)
{
    struct stat dst, fst;
    cr_assert_eq(mkdirat(it_root, "d", 0755), 0);
    it_touch("d/f", 0);
    struct cbfs_inode *const d = it_lookup(it_fs->root, "d", &dst);
    cr_assert_eq(d->kind, CBFS_KIND_OTHER);
    struct cbfs_inode *const f = it_lookup(d, "f", &fst);
    cr_assert_eq(f->parent, d);
    cr_assert_eq(d->refs, 2, "one lookup and f's location");
    cbfs_inode_unref(it_fs, d, 1); /* the kernel forgets d */
    cr_assert(it_in_table(&dst), "f's location keeps d");
    cbfs_inode_unref(it_fs, f, 1); /* ... then f: both go */
    cr_assert_not(it_in_table(&fst));
    cr_assert_not(it_in_table(&dst));
    cr_assert_eq(it_fs->count, 1);
    cr_assert_eq(it_fs->root->refs, 1);
}

Test(inode, hard_links_share_an_inode)
{
    char name[NAME_MAX + 1];
    struct cbfs_inode *dir;
    it_touch("a", 10);
    cr_assert_eq(linkat(it_root, "a", it_root, "b", 0), 0);
    struct cbfs_inode *const a = it_lookup(it_fs->root, "a", NULL);
    struct cbfs_inode *const b = it_lookup(it_fs->root, "b", NULL);
    cr_assert_eq(a, b);
    cr_assert_eq(a->refs, 2);
    cr_assert_eq(it_fs->count, 2);
    /* the latest lookup decides where the sidecar is looked for */
    cr_assert_eq(cbfs_inode_get_location(it_fs, a, &dir, name, sizeof name), 0);
    cr_assert_eq(dir, it_fs->root);
    cr_assert_str_eq(name, "b");
    cbfs_inode_unref(it_fs, dir, 1);
    cbfs_inode_unref(it_fs, a, 2);
}

Test(inode, location_follows_set_and_clear)
{
    char name[NAME_MAX + 1];
    struct cbfs_inode *where;
    it_touch("a", 0);
    cr_assert_eq(mkdirat(it_root, "d", 0755), 0);
    struct cbfs_inode *const a = it_lookup(it_fs->root, "a", NULL);
    struct cbfs_inode *const d = it_lookup(it_fs->root, "d", NULL);
    cr_assert_eq(it_fs->root->refs, 2, "the root's own ref and a's location");

    /* a rename to d/x moves the location and its ref */
    cr_assert_eq(cbfs_inode_set_location(it_fs, a, d, "x"), 0);
    cr_assert_eq(it_fs->root->refs, 1);
    cr_assert_eq(d->refs, 2);
    cr_assert_eq(cbfs_inode_get_location(it_fs, a, &where, name, sizeof name), 0);
    cr_assert_eq(where, d);
    cr_assert_str_eq(name, "x");
    cbfs_inode_unref(it_fs, where, 1);
    cr_assert_eq(cbfs_inode_get_location(it_fs, a, &where, name, 1), ENAMETOOLONG);

    /* an unlink of another name leaves it; of this one clears it */
    cbfs_inode_clear_location(it_fs, a, it_fs->root, "a");
    cbfs_inode_clear_location(it_fs, a, d, "y");
    cr_assert_eq(a->parent, d);
    cbfs_inode_clear_location(it_fs, a, d, "x");
    cr_assert_eq(cbfs_inode_get_location(it_fs, a, &where, name, sizeof name), ENOENT);
    cr_assert_eq(d->refs, 1);
    cbfs_inode_unref(it_fs, a, 1);
    cbfs_inode_unref(it_fs, d, 1);
    cr_assert_eq(it_fs->count, 1);
}

Test(inode, directories_and_symlinks_have_no_kind_or_location)
{
    char name[NAME_MAX + 1];
    struct cbfs_inode *where;
    cr_assert_eq(mkdirat(it_root, "d", 0755), 0);
    cr_assert_eq(symlinkat("d", it_root, "l"), 0);
    struct cbfs_inode *const d = it_lookup(it_fs->root, "d", NULL);
    struct cbfs_inode *const l = it_lookup(it_fs->root, "l", NULL);
    cr_assert_eq(d->type, S_IFDIR);
    cr_assert_eq(l->type, S_IFLNK, "a symlink is never followed");
    cr_assert_eq(d->kind, CBFS_KIND_OTHER);
    cr_assert_eq(l->kind, CBFS_KIND_OTHER);
    cr_assert_eq(cbfs_inode_get_location(it_fs, l, &where, name, sizeof name), ENOENT);
    cbfs_inode_unref(it_fs, d, 1);
    cbfs_inode_unref(it_fs, l, 1);
}

Test(inode, a_directory_named_like_a_sidecar_is_not_one)
{
    it_touch("p", 5);
    cr_assert_eq(mkdirat(it_root, "p" CBFS_INDEX_SUFFIX, 0755), 0);
    struct cbfs_inode *const p = it_lookup(it_fs->root, "p", NULL);
    cr_assert_eq(p->kind, CBFS_KIND_PLAIN);
    cbfs_inode_unref(it_fs, p, 1);
}

Test(inode, a_compressed_file_shows_its_logical_size)
{
    struct stat st;
    it_write_compressed("c", 300000, 64 << 10); /* not the mount's block size */
    struct cbfs_inode *const c = it_lookup(it_fs->root, "c", &st);
    cr_assert_eq(c->kind, CBFS_KIND_COMPRESSED);
    cr_assert(c->has_idx);
    cr_assert_eq(st.st_size, 300000);
    cr_assert_eq(st.st_blksize, 64 << 10, "st_blksize %ld: the file's block size",
                 (long)st.st_blksize);
    cbfs_inode_unref(it_fs, c, 1);
}

Test(inode, a_compressed_file_without_sidecar_is_found_by_its_frames)
{
    struct stat st;
    /* the mount's block size: the candidate a rebuild needs (FORMAT.md 3.3) */
    it_write_compressed("c", 300000, IT_BLOCK_SIZE);
    cr_assert_eq(unlinkat(it_root, "c" CBFS_INDEX_SUFFIX, 0), 0);
    struct cbfs_inode *const c = it_lookup(it_fs->root, "c", &st);
    cr_assert_eq(c->kind, CBFS_KIND_COMPRESSED);
    cr_assert_not(c->has_idx);
    cr_assert_eq(st.st_size, 300000, "size rebuilt from the frames");
    cbfs_inode_unref(it_fs, c, 1);
}

/* Out of fds, the sidecar cannot be opened: the lookup fails rather than take
 * a compressed file for a plain one (which would show its raw frames). */
Test(inode, an_unopenable_sidecar_is_an_error_not_plain)
{
    struct cbfs_inode *inode = NULL;
    struct stat st;
    it_touch("s", 0);
    it_touch("s" CBFS_INDEX_SUFFIX, 0);
    const rlim_t old = cbfs_td_nofile_squeeze(1); /* the data file's O_PATH fd only */
    const int err = cbfs_inode_lookup(it_fs, it_fs->root, "s", &inode, &st);
    cbfs_td_nofile_restore(old);
    cr_assert_eq(err, EMFILE, "got %s", strerror(err));
    cr_assert_null(inode);
    cr_assert_eq(it_fs->count, 1, "nothing entered the table");

    inode = it_lookup(it_fs->root, "s", &st); /* with fds again */
    cr_assert_eq(inode->kind, CBFS_KIND_COMPRESSED);
    cbfs_inode_unref(it_fs, inode, 1);
}

/* ---- node ids (inode.h, "Node ids") ---- */

/* The generation of name in the store, from its file handle as the kernel's
 * nfsd would see it. */
static uint32_t it_generation(const char *name)
{
    const int fd = openat(it_root, name, O_PATH | O_NOFOLLOW | O_CLOEXEC);
    cr_assert(fd >= 0);
    const uint32_t gen = cbfs_fdcache_generation(fd);
    close(fd);
    return gen;
}

Test(inode, node_ids_are_store_inode_numbers)
{
    struct stat st;
    it_touch("a", 1);
    struct cbfs_inode *const a = it_lookup(it_fs->root, "a", &st);
    cr_assert_eq(cbfs_inode_nodeid(it_fs, a), (fuse_ino_t)st.st_ino);
    cr_assert_eq(a->gen, it_generation("a"));
    cr_assert_eq(cbfs_inode_get(it_fs, st.st_ino), a);
    cbfs_inode_unref(it_fs, a, 1);
    cr_assert_null(cbfs_inode_get(it_fs, st.st_ino), "forgotten: no longer in the table");
    cr_assert_null(cbfs_inode_find_nodeid(it_fs, st.st_ino));
}

Test(inode, the_root_is_fuse_root_id_with_generation_0)
{
    cr_assert_eq(cbfs_inode_nodeid(it_fs, it_fs->root), FUSE_ROOT_ID);
    cr_assert_eq(it_fs->root->gen, 0, "the kernel's root inode has generation 0");
    cr_assert_eq(cbfs_inode_get(it_fs, FUSE_ROOT_ID), it_fs->root);
    struct cbfs_inode *const r = cbfs_inode_find_nodeid(it_fs, FUSE_ROOT_ID);
    cr_assert_eq(r, it_fs->root);
    cbfs_inode_unref(it_fs, r, 1);
}

/* The store frees a deleted file's inode number and gives it to a new file
 * while the kernel still holds the old inode: the new one must not share the
 * old one's id (nor its inode), or the kernel would take one for the other. */
Test(inode, a_reused_inode_number_gets_a_local_id)
{
    struct stat xst, yst;
    char name[32];
    it_touch("x", 0);
    if (it_generation("x") == 0) {
        it_teardown();
        cr_skip_test("the store's file handles carry no generation");
    }
    struct cbfs_inode *const x = it_lookup(it_fs->root, "x", &xst);
    cbfs_fdcache_relieve(&it_fs->fdc, EMFILE); /* x's idle O_PATH fd goes */
    cr_assert_eq(unlinkat(it_root, "x", 0), 0);
    int i;
    for (i = 0; i < 64; i++) {
        snprintf(name, sizeof name, "y%d", i);
        it_touch(name, 0);
        cr_assert_eq(fstatat(it_root, name, &yst, 0), 0);
        if (yst.st_ino == xst.st_ino) break;
    }
    if (i == 64) {
        cbfs_inode_unref(it_fs, x, 1);
        it_teardown();
        cr_skip_test("the store did not reuse the inode number");
    }
    struct cbfs_inode *const y = it_lookup(it_fs->root, name, NULL);
    cr_assert_neq(y, x);
    cr_assert(y->nodeid & CBFS_NODEID_LOCAL, "the number is x's: y gets a local id");
    cr_assert_eq(cbfs_inode_get(it_fs, y->nodeid), y);
    cr_assert_eq(cbfs_inode_get(it_fs, xst.st_ino), x, "x keeps its id until forgotten");
    struct cbfs_inode *const newest = cbfs_inode_find(it_fs, yst.st_dev, yst.st_ino);
    cr_assert_eq(newest, y, "a lookup of the number finds the live object");
    cbfs_inode_unref(it_fs, newest, 1);
    cbfs_inode_unref(it_fs, x, 1);
    cbfs_inode_unref(it_fs, y, 1);
    cr_assert_eq(it_fs->count, 1);
}

/* ---- "." and ".." lookups (export.h) ---- */

/* Export support on the scratch store, a directory below /tmp: the probe may
 * refuse it only for not being the root of its filesystem (stand-in for one
 * that is); anything else (no handles, not ext4) skips the test. */
static void ex_setup(void)
{
    struct stat st;
    it_setup();
    cr_assert_eq(fstat(it_root, &st), 0);
    const char *const why = cbfs_fdcache_ino_probe(&it_fs->fdc, it_root, &st);
    cr_assert_not(it_fs->export && why, "the probe decides export");
    if (why && !strstr(why, "not the root of its filesystem")) {
        it_teardown();
        cr_skip_test("no export support on this store: %s", why);
    }
    it_fs->export = true;
}

TestSuite(export, .init = ex_setup, .fini = it_teardown, .timeout = 60);

/* The node id of name (looked up, then forgotten again: the table no longer
 * holds it). */
static fuse_ino_t ex_forgotten_id(struct cbfs_inode *dir, const char *name)
{
    struct cbfs_inode *const inode = it_lookup(dir, name, NULL);
    const fuse_ino_t id = cbfs_inode_nodeid(it_fs, inode);
    cbfs_inode_unref(it_fs, inode, 1);
    cr_assert_null(cbfs_inode_find_nodeid(it_fs, id));
    return id;
}

/* LOOKUP of name ("." or "..") in id; asserts success. */
static struct cbfs_inode *ex_lookup(fuse_ino_t id, const char *name, struct stat *st)
{
    struct cbfs_inode *inode = NULL;
    struct stat sb;
    const int err = cbfs_export_lookup(it_fs, id, name, &inode, st ? st : &sb);
    cr_assert_eq(err, 0, "lookup of '%s' in %llu: %s", name, (unsigned long long)id,
                 strerror(err));
    return inode;
}

static int ex_lookup_err(fuse_ino_t id, const char *name)
{
    struct cbfs_inode *inode = NULL;
    struct stat st;
    const int err = cbfs_export_lookup(it_fs, id, name, &inode, &st);
    if (err == 0) cbfs_inode_unref(it_fs, inode, 1);
    return err;
}

/* Opens and closes inode's engine state (with an engine of our own where the
 * fixture's fs has none). @return whether it opened writable. */
static bool ex_opens_writable(struct cbfs_inode *inode)
{
    const struct cbfs_engine_config cfg = {
        .block_size = 64 << 10, .workers = 1, .cache_bytes = 8 << 20};
    struct cbfs_engine *const had = it_fs->opt.eng, *eng = NULL;
    struct cbfs_file *f;
    if (!had) {
        cr_assert_eq(cbfs_engine_create(&cfg, &eng), CBFS_OK);
        it_fs->opt.eng = eng;
    }
    const int err = cbfs_inode_file_get(it_fs, inode, &f);
    cr_assert_eq(err, 0, "open: %s", strerror(err));
    const bool writable = inode->ro_errno == 0;
    cr_assert_eq(cbfs_inode_file_put(it_fs, inode), 0);
    it_fs->opt.eng = had;
    if (eng) cbfs_engine_destroy(eng);
    return writable;
}

Test(export, dot_rebuilds_a_forgotten_file)
{
    char name[NAME_MAX + 1];
    struct cbfs_inode *where;
    struct stat st, sb;
    it_touch("p", 4321);
    cr_assert_eq(fstatat(it_root, "p", &sb, 0), 0);
    const fuse_ino_t id = ex_forgotten_id(it_fs->root, "p");
    struct cbfs_inode *const p = ex_lookup(id, ".", &st);
    cr_assert_eq(p->nodeid, id);
    cr_assert_eq(p->ino, sb.st_ino);
    cr_assert_eq(p->gen, it_generation("p"));
    cr_assert_eq(p->kind, CBFS_KIND_PLAIN);
    cr_assert_eq(st.st_size, 4321);
    cr_assert_eq(cbfs_inode_get_location(it_fs, p, &where, name, sizeof name), ENOENT,
                 "reached by id alone: its name is not known");
    struct cbfs_inode *const again = ex_lookup(id, ".", NULL);
    cr_assert_eq(again, p, "in the table now: the same inode");
    cbfs_inode_unref(it_fs, p, 2);
    cr_assert_eq(it_fs->count, 1);
}

Test(export, a_nameless_compressed_file_reads_but_opens_read_only_until_named)
{
    struct stat st;
    it_write_compressed("c", 300000, IT_BLOCK_SIZE); /* rebuilt without its sidecar */
    const fuse_ino_t id = ex_forgotten_id(it_fs->root, "c");
    struct cbfs_inode *const c = ex_lookup(id, ".", &st);
    cr_assert_eq(c->kind, CBFS_KIND_COMPRESSED, "found by its frames");
    cr_assert_not(c->has_idx);
    cr_assert_eq(st.st_size, 300000, "size rebuilt from the frames");
    cr_assert_not(ex_opens_writable(c), "no sidecar to write with");

    struct cbfs_inode *const named = it_lookup(it_fs->root, "c", NULL);
    cr_assert_eq(named, c);
    cr_assert(c->has_idx, "the lookup found its sidecar");
    cr_assert(ex_opens_writable(c));
    cbfs_inode_unref(it_fs, c, 2);
}

/* An empty data file may have a sidecar (a compressed file of size 0): raw
 * bytes written into it would be cut off at its next open. */
Test(export, a_nameless_empty_file_is_compressed_and_read_only)
{
    struct stat st;
    it_touch("e", 0);
    const fuse_ino_t id = ex_forgotten_id(it_fs->root, "e");
    struct cbfs_inode *const e = ex_lookup(id, ".", &st);
    cr_assert_eq(e->kind, CBFS_KIND_COMPRESSED);
    cr_assert_eq(st.st_size, 0);
    cr_assert_not(ex_opens_writable(e));
    cbfs_inode_unref(it_fs, e, 1);
}

Test(export, dotdot_walks_up_to_the_root)
{
    struct stat dst;
    cr_assert_eq(mkdirat(it_root, "d", 0755), 0);
    cr_assert_eq(mkdirat(it_root, "d/e", 0755), 0);
    cr_assert_eq(fstatat(it_root, "d", &dst, 0), 0);
    struct cbfs_inode *const d0 = it_lookup(it_fs->root, "d", NULL);
    const fuse_ino_t eid = ex_forgotten_id(d0, "e");
    cbfs_inode_unref(it_fs, d0, 1);
    cr_assert_eq(it_fs->count, 1);

    struct cbfs_inode *const e = ex_lookup(eid, ".", NULL);
    cr_assert_eq(e->type, S_IFDIR);
    struct cbfs_inode *const d = ex_lookup(e->nodeid, "..", NULL);
    cr_assert_eq(d->nodeid, (fuse_ino_t)dst.st_ino);
    struct cbfs_inode *const r = ex_lookup(d->nodeid, "..", NULL);
    cr_assert_eq(r, it_fs->root);
    struct cbfs_inode *const r2 = ex_lookup(FUSE_ROOT_ID, "..", NULL);
    cr_assert_eq(r2, it_fs->root, "the root's parent is the root");
    cbfs_inode_unref(it_fs, r, 1);
    cbfs_inode_unref(it_fs, r2, 1);
    cbfs_inode_unref(it_fs, d, 1);
    cbfs_inode_unref(it_fs, e, 1);
    cr_assert_eq(it_fs->count, 1);
}

Test(export, gone_and_hidden_objects_are_stale)
{
    struct stat st;
    it_write_compressed("c", 1000, 64 << 10);
    it_touch("gone", 10);
    const fuse_ino_t gone = ex_forgotten_id(it_fs->root, "gone");
    const uint32_t gone_gen = it_generation("gone");
    cr_assert_eq(unlinkat(it_root, "gone", 0), 0);
    /* Deleted: ESTALE, unless a file made since (this test's store shares its
     * filesystem with other tests running beside it) took the inode number:
     * that file is then found, with a generation of its own, which the kernel
     * compares with the handle's and refuses (fuse_get_dentry). A flake
     * before: the number was taken in one full run in many. */
    struct cbfs_inode *other = NULL;
    const int gone_err = cbfs_export_lookup(it_fs, gone, ".", &other, &st);
    if (gone_err == 0) {
        cr_assert_neq(other->gen, gone_gen, "deleted, yet found with its generation");
        cbfs_inode_unref(it_fs, other, 1);
    } else {
        cr_assert_eq(gone_err, ESTALE, "deleted: %s", strerror(gone_err));
    }

    cr_assert_eq(fstatat(it_root, "c" CBFS_INDEX_SUFFIX, &st, 0), 0);
    cr_assert_eq(ex_lookup_err(st.st_ino, "."), ESTALE, "a sidecar");
    cr_assert_eq(mkdirat(it_root, CBFS_STORE_DIR, 0700), 0);
    cr_assert_eq(mkdirat(it_root, CBFS_STORE_DIR "/sub", 0700), 0);
    it_touch(CBFS_STORE_DIR "/" CBFS_STORE_CONF, 10);
    cr_assert_eq(fstatat(it_root, CBFS_STORE_DIR, &st, 0), 0);
    cr_assert_eq(ex_lookup_err(st.st_ino, "."), ESTALE, ".cbfs");
    cr_assert_eq(fstatat(it_root, CBFS_STORE_DIR "/sub", &st, 0), 0);
    cr_assert_eq(ex_lookup_err(st.st_ino, "."), ESTALE, "a directory in .cbfs");
    cr_assert_eq(fstatat(it_root, CBFS_STORE_DIR "/" CBFS_STORE_CONF, &st, 0), 0);
    cr_assert_eq(ex_lookup_err(st.st_ino, "."), ESTALE, "a file in .cbfs");

    struct cbfs_inode *const c = it_lookup(it_fs->root, "c", NULL);
    cr_assert_eq(ex_lookup_err(((fuse_ino_t)(uintptr_t)c) | CBFS_NODEID_LOCAL, "."), ESTALE,
                 "a local id is never looked up by \".\"");
    cbfs_inode_unref(it_fs, c, 1);
    cr_assert_eq(it_fs->count, 1);

    it_fs->export = false;
    cr_assert_eq(ex_lookup_err(FUSE_ROOT_ID, "."), ENOENT, "no export support: no \".\"");
}

/* A handle forged for .cbfs/store.conf while the daemon is out of fds: the
 * check that .cbfs holds it cannot read the directory, and must then refuse
 * (fail closed), never take it for a visible file. */
Test(export, out_of_fds_a_hidden_file_is_still_refused)
{
    struct stat st;
    cr_assert_eq(mkdirat(it_root, CBFS_STORE_DIR, 0700), 0);
    it_touch(CBFS_STORE_DIR "/" CBFS_STORE_CONF, 10);
    cr_assert_eq(fstatat(it_root, CBFS_STORE_DIR "/" CBFS_STORE_CONF, &st, 0), 0);
    for (unsigned spare = 0; spare <= 6; spare++) {
        const rlim_t old = cbfs_td_nofile_squeeze(spare);
        const int err = ex_lookup_err(st.st_ino, ".");
        cbfs_td_nofile_restore(old);
        cr_assert(err == ESTALE || err == EMFILE, "%u spare fds: got %s", spare,
                  err ? strerror(err) : "the file");
    }
    cr_assert_eq(ex_lookup_err(st.st_ino, "."), ESTALE);
}

/* Idle fds of the cache make room for the checks (cbfs_fs_openat): the
 * answer is then the right one, not an error. (The first open that fails
 * relieves the cache for all that follow, so this holds with a raw openat in
 * the directory check too: it guards against refusing too much.) */
Test(export, idle_cached_fds_make_room_for_the_hidden_check)
{
    struct cbfs_inode *held[4];
    char name[8];
    struct stat st;
    cr_assert_eq(mkdirat(it_root, CBFS_STORE_DIR, 0700), 0);
    it_touch(CBFS_STORE_DIR "/" CBFS_STORE_CONF, 10);
    cr_assert_eq(fstatat(it_root, CBFS_STORE_DIR "/" CBFS_STORE_CONF, &st, 0), 0);
    for (int i = 0; i < 4; i++) {
        snprintf(name, sizeof name, "f%d", i);
        it_touch(name, 1);
        held[i] = it_lookup(it_fs->root, name, NULL); /* its O_PATH fd stays cached, idle */
    }
    const rlim_t old = cbfs_td_nofile_squeeze(0);
    const int err = ex_lookup_err(st.st_ino, ".");
    cbfs_td_nofile_restore(old);
    cr_assert_eq(err, ESTALE, "got %s", err ? strerror(err) : "the file");
    for (int i = 0; i < 4; i++) cbfs_inode_unref(it_fs, held[i], 1);
}

/* ---- what is held for the kernel's times SETATTR after a change (flushhold.h) ---- */

/* A file held for the SETATTR is stat'ed, as that SETATTR's reply does, with
 * the fd cache emptied and no descriptor to spare; once the hold is dropped
 * its fds must be opened again, and cannot be. */
Test(inode, a_held_file_needs_no_new_fd_until_its_setattr_drops_it)
{
    struct cbfs_flush_hold h;
    struct stat st;
    it_write_compressed("c", 100000, IT_BLOCK_SIZE);
    struct cbfs_inode *const c = it_lookup(it_fs->root, "c", NULL);
    it_fs->writeback = true;
    cr_assert_eq(cbfs_flush_hold_take(it_fs, c, &h), 0);
    cr_assert_eq(h.inode, c);
    cr_assert(h.idx, "the sidecar is held too");
    cbfs_flush_hold_keep(it_fs, &h, true);
    cr_assert_eq(it_fs->nflush_holds, 1);
    cr_assert_eq(c->refs, 2, "the kernel's and the hold's");
    (void)cbfs_fdcache_relieve(&it_fs->fdc, EMFILE);
    rlim_t old = cbfs_td_nofile_squeeze(0);
    int err = cbfs_inode_stat(it_fs, c, &st);
    cbfs_td_nofile_restore(old);
    cr_assert_eq(err, 0, "held: %s", strerror(err));
    cr_assert_eq(st.st_size, 100000);
    cbfs_flush_hold_drop(it_fs, c);
    cr_assert_eq(it_fs->nflush_holds, 0);
    cr_assert_eq(c->refs, 1);
    if (it_fs->fdc.handles) { /* else every fd is kept for the object's life anyway */
        (void)cbfs_fdcache_relieve(&it_fs->fdc, EMFILE);
        old = cbfs_td_nofile_squeeze(0);
        err = cbfs_inode_stat(it_fs, c, &st);
        cbfs_td_nofile_restore(old);
        cr_assert_eq(err, EMFILE, "dropped: %s", err ? strerror(err) : "the stat");
    }
    cbfs_inode_unref(it_fs, c, 1);
}

/* The kernel sends no such SETATTR without the writeback cache, nor for what
 * is not a regular file; and a change that failed gets none either. */
Test(inode, nothing_is_held_where_no_setattr_comes)
{
    struct cbfs_flush_hold h;
    it_touch("a", 10);
    cr_assert_eq(mkdirat(it_root, "d", 0755), 0);
    struct cbfs_inode *const a = it_lookup(it_fs->root, "a", NULL);
    struct cbfs_inode *const d = it_lookup(it_fs->root, "d", NULL);
    cr_assert_eq(cbfs_flush_hold_take(it_fs, a, &h), 0);
    cr_assert_null(h.inode, "no writeback cache");
    it_fs->writeback = true;
    cr_assert_eq(cbfs_flush_hold_take(it_fs, d, &h), 0);
    cr_assert_null(h.inode, "a directory");
    cr_assert_eq(cbfs_flush_hold_take(it_fs, a, &h), 0);
    cr_assert_eq(h.inode, a);
    cbfs_flush_hold_keep(it_fs, &h, false);
    cr_assert_eq(it_fs->nflush_holds, 0);
    cr_assert_eq(a->refs, 1);
    cbfs_inode_unref(it_fs, a, 1);
    cbfs_inode_unref(it_fs, d, 1);
}

/* By name, where the object keeps another name after its removal: only then
 * is it still there for the SETATTR (and only then does the kernel hold it). */
Test(inode, a_name_is_held_only_where_another_name_is_left)
{
    struct cbfs_flush_hold h;
    it_touch("a", 10);
    struct cbfs_inode *const a = it_lookup(it_fs->root, "a", NULL);
    it_fs->writeback = true;
    cr_assert_eq(cbfs_flush_hold_take_name(it_fs, it_root, "a", true, &h), 0);
    cr_assert_null(h.inode, "its last name");
    cr_assert_eq(cbfs_flush_hold_take_name(it_fs, it_root, "nothing", false, &h), 0);
    cr_assert_null(h.inode, "no such name");
    cr_assert_eq(linkat(it_root, "a", it_root, "b", 0), 0);
    cr_assert_eq(cbfs_flush_hold_take_name(it_fs, it_root, "a", true, &h), 0);
    cr_assert_eq(h.inode, a, "b is left");
    cbfs_flush_hold_keep(it_fs, &h, true);
    cbfs_flush_hold_drop_all(it_fs);
    cr_assert_eq(a->refs, 1);
    cbfs_inode_unref(it_fs, a, 1);
}

/* At most CBFS_FLUSH_HOLDS at once: the oldest gives way. */
Test(inode, the_oldest_hold_gives_way)
{
    struct cbfs_inode *f[CBFS_FLUSH_HOLDS + 1];
    struct cbfs_flush_hold h;
    char name[8];
    it_fs->writeback = true;
    for (int i = 0; i <= CBFS_FLUSH_HOLDS; i++) {
        snprintf(name, sizeof name, "f%d", i);
        it_touch(name, 1);
        f[i] = it_lookup(it_fs->root, name, NULL);
        cr_assert_eq(cbfs_flush_hold_take(it_fs, f[i], &h), 0);
        cbfs_flush_hold_keep(it_fs, &h, true);
    }
    cr_assert_eq(it_fs->nflush_holds, CBFS_FLUSH_HOLDS);
    cr_assert_eq(f[0]->refs, 1, "the first gave way");
    cr_assert_eq(f[CBFS_FLUSH_HOLDS]->refs, 2);
    cbfs_flush_hold_drop(it_fs, f[0]); /* not held: nothing else goes */
    cr_assert_eq(it_fs->nflush_holds, CBFS_FLUSH_HOLDS);
    cbfs_flush_hold_drop_all(it_fs);
    for (int i = 0; i <= CBFS_FLUSH_HOLDS; i++) {
        cr_assert_eq(f[i]->refs, 1);
        cbfs_inode_unref(it_fs, f[i], 1);
    }
}

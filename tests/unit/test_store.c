/* Store tests: the layout rules (hidden names in the root and below, sidecar
 * names and their length limits, the frame envelope that makes a file a cbfs
 * file), the metadata under .cbfs/ (lock, store.conf) and the directory
 * listing (cbfs_dir_read_names) that the upgrade and the tools walk with. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <sys/xattr.h>
#include <unistd.h>

#include "cbfs/format.h"
#include "cbfs/store.h"
#include "cbfs/util.h"

static char st_dir[64];

static void st_setup(void)
{
    snprintf(st_dir, sizeof st_dir, "/tmp/cbfs-store-XXXXXX");
    cr_assert_not_null(mkdtemp(st_dir));
}

static void st_teardown(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", st_dir);
    cr_assert_eq(system(cmd), 0);
}

/* st_dir/rel, in a static buffer (one at a time). */
static const char *st_path(const char *rel)
{
    static char p[256];
    snprintf(p, sizeof p, "%s/%s", st_dir, rel);
    return p;
}

static void st_write(const char *rel, const void *buf, size_t len)
{
    const int fd = open(st_path(rel), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    cr_assert(fd >= 0, "create %s: %s", rel, strerror(errno));
    cr_assert_eq(cbfs_pwrite_full(fd, buf, len, 0), CBFS_OK);
    close(fd);
}

/* Renames st_dir/from to st_dir/to. */
static void st_move(const char *from, const char *to)
{
    char f[256];
    snprintf(f, sizeof f, "%s", st_path(from));
    cr_assert_eq(rename(f, st_path(to)), 0, "rename %s %s: %s", from, to, strerror(errno));
}

/* ---- layout: names ---- */

#define L1 CBFS_LAYOUT_SUFFIX
#define L2 CBFS_LAYOUT_INDEXDIR

Test(store_layout, metadata_dir_hidden_only_in_the_root)
{
    cr_assert(cbfs_store_name_hidden(L1, ".cbfs", true));
    cr_assert_not(cbfs_store_name_hidden(L1, ".cbfs", false));
    cr_assert_not(cbfs_store_name_hidden(L1, ".cbfsx", true));
    cr_assert_not(cbfs_store_name_hidden(L1, "cbfs", true));
    cr_assert_not(cbfs_store_name_hidden(L1, ".cbf", true));
    cr_assert_not(cbfs_store_name_hidden(L1, "", true));
    cr_assert_not(cbfs_store_name_hidden(L1, "data.csv", true));
    cr_assert_not(cbfs_store_name_hidden(L1, "data.csv", false));
}

Test(store_layout, metadata_dir_hidden_only_in_the_root_layout2)
{
    cr_assert(cbfs_store_name_hidden(L2, ".cbfs", true));
    cr_assert_not(cbfs_store_name_hidden(L2, ".cbfs", false));
    cr_assert_not(cbfs_store_name_hidden(L2, "data.csv", true));
}

Test(store_layout, layout2_reserves_only_the_index_dir)
{
    cr_assert(cbfs_store_name_hidden(L2, CBFS_INDEX_DIR, true));
    cr_assert(cbfs_store_name_hidden(L2, CBFS_INDEX_DIR, false));
    static const char *const users[] = {"a.cbfsidx", "x.cbfsidx.cbfsidx", "..cbfsidx",
                                        ".cbfsidx.", ".cbfsid", "cbfsidx"};
    for (size_t i = 0; i < sizeof users / sizeof users[0]; i++) {
        cr_assert_not(cbfs_store_name_hidden(L2, users[i], true), "%s", users[i]);
        cr_assert_not(cbfs_store_name_hidden(L2, users[i], false), "%s", users[i]);
    }
}

Test(store_layout, path_reserved_both_layouts)
{
    cr_assert(cbfs_store_path_reserved(L1, "/d/a.csv.cbfsidx"));
    cr_assert(cbfs_store_path_reserved(L1, "a.csv.cbfsidx"));
    cr_assert_not(cbfs_store_path_reserved(L1, "/d/a.csv"));
    cr_assert_not(cbfs_store_path_reserved(L1, "/.cbfsidx/a.csv")); /* layout 2's rule */
    cr_assert(cbfs_store_path_reserved(L2, "/d/.cbfsidx/a.csv"));
    cr_assert(cbfs_store_path_reserved(L2, ".cbfsidx/a.csv"));
    cr_assert(cbfs_store_path_reserved(L2, "/d/.cbfsidx"));
    cr_assert_not(cbfs_store_path_reserved(L2, "/d/a.csv.cbfsidx")); /* layout 1's rule */
    cr_assert_not(cbfs_store_path_reserved(L2, "/d/x.cbfsidx/a.csv"));
    cr_assert_not(cbfs_store_path_reserved(L2, "/d/.cbfsidxx/a.csv"));
    cr_assert_not(cbfs_store_path_reserved(L2, "/.cbfs/a.csv"));
    /* from the root, the store's own directory and what is in it */
    cr_assert(cbfs_store_path_reserved(L2, ".cbfs/store.conf"));
    cr_assert(cbfs_store_path_reserved(L1, ".cbfs"));
    cr_assert_not(cbfs_store_path_reserved(L2, "d/.cbfs/a.csv"));
    cr_assert_not(cbfs_store_path_reserved(L2, ".cbfsx/a.csv"));
}

Test(store_layout, name_check_both_layouts)
{
    char n255[NAME_MAX + 2], n248[CBFS_STORE_NAME_MAX + 2];
    memset(n255, 'n', sizeof n255);
    n255[NAME_MAX] = '\0';
    memset(n248, 'n', sizeof n248);
    n248[CBFS_STORE_NAME_MAX + 1] = '\0';
    cr_assert_eq(cbfs_store_name_max(L1), 247);
    cr_assert_eq(cbfs_store_name_max(L2), NAME_MAX);
    cr_assert_eq(cbfs_store_name_check(L2, n255, false, true), CBFS_OK);
    cr_assert_eq(cbfs_store_name_check(L1, n248, false, true), CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_name_check(L2, n248, false, false), CBFS_OK);
    n255[NAME_MAX] = 'n';
    n255[NAME_MAX + 1] = '\0';
    cr_assert_eq(cbfs_store_name_check(L2, n255, false, false), CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_name_check(L2, n255, false, true), CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_name_check(L2, CBFS_INDEX_DIR, false, true), CBFS_E_PERM);
    cr_assert_eq(cbfs_store_name_check(L2, CBFS_INDEX_DIR, false, false), CBFS_E_NOENT);
    cr_assert_eq(cbfs_store_name_check(L1, "a.cbfsidx", false, true), CBFS_E_PERM);
    cr_assert_eq(cbfs_store_name_check(L2, "a.cbfsidx", false, true), CBFS_OK);
    cr_assert_eq(cbfs_store_name_check(L1, ".cbfs", true, false), CBFS_E_NOENT);
    cr_assert_eq(cbfs_store_name_check(L2, ".cbfs", false, true), CBFS_OK);
}

Test(store_layout, sidecar_path_both_layouts)
{
    char buf[CBFS_STORE_SIDECAR_PATH_MAX], name[NAME_MAX + 2];
    cr_assert_eq(cbfs_store_sidecar_path(L1, "f", buf, sizeof buf), CBFS_OK);
    cr_assert_str_eq(buf, "f" CBFS_INDEX_SUFFIX);
    cr_assert_eq(cbfs_store_sidecar_path(L2, "f", buf, sizeof buf), CBFS_OK);
    cr_assert_str_eq(buf, CBFS_INDEX_DIR "/f");
    cr_assert_eq(cbfs_store_sidecar_path(L2, "f", buf, sizeof CBFS_INDEX_DIR + 1),
                 CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_sidecar_path(L2, "f", buf, sizeof CBFS_INDEX_DIR + 2), CBFS_OK);
    memset(name, 'n', sizeof name);
    name[NAME_MAX] = '\0';
    cr_assert_eq(cbfs_store_sidecar_path(L2, name, buf, sizeof buf), CBFS_OK);
    cr_assert_eq(strlen(buf), sizeof CBFS_INDEX_DIR + NAME_MAX);
    cr_assert_eq(cbfs_store_sidecar_path(L1, name, buf, sizeof buf), CBFS_E_NAMETOOLONG);
    name[NAME_MAX] = 'n';
    name[NAME_MAX + 1] = '\0';
    cr_assert_eq(cbfs_store_sidecar_path(L2, name, buf, sizeof buf), CBFS_E_NAMETOOLONG);
}

Test(store_layout, sidecar_dir_made_on_demand, .init = st_setup, .fini = st_teardown)
{
    const int dfd = open(st_dir, O_PATH | O_DIRECTORY);
    cr_assert(dfd >= 0);
    struct stat st;
    cr_assert_eq(cbfs_store_sidecar_dir(L1, dfd), CBFS_OK);
    cr_assert_neq(stat(st_path(CBFS_INDEX_DIR), &st), 0, "layout 1 makes no index directory");
    cr_assert_eq(cbfs_store_sidecar_dir(L2, dfd), CBFS_OK);
    cr_assert_eq(stat(st_path(CBFS_INDEX_DIR), &st), 0);
    cr_assert(S_ISDIR(st.st_mode));
    cr_assert_eq(st.st_mode & 07777, CBFS_INDEX_DIR_MODE);
    cr_assert_eq(cbfs_store_sidecar_dir(L2, dfd), CBFS_OK, "already there");
    close(dfd);
}

Test(store_layout, rmdir_takes_a_stale_index_dir, .init = st_setup, .fini = st_teardown)
{
    const int dfd = open(st_dir, O_PATH | O_DIRECTORY);
    cr_assert(dfd >= 0);
    cr_assert_eq(mkdir(st_path("d"), 0755), 0);
    cr_assert_eq(mkdir(st_path("d/" CBFS_INDEX_DIR), 0700), 0);
    st_write("d/" CBFS_INDEX_DIR "/gone", "x", 1);
    cr_assert_eq(cbfs_store_rmdir(L1, dfd, "d"), CBFS_E_NOTEMPTY, "layout 1: as before");
    st_write("d/kept", "x", 1);
    cr_assert_eq(cbfs_store_rmdir(L2, dfd, "d"), CBFS_E_NOTEMPTY, "a real entry");
    cr_assert_eq(unlink(st_path("d/kept")), 0);
    cr_assert_eq(cbfs_store_rmdir(L2, dfd, "d"), CBFS_OK);
    struct stat st;
    cr_assert_neq(stat(st_path("d"), &st), 0);
    close(dfd);
}

Test(store_layout, sidecar_names_hidden_everywhere)
{
    static const char *const sidecars[] = {"a.cbfsidx", ".cbfsidx", "x.cbfsidx.cbfsidx",
                                           "..cbfsidx", ".cbfs.cbfsidx"};
    for (size_t i = 0; i < sizeof sidecars / sizeof sidecars[0]; i++) {
        cr_assert(cbfs_store_is_sidecar_name(sidecars[i]), "%s", sidecars[i]);
        cr_assert(cbfs_store_name_hidden(L1, sidecars[i], true), "%s", sidecars[i]);
        cr_assert(cbfs_store_name_hidden(L1, sidecars[i], false), "%s", sidecars[i]);
    }
    static const char *const others[] = {"cbfsidx", "a.cbfsid",  "a.cbfsidx.bak", "a.CBFSIDX",
                                         "a.cbfsid x", "a.cbfsidx ", "",          ".cbfs"};
    for (size_t i = 0; i < sizeof others / sizeof others[0]; i++) {
        cr_assert_not(cbfs_store_is_sidecar_name(others[i]), "%s", others[i]);
        cr_assert_not(cbfs_store_name_hidden(L1, others[i], false), "%s", others[i]);
    }
}

Test(store_layout, sidecar_name_and_back)
{
    char buf[NAME_MAX + 1], data[NAME_MAX + 1];
    cr_assert_eq(cbfs_store_sidecar_name("base.tar", buf, sizeof buf), CBFS_OK);
    cr_assert_str_eq(buf, "base.tar" CBFS_INDEX_SUFFIX);
    cr_assert(cbfs_store_is_sidecar_name(buf));
    cr_assert_eq(cbfs_store_data_name(buf, data, sizeof data), CBFS_OK);
    cr_assert_str_eq(data, "base.tar");
    /* ".cbfsidx" is a sidecar name whose data file is the empty name: none. */
    cr_assert_eq(cbfs_store_data_name(".cbfsidx", data, sizeof data), CBFS_OK);
    cr_assert_str_eq(data, "");
    cr_assert_eq(cbfs_store_data_name("base.tar", data, sizeof data), CBFS_E_INVAL);
    cr_assert_eq(cbfs_store_data_name("base.tar.cbfsidx", data, 8), CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_data_name("base.tar.cbfsidx", data, 9), CBFS_OK);
}

Test(store_layout, sidecar_name_length_limits)
{
    cr_assert_eq(CBFS_STORE_NAME_MAX + strlen(CBFS_INDEX_SUFFIX), NAME_MAX);
    char name[NAME_MAX + 2], buf[NAME_MAX + 16];
    memset(name, 'n', sizeof name);
    name[CBFS_STORE_NAME_MAX] = '\0';
    cr_assert_eq(cbfs_store_sidecar_name(name, buf, sizeof buf), CBFS_OK);
    cr_assert_eq(strlen(buf), NAME_MAX);
    /* The same name into a buffer one byte too small, then exactly right. */
    memset(buf, 'x', sizeof buf);
    cr_assert_eq(cbfs_store_sidecar_name(name, buf, NAME_MAX), CBFS_E_NAMETOOLONG);
    cr_assert_eq(buf[0], 'x', "nothing is written on failure");
    cr_assert_eq(cbfs_store_sidecar_name(name, buf, NAME_MAX + 1), CBFS_OK);
    /* One byte longer: the sidecar would not fit a directory entry. */
    name[CBFS_STORE_NAME_MAX] = 'n';
    name[CBFS_STORE_NAME_MAX + 1] = '\0';
    cr_assert_eq(cbfs_store_sidecar_name(name, buf, sizeof buf), CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_sidecar_name("a", buf, 2), CBFS_E_NAMETOOLONG);
    cr_assert_eq(cbfs_store_sidecar_name("a", buf, 10), CBFS_OK);
    cr_assert_eq(cbfs_store_sidecar_name("a", buf, 9), CBFS_E_NAMETOOLONG);
}

/* ---- layout: file classification ---- */

static void st_frame(uint8_t out[CBFS_FRAME_HDR_SIZE])
{
    const struct cbfs_frame_hdr h = {.version = 1, .codec = 1, .block = 0, .generation = 1,
                                     .ulen = 100, .plen = 40, .hash = 7, .file_id = 9};
    cbfs_frame_hdr_encode(&h, out);
}

Test(store_layout, frame_envelope_is_the_first_twelve_bytes)
{
    uint8_t h[CBFS_FRAME_HDR_SIZE];
    st_frame(h);
    cr_assert(cbfs_frame_is_envelope(h, sizeof h));
    cr_assert(cbfs_frame_is_envelope(h, CBFS_FRAME_ENVELOPE_SIZE));
    cr_assert_not(cbfs_frame_is_envelope(h, CBFS_FRAME_ENVELOPE_SIZE - 1));
    cr_assert_not(cbfs_frame_is_envelope(h, 0));
    for (size_t i = 0; i < CBFS_FRAME_ENVELOPE_SIZE; i++) {
        uint8_t c[CBFS_FRAME_HDR_SIZE];
        memcpy(c, h, sizeof c);
        c[i] ^= 0x10;
        cr_assert_not(cbfs_frame_is_envelope(c, sizeof c), "byte %zu flipped", i);
        cr_assert_eq(cbfs_frame_hdr_decode(c, &(struct cbfs_frame_hdr){0}), CBFS_E_BAD_MAGIC);
    }
    /* Past the envelope a damaged header is still a cbfs frame (corrupt, not foreign). */
    h[CBFS_FRAME_ENVELOPE_SIZE] ^= 0xFF;
    cr_assert(cbfs_frame_is_envelope(h, sizeof h));
    cr_assert_eq(cbfs_frame_hdr_decode(h, &(struct cbfs_frame_hdr){0}), CBFS_E_CORRUPT);
    /* Another skippable frame (zstd's nibble 0) is not a cbfs frame. */
    st_frame(h);
    cbfs_put_le32(h, 0x184D2A50u);
    cr_assert_not(cbfs_frame_is_envelope(h, sizeof h));
}

Test(store_layout, file_with_envelope, .init = st_setup, .fini = st_teardown)
{
    uint8_t h[CBFS_FRAME_HDR_SIZE];
    st_frame(h);
    static const struct {
        const char *name;
        size_t len;
        bool framed;
    } cases[] = {{"whole", CBFS_FRAME_HDR_SIZE, true},
                 {"envelope", CBFS_FRAME_ENVELOPE_SIZE, true},
                 {"short", CBFS_FRAME_ENVELOPE_SIZE - 1, false},
                 {"empty", 0, false}};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        st_write(cases[i].name, h, cases[i].len);
        const int fd = open(st_path(cases[i].name), O_RDONLY);
        cr_assert(fd >= 0);
        bool framed = !cases[i].framed;
        cr_assert_eq(cbfs_store_has_frame_envelope(fd, &framed, NULL), CBFS_OK);
        cr_assert_eq(framed, cases[i].framed, "%s", cases[i].name);
        close(fd);
    }
    st_write("plain", "hello, world, plain text", 24);
    const int fd = open(st_path("plain"), O_RDONLY);
    bool framed = true;
    cr_assert_eq(cbfs_store_has_frame_envelope(fd, &framed, NULL), CBFS_OK);
    cr_assert_not(framed);
    close(fd);
    /* An error is reported, not taken for "plain". */
    cr_assert_eq(cbfs_store_has_frame_envelope(-1, &framed, NULL), CBFS_E_BADF);
    cr_assert_not(framed);
    const int dir = open(st_dir, O_RDONLY | O_DIRECTORY);
    cr_assert_neq(cbfs_store_has_frame_envelope(dir, &framed, NULL), CBFS_OK);
    close(dir);
}

/* What a write would make the start of a plain file, from the file's bytes
 * and the write's: whole, in pieces, past the end (a hole reads as zeros). */
Test(store_layout, plain_write_may_not_start_a_file_with_an_envelope, .init = st_setup,
     .fini = st_teardown)
{
    uint8_t h[CBFS_FRAME_HDR_SIZE];
    st_frame(h);
    const size_t E = CBFS_FRAME_ENVELOPE_SIZE;
    st_write("f", "", 0);
    int fd = open(st_path("f"), O_RDWR);
    cr_assert(fd >= 0);
    cr_assert_eq(cbfs_store_check_plain_write(fd, h, sizeof h, 0), CBFS_E_PLAIN_FRAMED);
    cr_assert_eq(cbfs_store_check_plain_write(fd, h, E, 0), CBFS_E_PLAIN_FRAMED);
    cr_assert_eq(cbfs_store_check_plain_write(fd, h, E - 1, 0), CBFS_OK, "too short to be one");
    cr_assert_eq(cbfs_store_check_plain_write(fd, h, sizeof h, 1), CBFS_OK, "not at the start");
    cr_assert_eq(cbfs_store_check_plain_write(fd, h + E, 4, E), CBFS_OK, "past the envelope");
    /* the tail first, then the piece that completes it */
    cr_assert_eq(pwrite(fd, h + 3, sizeof h - 3, 3), (ssize_t)(sizeof h - 3));
    cr_assert_eq(cbfs_store_check_plain_write(fd, h, 3, 0), CBFS_E_PLAIN_FRAMED);
    cr_assert_eq(cbfs_store_check_plain_write(fd, "abc", 3, 0), CBFS_OK);
    /* the head first: the rest of it comes later, into a short file */
    cr_assert_eq(ftruncate(fd, 0), 0);
    cr_assert_eq(pwrite(fd, h, 4, 0), 4);
    cr_assert_eq(cbfs_store_check_plain_write(fd, h + 4, E - 4, 4), CBFS_E_PLAIN_FRAMED);
    cr_assert_eq(cbfs_store_check_plain_write(fd, h + 4, E - 5, 4), CBFS_OK, "still short");
    /* a write past the end leaves zeros between: never an envelope */
    cr_assert_eq(cbfs_store_check_plain_write(fd, h + 8, 4, 8), CBFS_OK);
    close(fd);
    /* an error is reported, not taken for "allowed" */
    cr_assert_eq(cbfs_store_check_plain_write(-1, h + 1, 4, 1), CBFS_E_BADF);
}

Test(store_layout, store_root_holds_a_metadata_directory, .init = st_setup, .fini = st_teardown)
{
    const int fd = open(st_dir, O_PATH | O_DIRECTORY);
    cr_assert(fd >= 0);
    cr_assert_not(cbfs_store_is_root(fd));
    st_write(".cbfs", "", 0); /* a file of that name is not the metadata directory */
    cr_assert_not(cbfs_store_is_root(fd));
    cr_assert_eq(unlink(st_path(".cbfs")), 0);
    cr_assert_eq(mkdir(st_path("elsewhere"), 0700), 0);
    cr_assert_eq(symlink("elsewhere", st_path(".cbfs")), 0);
    cr_assert_not(cbfs_store_is_root(fd), "a symlink is not followed");
    cr_assert_eq(unlink(st_path(".cbfs")), 0);
    cr_assert_eq(mkdir(st_path(".cbfs"), 0700), 0);
    cr_assert(cbfs_store_is_root(fd));
    close(fd);
}

/* ---- layout: a sidecar's owner, mode and ACL ---- */

/* A POSIX ACL xattr value (version 2; entries tag, perm, id, sorted by tag):
 * user::rw- user:65534:r-- group::r-- mask::r-- other::---, as mode 0640. */
static const uint8_t st_acl[] = {
    2,    0, 0, 0,                         /* version */
    0x01, 0, 6, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_USER_OBJ rw- */
    0x02, 0, 4, 0, 0xfe, 0xff, 0,    0,    /* ACL_USER 65534 r-- */
    0x04, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_GROUP_OBJ r-- */
    0x10, 0, 4, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_MASK r-- */
    0x20, 0, 0, 0, 0xff, 0xff, 0xff, 0xff, /* ACL_OTHER --- */
};

Test(store_layout, sidecar_gets_the_data_files_mode_and_acl, .init = st_setup, .fini = st_teardown)
{
    uint8_t got[sizeof st_acl + 8];
    struct stat st;
    st_write("f", "data", 4);
    st_write("f" CBFS_INDEX_SUFFIX, "", 0);
    cr_assert_eq(chmod(st_path("f"), 02750), 0);
    const int dfd = open(st_path("f"), O_PATH);
    const int ifd = open(st_path("f" CBFS_INDEX_SUFFIX), O_PATH);
    cr_assert(dfd >= 0 && ifd >= 0);
    cr_assert_eq(cbfs_store_sidecar_match(dfd, ifd, NULL), CBFS_OK);
    cr_assert_eq(stat(st_path("f" CBFS_INDEX_SUFFIX), &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0750, "mode %o: the data file's, without set-id bits",
                 st.st_mode & 07777);

    if (setxattr(st_path("f"), CBFS_STORE_XATTR_ACL, st_acl, sizeof st_acl, 0) == -1 &&
        errno == ENOTSUP)
        cr_skip_test("/tmp keeps no POSIX ACLs");
    cr_assert_eq(cbfs_store_sidecar_match(dfd, ifd, NULL), CBFS_OK);
    const char *const side = st_path("f" CBFS_INDEX_SUFFIX);
    const ssize_t n = getxattr(side, CBFS_STORE_XATTR_ACL, got, sizeof got);
    cr_assert_eq(n, (ssize_t)sizeof st_acl, "the sidecar's ACL: %zd bytes", n);
    cr_assert_arr_eq(got, st_acl, sizeof st_acl);
    cr_assert_eq(stat(st_path("f" CBFS_INDEX_SUFFIX), &st), 0);
    cr_assert_eq(st.st_mode & 07777, 0640, "mode %o: the ACL's owner, mask and other",
                 st.st_mode & 07777);

    /* the data file's ACL goes: so does the sidecar's */
    cr_assert_eq(removexattr(st_path("f"), CBFS_STORE_XATTR_ACL), 0);
    cr_assert_eq(cbfs_store_sidecar_match(dfd, ifd, NULL), CBFS_OK);
    cr_assert_eq(getxattr(st_path("f" CBFS_INDEX_SUFFIX), CBFS_STORE_XATTR_ACL, got, sizeof got),
                 -1);
    cr_assert_eq(errno, ENODATA);
    close(dfd);
    close(ifd);
}

/* ---- metadata: open, lock ---- */

Test(store_meta, open_wants_an_existing_directory, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store *st = NULL;
    cr_assert_eq(cbfs_store_open(st_path("missing"), &st), CBFS_E_NOENT);
    st_write("file", "x", 1);
    cr_assert_eq(cbfs_store_open(st_path("file"), &st), CBFS_E_INVAL);
    cr_assert_eq(cbfs_store_open(st_dir, &st), CBFS_OK);
    cr_assert(cbfs_store_fd(st) >= 0);
    struct stat sb;
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR), &sb), -1, "open creates nothing");
    cbfs_store_close(st);
    cbfs_store_close(NULL);
}

Test(store_meta, one_lock_holder_and_its_pid, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store *a, *b;
    pid_t holder = -1;
    cr_assert_eq(cbfs_store_open(st_dir, &a), CBFS_OK);
    cr_assert_eq(cbfs_store_lock(a, false, &holder), CBFS_OK);
    cr_assert_eq(holder, 0);
    struct stat sb;
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR "/" CBFS_STORE_LOCK), &sb), 0);
    cr_assert_eq(cbfs_store_open(st_dir, &b), CBFS_OK);
    cr_assert_eq(cbfs_store_lock(b, false, &holder), CBFS_E_BUSY);
    cr_assert_eq(holder, getpid());
    cbfs_store_close(b);
    /* a created .cbfs/ and wrote no store.conf: close leaves no trace. */
    cbfs_store_close(a);
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR), &sb), -1);
    cr_assert_eq(errno, ENOENT);
}

/* The check's lock (fsck without --repair) creates and writes nothing, and
 * still keeps a daemon's lock out and is kept out by one. */
Test(store_meta, lock_existing_writes_nothing, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store *a, *b;
    pid_t holder = -1;
    struct stat sb;
    cr_assert_eq(cbfs_store_open(st_dir, &a), CBFS_OK);
    cr_assert_eq(cbfs_store_lock_existing(a, &holder), CBFS_OK, "a tree without .cbfs/");
    cr_assert_eq(holder, 0);
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR), &sb), -1, "the check made .cbfs/");
    cr_assert_eq(cbfs_store_open(st_dir, &b), CBFS_OK);
    cr_assert_eq(cbfs_store_lock(b, false, &holder), CBFS_E_BUSY, "the root's flock is held");
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR), &sb), -1, "the refused lock made .cbfs/");
    cbfs_store_close(a);
    /* a lock file with a pid, as a mount leaves it: the check takes it and
     * leaves it as it was, and a daemon's lock keeps the check out */
    cr_assert_eq(mkdir(st_path(CBFS_STORE_DIR), 0700), 0);
    st_write(CBFS_STORE_DIR "/" CBFS_STORE_LOCK, "", 0);
    cr_assert_eq(cbfs_store_lock(b, false, &holder), CBFS_OK);
    cr_assert_eq(cbfs_store_open(st_dir, &a), CBFS_OK);
    cr_assert_eq(cbfs_store_lock_existing(a, &holder), CBFS_E_BUSY);
    cr_assert_eq(holder, getpid());
    cbfs_store_close(a);
    cbfs_store_close(b);
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR "/" CBFS_STORE_LOCK), &sb), 0);
    const struct timespec before = sb.st_mtim;
    cr_assert_eq(cbfs_store_open(st_dir, &a), CBFS_OK);
    cr_assert_eq(cbfs_store_lock_existing(a, &holder), CBFS_OK);
    cr_assert_eq(cbfs_store_open(st_dir, &b), CBFS_OK);
    cr_assert_eq(cbfs_store_lock(b, false, &holder), CBFS_E_BUSY);
    cbfs_store_close(b);
    cbfs_store_close(a);
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR "/" CBFS_STORE_LOCK), &sb), 0);
    cr_assert_eq(sb.st_size, 0, "the check wrote its pid");
    cr_assert(sb.st_mtim.tv_sec == before.tv_sec && sb.st_mtim.tv_nsec == before.tv_nsec,
              "the check changed the lock file's mtime");
}

Test(store_meta, metadata_that_is_not_a_directory, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store *st;
    pid_t holder;
    st_write(CBFS_STORE_DIR, "", 0);
    cr_assert_eq(cbfs_store_open(st_dir, &st), CBFS_OK);
    cr_assert_eq(cbfs_store_lock(st, false, &holder), CBFS_E_INVAL);
    cbfs_store_close(st);
}

/* ---- metadata: store.conf ---- */

/* Locks st_dir (kept in *st) and reads its store.conf. */
static cbfs_err st_read(struct cbfs_store **st, struct cbfs_store_conf *conf, bool *found,
                        char *msg, size_t cap)
{
    pid_t holder;
    cr_assert_eq(cbfs_store_open(st_dir, st), CBFS_OK);
    cr_assert_eq(cbfs_store_lock(*st, false, &holder), CBFS_OK);
    return cbfs_store_read_conf(*st, conf, found, msg, cap);
}

Test(store_meta, conf_roundtrip, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store *st;
    struct cbfs_store_conf conf, back;
    bool found = true;
    char msg[256];
    cr_assert_eq(st_read(&st, &conf, &found, msg, sizeof msg), CBFS_OK);
    cr_assert_not(found, "no store.conf yet");
    const struct cbfs_codec_ops *none;
    cr_assert_eq(cbfs_codec_by_name("none", &none), CBFS_OK);
    cbfs_store_conf_init(&conf, none, 0, 64u << 10);
    cr_assert_eq(conf.format_version, CBFS_STORE_CONF_VERSION);
    cr_assert_eq(strlen(conf.uuid), 32);
    cr_assert_eq(cbfs_store_write_conf(st, &conf), CBFS_OK);
    cbfs_store_close(st);

    cr_assert_eq(st_read(&st, &back, &found, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert(found);
    cr_assert_str_eq(back.uuid, conf.uuid);
    cr_assert_str_eq(back.created, conf.created);
    cr_assert_eq(back.codec, none);
    cr_assert_eq(back.level, 0);
    cr_assert_eq(back.block_size, 64u << 10);
    cr_assert_eq(back.layout, CBFS_LAYOUT_NEWEST, "a new store gets the newest layout");
    cbfs_store_close(st);
    struct stat sb;
    cr_assert_eq(stat(st_path(CBFS_STORE_DIR "/" CBFS_STORE_CONF), &sb), 0, "kept after close");
}

/* Writes text as store.conf, reads it back: @return the error, msg filled. */
static cbfs_err st_conf(const char *text, struct cbfs_store_conf *conf, char *msg, size_t cap)
{
    cr_assert_eq(mkdir(st_path(CBFS_STORE_DIR), 0700), 0);
    st_write(CBFS_STORE_DIR "/" CBFS_STORE_CONF, text, strlen(text));
    struct cbfs_store *st;
    bool found;
    const cbfs_err e = st_read(&st, conf, &found, msg, cap);
    cr_assert_eq(found, e == CBFS_OK);
    cbfs_store_close(st);
    return e;
}

/* A store.conf written by hand as mount.cbfs advises for a layout-1 store
 * that lost its own ("format_version=1") has no uuid and no creation time;
 * written back (fsck --upgrade does) it must read back, not as "uuid=" that
 * the reader refuses (helper-46's fuzz_store_conf). */
Test(store_meta, conf_without_uuid_writes_back_readable, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store_conf conf, back;
    char msg[256];
    cr_assert_eq(st_conf("format_version=1\n", &conf, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_str_empty(conf.uuid);
    struct cbfs_store *st;
    bool found;
    cr_assert_eq(st_read(&st, &conf, &found, msg, sizeof msg), CBFS_OK, "%s", msg);
    conf.layout = CBFS_LAYOUT_INDEXDIR; /* as the upgrade writes it */
    cr_assert_eq(cbfs_store_write_conf(st, &conf), CBFS_OK);
    cr_assert_eq(cbfs_store_read_conf(st, &back, &found, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert(found);
    cr_assert_eq(back.layout, CBFS_LAYOUT_INDEXDIR);
    cr_assert_str_empty(back.uuid);
    cr_assert_eq(back.block_size, conf.block_size);
    cbfs_store_close(st);
}

Test(store_meta, conf_defaults_and_unknown_keys, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store_conf conf;
    char msg[256];
    cr_assert_eq(st_conf("# comment\n\nformat_version = 1\nfuture_key=whatever\n", &conf, msg,
                         sizeof msg),
                 CBFS_OK, "%s", msg);
    cr_assert_eq(conf.block_size, CBFS_BLOCK_DEFAULT);
    cr_assert_not_null(conf.codec);
    cr_assert_eq(conf.level, conf.codec->default_level);
    cr_assert_eq(conf.layout, CBFS_LAYOUT_SUFFIX, "no layout key: a store of before layouts");
}

Test(store_meta, conf_layout_key, .init = st_setup, .fini = st_teardown)
{
    struct cbfs_store_conf conf;
    char msg[256];
    cr_assert_eq(st_conf("format_version=1\nlayout=2\n", &conf, msg, sizeof msg), CBFS_OK);
    cr_assert_eq(conf.layout, CBFS_LAYOUT_INDEXDIR);
    const int root = open(st_dir, O_PATH | O_DIRECTORY);
    static struct cbfs_store_layout lay;
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.layout, CBFS_LAYOUT_INDEXDIR, "read without the lock, as the tool does");
    cr_assert_eq(lay.state, CBFS_LAYOUT_CONF);
    st_write(CBFS_STORE_DIR "/" CBFS_STORE_CONF, "format_version=1\nlayout=3\n", 26);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_E_VERSION);
    cr_assert(strstr(msg, "upgrade cbfs"), "%s", msg);
    st_write(CBFS_STORE_DIR "/" CBFS_STORE_CONF, "format_version=1\nlayout=x\n", 26);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_E_INVAL);
    close(root);
}

/* The layout rules of FORMAT.md 1 as the daemon and the tools both take them
 * (cbfs_store_layout_of): a tree without store.conf is the newest layout
 * unless it holds sidecars of layout 1; one whose store.conf says layout 1
 * and that holds an index directory is an upgrade cut short. */
Test(store_meta, layout_of_a_tree_with_and_without_store_conf, .init = st_setup,
     .fini = st_teardown)
{
    char msg[256];
    static struct cbfs_store_layout lay;
    const int root = open(st_dir, O_PATH | O_DIRECTORY);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "no .cbfs/: %s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_NO_CONF);
    cr_assert_eq(lay.layout, CBFS_LAYOUT_NEWEST);
    cr_assert_not(lay.index_dir_seen);
    /* a store of layout 2 that lost its .cbfs/: still layout 2 */
    cr_assert_eq(mkdir(st_path("d"), 0755), 0);
    cr_assert_eq(mkdir(st_path("d/" CBFS_INDEX_DIR), 0711), 0);
    st_write("d/a", "x", 1);
    st_write("d/" CBFS_INDEX_DIR "/a", "y", 1);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_NO_CONF);
    cr_assert_eq(lay.layout, CBFS_LAYOUT_INDEXDIR);
    cr_assert(lay.index_dir_seen, "the walk for layout-1 sidecars tells index directories too");
    /* one directory alone (a file given outside any store): d holds an index
     * directory, the root does not */
    const int d = open(st_path("d"), O_PATH | O_DIRECTORY);
    cr_assert_eq(cbfs_store_dir_layout(d), CBFS_LAYOUT_INDEXDIR);
    cr_assert_eq(cbfs_store_dir_layout(root), CBFS_LAYOUT_SUFFIX);
    close(d);
    /* a sidecar of layout 1 beside its file: a layout-1 store that lost it */
    st_write("b", "x", 1);
    st_write("b" CBFS_INDEX_SUFFIX, "y", 1);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_LOST_CONF);
    cr_assert_eq(lay.layout, CBFS_LAYOUT_SUFFIX, "its files read as layout 1's");
    cr_assert_str_eq(lay.example, "b" CBFS_INDEX_SUFFIX);
    bool found = false, index_dir = false;
    char example[PATH_MAX];
    cr_assert_eq(cbfs_store_find_layout1(root, &found, NULL, example, sizeof example), CBFS_OK);
    cr_assert(found);
    /* a tree of layout 2 where the sidecar of layout 1 sits deeper: both facts */
    st_move("b", "d/b");
    st_move("b" CBFS_INDEX_SUFFIX, "d/e");
    cr_assert_eq(mkdir(st_path("e"), 0755), 0);
    cr_assert_eq(mkdir(st_path("e/" CBFS_INDEX_DIR), 0711), 0);
    cr_assert_eq(mkdir(st_path("e/f"), 0755), 0);
    st_write("e/f/g", "x", 1);
    st_write("e/f/g" CBFS_INDEX_SUFFIX, "y", 1);
    cr_assert_eq(cbfs_store_find_layout1(root, &found, &index_dir, example, sizeof example),
                 CBFS_OK);
    cr_assert(found);
    cr_assert_str_eq(example, "e/f/g" CBFS_INDEX_SUFFIX);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_LOST_CONF);
    cr_assert_eq(unlink(st_path("e/f/g" CBFS_INDEX_SUFFIX)), 0);
    cr_assert_eq(cbfs_store_find_layout1(root, &found, &index_dir, example, sizeof example),
                 CBFS_OK);
    cr_assert_not(found, "%s", example);
    cr_assert(index_dir, "d/ and e/ hold index directories");
    st_move("d/e", "b" CBFS_INDEX_SUFFIX);
    st_move("d/b", "b");
    cr_assert_eq(unlink(st_path("e/f/g")), 0);
    cr_assert_eq(rmdir(st_path("e/f")), 0);
    cr_assert_eq(rmdir(st_path("e/" CBFS_INDEX_DIR)), 0);
    cr_assert_eq(rmdir(st_path("e")), 0);
    char why[2 * PATH_MAX + 512];
    cbfs_store_layout_refusal(&lay, "/s", why, sizeof why);
    cr_assert(strstr(why, "lost its store.conf") && strstr(why, "format_version=1"), "%s", why);
    /* store.conf says layout 1, and d/.cbfsidx/ is there: cut short */
    cr_assert_eq(mkdir(st_path(CBFS_STORE_DIR), 0700), 0);
    st_write(CBFS_STORE_DIR "/" CBFS_STORE_CONF, "format_version=1\n", 17);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_CUT_SHORT);
    cr_assert_eq(lay.layout, CBFS_LAYOUT_SUFFIX);
    cr_assert_str_eq(lay.example, "d/" CBFS_INDEX_DIR);
    cr_assert(lay.index_dir_seen);
    cbfs_store_layout_refusal(&lay, "/s", why, sizeof why);
    cr_assert(strstr(why, "cut short") && strstr(why, "fsck --upgrade"), "%s", why);
    /* store.conf says layout 2: what it says */
    st_write(CBFS_STORE_DIR "/" CBFS_STORE_CONF, "format_version=1\nlayout=2\n", 26);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_CONF);
    cr_assert_eq(lay.layout, CBFS_LAYOUT_INDEXDIR);
    cr_assert_not(lay.index_dir_seen, "no probe where store.conf says layout 2");
    close(root);
}

/* A tree in no store that holds stores (/srv of /srv/db1 and /srv/db2): the
 * layout probe of the tree does not look into them, their sidecars are their
 * own stores'; below a store root .cbfs is an ordinary name, and the probe
 * of a store goes on into it. */
Test(store_meta, probe_of_a_tree_in_no_store_leaves_the_stores_in_it, .init = st_setup,
     .fini = st_teardown)
{
    char msg[256];
    static struct cbfs_store_layout lay;
    /* a layout-1 store and a layout-2 store below the tree */
    cr_assert_eq(mkdir(st_path("s1"), 0755), 0);
    cr_assert_eq(mkdir(st_path("s1/" CBFS_STORE_DIR), 0700), 0);
    st_write("s1/" CBFS_STORE_DIR "/" CBFS_STORE_CONF, "format_version=1\n", 17);
    st_write("s1/a", "x", 1);
    st_write("s1/a" CBFS_INDEX_SUFFIX, "y", 1);
    cr_assert_eq(mkdir(st_path("s2"), 0755), 0);
    cr_assert_eq(mkdir(st_path("s2/" CBFS_STORE_DIR), 0700), 0);
    cr_assert_eq(mkdir(st_path("s2/" CBFS_INDEX_DIR), 0711), 0);
    st_write("s2/b", "x", 1);
    st_write("s2/" CBFS_INDEX_DIR "/b", "y", 1);
    const int root = open(st_dir, O_PATH | O_DIRECTORY);
    const int s1 = open(st_path("s1"), O_PATH | O_DIRECTORY);
    cr_assert(cbfs_store_nested_root(true, s1));
    cr_assert_not(cbfs_store_nested_root(false, s1), "below a store root: an ordinary name");
    cr_assert_not(cbfs_store_nested_root(true, root));
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_NO_CONF, "s1's sidecar is s1's: %s", lay.example);
    cr_assert_not(lay.index_dir_seen, "s2's index directory is s2's");
    /* a symlink named .cbfs makes no store: looked into */
    st_move("s1/" CBFS_STORE_DIR, "s1.meta");
    cr_assert_eq(symlink("../s1.meta", st_path("s1/" CBFS_STORE_DIR)), 0);
    cr_assert_not(cbfs_store_nested_root(true, s1));
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_LOST_CONF);
    cr_assert_str_eq(lay.example, "s1/a" CBFS_INDEX_SUFFIX);
    cr_assert_eq(unlink(st_path("s1/" CBFS_STORE_DIR)), 0);
    st_move("s1.meta", "s1/" CBFS_STORE_DIR);
    /* the tree a store itself (.cbfs/ at its root, no store.conf: what a first
     * mount probes): s1/.cbfs is a directory of its files, s1's sidecar its own */
    cr_assert_eq(mkdir(st_path(CBFS_STORE_DIR), 0700), 0);
    cr_assert_eq(cbfs_store_read_layout(root, &lay, msg, sizeof msg), CBFS_OK, "%s", msg);
    cr_assert_eq(lay.state, CBFS_LAYOUT_LOST_CONF);
    cr_assert_str_eq(lay.example, "s1/a" CBFS_INDEX_SUFFIX);
    close(s1);
    close(root);
}

Test(store_meta, conf_refusals, .init = st_setup, .fini = st_teardown)
{
    static const struct {
        const char *text;
        cbfs_err err;
        const char *says; /* in the message */
    } cases[] = {
        {"codec=none\n", CBFS_E_INVAL, "format_version"},
        {"format_version=x\n", CBFS_E_INVAL, "format_version"},
        {"format_version=+1\n", CBFS_E_INVAL, "format_version"}, /* strtoul took it */
        {"format_version=0\n", CBFS_E_INVAL, "format_version"},
        {"format_version=2\n", CBFS_E_VERSION, "upgrade"},
        {"format_version=1\njunk\n", CBFS_E_INVAL, "key=value"},
        {"format_version=1\nuuid=XYZ\n", CBFS_E_INVAL, "uuid"},
        {"format_version=1\ncodec=zip\n", CBFS_E_CODEC_UNKNOWN, "zip"},
        {"format_version=1\ncodec=none\nlevel=3\n", CBFS_E_CODEC_LEVEL, "level"},
        {"format_version=1\nlevel=abc\n", CBFS_E_INVAL, "level"},
        {"format_version=1\nblock_size=3000\n", CBFS_E_INVAL, "block_size"},
        {"format_version=1\nblock_size=32M\n", CBFS_E_INVAL, "block_size"},
        /* a key given twice: the last one won */
        {"format_version=1\nlayout=2\nlayout=1\n", CBFS_E_INVAL, "layout is given twice"},
        {"format_version=1\ncodec=zstd\nlevel=5\ncodec=lz4\n", CBFS_E_INVAL,
         "codec is given twice"},
        {"format_version=1\nformat_version=1\n", CBFS_E_INVAL, "given twice"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        struct cbfs_store_conf conf;
        char msg[256] = "";
        cr_assert_eq(st_conf(cases[i].text, &conf, msg, sizeof msg), cases[i].err, "%s: %s",
                     cases[i].text, msg);
        cr_assert_not_null(strstr(msg, cases[i].says), "%s: message '%s'", cases[i].text, msg);
        char cmd[128];
        snprintf(cmd, sizeof cmd, "rm -rf %s/%s", st_dir, CBFS_STORE_DIR);
        cr_assert_eq(system(cmd), 0);
    }
}

/* ---- directory names (the tools' walk and the layout upgrade) ---- */

Test(util_dir, names_sorted_without_dots, .init = st_setup, .fini = st_teardown)
{
    char **names;
    size_t n;
    cr_assert_eq(cbfs_dir_read_names(open(st_dir, O_RDONLY | O_DIRECTORY), &names, &n), CBFS_OK);
    cr_assert_null(names);
    cr_assert_eq(n, 0);
    st_write("b", "x", 1);
    st_write("a", "x", 1);
    cr_assert_eq(mkdir(st_path("c"), 0755), 0);
    cr_assert_eq(cbfs_dir_read_names(open(st_dir, O_RDONLY | O_DIRECTORY), &names, &n), CBFS_OK);
    cr_assert_eq(n, 3);
    cr_assert_str_eq(names[0], "a");
    cr_assert_str_eq(names[1], "b");
    cr_assert_str_eq(names[2], "c");
    cbfs_dir_free_names(names, n);
    cbfs_dir_free_names(NULL, 0);
    cr_assert_eq(cbfs_dir_read_names(-1, &names, &n), CBFS_E_BADF);
    cr_assert_null(names);
}

/* The one unescape of /proc/self/mounts and mountinfo fields (the tools' walk
 * and the daemon's read-ahead both read mount points there). */
Test(util_mounts, unescapes_octal_escapes_only)
{
    char s[] = "/a\\040b\\011c\\012d\\134e\\0f\\999";
    cbfs_mounts_unescape(s);
    cr_assert_str_eq(s, "/a b\tc\nd\\e\\0f\\999");
}

/* The one reader of a mountinfo line (the tools' mapping of a path to its
 * store, the daemon's read-ahead): optional tags before "-", escapes in the
 * paths and the source, a FUSE mount's super options. */
Test(util_mounts, mountinfo_line_fields)
{
    char line[] = "36 35 0:52 /sub\\040dir /mnt/my\\040backups rw,nosuid shared:17 master:1 - "
                  "fuse.cbfs /srv/st\\040ore rw,user_id=1000,group_id=1000\n";
    struct cbfs_mountinfo m;
    cr_assert(cbfs_mountinfo_parse(line, &m));
    cr_assert_str_eq(m.dev, "0:52");
    cr_assert_str_eq(m.root, "/sub dir");
    cr_assert_str_eq(m.point, "/mnt/my backups");
    cr_assert_str_eq(m.type, "fuse.cbfs");
    cr_assert_str_eq(m.source, "/srv/st ore");
    cr_assert_str_eq(m.super, "rw,user_id=1000,group_id=1000");
    char bare[] = "20 1 8:1 / / rw - ext4 /dev/sda1 rw";
    cr_assert(cbfs_mountinfo_parse(bare, &m));
    cr_assert_str_eq(m.point, "/");
    cr_assert_str_eq(m.type, "ext4");
    char cut[] = "20 1 8:1 / / rw shared:1 - ext4";
    cr_assert(!cbfs_mountinfo_parse(cut, &m));
}

/* A sidecar path never leads out through a symlink at the index directory:
 * whoever can write the store could otherwise point it at /etc. */
Test(store_layout, sidecar_path_does_not_follow_an_index_dir_symlink, .init = st_setup,
     .fini = st_teardown)
{
    struct stat st;
    char target[128];
    snprintf(target, sizeof target, "%s/elsewhere", st_dir);
    cr_assert_eq(mkdir(target, 0755), 0);
    st_write("elsewhere/f", "x", 1);
    cr_assert_eq(symlink(target, st_path(CBFS_INDEX_DIR)), 0);
    const int dfd = open(st_dir, O_PATH | O_DIRECTORY);
    cr_assert(dfd >= 0);
    cr_assert_eq(cbfs_store_openat(dfd, CBFS_INDEX_DIR "/f", O_RDONLY | O_NOFOLLOW, 0), -1);
    cr_assert_eq(errno, ENOTDIR);
    cr_assert_eq(cbfs_store_fstatat(dfd, CBFS_INDEX_DIR "/f", &st, AT_SYMLINK_NOFOLLOW), -1);
    cr_assert_eq(cbfs_store_unlinkat(dfd, CBFS_INDEX_DIR "/f", 0), -1);
    cr_assert_eq(cbfs_store_renameat2(dfd, CBFS_INDEX_DIR "/f", dfd, "g", 0), -1);
    cr_assert_eq(stat(st_path("elsewhere/f"), &st), 0, "the file outside stays");
    cr_assert_eq(cbfs_store_sidecar_dir(L2, dfd), CBFS_E_EXIST);
    /* a real index directory works as before */
    cr_assert_eq(unlink(st_path(CBFS_INDEX_DIR)), 0);
    cr_assert_eq(cbfs_store_sidecar_dir(L2, dfd), CBFS_OK);
    const int fd = cbfs_store_openat(dfd, CBFS_INDEX_DIR "/n", O_RDWR | O_CREAT | O_EXCL, 0600);
    cr_assert(fd >= 0);
    close(fd);
    cr_assert_eq(cbfs_store_renameat2(dfd, CBFS_INDEX_DIR "/n", dfd, CBFS_INDEX_DIR "/m", 0), 0);
    cr_assert_eq(cbfs_store_fstatat(dfd, CBFS_INDEX_DIR "/m", &st, 0), 0);
    cr_assert_eq(cbfs_store_unlinkat(dfd, CBFS_INDEX_DIR "/m", 0), 0);
    close(dfd);
}

/* An existing sidecar is matched only if it has the owner it should. */
Test(store_layout, sidecar_match_refuses_a_foreign_owner, .init = st_setup, .fini = st_teardown)
{
    if (geteuid() != 0) /* cbfs not run as root takes a sidecar of its own uid as well */
        cr_skip_test("needs root: the test's files are the caller's");
    struct stat was;
    st_write("f", "data", 4);
    st_write("f" CBFS_INDEX_SUFFIX, "", 0);
    const int dfd = open(st_path("f"), O_PATH);
    const int ifd = open(st_path("f" CBFS_INDEX_SUFFIX), O_PATH);
    cr_assert(dfd >= 0 && ifd >= 0);
    cr_assert_eq(fstat(dfd, &was), 0);
    cr_assert_eq(cbfs_store_sidecar_match(dfd, ifd, &was), CBFS_OK);
    was.st_uid += 1; /* the data file's owner was someone else */
    cr_assert_eq(cbfs_store_sidecar_match(dfd, ifd, &was), CBFS_E_PERM);
    close(dfd);
    close(ifd);
}

/* ---- who holds a store's lock (cbfs_store_holder_describe) ---- */

/* A child that sleeps under the argv given (argv[0] as it likes): what
 * /proc/PID/cmdline shows for a daemon started as fstab's fuse.cbfs, or for
 * another program. The caller kills and reaps it. */
static pid_t holder_child(char *const argv[])
{
    const pid_t pid = fork();
    cr_assert(pid >= 0);
    if (pid == 0) {
        execv("/bin/sleep", argv);
        _exit(127);
    }
    /* until the exec has replaced the cmdline */
    char path[64], buf[64];
    snprintf(path, sizeof path, "/proc/%ld/cmdline", (long)pid);
    for (int i = 0; i < 500; i++) {
        const int fd = open(path, O_RDONLY);
        const ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
        if (fd >= 0) close(fd);
        if (n > 0 && strncmp(buf, argv[0], (size_t)n) == 0) break;
        usleep(10000);
    }
    return pid;
}

static void holder_reap(pid_t pid)
{
    kill(pid, SIGKILL);
    waitpid(pid, NULL, 0);
}

Test(store_lock, holder_described)
{
    char buf[128], want[128];
    char *const fuse_argv[] = {"/sbin/mount.fuse.cbfs", "30", NULL};
    pid_t pid = holder_child(fuse_argv);
    cr_expect_eq(cbfs_store_holder_describe(pid, buf, sizeof buf), CBFS_HOLDER_DAEMON);
    snprintf(want, sizeof want, "a cbfs daemon (pid %ld)", (long)pid);
    cr_expect_str_eq(buf, want);
    holder_reap(pid);

    char *const other_argv[] = {"sleep", "30", NULL};
    pid = holder_child(other_argv);
    cr_expect_eq(cbfs_store_holder_describe(pid, buf, sizeof buf), CBFS_HOLDER_UNKNOWN);
    snprintf(want, sizeof want, "process %ld (sleep)", (long)pid);
    cr_expect_str_eq(buf, want);
    holder_reap(pid);
    /* gone now: no cmdline to read, so no name is guessed */
    cr_expect_eq(cbfs_store_holder_describe(pid, buf, sizeof buf), CBFS_HOLDER_UNKNOWN);
    snprintf(want, sizeof want, "process %ld", (long)pid);
    cr_expect_str_eq(buf, want);

    cr_expect_eq(cbfs_store_holder_describe(0, buf, sizeof buf), CBFS_HOLDER_UNKNOWN);
    cr_expect_str_eq(buf, "an unknown process");
}

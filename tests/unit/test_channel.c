/* Channel hook tests (src/fuse/channel.c): which requests ask the daemon to
 * kill suid/sgid, read from each opcode's own argument layout. */
#include <criterion/criterion.h>
#include <linux/fuse.h>
#include <sys/stat.h>

#include "fuse/channel.h"

/* FUSE_CREATE's argument for mode, with the kernel's open_flags. */
static bool ch_create_kills(uint32_t mode, uint32_t open_flags)
{
    const struct fuse_create_in c = {
        .flags = 01101 /* O_WRONLY|O_CREAT|O_TRUNC */,
        .mode = S_IFREG | mode,
        .umask = 022,
        .open_flags = open_flags,
    };
    return cbfs_chan_kill_requested(FUSE_CREATE, &c, sizeof c);
}

Test(channel, create_reads_its_own_open_flags)
{
    /* mode's low bit sits where fuse_open_in has open_flags: an odd mode
     * without the flag asks nothing, an even one with it asks a kill */
    cr_assert_not(ch_create_kills(0755, 0));
    cr_assert(ch_create_kills(0644, FUSE_OPEN_KILL_SUIDGID));
    cr_assert(ch_create_kills(0755, FUSE_OPEN_KILL_SUIDGID));
    cr_assert_not(ch_create_kills(0644, 0));
}

Test(channel, create_too_short_asks_nothing)
{
    const struct fuse_create_in c = {.open_flags = FUSE_OPEN_KILL_SUIDGID};
    cr_assert_not(cbfs_chan_kill_requested(FUSE_CREATE, &c, sizeof c - 1));
}

Test(channel, open_write_setattr)
{
    const struct fuse_open_in o = {.flags = 1, .open_flags = FUSE_OPEN_KILL_SUIDGID};
    cr_assert(cbfs_chan_kill_requested(FUSE_OPEN, &o, sizeof o));
    const struct fuse_open_in o0 = {.flags = 1};
    cr_assert_not(cbfs_chan_kill_requested(FUSE_OPEN, &o0, sizeof o0));
    const struct fuse_write_in w = {.write_flags = FUSE_WRITE_KILL_SUIDGID};
    cr_assert(cbfs_chan_kill_requested(FUSE_WRITE, &w, sizeof w));
    cr_assert_not(cbfs_chan_kill_requested(FUSE_WRITE, &w, sizeof w - 1));
    const struct fuse_setattr_in s = {.valid = FATTR_KILL_SUIDGID};
    cr_assert(cbfs_chan_kill_requested(FUSE_SETATTR, &s, sizeof s));
    cr_assert_not(cbfs_chan_kill_requested(FUSE_READ, &s, sizeof s));
}

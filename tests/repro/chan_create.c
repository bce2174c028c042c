/* Repro: cbfs_chan_read parses FUSE_CREATE's open_flags at fuse_open_in's
 * offset (4, which in fuse_create_in is `mode`) instead of 12.
 * Build: see run_chan_create.sh */
#include "../../src/fuse/channel.c"

#include <stdio.h>
#include <sys/stat.h>

static bool kill_for_create(uint32_t mode, uint32_t open_flags)
{
    struct {
        struct fuse_in_header h;
        struct fuse_create_in c;
        char name[8];
    } req = {0};
    req.h.len = sizeof req;
    req.h.opcode = FUSE_CREATE;
    req.h.unique = 42;
    req.c.flags = 01101; /* O_WRONLY|O_CREAT|O_TRUNC */
    req.c.mode = S_IFREG | mode;
    req.c.umask = 022;
    req.c.open_flags = open_flags;
    memcpy(req.name, "f", 2);
    int p[2];
    if (pipe(p) != 0 || write(p[1], &req, sizeof req) != (ssize_t)sizeof req) return false;
    char buf[4096];
    (void)cbfs_chan_read(p[0], buf, sizeof buf, NULL);
    close(p[0]);
    close(p[1]);
    return cbfs_chan_take_kill();
}

int main(void)
{
    /* root (CAP_FSETID) creating with 0755: the kernel sets no kill flag */
    const bool a = kill_for_create(0755, 0);
    /* an unprivileged O_TRUNC create with 0644: the kernel asks for a kill */
    const bool b = kill_for_create(0644, FUSE_OPEN_KILL_SUIDGID);
    printf("mode 0755, open_flags 0                    -> kill=%d (expected 0)\n", a);
    printf("mode 0644, open_flags FUSE_OPEN_KILL_SUIDGID -> kill=%d (expected 1)\n", b);
    return (a == false && b == true) ? 0 : 1;
}

"""Shared pieces of the mount tests that make the store fail and check who hears of it
(t_enospc_read_*, t_enospc_shared_close, t_plain_wb_error_close): filling the store's
file system, and the outcome of a row of calls as one line the shell test matches.
Import with PYTHONPATH=$CBFS_TOOLS."""
import os


def fill_store(fs, leave):
    """Fills the file system at fs (a test's small tmpfs) up to `leave` bytes with
    fs/filler, allocated, not written."""
    st = os.statvfs(fs)
    with open(os.path.join(fs, "filler"), "wb") as f:
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - leave)


def outcomes(calls):
    """Runs each (name, fn) of calls in turn and says how each ended: "fsync ok, close No
    space left on device". A failure does not stop the row: the next call is what the test
    asks about (did the close hear what the fsync did not?)."""
    res = []
    for name, fn in calls:
        try:
            fn()
            res.append(name + " ok")
        except OSError as e:
            res.append(name + " " + e.strerror)
    return ", ".join(res)

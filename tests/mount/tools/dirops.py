#!/usr/bin/env python3
"""dirops: directory operations whose answers and resulting tree are compared
between a local file system (ext4) and a cbfs mount.
  dirops.py ops DIR    runs the operations in DIR, one line per answer
  dirops.py state DIR  prints the tree below DIR (type, mode, nlink, size,
                       owner, sha256 of files), one line per entry, sorted
Renames of directories holding many files (compressed ones' sidecars
follow), over an empty directory, RENAME_EXCHANGE of two directories,
RENAME_NOREPLACE, rmdir of a directory that lists as empty and of one that
does not, mkdir below setgid and sticky directories."""
import ctypes, errno, hashlib, os, stat, sys

_libc = ctypes.CDLL(None, use_errno=True)
_libc.renameat2.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p,
                            ctypes.c_uint]
AT_FDCWD = -100
RENAME_NOREPLACE, RENAME_EXCHANGE = 1, 2


def renameat2(a, b, flags):
    if _libc.renameat2(AT_FDCWD, a.encode(), AT_FDCWD, b.encode(), flags) != 0:
        e = ctypes.get_errno()
        raise OSError(e, os.strerror(e), a)


def answer(what, fn, *args):
    try:
        fn(*args)
        print('%s: ok' % what)
    except OSError as e:
        print('%s: %s' % (what, errno.errorcode.get(e.errno, e.errno)))


def fill(d, n, tag):
    os.makedirs(d, exist_ok=True)
    for i in range(n):
        with open(os.path.join(d, 'f%03d' % i), 'wb') as f:
            f.write((b'%s %d ' % (tag.encode(), i)) * (1 + i * 37 % 2000))


def as_user(uid, gid, fn, *args):
    """fn in a child running as uid:gid; the answer's errno comes back"""
    pid = os.fork()
    if pid == 0:
        code = 0
        try:
            os.setgroups([])
            os.setgid(gid)
            os.setuid(uid)
            fn(*args)
        except OSError as e:
            code = e.errno
        except BaseException:
            code = 255
        os._exit(code)
    _, status = os.waitpid(pid, 0)
    code = os.waitstatus_to_exitcode(status)
    if code:
        raise OSError(code, os.strerror(code))


def ops():
    # renames of directories full of (compressed) files
    fill('a', 150, 'a')
    fill('a/sub', 30, 'asub')
    answer('rename a b', os.rename, 'a', 'b')
    answer('stat a after rename', os.stat, 'a')
    os.mkdir('empty')
    answer('rename b over empty', os.rename, 'b', 'empty')
    answer('rename empty back to b', os.rename, 'empty', 'b')
    fill('full', 3, 'full')
    answer('rename b over non-empty full', os.rename, 'b', 'full')
    os.mkdir('e2')
    answer('rename noreplace b e2', renameat2, 'b', 'e2', RENAME_NOREPLACE)
    answer('rename b into its own subdir', os.rename, 'b', 'b/sub/x')
    answer('rename file over empty dir', os.rename, 'full/f000', 'e2')
    answer('rename dir over file', os.rename, 'e2', 'full/f001')
    # a directory emptied through the mount (layout 2 keeps its .cbfsidx/)
    fill('emptied', 5, 'emptied')
    for n in sorted(os.listdir('emptied')):
        os.unlink(os.path.join('emptied', n))
    answer('listdir emptied', lambda: print(' entries', sorted(os.listdir('emptied'))))
    fill('src2', 4, 'src2')
    answer('rename src2 over emptied', os.rename, 'src2', 'emptied')
    fill('emptied2', 5, 'emptied2')
    for n in sorted(os.listdir('emptied2')):
        os.unlink(os.path.join('emptied2', n))
    answer('rmdir emptied2', os.rmdir, 'emptied2')
    answer('rmdir full (not empty)', os.rmdir, 'full')
    os.mkdir('onlysub')
    os.mkdir('onlysub/s')
    answer('rmdir onlysub (a subdir)', os.rmdir, 'onlysub')
    # a file renamed out leaves an empty directory
    fill('leave', 2, 'leave')
    os.rename('leave/f000', 'left0')
    os.rename('leave/f001', 'b/left1')
    answer('rmdir leave', os.rmdir, 'leave')
    # RENAME_EXCHANGE of two directories full of files, of a dir and a file
    fill('x', 40, 'x')
    fill('y', 7, 'y')
    fill('y/deep', 3, 'ydeep')
    answer('exchange x y', renameat2, 'x', 'y', RENAME_EXCHANGE)
    answer('exchange x/deep y/f000', renameat2, 'x/deep', 'y/f000', RENAME_EXCHANGE)
    answer('exchange x missing', renameat2, 'x', 'nothere', RENAME_EXCHANGE)
    # move a directory across directories, then back under another name
    os.mkdir('p')
    answer('rename x p/x', os.rename, 'x', 'p/x')
    answer('rename p/x q', os.rename, 'p/x', 'q')
    # a file open for writing while its directory is renamed
    os.mkdir('w')
    f = open('w/open', 'wb')
    f.write(b'first part ' * 50000)
    f.flush()
    answer('rename w w2 with a file open', os.rename, 'w', 'w2')
    f.write(b'second part ' * 50000)
    f.close()
    # names of the store's own, as directory names in a subdirectory
    answer('mkdir .cbfs in a subdir', os.mkdir, 'b/.cbfs')
    answer('rmdir . ', os.rmdir, 'b/.')
    # setgid and sticky
    os.mkdir('sg')
    os.chown('sg', 0, 4321)
    os.chmod('sg', 0o2775)
    os.mkdir('sg/child')
    with open('sg/file', 'wb') as f:
        f.write(b'sgid ' * 1000)
    os.mkdir('sg/child/grand', 0o755)
    os.mkdir('st')
    os.chmod('st', 0o1777)
    answer('nobody: mkdir st/nd', as_user, 65534, 65534, os.mkdir, 'st/nd')
    answer('nobody: create st/nf', as_user, 65534, 65534,
           lambda: open('st/nf', 'wb').write(b'nobody ' * 3000))
    answer('other: rmdir st/nd', as_user, 4000, 4000, os.rmdir, 'st/nd')
    answer('other: unlink st/nf', as_user, 4000, 4000, os.unlink, 'st/nf')
    answer('other: rename st/nf st/o', as_user, 4000, 4000, os.rename, 'st/nf', 'st/o')
    answer('other: rename st/nd st/o', as_user, 4000, 4000, os.rename, 'st/nd', 'st/o')
    answer('other: mkdir st/od', as_user, 4000, 4000, os.mkdir, 'st/od')
    answer('other: rename st/od over st/nd', as_user, 4000, 4000, os.rename, 'st/od', 'st/nd')
    answer('nobody: rename st/nd st/nd2', as_user, 65534, 65534, os.rename, 'st/nd', 'st/nd2')
    answer('nobody: rename st/nf st/nf2', as_user, 65534, 65534, os.rename, 'st/nf', 'st/nf2')
    answer('nobody: mkdir sg/nob', as_user, 65534, 65534, os.mkdir, 'sg/nob')
    os.chmod('sg', 0o2777)
    answer('nobody: mkdir sg/nob', as_user, 65534, 65534, os.mkdir, 'sg/nob')
    answer('nobody: mkdir sg/nob/x mode 2777', as_user, 65534, 65534, os.mkdir, 'sg/nob/x', 0o2777)
    answer('nobody: file sg/nob/f', as_user, 65534, 65534,
           lambda: open('sg/nob/f', 'wb').write(b'n' * 10000))
    answer('rename sg/child to top', os.rename, 'sg/child', 'sgchild')


def state(top):
    rows = []
    for dirpath, dirnames, filenames in os.walk(top):
        for n in dirnames + filenames:
            p = os.path.join(dirpath, n)
            st = os.lstat(p)
            rel = os.path.relpath(p, top)
            line = '%s %o nlink=%d %d:%d' % (rel, st.st_mode, st.st_nlink, st.st_uid, st.st_gid)
            if stat.S_ISREG(st.st_mode):
                line += ' size=%d sha=%s' % (st.st_size,
                                              hashlib.sha256(open(p, 'rb').read()).hexdigest()[:16])
            rows.append(line)
    st = os.lstat(top)
    rows.append('. nlink=%d' % st.st_nlink)
    print('\n'.join(sorted(rows)))


if __name__ == '__main__':
    os.chdir(sys.argv[2])
    os.umask(0o022)
    ops() if sys.argv[1] == 'ops' else state('.')

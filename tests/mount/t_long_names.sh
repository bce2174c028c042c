#!/usr/bin/env bash
# Store layout 2 (docs/FORMAT.md section 1): every name ext4 takes works through the
# mount. 255-byte names for compressed and plain files, directories, symlinks, fifos,
# hard links and renames between directories, across a remount; f_namemax 255; a
# 256-byte name is ENAMETOOLONG from every operation that takes a name; ".cbfsidx" is
# reserved in every directory while "x.cbfsidx" is a user's name; rmdir of a directory
# that holds only its index directory works. Ends with the golden listing of a small
# store (tests/golden/layout2.tree).
. "$(dirname "$0")/lib.sh"
CBFS=${CBFS_TOOL_BIN:-$(dirname "$CBFS_MOUNT_BIN")/cbfs}
[[ -x $CBFS ]] || fail "tool not built: $CBFS"

store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
grep -qx 'layout=2' "$store/.cbfs/store.conf" || fail "a new store is not in layout 2: $(cat "$store/.cbfs/store.conf")"
check_eq 255 "$(stat -f -c %l "$mnt")" "f_namemax of the mount"
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/data.csv" 7

n255=$(printf 'n%.0s' {1..255})
m255=$(printf 'm%.0s' {1..255})
n256=$(printf 'n%.0s' {1..256})

# ---- 255 bytes work
mkdir "$mnt/d1" "$mnt/d2" "$mnt/raw" "$mnt/$n255"
setfattr -n user.cbfs.codec -v none "$mnt/raw"
cp "$T/data.csv" "$mnt/d1/$n255"
cp "$T/data.csv" "$mnt/raw/$n255"
ln -s "d1/$n255" "$mnt/$m255"
mkfifo "$mnt/d1/$m255"
ln "$mnt/d1/$n255" "$mnt/d2/$m255"
[[ -f $store/d1/.cbfsidx/$n255 ]] || fail "no sidecar for a 255-byte compressed file"
[[ ! -e $store/raw/.cbfsidx ]] || fail "a plain file got a sidecar"
(($(stat -c %i "$store/d1/.cbfsidx/$n255") == $(stat -c %i "$store/d2/.cbfsidx/$m255"))) ||
    fail "hard links do not share one sidecar"
mv "$mnt/d1/$n255" "$mnt/d2/$n255"
[[ -f $store/d2/.cbfsidx/$n255 && ! -e $store/d1/.cbfsidx/$n255 ]] || fail "the sidecar did not follow the rename"
same_file "$T/data.csv" "$mnt/d2/$n255"
same_file "$T/data.csv" "$mnt/d2/$m255"
same_file "$T/data.csv" "$mnt/raw/$n255"
check_eq "$(tree_manifest "$mnt")" "$(tree_manifest "$mnt")" "listing is stable"
before=$(tree_manifest "$mnt")
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt"
check_eq "$before" "$(tree_manifest "$mnt")" "the tree after a remount"
check_eq "d2/$n255" "$(readlink "$mnt/$m255" | sed 's/^d1/d2/')" "the symlink's target"

# ---- 256 bytes: ENAMETOOLONG from every operation that takes a name
python3 - "$mnt" "$n256" "$n255" <<'PY' || fail "ENAMETOOLONG: $(cat "$T/last.err" 2>/dev/null)"
import errno, os, sys
mnt, bad, good = sys.argv[1], sys.argv[2], sys.argv[3]
B, G = os.path.join(mnt, "d2", bad), os.path.join(mnt, "d2", good)
ops = {
    "lookup": lambda: os.lstat(B),
    "create": lambda: os.open(B, os.O_CREAT | os.O_WRONLY, 0o644),
    "mknod": lambda: os.mkfifo(B),
    "mkdir": lambda: os.mkdir(B),
    "symlink": lambda: os.symlink("x", B),
    "link": lambda: os.link(G, B),
    "rename to": lambda: os.rename(G, B),
    "rename from": lambda: os.rename(B, os.path.join(mnt, "d2", "x")),
    "unlink": lambda: os.unlink(B),
    "rmdir": lambda: os.rmdir(B),
    "setxattr": lambda: os.setxattr(B, "user.x", b"1"),
}
for name, op in ops.items():
    try:
        op()
    except OSError as e:
        if e.errno != errno.ENAMETOOLONG:
            sys.exit(f"{name}: {os.strerror(e.errno)}, not ENAMETOOLONG")
    else:
        sys.exit(f"{name}: succeeded")
PY
[[ -z $(find "$store" -name "$n256") ]] || fail "a 256-byte name reached the store"

# ---- the reserved name and the freed suffix
echo user >"$mnt/d2/x.cbfsidx"
check_eq user "$(cat "$mnt/d2/x.cbfsidx")" "a user's x.cbfsidx"
mv "$mnt/d2/x.cbfsidx" "$mnt/d1/.cbfsidx.cbfsidx"
check_eq user "$(cat "$mnt/d1/.cbfsidx.cbfsidx")" "a user's .cbfsidx.cbfsidx"
for d in "$mnt" "$mnt/d2"; do
    check_fails touch "$d/.cbfsidx"
    grep -qi 'not permitted' "$T/last.err" || fail "create .cbfsidx: $(cat "$T/last.err")"
    check_fails mkdir "$d/.cbfsidx"
    check_fails stat "$d/.cbfsidx"
    grep -qi 'no such file' "$T/last.err" || fail "lookup .cbfsidx: $(cat "$T/last.err")"
    ! ls -a "$d" | grep -qx '.cbfsidx' || fail "$d lists .cbfsidx"
done
check_fails mv "$mnt/d1/.cbfsidx.cbfsidx" "$mnt/d1/.cbfsidx"

# ---- rmdir of a directory that looks empty: only its (empty or stale) index is left
mkdir "$mnt/e1" "$mnt/e2"
cp "$T/data.csv" "$mnt/e1/f"
cp "$T/data.csv" "$mnt/e2/f"
rm "$mnt/e1/f" "$mnt/e2/f"
[[ -d $store/e1/.cbfsidx ]] || note "the empty index directory was not kept"
: >"$store/e2/.cbfsidx/stale"
rmdir "$mnt/e1" "$mnt/e2" || fail "rmdir of directories holding only their index directory"
[[ ! -e $store/e1 && ! -e $store/e2 ]] || fail "rmdir left the directories in the store"
rmdir "$mnt/$n255"
mkdir "$mnt/e3"
echo x >"$mnt/e3/keep"
check_fails rmdir "$mnt/e3"
grep -qi 'not empty' "$T/last.err" || fail "rmdir of a non-empty directory: $(cat "$T/last.err")"
cbfs_umount "$mnt"

cbfs_tool
check "$CBFS" verify "$store"
check "$CBFS" fsck "$store"

# ---- golden: the store of a small tree made through the mount
g=$T/golden
mkdir -p "$g"
cbfs_mount "$g" "$mnt" codec=lz4
mkdir -p "$mnt/dir/sub" "$mnt/raw"
setfattr -n user.cbfs.codec -v none "$mnt/raw"
printf 'hello\n' >"$mnt/top"
printf 'nested\n' >"$mnt/dir/sub/deep"
printf 'plain\n' >"$mnt/raw/plain"
printf 'user\n' >"$mnt/dir/user.cbfsidx"
ln -s top "$mnt/link"
ln "$mnt/top" "$mnt/dir/hard"
mkfifo "$mnt/dir/fifo"
chmod 640 "$mnt/top"
cbfs_umount "$mnt"
listing=$(cd "$g" && find . -mindepth 1 -path ./.cbfs/lock -prune -o -printf '%P %y %m\n' | LC_ALL=C sort
    grep -E '^(format_version|layout)=' .cbfs/store.conf)
check_eq "$(grep -v '^#' "$CBFS_REPO/tests/golden/layout2.tree")" "$listing" \
    "the golden store tree (tests/golden/layout2.tree)"
pass

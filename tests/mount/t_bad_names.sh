#!/usr/bin/env bash
# Hostile names and paths through the mount: names at NAME_MAX (the mount reports
# f_namemax 247 because a data file's sidecar adds ".cbfsidx"), a 100-level directory
# tree longer than PATH_MAX, and symlinks in the store pointing out of it, which the
# daemon must never follow itself (the kernel resolves symlinks on the client side).
. "$(dirname "$0")/lib.sh"

store=$T/s/store mnt=$T/m/mnt
mkdir -p "$store" "$T/m"
cbfs_layout1_store "$store" # the rules of layout 1 (t_long_names: layout 2)
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
python3 "$CBFS_TOOLS/gendata.py" csv 200K "$T/data.csv" 61

# ---- NAME_MAX
check_eq 247 "$(stat -f -c %l "$mnt")" "f_namemax of the mount"
n247=$(printf 'n%.0s' {1..247})
n248=$(printf 'n%.0s' {1..248})
n255=$(printf 'n%.0s' {1..255})
cp "$T/data.csv" "$mnt/$n247" || fail "a 247-character name does not work"
same_file "$T/data.csv" "$mnt/$n247"
[[ -f $store/$n247 && -f $store/$n247.cbfsidx ]] || fail "247-character file or its sidecar missing in the store"
for nm in "$n248" "$n255"; do
    check_fails sh -c "cp '$T/data.csv' '$mnt/$nm'"
    grep -qi 'name too long' "$T/last.err" || fail "${#nm}-character name: expected ENAMETOOLONG: $(cat "$T/last.err")"
    check_fails mv "$mnt/$n247" "$mnt/$nm"   # rename onto a too-long name
    grep -qi 'name too long' "$T/last.err" || fail "rename to ${#nm} characters: expected ENAMETOOLONG: $(cat "$T/last.err")"
    [[ ! -e $store/$nm ]] || fail "a ${#nm}-character data file was left in the store"
done
# nothing half-created: the store holds exactly the 247-character pair
check_eq "$n247 $n247.cbfsidx" "$(ls "$store" | sort | tr '\n' ' ' | sed 's/ $//')" "store contents after the refused names"
same_file "$T/data.csv" "$mnt/$n247"
# directories and symlinks need no sidecar: whether 255 works for them or not, the result is clean
if mkdir "$mnt/$n255" 2>"$T/mkdir.err"; then
    [[ -d $store/$n255 ]] || fail "mkdir of a 255-character name succeeded but is not in the store"
    rmdir "$mnt/$n255"
else
    grep -qi 'name too long' "$T/mkdir.err" || fail "mkdir 255: $(cat "$T/mkdir.err")"
fi
rm "$mnt/$n247"
[[ -z $(ls -A "$store" | grep -v '^\.cbfs$' || true) ]] || fail "store not empty after rm: $(ls -A "$store")"
note "NAME_MAX: 247 works, 248 and 255 fail with ENAMETOOLONG, store clean"

# ---- a 100-level tree whose full path (about 5100 bytes) exceeds PATH_MAX
python3 - "$mnt" "$T/data.csv" <<'PY' || fail "deep tree through the mount failed"
import os, sys
mnt, src = sys.argv[1], sys.argv[2]
comp = "level-%03d-" + "d" * 40
data = open(src, "rb").read()
os.chdir(mnt)
for i in range(100):
    os.mkdir(comp % i)
    os.chdir(comp % i)
with open("bottom.csv", "wb") as f:
    f.write(data)
with open("bottom.csv", "rb") as f:
    assert f.read() == data, "deep file reads back wrong"
os.symlink("../" * 3 + "bottom-link-target", "rel-link")
print("  t_bad_names: deep tree: path length %d" % len(os.getcwd()))
PY
python3 - "$store" "$T/data.csv" <<'PY' || fail "the deep tree is not mirrored 1:1 in the store"
import os, sys
store, src = sys.argv[1], sys.argv[2]
comp = "level-%03d-" + "d" * 40
os.chdir(store)
for i in range(100):
    os.chdir(comp % i)
assert open("bottom.csv", "rb").read(4) == bytes.fromhex("5c2a4d18"), "bottom.csv is not a cbfs data file"
assert os.path.exists("bottom.csv.cbfsidx"), "no sidecar at the bottom"
assert os.readlink("rel-link") == "../../../bottom-link-target"
PY
# the daemon re-reads it after a remount (inodes rebuilt from scratch), then removes it
cbfs_umount "$mnt"
cbfs_mount "$store" "$mnt" codec=lz4,block_size=64K
python3 - "$mnt" "$T/data.csv" <<'PY' || fail "deep file after remount"
import os, sys
comp = "level-%03d-" + "d" * 40
os.chdir(sys.argv[1])
for i in range(100):
    os.chdir(comp % i)
assert open("bottom.csv", "rb").read() == open(sys.argv[2], "rb").read(), "deep file differs after remount"
PY
(cd "$mnt" && rm -rf "level-000-$(printf 'd%.0s' {1..40})") || fail "cannot remove the deep tree"
[[ -z $(ls -A "$store" | grep -v '^\.cbfs$' || true) ]] || fail "store not empty after removing the deep tree"
note "deep tree: 100 levels, path > PATH_MAX, written, read, remounted, removed"

# ---- symlinks pointing out of the store. The daemon serves STORE=$T/s/store, the client
# sees MNT=$T/m/mnt. A relative link "../secret/..." resolves to $T/s/secret on the
# daemon's side and to $T/m/secret on the client's: the two hold different bytes, so what
# comes back tells who followed the link. The kernel (client) must be the only one.
mkdir -p "$T/s/secret" "$T/m/secret"
echo "daemon-side secret" >"$T/s/secret/file"
echo "client-side view" >"$T/m/secret/file"
ln -s ../secret "$store/evil-dir"
ln -s ../secret/file "$store/evil-file"
ln -s /nonexistent/cbfs-test "$store/evil-abs"
drop_caches
[[ -L $mnt/evil-dir && -L $mnt/evil-file && -L $mnt/evil-abs ]] || fail "store symlinks are not shown as symlinks"
check_eq ../secret "$(readlink "$mnt/evil-dir")" "readlink evil-dir"
check_eq "client-side view" "$(cat "$mnt/evil-file")" "reading through evil-file (client-side resolution)"
check_eq "client-side view" "$(cat "$mnt/evil-dir/file")" "reading through evil-dir (client-side resolution)"
ls "$mnt" | grep -q secret && fail "the target directory shows up in the mount"
# writes and metadata changes through the links land on the client side, never in $T/s/secret
echo new >"$mnt/evil-dir/new" || fail "writing through evil-dir (client side) failed"
[[ -e $T/m/secret/new ]] || fail "the client-side write did not land in $T/m/secret"
[[ ! -e $T/s/secret/new ]] || fail "the daemon followed evil-dir: $T/s/secret/new created"
touch -h "$mnt/evil-file" 2>/dev/null || true
chmod 600 "$mnt/evil-file" 2>/dev/null || true
setfattr -h -n user.x -v y "$mnt/evil-file" 2>/dev/null || true
check_eq 644 "$(stat -c %a "$T/s/secret/file")" "mode of the daemon-side target"
check_eq "daemon-side secret" "$(cat "$T/s/secret/file")" "content of the daemon-side target"
getfattr -n user.x "$T/s/secret/file" >/dev/null 2>&1 && fail "an xattr was set through the store symlink"
# replacing the link through the mount replaces the link, not its target
rm "$mnt/evil-file"
[[ ! -e $store/evil-file && -f $T/s/secret/file ]] || fail "rm of the link removed its target or left the link"
# a store symlink where a directory component is expected on the daemon's side: creating a
# file under its name is resolved by the kernel (client side) again
echo x >"$mnt/evil-dir/x2"
[[ ! -e $T/s/secret/x2 ]] || fail "the daemon created $T/s/secret/x2"

# optional: trace the daemon's own path lookups while the links are used; no syscall of
# the daemon may name the target directory (it only works with names relative to fds)
if command -v strace >/dev/null; then
    strace -f -qq -e trace=%file -p "${CBFS_PID[$mnt]}" -o "$T/strace.out" &
    spid=$!
    sleep 0.5
    drop_caches
    cat "$mnt/evil-dir/file" >/dev/null
    ls -l "$mnt/" >/dev/null
    readlink "$mnt/evil-dir" >/dev/null
    echo y >"$mnt/evil-dir/y" 2>/dev/null || true
    sleep 0.3
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    grep -q 'evil-dir' "$T/strace.out" || note "strace saw no lookup of evil-dir (kernel cache?)"
    if grep -E 'secret' "$T/strace.out" | grep -v readlinkat >"$T/strace.bad"; then
        fail "the daemon used a path through the symlink target: $(head -n 2 "$T/strace.bad" | tr '\n' '|')"
    fi
    if grep -E 'evil-(dir|abs)' "$T/strace.out" | grep -E 'openat' | grep -vE 'O_PATH|O_NOFOLLOW' >"$T/strace.bad"; then
        fail "the daemon opened a store symlink without O_NOFOLLOW/O_PATH: $(head -n 2 "$T/strace.bad" | tr '\n' '|')"
    fi
    note "strace: $(grep -c . "$T/strace.out") file syscalls of the daemon, none through a symlink"
fi
cbfs_umount "$mnt"
check_eq "daemon-side secret" "$(cat "$T/s/secret/file")" "content of the daemon-side target at the end"
check_eq "file" "$(ls "$T/s/secret" | tr '\n' ' ' | sed 's/ $//')" "daemon-side target directory at the end"
pass

#!/usr/bin/env bash
# End to end: file-level backups into cbfs. SQLite's online `.backup` into an lz4 mount;
# a tree with hard links, symlinks, user.* xattrs, a sparse file, a fifo, a device node,
# odd names, odd modes and owners, archived with `tar -S --xattrs` and copied with
# `rsync -aHAXS`. After a remount with xz: the copy in the mount equals the source
# (diff -r, getfattr -d, lstat of every entry), the restored SQLite database passes
# PRAGMA integrity_check with the same content, and the tree restored from both the
# tar archive and the rsync copy equals the source, holes included.
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e/common.sh"

e2e_need sqlite3 tar rsync getfattr setfattr diff python3
MANIFEST=$CBFS_REPO/tests/mount/e2e/treemanifest.py

# ---- the SQLite source (about 40 MB: text, numbers and random blobs)
DB=$T/app.db
sqlite3 "$DB" >"$T/sqlite.out" 2>&1 <<'EOF' || fail "creating the SQLite database: $(head -c 400 "$T/sqlite.out")"
CREATE TABLE items (id INTEGER PRIMARY KEY, name TEXT NOT NULL, price REAL, qty INTEGER, tag BLOB);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 300000)
INSERT INTO items SELECT x, 'item ' || x || ' ' || hex(x * 7919), x * 1.25, x % 1000, randomblob(16) FROM c;
CREATE INDEX items_name ON items (name);
CREATE TABLE notes (id INTEGER PRIMARY KEY, item_id INTEGER REFERENCES items (id), body TEXT);
WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x + 1 FROM c WHERE x < 20000)
INSERT INTO notes SELECT x, x * 13 % 300000 + 1, printf('%.*c', 200 + x % 800, 'n') || x FROM c;
EOF
# db_sum DB: SHA-256 of the SQL text of the whole database (schema and rows).
db_sum() { sqlite3 -readonly "$1" .dump | sha256sum | cut -c1-64; }
db_src=$(db_sum "$DB")

# ---- the tree
S=$T/src
mkdir -p "$S/a/b/c" "$S/empty dir" "$S/sticky" "$S/setgid"
python3 "$CBFS_TOOLS/gendata.py" csv 24M "$S/data.csv" 11
python3 "$CBFS_TOOLS/gendata.py" mixed 6M "$S/a/mixed.bin" 12
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$S/a/b/c/small.csv" 13
head -c 4M /dev/urandom >"$S/a/b/random.bin"
: >"$S/empty"
printf x >"$S/a/one-byte"
for i in $(seq 1 200); do printf 'file %d\n' "$i" >"$S/a/b/c/f$i.txt"; done
# odd names: blanks, tab, newline, quotes, backslash, glob characters, UTF-8, a leading
# dash, a dot file, and a 239-byte name: cbfs names are at most 247 bytes (255 minus the
# index suffix; statfs says so) and rsync writes "." NAME ".XXXXXX" first, 8 bytes more
for n in 'with space' $'tab\tname' $'new\nline' "quote'd \"double\"" 'back\slash' 'star*?[x]' \
    'ünïcödé-名前' '-leading-dash' '.hidden' "$(printf 'L%.0s' {1..239})"; do
    printf '%s\n' "$n" >"$S/a/$n"
done
# hard links (a three-way group across directories) and symlinks of every kind
ln "$S/data.csv" "$S/a/b/hardlink.csv"
ln "$S/data.csv" "$S/empty dir/../a/hardlink2.csv"
ln -s a/b/c/small.csv "$S/link-rel"
ln -s /etc/hostname "$S/link-abs"
ln -s does/not/exist "$S/link-dangling"
ln -s a/b "$S/link-dir"
ln -s 'with space' "$S/a/link to odd name"
# a sparse file: 64 MiB with three written islands
truncate -s 64M "$S/sparse.img"
for off in 0 10 63; do
    printf 'island at %d MiB\n' "$off" | dd of="$S/sparse.img" bs=1M seek="$off" conv=notrunc status=none
done
# a fifo and a device node (rsync -a and tar keep them; cbfs stores them as themselves)
mkfifo "$S/pipe.fifo"
mknod "$S/null.dev" c 1 3
# user.* xattrs on files and directories, including binary and empty values
setfattr -n user.comment -v "nightly export" "$S/data.csv"
setfattr -n user.checksum -v 0x00ff10e7deadbeef "$S/a/mixed.bin"
setfattr -n user.empty -v '' "$S/a/one-byte"
setfattr -n user.dir -v "on a directory" "$S/a/b"
for i in 1 2 3 4 5 6 7 8; do setfattr -n "user.k$i" -v "value $i" "$S/a/b/c/small.csv"; done
# modes and owners
chmod 600 "$S/a/mixed.bin"
chmod 755 "$S/a/b/c/f1.txt"
chmod 444 "$S/a/one-byte"
chmod 4755 "$S/a/b/c/f2.txt"
chmod 1777 "$S/sticky"
chmod 2775 "$S/setgid"
chmod 700 "$S/empty dir"
chown nobody:nogroup "$S/a/b/c/f3.txt"
chown 1234:5678 "$S/a/b/c/f4.txt" "$S/setgid"
# fixed times last (they are compared), directories deepest first
find "$S" -depth ! -type l -exec touch -h -d '2001-02-03 04:05:06' {} +
touch -d '2024-05-06 07:08:09' "$S/data.csv"
touch -h -d '2020-01-01 00:00:00' "$S/link-rel"

python3 "$MANIFEST" "$S" >"$T/man.src" || fail "manifest of the source"
python3 "$MANIFEST" "$S" --no-sparse >"$T/man.src.ns" || fail "manifest of the source"
grep -q "'sparse.img'.* sparse" "$T/man.src" || fail "the source's sparse.img is not sparse"

# compare_tree DIR [--no-sparse]: DIR equals the source by diff -r, getfattr -d and the manifest.
compare_tree() {
    local d=$1 sp=${2:-} ref=$T/man.src
    [[ -n $sp ]] && ref=$T/man.src.ns
    # diff -r reports fifos and devices as differing even when equal: the manifest covers them
    diff -r --no-dereference -x '*.fifo' -x '*.dev' "$S" "$d" >"$T/diff.out" 2>&1 ||
        fail "diff -r $S $d: $(head -c 600 "$T/diff.out" | tr '\n' '|')"
    (cd "$S" && getfattr -R -h -d -m '^user\.' -e hex . 2>/dev/null) >"$T/xattr.src"
    (cd "$d" && getfattr -R -h -d -m '^user\.' -e hex . 2>/dev/null) >"$T/xattr.act"
    [[ -s $T/xattr.src ]] || fail "getfattr found no user.* xattrs in the source"
    diff -u "$T/xattr.src" "$T/xattr.act" >"$T/xattr.diff" ||
        fail "getfattr -d differs for $d: $(head -n 12 "$T/xattr.diff" | tr '\n' '|')"
    python3 "$MANIFEST" "$d" $sp >"$T/man.act" || fail "manifest of $d"
    diff -u "$ref" "$T/man.act" >"$T/man.diff" ||
        fail "$d differs from the source: $(grep '^[-+][^-+]' "$T/man.diff" | head -n 8 | tr '\n' '|')"
}

# ---- back up through an lz4 mount
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=lz4
e2e_timed t_sq sqlite3 "$DB" ".backup '$mnt/db.sqlite'"
e2e_report "sqlite3 .backup (lz4)" "$t_sq" "$mnt/db.sqlite"
e2e_timed t_tar tar -cSpf "$mnt/tree.tar" --xattrs --xattrs-include='user.*' -C "$S" .
e2e_report "tar -cS --xattrs (lz4)" "$t_tar" "$mnt/tree.tar"
e2e_timed t_rs rsync -aHAXS "$S/" "$mnt/tree/"
e2e_report "rsync -aHAXS (lz4)" "$t_rs" "$mnt/tree"
cbfs_umount "$mnt"
e2e_verify_store "$store"

# ---- remount with ANOTHER codec: the lz4 frames must still read
cbfs_mount "$store" "$mnt" codec=xz
drop_caches
compare_tree "$mnt/tree" --no-sparse   # in cbfs, st_blocks of every file is its compressed size
note "rsync copy in the mount equals the source (diff -r, getfattr -d, lstat, hard-link groups)"
check_eq ok "$(sqlite3 -readonly "$mnt/db.sqlite" 'PRAGMA integrity_check')" "integrity_check in the mount"

# ---- restore
sqbytes=$(stat -c %s "$mnt/db.sqlite")
drop_caches
e2e_timed t_rsq cp "$mnt/db.sqlite" "$T/restored.db"
e2e_report_restore "sqlite (cp)" "$t_rsq" "$sqbytes"
check_eq ok "$(sqlite3 "$T/restored.db" 'PRAGMA integrity_check')" "integrity_check of the restored database"
check_eq "$db_src" "$(db_sum "$T/restored.db")" "SHA-256 of .dump of the restored database"
check_eq 300000 "$(sqlite3 "$T/restored.db" 'SELECT count(*) FROM items')" "rows of items"
note "SQLite: integrity_check ok, .dump identical to the source"

tarbytes=$(stat -c %s "$mnt/tree.tar")
mkdir "$T/from-tar"
drop_caches
e2e_timed t_rtar tar -xpf "$mnt/tree.tar" --xattrs --xattrs-include='user.*' -C "$T/from-tar"
e2e_report_restore "tar -x" "$t_rtar" "$tarbytes"
compare_tree "$T/from-tar"
treebytes=$(du -scb "$mnt/tree" | tail -n 1 | cut -f1)
drop_caches
e2e_timed t_rrs rsync -aHAXS "$mnt/tree/" "$T/from-rsync/"
e2e_report_restore "rsync -aHAXS" "$t_rrs" "$treebytes"
compare_tree "$T/from-rsync"
note "trees restored by tar and by rsync equal the source, holes included"

cbfs_umount "$mnt"
e2e_verify_store "$store"
pass "sqlite .backup, tar and rsync -aHAXS through lz4, compared and restored through xz"

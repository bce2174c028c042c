#!/usr/bin/env bash
# Directory operations compared with the local filesystem (ext4), tools/dirops.py:
# renames of directories holding many files (compressed ones' sidecars follow, in
# layout 2 with the directory's .cbfsidx/), over an empty directory, over one emptied
# through the mount (its .cbfsidx/ left), over a non-empty one (ENOTEMPTY), into its
# own subdirectory, RENAME_NOREPLACE, RENAME_EXCHANGE of two directories and of a
# directory and a file, rmdir of a directory that lists as empty (its store holds only
# hidden names) and of non-empty ones, a directory renamed with a file open in it,
# setgid parents and sticky directories as other users. Every answer and the tree
# (modes, owners, link counts, bytes) must be ext4's; cbfs verify and fsck then find
# nothing, and a remount shows the same tree. Both layouts, codec=none and zstd.
. "$(dirname "$0")/lib.sh"
[[ $(id -u) == 0 ]] || pass "not root: other users and owners cannot be tried, nothing checked"
id nobody >/dev/null 2>&1 || fail "needs the user nobody"
cbfs_tool
chmod 755 "$T"
mkdir "$T/ref"
python3 "$CBFS_TOOLS/dirops.py" ops "$T/ref" >"$T/ref.out" 2>&1 || fail "on the local filesystem: $(tail -n 3 "$T/ref.out")"
python3 "$CBFS_TOOLS/dirops.py" state "$T/ref" >"$T/ref.state" 2>&1 || fail "state: $(tail -n 3 "$T/ref.state")"
for layout in 1 2; do
    for codec in none zstd; do
        what="layout $layout, codec=$codec"
        store=$T/s.$layout.$codec mnt=$T/mnt
        cbfs_layout_store "$store" "$layout"
        cbfs_mount "$store" "$mnt" "codec=$codec,allow_other"
        chmod 755 "$mnt"
        python3 "$CBFS_TOOLS/dirops.py" ops "$mnt" >"$T/got.out" 2>&1
        same_answers "$what: answers differ from ext4" "$T/ref.out" "$T/got.out"
        python3 "$CBFS_TOOLS/dirops.py" state "$mnt" >"$T/got.state" 2>&1
        same_answers "$what: tree differs from ext4" "$T/ref.state" "$T/got.state"
        cbfs_umount "$mnt"
        "$CBFS" verify "$store" >"$T/verify.out" 2>&1 || fail "$what: cbfs verify: $(tail -n 3 "$T/verify.out")"
        fsck_rc 0 "$store"
        if [[ $layout == 2 ]]; then # the index moved with its directory
            [[ -f $store/b/.cbfsidx/f149 || $codec == none ]] || fail "$what: b's sidecars did not follow"
            [[ ! -e $store/a ]] || fail "$what: a is still in the store"
        fi
        cbfs_mount "$store" "$mnt" "codec=$codec,allow_other"
        python3 "$CBFS_TOOLS/dirops.py" state "$mnt" >"$T/got.state" 2>&1
        same_answers "$what: tree after a remount" "$T/ref.state" "$T/got.state"
        cbfs_umount "$mnt"
        note "$what ok"
    done
done
pass

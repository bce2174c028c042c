#!/usr/bin/env bash
# cbfs fsck --repair, run as root, decides whose an orphan sidecar is on the files it
# read (the sidecar's owner against its data file's), then moves it by name, after its
# walk of the whole store: seconds later on a large store. A user who writes the
# orphan's directory (a team's shared directory: B's rename from it into B's own
# directory cut short by a crash) could put a file of its own at the orphan's name
# meanwhile, and root moved that file into B's directory as the index of B's file (A
# can rewrite it at will). The move must move the sidecar that was checked or nothing:
# the names are checked right before it, and the file moved after it; one swapped in at
# the last moment (a shim renames it in inside renameat2) is moved back, and fsck says so.
. "$(dirname "$0")/lib.sh"
cbfs_tool
cbfs_two_users
cbfs_preload renameswap
python3 "$CBFS_TOOLS/gendata.py" csv 300K "$T/a.csv" 12
mnt=$T/mnt
for layout in 1 2; do
    store=$T/store$layout
    cbfs_layout_store "$store" "$layout"
    cbfs_mount "$store" "$mnt" codec=zstd
    mkdir "$mnt/S" "$mnt/B"
    cp "$T/a.csv" "$mnt/S/x.bkp"
    cbfs_umount "$mnt"
    # S: A's directory that A's team writes too (mode 0777); B's file in it
    chown -R "$A:" "$store/S"
    chmod 777 "$store/S"
    chown -R "$B:" "$store/B" "$store/S/x.bkp" "$(cbfs_sidecar_of "$store" S/x.bkp "$layout")"
    old=$(cbfs_sidecar_of "$store" S/x.bkp "$layout")
    new=$(cbfs_sidecar_of "$store" B/y.bkp "$layout")
    # B's rename of S/x.bkp to B/y.bkp cut short (the data file moved, its sidecar not)
    mv "$store/S/x.bkp" "$store/B/y.bkp"
    # A's file to swap in: a copy of B's sidecar (0644), A's own
    as_user "$A" cp "$old" "$store/S/mine"
    rc=0
    CBFS_RENAMESWAP_NAME=$(basename "$old") CBFS_RENAMESWAP_WITH=$store/S/mine LD_PRELOAD=$T/renameswap.so \
        "$CBFS" fsck --repair "$store" >"$T/fsck.out" 2>&1 || rc=$?
    [[ -e $old.aside && ! -e $store/S/mine ]] || fail "layout $layout: the shim did not swap the name: $(cat "$T/fsck.out")"
    bad=$(find "$store/B" ! -user "$B" -printf '%u %p\n')
    [[ -z $bad ]] || fail "layout $layout: fsck --repair moved a file of A's into B's directory: $bad ($(cat "$T/fsck.out"))"
    [[ $(stat -c %U "$old") == "$A" ]] || fail "layout $layout: A's file was not moved back to $old: $(cat "$T/fsck.out")"
    grep -qF "cannot move it to $store/B/y.bkp's sidecar: it, that file or a directory of theirs was moved or replaced while fsck ran" \
        "$T/fsck.out" || fail "layout $layout: fsck does not say why it moved nothing: $(cat "$T/fsck.out")"
    check_eq 4 "$rc" "layout $layout: exit status of fsck --repair ($(cat "$T/fsck.out"))"
    # B's own sidecar, back at its name, is then moved (A's put aside)
    rm "$old" && mv "$old.aside" "$old"
    fsck_rc 1 --repair "$store"
    [[ -f $new && ! -e $old && $(stat -c %U "$new") == "$B" ]] ||
        fail "layout $layout: B's sidecar was not moved to its file: $(cat "$T/fsck.out")"
    cbfs_mount "$store" "$mnt"
    same_file "$T/a.csv" "$mnt/B/y.bkp"
    cbfs_umount "$mnt"
done
pass

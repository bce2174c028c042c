#!/usr/bin/env bash
# End to end: PostgreSQL 15 backs up into cbfs and restores from it. A throwaway
# cluster (pgbench -i plus two tables of mixed types) is backed up with pg_basebackup
# -Ft and -Fp and pg_dump -Fd -j 2 through a zstd:3 mount as user postgres; after a
# remount with lz4 both base backups pass pg_verifybackup, the tar backup restored to a
# new data directory starts and every table's row count and checksum equal the source,
# and pg_restore of the dump into a new database gives the same tables.
# Environment: E2E_PG_SCALE pgbench scale (default 20, about 300 MB of tables).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e/common.sh"

PGBIN=${E2E_PGBIN:-/usr/lib/postgresql/15/bin}
SCALE=${E2E_PG_SCALE:-20}
E2E_PATH=$PGBIN
e2e_need "$PGBIN/initdb" "$PGBIN/pg_ctl" "$PGBIN/pg_basebackup" "$PGBIN/pg_verifybackup" \
    "$PGBIN/pg_dump" "$PGBIN/pg_restore" "$PGBIN/pgbench" "$PGBIN/psql" runuser tar
id postgres >/dev/null 2>&1 || fail "no postgres user: run scripts/deps.sh --test"

SOCK=$T/pgsock
install -d -o postgres -m 700 "$SOCK" "$T/pg"

# pg_start DATADIR PORT: start a server on DATADIR, unix socket only (in $SOCK).
# fsync=off: these clusters are throwaway; the backups (written by the clients
# through cbfs) are still fsynced by pg_basebackup and pg_dump. autovacuum=off: the
# WAL (and so the size of the backups) must not depend on when autovacuum runs.
pg_start() {
    e2e_at_exit "runuser -u postgres -- $PGBIN/pg_ctl -D '$1' -m immediate -w stop"
    e2e_as postgres pg_ctl -D "$1" -l "$1.log" -w -t 300 \
        -o "-p $2 -k $SOCK -c listen_addresses='' -c fsync=off -c max_wal_size=2GB -c autovacuum=off" \
        start >"$T/pg_start.out" 2>&1 || fail "postgres on $1 did not start: $(tail -n 5 "$1.log" | tr '\n' '|')"
}
pg_stop() { check e2e_as postgres pg_ctl -D "$1" -m fast -w stop; }

# psql_q PORT DB SQL: one query, unaligned tuples only.
psql_q() { e2e_as postgres psql -h "$SOCK" -p "$1" -U postgres -d "$2" -XAtq -v ON_ERROR_STOP=1 -c "$3"; }

# pg_sums PORT DB: one line per public table: name, row count, and two sums of 64-bit
# hashes of the rows' text (seeds 0 and 1). Order-independent (a pg_restore'd table may
# lie in another physical order) and without a sort, so a 2M-row table takes seconds.
pg_sums() {
    local t
    for t in $(psql_q "$1" "$2" "SELECT format('%I', tablename) FROM pg_tables WHERE schemaname = 'public' ORDER BY 1"); do
        echo "$t $(psql_q "$1" "$2" "SELECT count(*) || ' ' || coalesce(sum(hashtextextended(r, 0)::numeric), 0) || ' ' ||
                                       coalesce(sum(hashtextextended(r, 1)::numeric), 0) FROM (SELECT x::text AS r FROM $t x) s")"
    done
}

# ---- the source cluster
SRC=$T/pg/src
PORT=$(e2e_free_port)
check e2e_as postgres initdb -D "$SRC" -U postgres --auth=trust --data-checksums -E UTF8 --locale=C.UTF-8
pg_start "$SRC" "$PORT"
check e2e_as postgres createdb -h "$SOCK" -p "$PORT" -U postgres bench
e2e_timed t_gen e2e_as postgres pgbench -h "$SOCK" -p "$PORT" -U postgres -i -s "$SCALE" -q bench
check psql_q "$PORT" bench "
CREATE TABLE docs (id int PRIMARY KEY, title text NOT NULL, body text, tags text[], meta jsonb,
                   created timestamptz, price numeric(12,2), digest bytea);
INSERT INTO docs
SELECT g, 'doc ' || g, repeat(md5(g::text) || ' lorem ipsum ', 1 + g % 40),
       ARRAY['t' || g % 7, 'u' || g % 11], jsonb_build_object('k', g, 'h', md5((g * 7)::text)),
       timestamptz '2024-01-01 00:00+00' + g * interval '37 seconds', (g * 1.37)::numeric(12,2),
       decode(md5(random()::text) || md5(random()::text), 'hex')
FROM generate_series(1, 150000) g;
CREATE INDEX docs_created ON docs (created);
CREATE TABLE noise (id bigint PRIMARY KEY, payload text);
ALTER TABLE noise ALTER payload SET STORAGE EXTERNAL;  -- TOASTed but not pglz-compressed
INSERT INTO noise SELECT g, (SELECT string_agg(md5(random()::text || i || g), '') FROM generate_series(1, 64) s(i))
FROM generate_series(1, 20000) g;"
# hint bits and the visibility map set now, so reading the tables later writes no WAL
check psql_q "$PORT" bench "VACUUM (FREEZE, ANALYZE)"
check psql_q "$PORT" bench "CHECKPOINT"
note "source: pgbench scale $SCALE, generated in $t_gen s; database $(psql_q "$PORT" bench "SELECT pg_size_pretty(pg_database_size('bench'))")"
e2e_timed t_sums pg_sums "$PORT" bench
mv "$T/t_sums.out" "$T/sums.src"
note "table checksums of the source: $t_sums s"
(($(wc -l <"$T/sums.src") == 6)) || fail "expected 6 tables in the source: $(tr '\n' '|' <"$T/sums.src")"

# ---- back up through a zstd:3 mount, as user postgres (allow_other; files owned by the caller)
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" codec=zstd:3,allow_other
install -d -o postgres -m 700 "$mnt/pg"
B=$mnt/pg
e2e_timed t_tar e2e_as postgres pg_basebackup -h "$SOCK" -p "$PORT" -U postgres -D "$B/base_tar" -Ft -X stream -c fast
e2e_report "pg_basebackup -Ft (zstd:3)" "$t_tar" "$B/base_tar"
e2e_timed t_plain e2e_as postgres pg_basebackup -h "$SOCK" -p "$PORT" -U postgres -D "$B/base_plain" -Fp -X stream -c fast
e2e_report "pg_basebackup -Fp (zstd:3)" "$t_plain" "$B/base_plain"
e2e_timed t_dump e2e_as postgres pg_dump -h "$SOCK" -p "$PORT" -U postgres -Fd -j 2 -Z 0 -f "$B/dump" bench
e2e_report "pg_dump -Fd -j 2 -Z 0 (zstd:3)" "$t_dump" "$B/dump"
check_eq "postgres 600" "$(stat -c '%U %a' "$B/base_tar/base.tar")" "owner and mode of base.tar"
check_eq postgres "$(stat -c %U "$B/base_plain/global/pg_control")" "owner of a file of the plain backup"
cbfs_umount "$mnt"
e2e_verify_store "$store"

# ---- remount with ANOTHER codec: the zstd frames must still read
cbfs_mount "$store" "$mnt" codec=lz4,allow_other
e2e_timed t_vplain e2e_as postgres pg_verifybackup "$B/base_plain"
note "pg_verifybackup of the -Fp backup: ok ($t_vplain s)"
# pg_verifybackup (15) reads only plain backups: extract the tar one on the mount (written
# now with lz4, so the mount holds both codecs) with its WAL and manifest, and verify that.
X=$B/base_tar_x
check e2e_as postgres install -d -m 700 "$X"
check e2e_as postgres tar -xf "$B/base_tar/base.tar" -C "$X"
check e2e_as postgres tar -xf "$B/base_tar/pg_wal.tar" -C "$X/pg_wal"
check e2e_as postgres cp "$B/base_tar/backup_manifest" "$X/"
e2e_timed t_vtar e2e_as postgres pg_verifybackup "$X"
note "pg_verifybackup of the extracted -Ft backup: ok ($t_vtar s)"

# ---- restore the tar backup to a new data directory and start it
R=$T/pg/restored
install -d -o postgres -m 700 "$R"
tarbytes=$(du -scb "$B/base_tar" | tail -n 1 | cut -f1)
drop_caches
e2e_timed t_rest sh -c "runuser -u postgres -- tar -xf '$B/base_tar/base.tar' -C '$R' &&
                        runuser -u postgres -- tar -xf '$B/base_tar/pg_wal.tar' -C '$R/pg_wal'"
e2e_report_restore "pg_basebackup -Ft, tar -x (read with lz4 mount)" "$t_rest" "$tarbytes"
PORT2=$(e2e_free_port)
[[ $PORT2 != "$PORT" ]] || PORT2=$((PORT + 1))
pg_start "$R" "$PORT2"
pg_sums "$PORT2" bench >"$T/sums.rest" || fail "checksums of the restored cluster"
diff -u "$T/sums.src" "$T/sums.rest" >"$T/sums.diff" || fail "restored base backup differs: $(tr '\n' '|' <"$T/sums.diff")"
note "restored -Ft cluster: $(wc -l <"$T/sums.rest") tables, row counts and checksums equal the source"
pg_stop "$R"

# ---- pg_restore the directory dump into a new database
check e2e_as postgres createdb -h "$SOCK" -p "$PORT" -U postgres restored
dumpbytes=$(du -scb "$B/dump" | tail -n 1 | cut -f1)
e2e_timed t_prest e2e_as postgres pg_restore -h "$SOCK" -p "$PORT" -U postgres -d restored -j 2 "$B/dump"
e2e_report_restore "pg_dump -Fd, pg_restore -j 2" "$t_prest" "$dumpbytes"
pg_sums "$PORT" restored >"$T/sums.dump" || fail "checksums of the pg_restore'd database"
diff -u "$T/sums.src" "$T/sums.dump" >"$T/sums.diff" || fail "pg_restore'd database differs: $(tr '\n' '|' <"$T/sums.diff")"
note "pg_restore'd database: tables equal the source"

pg_stop "$SRC"
cbfs_umount "$mnt"
e2e_verify_store "$store"
pass "basebackup -Ft/-Fp + pg_dump -Fd through zstd:3, verified and restored through lz4"

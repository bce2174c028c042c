#!/usr/bin/env bash
# End to end: MariaDB backs up into cbfs and restores from it. A throwaway mariadbd
# (InnoDB tables of mixed, partly incompressible data plus one Aria table) is backed up
# with mariadb-backup and mysqldump through an lz4 mount; after a remount with zstd:3
# the backup is prepared IN PLACE on the mount (random writes into files written with
# the other codec), copied back to a fresh datadir, started, and CHECKSUM TABLE of every
# table equals the source; the dump reloads into a new database with equal checksums.
# Environment: E2E_MY_ROWS rows in the main table (default 600000, about 200 MB in all);
#              E2E_MY_MOUNT_OPTS extra mount options for both mounts (e.g. block_size=64K).
. "$(dirname "$0")/lib.sh"
. "$(dirname "$0")/e2e/common.sh"

ROWS=${E2E_MY_ROWS:-600000}
XOPTS=${E2E_MY_MOUNT_OPTS:+,$E2E_MY_MOUNT_OPTS}
e2e_need mariadb-install-db mariadbd mariadb mariadb-admin mariadb-backup mariadb-dump
id mysql >/dev/null 2>&1 || fail "no mysql user: run scripts/deps.sh --test"
install -d -o mysql -m 750 "$T/my"

# my_start NAME DATADIR: start a throwaway server on DATADIR, socket $T/my/NAME.sock and
# a free loopback port; no option file is read (--no-defaults), so the distribution's
# configuration and service are never involved.
my_start() {
    local name=$1 d=$2 sock=$T/my/$1.sock port i
    port=$(e2e_free_port)
    mariadbd --no-defaults --datadir="$d" --socket="$sock" --port="$port" --bind-address=127.0.0.1 \
        --user=mysql --pid-file="$T/my/$name.pid" --log-error="$T/my/$name.err" --skip-name-resolve \
        --innodb-buffer-pool-size=256M --innodb-log-file-size=256M --innodb-flush-log-at-trx-commit=2 \
        </dev/null >/dev/null 2>&1 &
    local pid=$!
    e2e_at_exit "kill $pid; wait $pid"
    for ((i = 0; i < 600; i++)); do
        mariadb-admin --no-defaults --socket="$sock" -uroot ping >/dev/null 2>&1 && return 0
        kill -0 "$pid" 2>/dev/null || fail "mariadbd $name exited: $(tail -n 5 "$T/my/$name.err" | tr '\n' '|')"
        sleep 0.1
    done
    fail "mariadbd $name not answering after 60 s: $(tail -n 5 "$T/my/$name.err" | tr '\n' '|')"
}
# my_stop NAME: clean shutdown (the pid file disappears when mariadbd has exited).
my_stop() {
    local i
    check mariadb-admin --no-defaults --socket="$T/my/$1.sock" -uroot shutdown
    for ((i = 0; i < 600; i++)); do [[ -e $T/my/$1.pid ]] || return 0; sleep 0.1; done
    fail "mariadbd $1 still running 60 s after shutdown"
}
# my_q NAME SQL...: run SQL as root over the socket (unix_socket authentication).
my_q() {
    local name=$1
    shift
    mariadb --no-defaults --socket="$T/my/$name.sock" -uroot -NBs -e "$*"
}
# my_sums NAME DB: per table of DB: name, row count, CHECKSUM TABLE.
my_sums() {
    local t
    for t in $(my_q "$1" "SELECT table_name FROM information_schema.tables WHERE table_schema = '$2' ORDER BY 1"); do
        echo "$t $(my_q "$1" "SELECT count(*) FROM \`$2\`.\`$t\`") $(my_q "$1" "CHECKSUM TABLE \`$2\`.\`$t\` EXTENDED" | cut -f2)"
    done
}

# ---- the source server
SRC=$T/my/src
check mariadb-install-db --no-defaults --datadir="$SRC" --user=mysql --skip-test-db --auth-root-authentication-method=socket
my_start src "$SRC"
t0=$(e2e_now)
check my_q src "
CREATE DATABASE shop;
USE shop;
CREATE TABLE customers (id INT PRIMARY KEY, name VARCHAR(100) NOT NULL, email VARCHAR(200),
  region ENUM('north','south','east','west'), created DATETIME(3), balance DECIMAL(12,2)) ENGINE=InnoDB;
INSERT INTO customers SELECT seq, CONCAT('Customer ', seq), CONCAT('c', seq, '@example.com'),
  ELT(1 + seq % 4, 'north', 'south', 'east', 'west'), TIMESTAMP'2024-01-01 00:00:00' + INTERVAL seq MINUTE,
  seq * 1.37 FROM seq_1_to_100000;
CREATE TABLE orders (id BIGINT PRIMARY KEY, customer_id INT NOT NULL, status VARCHAR(16),
  amount DECIMAL(12,2), note TEXT, KEY (customer_id)) ENGINE=InnoDB;
INSERT INTO orders SELECT seq, 1 + seq % 100000, ELT(1 + seq % 5, 'PAID', 'OPEN', 'OVERDUE', 'CANCELLED', 'REFUNDED'),
  (seq % 99991) / 7, REPEAT(CONCAT(MD5(seq), ' invoice ledger '), 1 + seq % 3) FROM seq_1_to_$ROWS;
CREATE TABLE attachments (id INT PRIMARY KEY, data MEDIUMBLOB) ENGINE=InnoDB;
INSERT INTO attachments SELECT seq, CONCAT(RANDOM_BYTES(1024), RANDOM_BYTES(1024), RANDOM_BYTES(1024), RANDOM_BYTES(1024))
  FROM seq_1_to_10000;
CREATE TABLE audit (id INT PRIMARY KEY, what VARCHAR(64), at DATETIME) ENGINE=Aria;
INSERT INTO audit SELECT seq, CONCAT('event ', seq % 97), TIMESTAMP'2024-06-01 00:00:00' + INTERVAL seq SECOND
  FROM seq_1_to_20000;"
note "source: 4 tables, $(my_q src "SELECT round(sum(data_length + index_length) / 1048576) FROM information_schema.tables WHERE table_schema = 'shop'") MiB, loaded in $(awk -v a="$t0" -v b="$(e2e_now)" 'BEGIN { printf "%.1f", b - a }') s"
my_sums src shop >"$T/sums.src" || fail "checksums of the source"
(($(wc -l <"$T/sums.src") == 4)) || fail "expected 4 tables in the source: $(tr '\n' '|' <"$T/sums.src")"

# ---- back up through an lz4 mount
store=$T/store mnt=$T/mnt
mkdir -p "$store"
cbfs_mount "$store" "$mnt" "codec=lz4,allow_other$XOPTS"
e2e_timed t_bk mariadb-backup --no-defaults --backup --target-dir="$mnt/full" --socket="$T/my/src.sock" \
    --user=root --datadir="$SRC" --parallel=2
e2e_report "mariadb-backup --backup (lz4)" "$t_bk" "$mnt/full"
t0=$(e2e_now)
mariadb-dump --no-defaults --socket="$T/my/src.sock" -uroot --single-transaction --hex-blob shop \
    >"$mnt/dump.sql" 2>"$T/dump.err" || fail "mariadb-dump: $(head -c 400 "$T/dump.err")"
t_dump=$(awk -v a="$t0" -v b="$(e2e_now)" 'BEGIN { printf "%.2f", b - a }')
e2e_report "mysqldump > dump.sql (lz4)" "$t_dump" "$mnt/dump.sql"
cbfs_umount "$mnt"
e2e_verify_store "$store"

# ---- remount with ANOTHER codec; prepare in place, copy back to a fresh datadir
cbfs_mount "$store" "$mnt" "codec=zstd:3,allow_other$XOPTS"
e2e_timed t_prep mariadb-backup --no-defaults --prepare --target-dir="$mnt/full"
grep -q 'backup_type = log-applied' "$mnt/full/xtrabackup_checkpoints" ||
    fail "after --prepare: $(tr '\n' '|' <"$mnt/full/xtrabackup_checkpoints")"
bkbytes=$(du -scb "$mnt/full" | tail -n 1 | cut -f1)
drop_caches
R=$T/my/restored
e2e_timed t_cb mariadb-backup --no-defaults --copy-back --target-dir="$mnt/full" --datadir="$R"
check chown -R mysql:mysql "$R"
e2e_report_restore "mariadb-backup --prepare (in place, zstd:3 mount)" "$t_prep"
e2e_report_restore "mariadb-backup --copy-back" "$t_cb" "$bkbytes"
my_start restored "$R"
my_sums restored shop >"$T/sums.rest" || fail "checksums of the restored server"
diff -u "$T/sums.src" "$T/sums.rest" >"$T/sums.diff" || fail "restored server differs: $(tr '\n' '|' <"$T/sums.diff")"
note "restored server: CHECKSUM TABLE and row counts equal the source for all 4 tables"
my_stop restored

# ---- reload the dump into a new database
check my_q src "CREATE DATABASE shop2"
dumpbytes=$(stat -c %s "$mnt/dump.sql")
t0=$(e2e_now)
mariadb --no-defaults --socket="$T/my/src.sock" -uroot shop2 <"$mnt/dump.sql" >"$T/reload.out" 2>&1 ||
    fail "reloading dump.sql: $(head -c 400 "$T/reload.out")"
t_rel=$(awk -v a="$t0" -v b="$(e2e_now)" 'BEGIN { printf "%.2f", b - a }')
e2e_report_restore "mysqldump reload" "$t_rel" "$dumpbytes"
my_sums src shop2 >"$T/sums.dump" || fail "checksums of the reloaded database"
diff -u "$T/sums.src" "$T/sums.dump" >"$T/sums.diff" || fail "reloaded dump differs: $(tr '\n' '|' <"$T/sums.diff")"
note "reloaded dump: CHECKSUM TABLE and row counts equal the source"

my_stop src
cbfs_umount "$mnt"
e2e_verify_store "$store"
pass "mariadb-backup + mysqldump through lz4, prepared in place and restored through zstd:3"

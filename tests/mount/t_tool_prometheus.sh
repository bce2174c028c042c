#!/usr/bin/env bash
# `cbfs stats --prometheus`: the counters in the Prometheus text format pass
# `promtool check metrics` (from a file and live from two mounts in one document), every
# field of user.cbfs.stats becomes a metric in base units (ns -> seconds, exactly), a
# mount without counters fails the whole run with nothing on stdout; the alert rules in
# mount-helpers/cbfs.rules.yml load, fire (promtool test rules) when they should, and are
# the ones docs/OPERATIONS.md shows.
. "$(dirname "$0")/lib.sh"
cbfs_tool

# check_metrics FILE: promtool's parser and linter find nothing to say
check_metrics() {
    promtool check metrics <"$1" >"$T/promtool.out" 2>&1 ||
        fail "promtool check metrics: $(head -n 5 "$T/promtool.out" | tr '\n' '|')"
    [[ ! -s $T/promtool.out ]] || fail "promtool check metrics: $(head -n 5 "$T/promtool.out" | tr '\n' '|')"
}
# value FILE METRIC MOUNTPOINT: the sample's value
value() { awk -v m="$2{mountpoint=\"$3\"}" '$1 == m {print $2}' "$1"; }

cat >"$T/in.txt" <<'S'
uptime_ns=10000000000
workers=2
codec=zstd
level=-5
block_size=1048576
logical_written=2000000000
physical_written=500000000
logical_read=7
physical_read=3
blocks_compressed=1900
blocks_raw=0
blocks_hole=100
ns_compress=18000000001
ns_store_write=1000000000
ns_wait_slots=7000000000
ns_decompress=0
ns_store_read=0
cache_hits=5
cache_misses=6
readahead_hits=0
write_errors=1
read_errors=0
stream_gaps=0
inflight_bytes=8388608
S
check "$CBFS" stats --prometheus --input "$T/in.txt" /backups
cp "$T/check.out" "$T/file.prom"
check_metrics "$T/file.prom"
check_eq 2000000000 "$(value "$T/file.prom" cbfs_logical_written_bytes_total /backups)" "logical bytes"
check_eq 18.000000001 "$(value "$T/file.prom" cbfs_compress_seconds_total /backups)" "compress seconds"
check_eq 10.000000000 "$(value "$T/file.prom" cbfs_uptime_seconds /backups)" "uptime"
check_eq -5 "$(value "$T/file.prom" cbfs_level /backups)" "level"
check_eq 8388608 "$(value "$T/file.prom" cbfs_inflight_bytes /backups)" "inflight gauge"
check_eq 4 "$(value "$T/file.prom" cbfs_compression_ratio /backups)" "ratio"
grep -q '^# TYPE cbfs_cache_hits_total counter$' "$T/file.prom" || fail "cache hits not a counter"
check_eq 1 "$(value "$T/file.prom" cbfs_write_errors_total /backups)" "write errors"
grep -q '^# TYPE cbfs_inflight_bytes gauge$' "$T/file.prom" || fail "in-flight bytes not a gauge"
grep -qF 'cbfs_info{mountpoint="/backups",version="' "$T/file.prom" || fail "no cbfs_info"
grep -qF 'codec="zstd"} 1' "$T/file.prom" || fail "cbfs_info lacks the codec"
# one sample per field of the text (the codec is a label of cbfs_info), plus info and ratio
n_fields=$(grep -vc '^codec=' "$T/in.txt")
check_eq $((n_fields + 2)) "$(grep -vc '^#' "$T/file.prom")" "samples, one per stats field"

# label values must be UTF-8: a mount point that is not is refused before anything is
# printed; a codec name from the daemon that is not comes out with U+FFFD
rc=0; "$CBFS" stats --prometheus --input "$T/in.txt" $'/b\xffx' >"$T/u.out" 2>"$T/u.err" || rc=$?
check_eq 2 "$rc" "a mount point that is not UTF-8"
grep -q 'not UTF-8' "$T/u.err" || fail "non-UTF-8 mount point: $(cat "$T/u.err")"
[[ ! -s $T/u.out ]] || fail "non-UTF-8 mount point: something was printed"
sed $'s/^codec=.*/codec=z\xffstd/' "$T/in.txt" >"$T/in-ff.txt"
check "$CBFS" stats --prometheus --input "$T/in-ff.txt" /backups
python3 -c 'import sys; open(sys.argv[1], "rb").read().decode("utf-8")' "$T/check.out" ||
    fail "--prometheus output is not UTF-8"
grep -qF $'codec="z\xef\xbf\xbdstd"' "$T/check.out" || fail "codec label: $(grep info "$T/check.out")"

# live, two mounts in one document; an empty one has a NaN ratio
mkdir -p "$T/s1" "$T/s2"
cbfs_mount "$T/s1" "$T/m1" codec=zstd:3
cbfs_mount "$T/s2" "$T/m2" codec=lz4
python3 "$CBFS_TOOLS/gendata.py" csv 8M "$T/a.csv" 4
cp "$T/a.csv" "$T/m1/a.csv"
cat "$T/m1/a.csv" >/dev/null
check "$CBFS" stats --prometheus "$T/m1" "$T/m2"
cp "$T/check.out" "$T/live.prom"
check_metrics "$T/live.prom"
(($(grep -c '^# TYPE' "$T/live.prom") == $(grep -c '^# TYPE' "$T/file.prom"))) ||
    fail "live and file documents have different metrics"
lw=$(value "$T/live.prom" cbfs_logical_written_bytes_total "$T/m1")
((lw >= 8 << 20)) || fail "m1 logical written $lw < 8 MiB"
pw=$(value "$T/live.prom" cbfs_physical_written_bytes_total "$T/m1")
((pw > 0 && pw < lw)) || fail "m1 physical written $pw (logical $lw)"
check_eq 0 "$(value "$T/live.prom" cbfs_logical_written_bytes_total "$T/m2")" "m2 logical written"
check_eq NaN "$(value "$T/live.prom" cbfs_compression_ratio "$T/m2")" "m2 ratio"
grep -qF "cbfs_info{mountpoint=\"$T/m2\",version=\"" "$T/live.prom" || fail "no cbfs_info for m2"
grep -qF 'codec="lz4"} 1' "$T/live.prom" || fail "m2's codec"
# the same mount twice would repeat its series (invalid): refused, nothing printed
rc=0; "$CBFS" stats --prometheus "$T/m1" "$T/m2" "$T/m1" >"$T/u.out" 2>"$T/u.err" || rc=$?
check_eq 2 "$rc" "the same mount point twice"
grep -q 'given twice' "$T/u.err" || fail "mount point twice: $(cat "$T/u.err")"
[[ ! -s $T/u.out ]] || fail "mount point twice: something was printed"

# a path without counters fails the whole run: stdout empty, exit 2, the path named
rc=0
"$CBFS" stats --prometheus "$T/m1" "$T" >"$T/bad.out" 2>"$T/bad.err" || rc=$?
check_eq 2 "$rc" "stats --prometheus with a plain directory"
[[ ! -s $T/bad.out ]] || fail "partial document on stdout: $(head -c 200 "$T/bad.out")"
grep -qF "$T has no user.cbfs.stats" "$T/bad.err" || fail "message: $(cat "$T/bad.err")"
cbfs_umount "$T/m1"
cbfs_umount "$T/m2"

# the alert rules load, and fire on a store at 5% free and on a stale textfile only
rules=$CBFS_REPO/mount-helpers/cbfs.rules.yml
check promtool check rules "$rules"
# docs/OPERATIONS.md quotes the rules: every expression it shows is the file's
grep -o 'expr: .*' "$CBFS_REPO/docs/OPERATIONS.md" >"$T/doc-exprs"
(($(wc -l <"$T/doc-exprs") == 3)) || fail "OPERATIONS.md shows $(wc -l <"$T/doc-exprs") alert expressions, not 3"
while read -r e; do
    grep -qF -- "$e" "$rules" || fail "OPERATIONS.md's '$e' is not in cbfs.rules.yml"
done <"$T/doc-exprs"
cp "$rules" "$T/cbfs.rules.yml"
cat >"$T/rules-test.yml" <<'Y'
rule_files: [cbfs.rules.yml]
evaluation_interval: 1m
tests:
  - interval: 1m
    input_series:
      - series: 'node_filesystem_avail_bytes{fstype="fuse.cbfs",mountpoint="/backups"}'
        values: '5x40'
      - series: 'node_filesystem_size_bytes{fstype="fuse.cbfs",mountpoint="/backups"}'
        values: '100x40'
      - series: 'node_filesystem_avail_bytes{fstype="fuse.cbfs",mountpoint="/dbdump"}'
        values: '50x40'
      - series: 'node_filesystem_size_bytes{fstype="fuse.cbfs",mountpoint="/dbdump"}'
        values: '100x40'
      - series: 'node_textfile_mtime_seconds{file="/var/lib/prometheus/node-exporter/cbfs.prom"}'
        values: '0x40'
      - series: 'node_textfile_mtime_seconds{file="/var/lib/prometheus/node-exporter/other.prom"}'
        values: '0x40'
      - series: 'cbfs_write_errors_total{mountpoint="/backups"}'
        values: '0x20 1x20'
      - series: 'cbfs_read_errors_total{mountpoint="/backups"}'
        values: '0x40'
    alert_rule_test:
      - eval_time: 15m
        alertname: CbfsErrors
        exp_alerts: []
      - eval_time: 25m
        alertname: CbfsErrors
        exp_alerts:
          - exp_labels: {severity: critical, mountpoint: /backups}
            exp_annotations:
              summary: "cbfs at /backups failed to store or read back data: see journalctl -t mount.cbfs"
      - eval_time: 10m
        alertname: CbfsStoreSpaceLow
        exp_alerts: []
      - eval_time: 20m
        alertname: CbfsStoreSpaceLow
        exp_alerts:
          - exp_labels: {severity: warning, fstype: fuse.cbfs, mountpoint: /backups}
            exp_annotations:
              summary: "cbfs store behind /backups has less than 10% free"
      - eval_time: 8m
        alertname: CbfsCountersStale
        exp_alerts: []
      - eval_time: 20m
        alertname: CbfsCountersStale
        exp_alerts:
          - exp_labels: {severity: warning, file: /var/lib/prometheus/node-exporter/cbfs.prom}
            exp_annotations:
              summary: "cbfs counters in /var/lib/prometheus/node-exporter/cbfs.prom not refreshed for 10 minutes"
Y
(cd "$T" && promtool test rules rules-test.yml) >"$T/rt.out" 2>&1 ||
    fail "promtool test rules: $(tail -n 15 "$T/rt.out" | tr '\n' '|')"
pass

#!/usr/bin/env bash
# The fleet at scale: test/bench/fleet at each size in SCALE_SIZES, agents
# started at SCALE_RATE per second (a DaemonSet rollout's wave), each agent
# with its own client, transport and connection, one after the other on one
# local kube-apiserver and etcd each. Prints one table of what each blade
# costs the control plane at each size; a size that does not finish is a row
# that says so and why (the harness's last words). With -o FILE it also
# writes the table into FILE's generated block "fleet-scale" (hack/benchdoc).
#
# Knobs (environment): SCALE_SIZES ("1000 5000 10000"), SCALE_RATE (20),
# SCALE_WINDOW (5m, one heartbeat period), SCALE_TIMEOUT (20m, per phase),
# SCALE_HANDSHAKE_TIMEOUT and SCALE_PING_TIMEOUT (60s each: each agent's
# TLS handshake and HTTP/2 ping timeouts, client-go's 10 s and 15 s raised so
# that a start-up wave on two shared cores does not turn into a storm of
# abandoned handshakes and reconnections; test/bench/fleet says why).
#
# Each row names its own commit, time and load. With -o, rows of sizes not
# in SCALE_SIZES already in the block are kept, so sizes can be measured in
# separate runs.
# Expects `make envtest-assets` to have run (make bench-scale does).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=""
while [ $# -gt 0 ]; do
  case "$1" in
    -o) out="$2"; shift 2 ;;
    *) echo "usage: $0 [-o docs/performance.md]" >&2; exit 2 ;;
  esac
done
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/k8s-tools.sh kube-apiserver etcd)}"
sizes="${SCALE_SIZES:-1000 5000 10000}"
rate="${SCALE_RATE:-20}"
window="${SCALE_WINDOW:-5m}"
timeout="${SCALE_TIMEOUT:-20m}"
handshake="${SCALE_HANDSHAKE_TIMEOUT:-60s}"
ping="${SCALE_PING_TIMEOUT:-60s}"
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
go build -o bin/fleet ./test/bench/fleet
go build -o bin/benchdoc ./hack/benchdoc
if [ -n "$out" ]; then bin/benchdoc -file "$out" -block fleet-scale -check; fi

# Rows of other sizes from an earlier run of this script (same columns).
kept=""
if [ -n "$out" ]; then
  kept=$(sed -n '/^<!-- BEGIN GENERATED fleet-scale -->$/,/^<!-- END GENERATED fleet-scale -->$/p' "$out" |
    awk -F'|' -v sizes=" $sizes " 'NF == 12 && $2 ~ /^ [0-9]+ $/ { n = $2; gsub(/ /, "", n); if (index(sizes, " " n " ") == 0) print }')
fi
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)

# write prints the table of the sizes measured so far and the kept rows,
# and with -o writes it into the block (after every size, so a run stopped
# later keeps what it measured).
write() {
  local all table machine
  all=$(printf '%s%s' "$rows" "${kept:+$kept$'\n'}" | sort -t'|' -k2,2n)
  table="| agents | all report config gen 1 after the first start | kube-apiserver CPU over the start-up wave (per agent) | agents' failed requests in the wave | kube-apiserver CPU at steady state, % of one core (per agent) | kube-apiserver resident (per agent) | etcd database in use (per blade) | BladeConfig change applied by all (confirmed in every Blade's status) | writes per blade per 5 min | measured (UTC, commit, load average before) |
|---|---|---|---|---|---|---|---|---|---|
$all
"
  machine="$(nproc) CPUs ($cpu_model), $mem RAM, $(go version | cut -d' ' -f3-), $(uname -sr); load average $(cut -d' ' -f1-3 /proc/loadavg) at $(date -u '+%H:%M UTC'), after the last row"
  echo
  echo "fleet at scale, started at $rate/s, steady window $window — $machine"
  echo
  echo "$table"
  if [ -n "$out" ]; then
    printf 'Measured by `SCALE_SIZES="..." make bench-scale BENCH_DOC=docs/performance.md` (hack/bench-scale.sh: SCALE_RATE=%s agents started per second, SCALE_WINDOW=%s, SCALE_HANDSHAKE_TIMEOUT=%s, SCALE_PING_TIMEOUT=%s), one size per row; the last run: SCALE_SIZES="%s".\n\nMachine: %s.\n\n%s\n' \
      "$rate" "$window" "$handshake" "$ping" "$sizes" "$machine" "$table" | bin/benchdoc -file "$out" -block fleet-scale
    echo "wrote the fleet-scale block of $out"
  fi
}

rows=""
for n in $sizes; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  began=$(date -u '+%Y-%m-%d %H:%M')
  echo "== fleet of $n agents, started at $rate/s (load average $load)" >&2
  t0=$(date +%s)
  if bin/fleet -agents "$n" -rate "$rate" -window "$window" -timeout "$timeout" \
    -tls-handshake-timeout "$handshake" -http2-ping-timeout "$ping" 2>&1 | tee "$logs/$n" | sed -u 's/^/   /' >&2; then
    ok=1
  else
    ok=0
  fi
  secs=$(( $(date +%s) - t0 ))
  r=$(sed -n 's/.*fleet-result //p' "$logs/$n")
  f() { tr ' ' '\n' <<<"$r" | awk -F= -v k="$1" '$1 == k {print $2}'; }
  when="$began–$(date -u '+%H:%M') UTC, $commit, load $load"
  if [ "$ok" = 1 ] && [ -n "$r" ]; then
    rows+="| $n | $(f gen1_s) s | $(f apiserver_start_cpu_s) CPU-s = $(awk -v c="$(f apiserver_start_cpu_s)" -v n="$n" 'BEGIN{printf "%.1f", 1000*c/n}') CPU-ms | $(f start_failures) | $(f apiserver_steady_pct) % = $(awk -v p="$(f apiserver_steady_pct)" -v n="$n" 'BEGIN{printf "%.4f", p/n}') % | $(f apiserver_rss_mib) MiB (peak $(f apiserver_peak_mib)) = $(f apiserver_kib_per_agent) KiB | $(f etcd_db_inuse_mib) MiB = $(f etcd_db_kib_per_blade) KiB | $(f reached_s) s ($(f config_s) s) | $(f writes_per_blade_5min) | $when |"$'\n'
  elif [ -n "$r" ] && [ "$(f partial)" = config ]; then
    # The wave measured; the BladeConfig change did not reach every agent in time.
    rows+="| $n | $(f gen1_s) s | $(f apiserver_start_cpu_s) CPU-s = $(awk -v c="$(f apiserver_start_cpu_s)" -v n="$n" 'BEGIN{printf "%.1f", 1000*c/n}') CPU-ms | $(f start_failures) | not reached | $(f apiserver_rss_mib) MiB (peak $(f apiserver_peak_mib)) = $(f apiserver_kib_per_agent) KiB, after the wave | $(f etcd_db_inuse_mib) MiB = $(f etcd_db_kib_per_blade) KiB, after the wave | $(f reached_s) s (confirmed by $(f config_reached) of $n after $(f config_timeout_s) s) | not reached | $when |"$'\n'
  elif [ -n "$r" ] && [ "$(f partial)" = reach ]; then
    # The wave measured; the change did not reach every agent in time.
    rows+="| $n | $(f gen1_s) s | $(f apiserver_start_cpu_s) CPU-s = $(awk -v c="$(f apiserver_start_cpu_s)" -v n="$n" 'BEGIN{printf "%.1f", 1000*c/n}') CPU-ms | $(f start_failures) | not reached | | | not by all: $(f reached) of $n after $(f config_timeout_s) s | not reached | $when |"$'\n'
  else
    why=$(grep -v '^ *$' "$logs/$n" | tail -n 1 | tr '|' '/' | cut -c1-400)
    rows+="| $n | did not finish in ${secs} s: $why | | | | | | | | $when |"$'\n'
  fi
  write
done

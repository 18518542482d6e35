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
# SCALE_WINDOW (5m, one heartbeat period), SCALE_TIMEOUT (20m, per phase).
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
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
go build -o bin/fleet ./test/bench/fleet
go build -o bin/benchdoc ./hack/benchdoc
if [ -n "$out" ]; then bin/benchdoc -file "$out" -block fleet-scale -check; fi

rows=""
for n in $sizes; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "== fleet of $n agents, started at $rate/s (load average $load)" >&2
  t0=$(date +%s)
  if bin/fleet -agents "$n" -rate "$rate" -window "$window" -timeout "$timeout" 2>&1 | tee "$logs/$n" | sed 's/^/   /' >&2; then
    ok=1
  else
    ok=0
  fi
  secs=$(( $(date +%s) - t0 ))
  r=$(sed -n 's/.*fleet-result //p' "$logs/$n")
  f() { tr ' ' '\n' <<<"$r" | awk -F= -v k="$1" '$1 == k {print $2}'; }
  if [ "$ok" = 1 ] && [ -n "$r" ]; then
    rows+="| $n | $(f gen1_s) s | $(f apiserver_start_cpu_s) CPU-s = $(awk -v c="$(f apiserver_start_cpu_s)" -v n="$n" 'BEGIN{printf "%.1f", 1000*c/n}') CPU-ms | $(f apiserver_steady_pct) % = $(awk -v p="$(f apiserver_steady_pct)" -v n="$n" 'BEGIN{printf "%.4f", p/n}') % | $(f apiserver_rss_mib) MiB (peak $(f apiserver_peak_mib)) = $(f apiserver_kib_per_agent) KiB | $(f etcd_db_inuse_mib) MiB = $(f etcd_db_kib_per_blade) KiB | $(f config_s) s | $(f writes_per_blade_5min) | $load |"$'\n'
  else
    why=$(grep -v '^ *$' "$logs/$n" | tail -n 1 | tr '|' '/')
    rows+="| $n | did not finish in ${secs} s: $why | | | | | | | $load |"$'\n'
  fi
done

table="| agents | all report config gen 1 after the first start | kube-apiserver CPU over the start-up wave (per agent) | kube-apiserver CPU at steady state, % of one core (per agent) | kube-apiserver resident (per agent) | etcd database in use (per blade) | BladeConfig change applied by all | writes per blade per 5 min | load average before |
|---|---|---|---|---|---|---|---|---|
$rows"
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)
machine="$(nproc) CPUs ($cpu_model), $mem RAM, $(go version | cut -d' ' -f3-), $(uname -sr); $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "fleet at scale, started at $rate/s, steady window $window — $machine"
echo
echo "$table"
if [ -n "$out" ]; then
  printf 'Measured by `make bench-scale BENCH_DOC=docs/performance.md` (hack/bench-scale.sh: SCALE_SIZES="%s", SCALE_RATE=%s, SCALE_WINDOW=%s).\n\nMachine: %s.\n\n%s\n' \
    "$sizes" "$rate" "$window" "$machine" "$table" | bin/benchdoc -file "$out" -block fleet-scale
  echo "wrote the fleet-scale block of $out"
fi

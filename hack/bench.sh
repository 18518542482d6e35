#!/usr/bin/env bash
# Runs every kubeblade benchmark one after the other (they share a small
# machine, so never in parallel) and prints one table: agent footprint,
# Kubernetes-mode latencies and writes, the 1 000-blade fleet and the
# operator's assignment harness. With -o FILE it also writes the table, with
# the machine it ran on, into FILE's generated block "latest-run"
# (hack/benchdoc): the rest of FILE (docs/performance.md) is hand-written and
# stays as it is. The targets are the goals of FILE's "Goals" table
# (test/docs checks that they agree).
#
# Knobs (environment): BENCH_FOOTPRINT_SECONDS (60), BENCH_BENCHTIME (50x),
# BENCH_AGENTS (1000), BENCH_FLEET_WINDOW (5m), BENCH_FLEET_QUIET (90s),
# BENCH_OPERATOR_NODES (1000), BENCH_OPERATOR_STEADY (60s), BENCH_STALE_KILL (100),
# BENCH_STALE_HEARTBEAT (30s).
# Expects `make build build-standalone envtest-assets` to have run (make bench does).
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
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
fsecs="${BENCH_FOOTPRINT_SECONDS:-60}"
agents="${BENCH_AGENTS:-1000}"
opnodes="${BENCH_OPERATOR_NODES:-1000}"
load_before=$(cut -d' ' -f1-3 /proc/loadavg)

step() { echo "== $*" >&2; }
run() { # name, command...: keep the log, show it, fail loudly
  local name=$1; shift
  if ! "$@" >"$logs/$name" 2>&1; then
    cat "$logs/$name" >&2
    echo "bench: $name failed" >&2
    exit 1
  fi
  sed 's/^/   /' "$logs/$name" >&2
}

go build -o bin/kubeenv ./hack/kubeenv
go build -o bin/benchdoc ./hack/benchdoc
# Fail before an hour of benchmarks, not after, if the page has no block for them.
if [ -n "$out" ]; then bin/benchdoc -file "$out" -block latest-run -check; fi
step "footprint: lean standalone agent (-tags nokube), ${fsecs} s"
run fp-lean env AGENT=bin/kubeblade-agent-standalone FOOTPRINT_SECONDS="$fsecs" hack/footprint.sh
step "footprint: full agent, standalone, ${fsecs} s"
run fp-full env AGENT=bin/kubeblade-agent FOOTPRINT_SECONDS="$fsecs" hack/footprint.sh
step "footprint: full agent, Kubernetes mode, ${fsecs} s"
run fp-kube env AGENT=bin/kubeblade-agent FOOTPRINT_KUBERNETES=1 FOOTPRINT_SECONDS="$fsecs" hack/footprint.sh
step "Kubernetes-mode latency and writes (go test -bench, ${BENCH_BENCHTIME:-50x})"
run gobench go test ./internal/kubeagent/ -run '^$' -bench . -benchtime "${BENCH_BENCHTIME:-50x}" -count 1
step "fleet: $agents simulated agents in one process against one API server"
run fleet go run ./test/bench/fleet -agents "$agents" -window "${BENCH_FLEET_WINDOW:-5m}" -quiet "${BENCH_FLEET_QUIET:-90s}"
step "fleet with fan-peer pairs: $agents agents, every two sharing a fan unit"
run fleet-peers go run ./test/bench/fleet -agents "$agents" -fan-peers -window "${BENCH_FLEET_WINDOW:-5m}" -quiet "${BENCH_FLEET_QUIET:-90s}"
step "fleet: stale detection, ${BENCH_STALE_KILL:-100} of $agents agents killed at once (heartbeat ${BENCH_STALE_HEARTBEAT:-30s})"
run fleet-stale go run ./test/bench/fleet -agents "$agents" -fan-peers -heartbeat "${BENCH_STALE_HEARTBEAT:-30s}" -window 0 -kill "${BENCH_STALE_KILL:-100}"
step "operator: $opnodes Nodes, 3 BladeConfigs"
run operator go run ./test/bench/operator -nodes "$opnodes" -steady "${BENCH_OPERATOR_STEADY:-60s}"
load_after=$(cut -d' ' -f1-3 /proc/loadavg)

# Extraction: each harness prints fixed phrases (see their sources).
rss() { awk '/RSS now/{gsub(/[(),]/,""); printf "%s MiB (anon %s, file %s)", $3, $6, $9}' "$logs/$1"; }
cpu() { awk '/CPU /{printf "%s %%", $2}' "$logs/$1"; }
metric() { awk -v b="$1" -v u="$2" '$1 ~ "^"b"-" {for (i = 3; i < NF; i++) if ($(i+1) == u) print $i}' "$logs/gobench"; }
fleet() { sed -n 's/.*fleet-result //p' "$logs/${2:-fleet}" | tr ' ' '\n' | awk -F= -v k="$1" '$1 == k {print $2}'; }
opassign=$(sed -n 's/^all [0-9]* nodes assigned after \([^;]*\);.*after \(.*\)$/\1 (statuses accounted: \2)/p' "$logs/operator")
opsteady=$(sed -n 's/^steady state: \([0-9.]*\) writes\/min excluding.*(\([0-9.]*\)\/min including them)/\1 writes\/min (\2 with lease renewals)/p' "$logs/operator")
fwin=$(fleet window_s)

table=$(cat <<EOF
| measurement | result | target |
|---|---|---|
| agent RSS, lean standalone (\`-tags nokube\`) | $(rss fp-lean) | ≤ 11.6 MiB |
| agent CPU, lean standalone | $(cpu fp-lean) of one core | ≤ 0.2 % |
| agent RSS, full build, standalone (the image's binary) | $(rss fp-full) | |
| agent CPU, full build, standalone | $(cpu fp-full) of one core | ≤ 0.2 % |
| agent RSS, Kubernetes mode | $(rss fp-kube) | ≤ 35 MiB |
| agent CPU, Kubernetes mode | $(cpu fp-kube) of one core | |
| annotation → hardware p50 / p99 | $(metric BenchmarkAnnotationToHardware p50-ms) / $(metric BenchmarkAnnotationToHardware p99-ms) ms | p99 ≤ 200 ms |
| button → stored Event p50 / p99 | $(metric BenchmarkButtonToStoredEvent p50-ms) / $(metric BenchmarkButtonToStoredEvent p99-ms) ms | p99 ≤ 50 ms |
| API writes per agent, constant temperature | $(metric BenchmarkWritesPerHour writes/hour) per hour | ≤ 15 per hour |
| fleet: all Blade objects created (API server acknowledged) | $(fleet agents) agents: $(fleet created_s) s after the first agent started (seen by a watch: $(fleet blades_s) s; all report config gen 1: $(fleet gen1_s) s) | ≤ 5 s at 1 000 agents |
| fleet: BladeConfig change applied by all | $(fleet reached_s) s (confirmed in every Blade's status: $(fleet config_s) s) | ≤ 10 s at 1 000 agents |
| fleet: API writes at steady state | $(fleet writes_per_min)/min = $(fleet writes_per_blade_5min) per blade per 5 min (${fwin} s window) | ≤ 1 per blade per 5 min |
| fleet: memory per agent | $(fleet heap_kib) KiB heap in use, $(fleet sys_kib) KiB runtime Sys | |
| fleet: API server / etcd memory at the end | $(fleet apiserver_rss_mib) / $(fleet etcd_rss_mib) MiB resident (peak $(fleet apiserver_peak_mib) / $(fleet etcd_peak_mib) MiB) | |
| fleet: CPU at steady state, all agents | $(fleet cpu_pct) % of one core | |
| fleet, fan-peer pairs: API writes at steady state | $(fleet writes_per_min fleet-peers)/min = $(fleet writes_per_blade_5min fleet-peers) per blade per 5 min | ≤ 1 per blade per 5 min more than without |
| fleet: agents killed at once, all marked stale | $(fleet killed fleet-stale) killed: $(fleet stale_after_kill_s fleet-stale) s after the kill (worst $(fleet stale_after_heartbeat_s fleet-stale) s after a last heartbeat), heartbeat ${BENCH_STALE_HEARTBEAT:-30s} | ≤ 3 heartbeats + 10 s |
| operator: Nodes assigned | $opnodes Nodes: $opassign | ≤ 10 s for 1 000 Nodes |
| operator: writes at steady state | $opsteady | 0 |
EOF
)

cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)
machine="$(nproc) CPUs ($cpu_model), $mem RAM, $(go version | cut -d' ' -f3-), $(uname -sr); $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown); load average $load_before before, $load_after after"
echo
echo "kubeblade benchmarks — $machine"
echo
echo "$table"

if [ -n "$out" ]; then
  printf 'Measured by `make bench BENCH_DOC=docs/performance.md` (hack/bench.sh).\n\nMachine: %s.\n\n%s\n' "$machine" "$table" |
    bin/benchdoc -file "$out" -block latest-run
  echo
  echo "wrote the latest-run block of $out"
fi

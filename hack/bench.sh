#!/usr/bin/env bash
# Runs every kubeblade benchmark one after the other (they share a small
# machine, so never in parallel) and prints one table: agent footprint,
# Kubernetes-mode latencies and writes, the 1 000-blade fleet and the
# operator's assignment harness. With -o FILE it also writes the table, with
# the machine it ran on, as Markdown to FILE (docs/performance.md).
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
# Sections measured by other harnesses (the rack view's needs Chromium:
# make bench-dashboard) are kept from the file being rewritten.
kept=""
if [ -n "$out" ] && [ -f "$out" ]; then kept=$(sed -n '/^## Rack view/,$p' "$out"); fi

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
| agent RSS, lean standalone (\`-tags nokube\`) | $(rss fp-lean) | ≤ 15 MiB |
| agent CPU, lean standalone | $(cpu fp-lean) of one core | ≤ 0.2 % |
| agent RSS, full build, standalone | $(rss fp-full) | (the image's binary; systemd installs use the lean build) |
| agent CPU, full build, standalone | $(cpu fp-full) of one core | ≤ 0.2 % |
| agent RSS, Kubernetes mode | $(rss fp-kube) | ≤ 35 MiB |
| agent CPU, Kubernetes mode | $(cpu fp-kube) of one core | |
| annotation → hardware p50 / p99 | $(metric BenchmarkAnnotationToHardware p50-ms) / $(metric BenchmarkAnnotationToHardware p99-ms) ms | p99 ≤ 200 ms |
| button → stored Event p50 / p99 | $(metric BenchmarkButtonToStoredEvent p50-ms) / $(metric BenchmarkButtonToStoredEvent p99-ms) ms | p99 ≤ 200 ms |
| API writes per agent, constant temperature | $(metric BenchmarkWritesPerHour writes/hour) per hour | ≤ 15 |
| fleet of $(fleet agents): all Blade objects created (API server acknowledged) | $(fleet created_s) s after the first agent started (seen by a watch: $(fleet blades_s) s; all report config gen 1: $(fleet gen1_s) s) | ≤ 5 s |
| fleet: BladeConfig change applied by all | $(fleet config_s) s | ≤ 10 s |
| fleet: API writes at steady state | $(fleet writes_per_min)/min = $(fleet writes_per_blade_5min) per blade per 5 min (${fwin} s window) | ≤ 1 per blade per 5 min |
| fleet: memory per agent | $(fleet heap_kib) KiB heap in use, $(fleet sys_kib) KiB runtime Sys | |
| fleet: API server / etcd memory at the end | $(fleet apiserver_rss_mib) / $(fleet etcd_rss_mib) MiB resident (peak $(fleet apiserver_peak_mib) / $(fleet etcd_peak_mib) MiB) | |
| fleet: CPU at steady state, all agents | $(fleet cpu_pct) % of one core | |
| fleet, fan-peer pairs: API writes at steady state | $(fleet writes_per_min fleet-peers)/min = $(fleet writes_per_blade_5min fleet-peers) per blade per 5 min | ≤ 1 per blade per 5 min more than without |
| fleet: $(fleet killed fleet-stale) agents killed at once, all marked stale | $(fleet stale_after_kill_s fleet-stale) s after the kill (worst $(fleet stale_after_heartbeat_s fleet-stale) s after a last heartbeat), heartbeat ${BENCH_STALE_HEARTBEAT:-30s} | ≤ 3 heartbeats + 10 s |
| operator: $opnodes Nodes assigned | $opassign | ≤ 10 s |
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
  {
    cat <<EOF
# Performance

Measured by \`make bench\` (\`hack/bench.sh -o docs/performance.md\` rewrites this file).
Each part is a harness that prints figures; none is a timed test. Parts run one after
the other, never in parallel.

## Latest run

Machine: $machine.

$table

The machine is shared: a load average above the CPU count means other work competed
for the cores during the run, which inflates every latency and throughput figure above.

## What each line measures

- **agent RSS/CPU** — \`hack/footprint.sh\` (also \`make bench-footprint\`): the agent on a
  simulated blade for ${fsecs} s after a 5 s warm-up; RSS split into anonymous memory (the
  agent's own) and file-backed pages (the binary's code, shared and reclaimable). The
  Kubernetes-mode run talks to a local kube-apiserver and etcd (\`hack/kubeenv\`).
- **annotation → hardware, button → stored Event, writes per hour** — Go benchmarks in
  \`internal/kubeagent/bench_test.go\` against a real API server (envtest).
  Writes per hour run one simulated hour on a fake clock at constant temperature.
- **fleet** — \`test/bench/fleet\`: $(fleet agents) agents in one process (each a simulated
  blade, an agent loop and a Kubernetes reporter with its own clients, rate limiter
  and two watches) against one kube-apiserver and etcd on the same machine. The API
  server's \`--max-requests-inflight\`/\`--max-mutating-requests-inflight\` are raised to
  3000/1000. Nodes are created labelled \`kubeblade.io/config=fleet\` first. "All Blade
  objects exist" counts from the agents' start; the config change (fan curve and idle
  colour) counts from the update until every Blade reports generation 2 in
  \`status.config\`. Steady-state writes are counted from each reporter's \`Stats().Writes\`
  over one heartbeat period (5 min), after waiting past the one temperature-drift write
  a config change causes a minute later (\`MinInterval\`); at steady state a blade writes
  only its heartbeat. Memory per agent is the Go heap in use (and runtime \`Sys\`) after
  the run minus before the fleet started, divided by the number of agents; the API
  server's and etcd's memory is not included.
- **fan-peer pairs** — the same fleet with \`-fan-peers\`: blades 2i and 2i+1 declare each
  other as fan peer (\`kubeblade.io/fan-peer\`), so every agent also watches its peer's
  Blade by name and follows its demand; steady-state writes as above. The difference to
  the line above is what fan sync costs.
- **stale detection** — the fleet with \`-kill\`: the operator runs in the harness's
  process; after start-up the agents of the first N blades stop at once (their Blades
  stay, as with crashed pods) and the harness's Blade watch times until each is marked
  \`Unknown\`. Three heartbeat periods at the default 5 min would be 15 min, so this run
  shortens every agent's heartbeat (\`-heartbeat\`; agents publish their period in
  \`status.heartbeatPeriodSeconds\`, which the operator reads) and skips the
  steady-state count.
- **operator** — \`test/bench/operator\` (also \`make bench-operator\`): 1 000 Nodes and three
  overlapping BladeConfigs; time until every Node carries the right label and every
  BladeConfig status accounts for its Nodes; writes per minute once settled.

## Why the binaries are this size

Most of an idle agent's RSS is file-backed: the pages of its own binary that start-up
and the control loop touched (the kernel maps neighbouring pages of the page cache
along with each fault). The binary's size is therefore the agent's memory, and three
things keep it small; \`cmd/kubeblade-agent/deps_test.go\` fails if either regresses.

- **\`-tags grpcnotrace\`** on every build (the Makefile's \`TAGS\`). Without it grpc-go
  imports \`golang.org/x/net/trace\`, which imports \`html/template\`; its reflective
  method calls make the Go linker keep every exported method of every type that
  reaches an interface, and client-go registers thousands of types. Measured
  2026-11-29 with \`hack/footprint.sh\` on an idle machine: the agent binary went from
  52 MB to 33 MB (stripped), its Kubernetes-mode RSS from 49.0 to 31.7 MiB.
- **\`api/agentconfig/v1alpha1\` imports nothing from Kubernetes**, so the lean
  \`-tags nokube\` build (\`make build-standalone\`) links no client-go, apimachinery or
  \`k8s.io/api\`: 11.8 MB instead of 21.6 MB, RSS 11.3 instead of 16.3 MiB.
- **The agent's own Kubernetes client** (\`internal/kubeclient\`): typed clients for
  the five kinds it touches, built from client-go's \`rest\` and \`gentype\`, and an
  Events recorder of its own (\`internal/kubeevents\`). client-go's clientset, typed
  clients, events recorder and CSR helper, and controller-runtime's client, all import
  client-go's \`kubernetes/scheme\`, which registers every built-in API group: with them,
  \`k8s.io/api\` was 7.3 of the agent's 15.3 MB of machine code (\`go tool nm -size\`).
  Measured 2026-11-29 with \`hack/footprint.sh\` on an idle machine: binary 47 MB to
  30 MB, Kubernetes-mode RSS 33.4 to 21.7 MiB, full build standalone 27.6 to 16.9 MiB.
  The operator and bladectl keep client-go's and controller-runtime's clients.
EOF
    if [ -n "$kept" ]; then printf '\n%s\n' "$kept"; fi
  } >"$out"
  echo
  echo "wrote $out"
fi

#!/usr/bin/env bash
# Runs the standalone agent on a simulated blade and prints its resident
# memory and CPU use: a harness, not a test, because timings on a shared
# machine are noisy. FOOTPRINT_SECONDS sets the measured window (default 60).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
agent="${AGENT:-$root/bin/kubeblade-agent}"
secs="${FOOTPRINT_SECONDS:-60}"
warmup="${FOOTPRINT_WARMUP:-5}"
dir=$(mktemp -d)
pid=""
trap '[ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; rm -rf "$dir"' EXIT

cat >"$dir/agent.yaml" <<YAML
hardware:
  backend: simulated
grpc:
  socketPath: $dir/agent.sock
metrics:
  bindAddress: 127.0.0.1:0
YAML
mode=standalone
args=()
if [ "${FOOTPRINT_KUBERNETES:-0}" = 1 ]; then
  mode=kubernetes
  "${KUBEENV:-$root/bin/kubeenv}" --write-kubeconfig "$dir/kubeconfig" --nodes blade-footprint >"$dir/kubeenv.log" 2>&1 &
  envpid=$!
  trap '[ -n "$pid" ] && { kill "$pid" 2>/dev/null; wait "$pid" 2>/dev/null; }; kill "$envpid" 2>/dev/null || true; wait "$envpid" 2>/dev/null || true; rm -rf "$dir"' EXIT
  for _ in $(seq 600); do grep -q ready "$dir/kubeenv.log" && break; sleep 0.1; done
  grep -q ready "$dir/kubeenv.log" || { echo "control plane did not start:"; cat "$dir/kubeenv.log"; exit 1; }
  args=(--kubernetes --kubeconfig "$dir/kubeconfig" --node-name blade-footprint)
fi
"$agent" --config "$dir/agent.yaml" --state-dir "$dir/state" --log-level warn "${args[@]}" 2>"$dir/agent.log" &
pid=$!
sleep "$warmup"
kill -0 "$pid" 2>/dev/null || { echo "agent exited:"; cat "$dir/agent.log"; exit 1; }

hz=$(getconf CLK_TCK)
cpu() { awk '{print $14+$15}' "/proc/$pid/stat"; }
rss() { awk '/^VmRSS:/{print $2}' "/proc/$pid/status"; }
c0=$(cpu); t0=$(date +%s.%N); peak=0
for ((i = 0; i < secs; i++)); do
  r=$(rss); (( r > peak )) && peak=$r
  sleep 1
done
c1=$(cpu); t1=$(date +%s.%N); r=$(rss)
# Anonymous memory is the agent's own; file-backed pages are the binary's
# code, shared and reclaimable, but counted in RSS.
split=$(awk '/^RssAnon:/{a=$2} /^RssFile:/{f=$2} END{printf "anonymous %.1f MiB, file-backed %.1f MiB", a/1024, f/1024}' "/proc/$pid/status")
awk -v rsssplit="$split" -v agent="$(basename "$agent")" -v mode="$mode" -v c0="$c0" -v c1="$c1" -v t0="$t0" -v t1="$t1" -v hz="$hz" -v rss="$r" -v peak="$peak" -v secs="$secs" 'BEGIN {
  wall = t1 - t0; cpu = (c1 - c0) / hz
  printf "%s, %s mode, simulated blade, %d s window\n", agent, mode, secs
  printf "  RSS now   %6.1f MiB (%s)\n", rss / 1024, rsssplit
  printf "  RSS peak  %6.1f MiB\n", peak / 1024
  printf "  CPU       %6.3f %% of one core (%.2f s CPU in %.1f s; tick %d Hz)\n", 100 * cpu / wall, cpu, wall, hz
}'

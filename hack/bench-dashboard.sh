#!/usr/bin/env bash
# The rack view at scale: test/bench/dashboard at each size in
# DASHBOARD_SIZES, one after the other, each on a local kube-apiserver and
# etcd of its own, `bladectl dashboard` as its own process and the page in
# headless Chromium. Prints one table: first paint, the blades in view
# drawn, memory, the far end of the rack, and the server's CPU and bytes
# sent while every blade changes every 5 s. A size that does not finish is
# a row that says so and why. With -o FILE it also writes the table into
# FILE's generated block "rack-view" (hack/benchdoc).
#
# Knobs (environment): DASHBOARD_SIZES ("1000 5000 10000"), DASHBOARD_BLADECTL
# (bin/bladectl: the binary measured, e.g. one built at an older commit),
# BENCH_DASHBOARD_ARGS (more flags for each run, e.g. "-window 2m"; one with
# -blades N measures that size only).
# Expects `make build envtest-assets` to have run (make bench-dashboard does).
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
sizes="${DASHBOARD_SIZES:-1000 5000 10000}"
bladectl="${DASHBOARD_BLADECTL:-bin/bladectl}"
args="${BENCH_DASHBOARD_ARGS:-}"
if [[ " $args " =~ \ -?-blades[=\ ]+([0-9]+) ]]; then
  sizes=${BASH_REMATCH[1]}
fi
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
go build -o bin/bench-dashboard ./test/bench/dashboard
go build -o bin/benchdoc ./hack/benchdoc
if [ -n "$out" ]; then bin/benchdoc -file "$out" -block rack-view -check; fi

rows=""
for n in $sizes; do
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  echo "== rack view with $n blades (load average $load)" >&2
  t0=$(date +%s)
  # shellcheck disable=SC2086 # BENCH_DASHBOARD_ARGS is a list of flags
  if bin/bench-dashboard -bladectl "$bladectl" -blades "$n" $args 2>&1 | tee "$logs/$n" | sed 's/^/   /' >&2; then
    ok=1
  else
    ok=0
  fi
  secs=$(( $(date +%s) - t0 ))
  r=$(sed -n 's/.*dashboard-result //p' "$logs/$n")
  f() { tr ' ' '\n' <<<"$r" | awk -F= -v k="$1" '$1 == k {print $2}'; }
  if [ "$ok" = 1 ] && [ -n "$r" ]; then
    rows+="| $n | $(f fcp_ms) ms | $(f usable_ms) ms / $(f answering_ms) ms | $(f cards) cards, $(f dom_nodes) nodes | $(f heap_mib) MiB / $(f pss_mib) MiB | $(f scroll_ms) ms | $(f writes_per_s)/s of $(f target_per_s)/s | $(f server_cpu_s_per_min) CPU-s ($(f server_ms_per_write) ms per write) | $(f sent_mib_per_min) MiB ($(f sent_bytes_per_write) B per write) | $(f browser_cpu_pct) %, $(f heap_load_mib) MiB, $(f dom_nodes_load) nodes | $(f led_p50_ms) / $(f led_max_ms) ms | $(f load_before | tr / ' ') |"$'\n'
  else
    why=$(grep -v '^ *$' "$logs/$n" | tail -n 1 | tr '|' '/')
    rows+="| $n | did not finish in ${secs} s: $why | | | | | | | | | | $load |"$'\n'
  fi
done

table="| blades | first contentful paint | blades in view drawn / main thread free | in the DOM after load | JS heap / Chromium PSS after load | scrolled to the last blade: drawn in view after | Blade writes achieved (every blade every 5 s asked) | dashboard server CPU per minute | sent to the page per minute | browser under load: CPU, JS heap, DOM nodes | LED change shown, p50 / max | load average before |
|---|---|---|---|---|---|---|---|---|---|---|---|
$rows"
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
mem=$(awk '/^MemTotal:/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)
chromium=$({ "${KUBEBLADE_CHROMIUM:-chromium}" --version 2>/dev/null || echo "Chromium"; } | head -n 1)
measured=$("$bladectl" version --client 2>/dev/null || true)
[ -n "$measured" ] || measured=$bladectl
machine="$(nproc) CPUs ($cpu_model), $mem RAM, $(go version | cut -d' ' -f3-), $(uname -sr), $chromium; $(date -u '+%Y-%m-%d %H:%M UTC'); commit $(git rev-parse --short HEAD 2>/dev/null || echo unknown), measuring $measured; load average $(cut -d' ' -f1-3 /proc/loadavg) at the end"
echo
echo "rack view — $machine"
echo
echo "$table"
if [ -n "$out" ]; then
  printf 'Measured by `make bench-dashboard BENCH_DOC=docs/performance.md` (hack/bench-dashboard.sh: DASHBOARD_SIZES="%s"%s).\n\nMachine: %s.\n\n%s\n' \
    "$sizes" "${args:+, BENCH_DASHBOARD_ARGS=\"$args\"}" "$machine" "$table" | bin/benchdoc -file "$out" -block rack-view
  echo "wrote the rack-view block of $out"
fi

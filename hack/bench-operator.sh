#!/usr/bin/env bash
# The operator assigning Nodes to BladeConfigs (test/bench/operator) on a
# local kube-apiserver and etcd, at the size and client limits given as the
# harness's flags (BENCH_OPERATOR_ARGS through make bench-operator, e.g.
# "-nodes 10000 -qps 500 -burst 1000"). Prints the harness's output; with
# -o FILE it also writes its figures, with the command, commit, machine
# and load, into FILE's generated block "operator-scale" (hack/benchdoc).
# Expects `make envtest-assets` to have run (make bench-operator does).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
out=""
if [ "${1:-}" = "-o" ]; then out="$2"; shift 2; fi
export KUBEBUILDER_ASSETS="${KUBEBUILDER_ASSETS:-$(hack/k8s-tools.sh kube-apiserver etcd)}"
go build -o bin/opbench ./test/bench/operator
go build -o bin/benchdoc ./hack/benchdoc
if [ -n "$out" ]; then bin/benchdoc -file "$out" -block operator-scale -check; fi
log=$(mktemp)
trap 'rm -f "$log"' EXIT
load0=$(cut -d' ' -f1-3 /proc/loadavg)
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
bin/opbench "$@" 2>&1 | tee "$log"
[ -n "$out" ] || exit 0

nodes=$(sed -n 's/^fixture: \([0-9]*\) nodes created.*/\1/p' "$log")
assign=$(sed -n 's/^all [0-9]* nodes assigned after \([^;]*\);.*after \(.*\)$/\1 (all BladeConfig statuses account for them: \2)/p' "$log")
steady=$(sed -n 's/^steady state: \([0-9.]*\) writes\/min excluding.*(\([0-9.]*\)\/min including them)/\1 writes\/min (\2 with leader-election lease renewals)/p' "$log")
mem=$(sed -n 's/^memory: //p' "$log")
if [ -z "$assign" ]; then echo "no result in the harness's output" >&2; exit 1; fi
cpu_model=$(awk -F': ' '/^model name/{print $2; exit}' /proc/cpuinfo)
ram=$(awk '/^MemTotal:/{printf "%.1f GiB", $2/1048576}' /proc/meminfo)
printf 'Measured by `make bench-operator BENCH_OPERATOR_ARGS="%s" BENCH_DOC=%s` (hack/bench-operator.sh), %s, commit %s; %s CPUs (%s), %s RAM, %s; load average %s before, %s after.\n\n| measurement | result |\n|---|---|\n| Nodes assigned | %s Nodes: %s |\n| writes at steady state | %s |\n| memory | %s |\n' \
  "$*" "$out" "$(date -u '+%Y-%m-%d %H:%M UTC')" "$commit" "$(nproc)" "$cpu_model" "$ram" "$(uname -sr)" "$load0" "$(cut -d' ' -f1-3 /proc/loadavg)" \
  "$nodes" "$assign" "$steady" "$mem" | bin/benchdoc -file "$out" -block operator-scale
echo "wrote the operator-scale block of $out"

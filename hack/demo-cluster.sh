#!/usr/bin/env bash
# make demo: a whole kubeblade cluster on this machine. etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl built from source
# (hack/k8s-tools.sh, cached in ~/.cache/kubeblade/k8s), three fake-kubelet blade Nodes,
# the CRDs and a BladeConfig, kubeblade-operator, and one kubeblade-agent
# process per blade on the simulated backend (hack/localcluster). Prints what
# to try and keeps running until Ctrl-C, which stops and removes everything.
#
# The walk-through is defined once, below, as one shell function per step:
# `cmd` lines are what a person types (printed as the walk-through, and run
# as they are printed under DEMO_SCRIPTED=1), `expect` lines what they should
# then see (printed as a comment, checked when scripted), `setup` lines the
# scripted run's own bookkeeping and `hint` lines the interactive-only
# extras (watches, the browser). So the printed walk-through cannot drift
# from the one that is tested.
#
# DEMO_SCRIPTED=1 (make demo-check) runs the walk-through instead, checks
# every step, ends with "N passed, M failed" (steps) and exits 0 when all
# worked; with TEST_REPORT_DIR set it also writes demo-check.counts for
# make test's end-of-run report.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripted="${DEMO_SCRIPTED:-0}"
export PATH="$root/bin:$PATH"

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
passed=0 failed=0 current=""
# counts prints the closing line every suite of make test prints, and
# records it for hack/testreport.
counts() {
  echo "$passed passed, $failed failed"
  if [ -n "${TEST_REPORT_DIR:-}" ]; then
    mkdir -p "$TEST_REPORT_DIR"
    echo "passed=$passed failed=$failed skipped=0" >"$TEST_REPORT_DIR/demo-check.counts"
  fi
}
# fail ends the scripted run (the EXIT trap prints the counts): later steps
# build on the cluster state the failed one should have left.
fail() {
  echo "DEMO FAILED${current:+ in step $current}: $*" >&2
  tail -n 20 "$dir"/cluster/logs/*.log >&2 2>/dev/null || true
  failed=$((failed + 1))
  exit 1
}
jp() { kubectl get "$1" -o "jsonpath=$2"; }
event_seen() { kubectl get events -A --field-selector "involvedObject.name=$1,reason=$2" -o name | grep -q .; }
condition() { jp "node/$1" "{.status.conditions[?(@.type==\"BladeThermalCritical\")].status}"; }
simstate() { curl -fsS --unix-socket "$DEMO_DIR/blades/$1/state/simulator.sock" http://blade/state; }

# The four kinds of walk-through line. $mode is "print" (the walk-through
# for a person) or "run" (DEMO_SCRIPTED=1).
# step TITLE: starts a step.
step() {
  if [ "$mode" = print ]; then printf '\n  # %s\n' "$*"; else bold "$current. $*"; fi
}
# cmd 'SHELL CODE': typed by a person; printed as is (with $DEMO_DIR and
# the like left for their shell, which the export line above sets), run by
# eval when scripted.
cmd() {
  if [ "$mode" = print ]; then printf '  %s\n' "$1"; return; fi
  printf '\033[2m$ %s\033[0m\n' "$1"
  eval "$1" || fail "command failed: $1"
}
# expect DESCRIPTION TIMEOUT_S 'SHELL CODE': what the person should see
# next; when scripted the code is evaluated (afresh each time) until it
# succeeds.
expect() {
  local what=$1 timeout=$2 check=$3
  if [ "$mode" = print ]; then printf '  #   -> %s\n' "$what"; return; fi
  local deadline=$(( $(date +%s) + timeout ))
  until eval "$check" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "$what (not within ${timeout}s)"
    sleep 0.2
  done
  echo "  ok: $what"
}
# setup 'SHELL CODE': the scripted run's bookkeeping, not printed.
setup() { [ "$mode" = print ] || eval "$1" || fail "setup failed: $1"; }
# hint 'LINE': printed only: interactive tools a script cannot use.
hint() { [ "$mode" != print ] || printf '  %s\n' "$1"; }

echo "Building the control plane (cached in ~/.cache/kubeblade/k8s; the first build of each binary takes minutes)..."
k8s=$(hack/k8s-tools.sh kube-apiserver etcd kube-controller-manager kube-scheduler kubectl)
export PATH="$k8s:$PATH"
# The release build's flags (as make build's), so a cold run reuses what
# that compiled rather than building the client tree a second time.
CGO_ENABLED=0 go build -trimpath -o bin/localcluster ./hack/localcluster

dir=$(mktemp -d "${TMPDIR:-/tmp}/kubeblade-demo.XXXXXX")
pid=""
restarted=""
cleanup() {
  if [ -n "$restarted" ] && kill -0 "$restarted" 2>/dev/null; then
    kill -TERM "$restarted"; wait "$restarted" 2>/dev/null || true
  fi
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    echo; echo "Stopping agents, operator, controllers and control plane..."
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
  fi
  rm -rf "$dir"
  # Last, after the stop messages: the line make test's report reads.
  if [ "$scripted" = 1 ]; then counts; fi
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bold "Starting the local cluster"
start=$(date +%s)
KUBEBUILDER_ASSETS="$k8s" bin/localcluster --dir "$dir/cluster" --env-file "$dir/env" >"$dir/localcluster.log" 2>&1 &
pid=$!
until [ -f "$dir/env" ]; do
  kill -0 "$pid" 2>/dev/null || { cat "$dir/localcluster.log"; fail "localcluster exited"; }
  [ $(( $(date +%s) - start )) -lt 300 ] || { cat "$dir/localcluster.log"; fail "cluster not ready in 300s"; }
  sleep 0.5
done
# shellcheck disable=SC1091
source "$dir/env"
export KUBECONFIG DEMO_DIR
echo "  up in $(( $(date +%s) - start ))s"
export BLADECTL_CONFIG="$dir/bladectl.yaml"
for n in $NODES; do
  bladectl config add "$n" --server "unix://$DEMO_DIR/blades/$n/agent.sock" >/dev/null
done
# The built-in "local" blade is the agent socket of a real blade host.
bladectl config remove local >/dev/null 2>&1 || true
bladectl config use blade-1 >/dev/null


# --- The walk-through, one function per step --------------------------------

step_rollout() {
  step "The operator rolled out one agent DaemonSet pod per blade"
  cmd 'kubectl get nodes -L kubeblade.io/config,kubeblade.io/soc'
  cmd 'kubectl -n kubeblade-system get daemonsets,pods -o wide'
  setup 'n=$(echo "$NODES" | wc -w)'
  expect "DaemonSet desired = ready = one per blade" 30 'test "$(kubectl -n kubeblade-system get ds kubeblade-agent-default -o jsonpath="{.status.desiredNumberScheduled}/{.status.numberReady}")" = "$n/$n"'
  cmd 'kubectl get bladeconfigs'
  cmd 'bladectl get blades                       # or: kubectl get blades -o wide'
  expect "bladectl get blades lists every blade" 10 'bladectl get blades | grep -q blade-3'
}

step_identify() {
  step "identify: the edge LED blinks; the Blade and an Event say so"
  cmd 'kubectl annotate node blade-1 kubeblade.io/identify=true --overwrite'
  expect "Blade blade-1 reports identify" 10 'test "$(jp blade/blade-1 "{.status.identify}")" = true'
  expect "an IdentifyStarted Event" 10 'event_seen blade-1 IdentifyStarted'
  cmd 'curl -s --unix-socket $DEMO_DIR/blades/blade-1/state/simulator.sock http://blade/state'
  cmd 'bladectl --node blade-1 status'
}

step_button() {
  step "press blade-1's button: confirms identify (annotation removed), Event ButtonPressed"
  cmd 'curl -fsS -o /dev/null -X POST --unix-socket $DEMO_DIR/blades/blade-1/state/simulator.sock http://blade/button'
  expect "a ButtonPressed Event" 10 'event_seen blade-1 ButtonPressed'
  expect "the identify annotation removed" 10 'test -z "$(jp node/blade-1 "{.metadata.annotations.kubeblade\.io/identify}")"'
  expect "Blade blade-1 identify off" 10 'test "$(jp blade/blade-1 "{.status.identify}")" != true'
  cmd 'kubectl get events --field-selector involvedObject.name=blade-1 --sort-by=.eventTime'
}

step_overheat() {
  step "heat blade-2 (busy, 75 °C): critical (fan 100 %, condition, taint, Warning Event), then recovery"
  cmd "curl -fsS -o /dev/null -X POST --unix-socket \$DEMO_DIR/blades/blade-2/state/simulator.sock 'http://blade/load?value=2'"
  cmd "curl -fsS -o /dev/null -X POST --unix-socket \$DEMO_DIR/blades/blade-2/state/simulator.sock 'http://blade/temperature?celsius=75'"
  expect "BladeThermalCritical=True" 10 'test "$(condition blade-2)" = True'
  expect "the taint kubeblade.io/thermal-critical" 10 'kubectl get node blade-2 -o jsonpath="{.spec.taints[*].key}" | grep -q thermal-critical'
  expect "a CriticalTemperature Warning Event" 10 'kubectl get events --field-selector involvedObject.name=blade-2,reason=CriticalTemperature,type=Warning -o name | grep -q .'
  cmd "kubectl get node blade-2 -o custom-columns='NAME:.metadata.name,CRITICAL:.status.conditions[?(@.type==\"BladeThermalCritical\")].status,TAINTS:.spec.taints[*].key'   # -w to watch"
  cmd 'bladectl --blade blade-2 status'
  cmd "curl -fsS -o /dev/null -X POST --unix-socket \$DEMO_DIR/blades/blade-2/state/simulator.sock 'http://blade/load?value=0.2'"
  cmd "curl -fsS -o /dev/null -X POST --unix-socket \$DEMO_DIR/blades/blade-2/state/simulator.sock 'http://blade/temperature?celsius=40'"
  expect "BladeThermalCritical=False" 10 'test "$(condition blade-2)" = False'
  expect "the taint removed" 10 '! kubectl get node blade-2 -o jsonpath="{.spec.taints[*].key}" | grep -q thermal-critical'
  expect "a TemperatureNormal Event" 10 'event_seen blade-2 TemperatureNormal'
}

step_config() {
  step "change the BladeConfig: every agent applies it live, without a restart (status.config.generation)"
  setup 'pids=$(pgrep -f -d, "kubeblade-agent.*$DEMO_DIR" || true)'
  cmd "kubectl patch bladeconfig default --type merge -p '{\"spec\":{\"agent\":{\"criticalCelsius\":70}}}'"
  setup 'gen=$(jp bladeconfig/default "{.metadata.generation}")'
  expect "every Blade applied the new generation" 20 '(for b in $NODES; do test "$(jp "blade/$b" "{.status.config.generation}")" = "$gen" || exit 1; done)'
  expect "the BladeConfig Ready" 20 'test "$(jp bladeconfig/default "{.status.conditions[?(@.type==\"Ready\")].status}")" = True'
  expect "the same agent processes as before" 1 'test "$(pgrep -f -d, "kubeblade-agent.*$DEMO_DIR" || true)" = "$pids"'
  cmd 'kubectl get blades -o custom-columns=NAME:.metadata.name,CONFIG:.status.config.name,GEN:.status.config.generation'
}

step_bladectl() {
  step "the agents' own gRPC API over their unix sockets, and the Kubernetes mode"
  cmd 'bladectl --blade blade-2 led edge ff8000'
  expect "the edge LED override shows on blade-2" 10 'bladectl --blade blade-2 status | grep -q "#ff8000"'
  cmd 'bladectl --blade blade-2 led edge clear'
  cmd 'bladectl -A status'
  cmd 'bladectl --blade blade-1 monitor --timeout 2s'
  cmd 'bladectl --node blade-3 status'
}

step_dashboard() {
  step "the rack view in your browser: live LEDs and temperatures, click a blade to identify it"
  hint 'bladectl dashboard --open                 # serves http://127.0.0.1:8080/ (docs/dashboard.md)'
  setup 'bladectl dashboard --listen 127.0.0.1:0 >"$dir/dashboard.log" 2>&1 & dpid=$!'
  expect "bladectl dashboard serving" 20 'grep -q "http://127.0.0.1:" "$dir/dashboard.log"'
  setup 'url=$(grep -o "http://127.0.0.1:[0-9]*/" "$dir/dashboard.log" | head -1)'
  expect "the page's stream shows blade-1 in demo-rack" 20 '{ curl -sN -m 2 "${url}api/stream" || true; } | grep -q "\"name\":\"blade-1\",\"chassis\":\"demo-rack\""'
  setup 'kill "$dpid"; wait "$dpid" 2>/dev/null || true'
}

step_fanpeer() {
  step "blades 1 and 2 share a fan unit (kubeblade.io/fan-peer): each drives the higher demand"
  cmd "kubectl get nodes -o custom-columns='NAME:.metadata.name,FAN-PEER:.metadata.annotations.kubeblade\.io/fan-peer'"
  expect "blade-1 follows blade-2 (fan.peer.state Synced)" 30 'test "$(jp blade/blade-1 "{.status.fan.peer.state}")" = Synced'
  expect "blade-2 follows blade-1" 30 'test "$(jp blade/blade-2 "{.status.fan.peer.state}")" = Synced'
  cmd 'kubectl annotate node blade-2 kubeblade.io/fan-speed=90 --overwrite   # blade-1'\''s fan follows to 90 %'
  expect "blade-2 publishes demand 90" 20 'test "$(jp blade/blade-2 "{.status.fan.demandPercent}")" = 90'
  expect "blade-1's fan runs at blade-2's 90 % (simulated hardware)" 20 'simstate blade-1 | grep -q "\"fanPercent\": 90,"'
  cmd "kubectl get blades -o custom-columns='NAME:.metadata.name,DEMAND:.status.fan.demandPercent,PEER:.status.fan.peer.name,SYNC:.status.fan.peer.state'"
  cmd 'kubectl annotate node blade-2 kubeblade.io/fan-speed-'
}

step_maintenance() {
  step "maintenance from the button: hold blade-3's button 3.5 s (cordon, drain through the Eviction API, safe to pull)"
  cmd 'kubectl apply -f hack/demo/workload.yaml'
  expect "3 web pods running, one per blade" 60 'test "$(kubectl -n demo get pods -l app=web --field-selector status.phase=Running -o name | wc -l)" = 3'
  expect "a web pod on blade-3" 30 'kubectl -n demo get pods -l app=web --field-selector spec.nodeName=blade-3 -o name | grep -q .'
  cmd "curl -fsS -o /dev/null -X POST --unix-socket \$DEMO_DIR/blades/blade-3/state/simulator.sock 'http://blade/button?hold=3.5s'"
  expect "kubeblade.io/maintenance=true on blade-3 (the long press)" 10 'test "$(jp node/blade-3 "{.metadata.annotations.kubeblade\.io/maintenance}")" = true'
  expect "a ButtonLongPressed Event" 10 'event_seen blade-3 ButtonLongPressed'
  expect "blade-3 drained (kubeblade.io/maintenance-state)" 90 'test "$(jp node/blade-3 "{.metadata.annotations.kubeblade\.io/maintenance-state}")" = drained'
  expect "blade-3 cordoned" 1 'test "$(jp node/blade-3 "{.spec.unschedulable}")" = true'
  expect "no web pod left on blade-3" 30 '! kubectl -n demo get pods -l app=web --field-selector spec.nodeName=blade-3 -o name | grep -q .'
  expect "MaintenanceRequested, Draining and Drained Events" 10 '(for r in MaintenanceRequested Draining Drained; do event_seen blade-3 $r || exit 1; done)'
  expect "blade-3's edge LED steady safe-to-pull blue (#000040)" 10 'simstate blade-3 | grep -q "\"edgeLED\": \"#000040\"" && test "$(jp blade/blade-3 "{.status.leds.edge.pattern}")" = steady'
  cmd "kubectl get nodes -o custom-columns='NAME:.metadata.name,MAINTENANCE:.metadata.annotations.kubeblade\.io/maintenance-state,UNSCHEDULABLE:.spec.unschedulable'"
  cmd 'kubectl get events --field-selector involvedObject.name=blade-3 --sort-by=.eventTime'
  step "hold it again: maintenance ends, kubeblade's cordon is lifted"
  cmd "curl -fsS -o /dev/null -X POST --unix-socket \$DEMO_DIR/blades/blade-3/state/simulator.sock 'http://blade/button?hold=3.5s'"
  expect "a MaintenanceEnded Event" 20 'event_seen blade-3 MaintenanceEnded'
  expect "blade-3 uncordoned" 10 'test "$(jp node/blade-3 "{.spec.unschedulable}")" != true'
  expect "blade-3's edge LED back to idle green (#001000)" 10 'simstate blade-3 | grep -q "\"edgeLED\": \"#001000\""'
}

step_killagent() {
  step "kill blade-2's agent (kill -9): after three heartbeats (10 s each here) its Blade is Unknown, its peer floors its fan"
  setup 'agent2=$(pgrep -f "kubeblade-agent.*--node-name=blade-2" | head -n1); test -n "$agent2"'
  setup 'agent2_args=$(tr "\0" " " < "/proc/$agent2/cmdline")'
  cmd "kill -9 \$(pgrep -f 'kubeblade-agent.*--node-name=blade-2')"
  expect "blade-2 STATE Unknown (AgentReady=Unknown, HeartbeatStale)" 60 'test "$(jp blade/blade-2 "{.status.state}")" = Unknown'
  expect "AgentReady reason HeartbeatStale" 1 'test "$(jp blade/blade-2 "{.status.conditions[?(@.type==\"AgentReady\")].reason}")" = HeartbeatStale'
  expect "an AgentStale Warning Event on blade-2" 10 'kubectl get events --field-selector involvedObject.name=blade-2,reason=AgentStale,type=Warning -o name | grep -q .'
  expect "a FanPeerLost Warning Event on blade-1" 30 'kubectl get events --field-selector involvedObject.name=blade-1,reason=FanPeerLost,type=Warning -o name | grep -q .'
  expect "blade-1's fan at least at fanPeerLostPercent (60 %)" 10 'simstate blade-1 | grep -Eq "\"fanPercent\": ([6-9][0-9]|100),"'
  cmd 'kubectl get blades                       # -w to watch'
  hint '# a kubelet would start the agent again (the scripted run does): then'
  setup '(cd "$DEMO_DIR/blades/blade-2" && exec $agent2_args >>"$DEMO_DIR/logs/agent-blade-2.restarted.log" 2>&1) & restarted=$!'
  expect "blade-2 no longer Unknown once its agent runs again" 60 'test "$(jp blade/blade-2 "{.status.state}")" != Unknown'
  expect "a FanPeerRestored Event on blade-1" 30 'event_seen blade-1 FanPeerRestored'
  setup 'kill -TERM "$restarted" 2>/dev/null || true; wait "$restarted" 2>/dev/null || true'
}

steps=(rollout identify button overheat config bladectl dashboard fanpeer maintenance killagent)

cat <<EOF

  kubeconfig       $KUBECONFIG
  logs             $DEMO_DIR/logs/   (operator, one agent per blade, controllers)
  blade state      $DEMO_DIR/blades/<node>/state   (simulator.sock: the blade's hardware)

In another shell:

  export KUBECONFIG=$KUBECONFIG PATH=$k8s:$root/bin:\$PATH BLADECTL_CONFIG=$BLADECTL_CONFIG DEMO_DIR=$DEMO_DIR
  cd $root
EOF
if [ "$scripted" != 1 ]; then
  mode=print
  for s in "${steps[@]}"; do "step_$s"; done
  bold "Running. Ctrl-C stops everything and removes $dir"
  wait "$pid"
  exit 0
fi

mode=run
i=0
for s in "${steps[@]}"; do
  i=$((i + 1)); current="$i ($s)"
  "step_$s"
  passed=$((passed + 1))
done
current=""
bold "Demo walk-through passed"

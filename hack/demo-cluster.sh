#!/usr/bin/env bash
# make demo: a whole kubeblade cluster on this machine. etcd, kube-apiserver,
# kube-controller-manager, kube-scheduler and kubectl built from source
# (hack/k8s-tools.sh, cached in ~/.cache/kubeblade/k8s), three fake-kubelet blade Nodes,
# the CRDs and a BladeConfig, kubeblade-operator, and one kubeblade-agent
# process per blade on the simulated backend (hack/localcluster). Prints what
# to try and keeps running until Ctrl-C, which stops and removes everything.
#
# DEMO_SCRIPTED=1 runs the walk-through instead, checks every step and exits
# (0 when all worked).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
scripted="${DEMO_SCRIPTED:-0}"
export PATH="$root/bin:$PATH"

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
run() { printf '\033[2m$ %s\033[0m\n' "$*"; "$@"; }
fail() { echo "DEMO FAILED: $*" >&2; tail -n 20 "$dir"/cluster/logs/*.log >&2 2>/dev/null || true; exit 1; }
# until_ok DESCRIPTION TIMEOUT_S 'SHELL CODE': evaluates the code (afresh
# each time) until it succeeds.
until_ok() {
  local what=$1 timeout=$2 check=$3
  local deadline=$(( $(date +%s) + timeout ))
  until eval "$check" >/dev/null 2>&1; do
    [ "$(date +%s)" -lt "$deadline" ] || fail "$what (not within ${timeout}s)"
    sleep 0.2
  done
  echo "  ok: $what"
}
jp() { kubectl get "$1" -o "jsonpath=$2"; }
sim() { curl -fsS --unix-socket "$DEMO_DIR/blades/$1/state/simulator.sock" -X POST "http://blade$2" >/dev/null; }
event_seen() { kubectl get events -A --field-selector "involvedObject.name=$1,reason=$2" -o name | grep -q .; }
condition() { jp "node/$1" "{.status.conditions[?(@.type==\"BladeThermalCritical\")].status}"; }

echo "Building the control plane (cached in ~/.cache/kubeblade/k8s; the first build of each binary takes minutes)..."
k8s=$(hack/k8s-tools.sh kube-apiserver etcd kube-controller-manager kube-scheduler kubectl)
export PATH="$k8s:$PATH"
go build -o bin/localcluster ./hack/localcluster

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

cat <<EOF

  kubeconfig       $KUBECONFIG
  logs             $DEMO_DIR/logs/   (operator, one agent per blade, controllers)
  blade state      $DEMO_DIR/blades/<node>/state   (simulator.sock: the blade's hardware)

In another shell:

  export KUBECONFIG=$KUBECONFIG PATH=$k8s:$root/bin:\$PATH BLADECTL_CONFIG=$BLADECTL_CONFIG
  kubectl get nodes -L kubeblade.io/config,kubeblade.io/soc
  kubectl get bladeconfigs; kubectl -n kubeblade-system get daemonsets,pods -o wide
  bladectl get blades                       # or: kubectl get blades -o wide

  # identify: the edge LED blinks; the Blade and an Event say so
  kubectl annotate node blade-1 kubeblade.io/identify=true --overwrite
  curl -s --unix-socket $DEMO_DIR/blades/blade-1/state/simulator.sock http://blade/state
  # press the blade's button: confirms identify (annotation removed), Event ButtonPressed
  curl -s -X POST --unix-socket $DEMO_DIR/blades/blade-1/state/simulator.sock http://blade/button
  kubectl get events --field-selector involvedObject.name=blade-1

  # heat blade-2: critical (fan 100 %, condition, taint, Warning Event), then recovery
  curl -s -X POST --unix-socket $DEMO_DIR/blades/blade-2/state/simulator.sock 'http://blade/load?value=2'
  kubectl get node blade-2 -w -o custom-columns='NAME:.metadata.name,CRITICAL:.status.conditions[?(@.type=="BladeThermalCritical")].status,TAINTS:.spec.taints[*].key'
  curl -s -X POST --unix-socket $DEMO_DIR/blades/blade-2/state/simulator.sock 'http://blade/load?value=0.2'

  # change the config: applied live, no restart (status.config.generation)
  kubectl patch bladeconfig default --type merge -p '{"spec":{"agent":{"criticalCelsius":70}}}'
  kubectl get blades -o custom-columns=NAME:.metadata.name,CONFIG:.status.config.name,GEN:.status.config.generation

  # the rack view in your browser: live LEDs and temperatures, click a blade to identify it
  bladectl dashboard --open                 # serves http://127.0.0.1:8080/ (docs/dashboard.md)

  # the agents' own gRPC API over their unix sockets, and the Kubernetes mode
  bladectl --blade blade-1 status;  bladectl -A monitor
  bladectl --node blade-1 status;   bladectl --node blade-3 identify
  bladectl --blade blade-2 led edge ff8000;  bladectl --blade blade-2 led edge clear

  # blades 1 and 2 share a fan unit (kubeblade.io/fan-peer): each drives the higher demand
  kubectl get blades -o custom-columns='NAME:.metadata.name,DEMAND:.status.fan.demandPercent,PEER:.status.fan.peer.name,SYNC:.status.fan.peer.state'
  kubectl annotate node blade-2 kubeblade.io/fan-speed=90 --overwrite   # blade-1's fan follows to 90 %

  # maintenance from the button: hold blade-3's button 3.5 s (cordon, drain, edge LED steady blue)
  kubectl apply -f hack/demo/workload.yaml
  curl -s -X POST --unix-socket $DEMO_DIR/blades/blade-3/state/simulator.sock 'http://blade/button?hold=3.5s'
  kubectl get nodes -L kubeblade.io/config -o custom-columns='NAME:.metadata.name,MAINTENANCE:.metadata.annotations.kubeblade\.io/maintenance-state,UNSCHEDULABLE:.spec.unschedulable'
  # hold it again to end maintenance (uncordoned)

  # kill an agent: after three heartbeats (10 s each here) its Blade is Unknown, its peer floors its fan
  kill -9 \$(pgrep -f 'kubeblade-agent.*--node-name=blade-2');  kubectl get blades -w
EOF

if [ "$scripted" != 1 ]; then
  bold "Running. Ctrl-C stops everything and removes $dir"
  wait "$pid"
  exit 0
fi

bold "1. The operator rolled out one agent DaemonSet pod per blade"
run kubectl get nodes -L kubeblade.io/config,kubeblade.io/soc
run kubectl -n kubeblade-system get daemonsets
n=$(echo "$NODES" | wc -w)
until_ok "DaemonSet desired = ready = $n" 30 'test "$(kubectl -n kubeblade-system get ds kubeblade-agent-default -o '\''jsonpath={.status.desiredNumberScheduled}/{.status.numberReady}'\'')" = "$n/$n"'
run kubectl get bladeconfigs
run bladectl get blades
bladectl get blades | grep -q 'blade-3' || fail "bladectl get blades lists no blade-3"

bold "2. Annotate blade-1: identify starts (the edge LED blinks the identify colour)"
run kubectl annotate node blade-1 kubeblade.io/identify=true --overwrite
until_ok "Blade blade-1 reports identify" 10 'test "$(jp blade/blade-1 '\''{.status.identify}'\'')" = true'
until_ok "IdentifyStarted Event" 10 'event_seen blade-1 IdentifyStarted'
run bladectl --node blade-1 status

bold "3. Press blade-1's button: identify confirmed, annotation removed, ButtonPressed Event"
sim blade-1 /button
until_ok "ButtonPressed Event" 10 'event_seen blade-1 ButtonPressed'
until_ok "identify annotation removed" 10 'test -z "$(jp node/blade-1 '\''{.metadata.annotations.kubeblade\.io/identify}'\'')"'
until_ok "Blade blade-1 identify off" 10 'test "$(jp blade/blade-1 '\''{.status.identify}'\'')" != true'
run kubectl get events --field-selector involvedObject.name=blade-1 --sort-by=.eventTime

bold "4. Overheat blade-2 (busy, 75 °C): critical, fan 100 %, tainted"
sim blade-2 '/load?value=2'; sim blade-2 '/temperature?celsius=75'
until_ok "BladeThermalCritical=True" 10 'test "$(condition blade-2)" = True'
until_ok "taint kubeblade.io/thermal-critical" 10 'kubectl get node blade-2 -o jsonpath='\''{.spec.taints[*].key}'\'' | grep -q thermal-critical'
until_ok "CriticalTemperature Event" 10 'event_seen blade-2 CriticalTemperature'
run bladectl --blade blade-2 status
bold "   Let it cool (idle, 40 °C): recovery"
sim blade-2 '/load?value=0.2'; sim blade-2 '/temperature?celsius=40'
until_ok "BladeThermalCritical=False" 10 'test "$(condition blade-2)" = False'
until_ok "taint removed" 10 '! kubectl get node blade-2 -o jsonpath='\''{.spec.taints[*].key}'\'' | grep -q thermal-critical'
until_ok "TemperatureNormal Event" 10 'event_seen blade-2 TemperatureNormal'

bold "5. Change the BladeConfig: every agent applies it live, without a restart"
pids=$(pgrep -f -d, "kubeblade-agent.*$DEMO_DIR" || true)
run kubectl patch bladeconfig default --type merge -p '{"spec":{"agent":{"criticalCelsius":70}}}'
gen=$(jp bladeconfig/default '{.metadata.generation}')
for b in $NODES; do
  until_ok "$b applied generation $gen" 20 'test "$(jp "blade/$b" '\''{.status.config.generation}'\'')" = "$gen"'
done
until_ok "BladeConfig Ready" 20 'test "$(jp bladeconfig/default '\''{.status.conditions[?(@.type=="Ready")].status}'\'')" = True'
[ "$(pgrep -f -d, "kubeblade-agent.*$DEMO_DIR" || true)" = "$pids" ] || fail "agent processes changed"
echo "  ok: same agent processes ($pids)"
run kubectl get blades -o custom-columns=NAME:.metadata.name,CONFIG:.status.config.name,GEN:.status.config.generation
run bladectl --blade blade-3 status -o json | grep "\"config\""

bold "6. bladectl over the agents' unix sockets"
run bladectl --blade blade-2 led edge ff8000
bladectl --blade blade-2 status | grep -q '#ff8000' || fail "the edge LED override did not show on blade-2"
run bladectl --blade blade-2 led edge clear
run bladectl -A status
run bladectl --blade blade-1 monitor --timeout 2s

bold "7. The rack view: bladectl dashboard serves the live page (open it with --open)"
bladectl dashboard --listen 127.0.0.1:0 >"$dir/dashboard.log" 2>&1 &
dpid=$!
until_ok "bladectl dashboard serving" 20 'grep -q "http://127.0.0.1:" "$dir/dashboard.log"'
url=$(grep -o 'http://127.0.0.1:[0-9]*/' "$dir/dashboard.log" | head -1)
echo "  $(head -1 "$dir/dashboard.log")"
until_ok "the page's stream shows blade-1 in demo-rack" 20 '{ curl -sN -m 2 "${url}api/stream" || true; } | grep -q "\"name\":\"blade-1\",\"chassis\":\"demo-rack\""'
kill "$dpid"; wait "$dpid" 2>/dev/null || true

bold "8. Blades 1 and 2 share a standard fan unit (kubeblade.io/fan-peer): each drives the higher demand"
simstate() { curl -fsS --unix-socket "$DEMO_DIR/blades/$1/state/simulator.sock" http://blade/state; }
run kubectl get nodes -o custom-columns='NAME:.metadata.name,FAN-PEER:.metadata.annotations.kubeblade\.io/fan-peer'
until_ok "blade-1 follows blade-2 (fan.peer.state Synced)" 30 'test "$(jp blade/blade-1 '\''{.status.fan.peer.state}'\'')" = Synced'
until_ok "blade-2 follows blade-1" 30 'test "$(jp blade/blade-2 '\''{.status.fan.peer.state}'\'')" = Synced'
run kubectl annotate node blade-2 kubeblade.io/fan-speed=90 --overwrite
until_ok "blade-2 publishes demand 90" 20 'test "$(jp blade/blade-2 '\''{.status.fan.demandPercent}'\'')" = 90'
until_ok "blade-1's fan runs at blade-2's 90 % (simulated hardware)" 20 'simstate blade-1 | grep -q "\"fanPercent\": 90,"'
run kubectl get blades -o custom-columns='NAME:.metadata.name,DEMAND:.status.fan.demandPercent,PEER:.status.fan.peer.name,SYNC:.status.fan.peer.state'
run kubectl annotate node blade-2 kubeblade.io/fan-speed-

bold "9. Hold blade-3's button for 3.5 s: maintenance (cordon, drain through the Eviction API, safe to pull)"
run kubectl apply -f hack/demo/workload.yaml
until_ok "3 web pods running, one per blade" 60 'test "$(kubectl -n demo get pods -l app=web --field-selector status.phase=Running -o name | wc -l)" = 3'
until_ok "a web pod on blade-3" 30 'kubectl -n demo get pods -l app=web --field-selector spec.nodeName=blade-3 -o name | grep -q .'
run curl -s -o /dev/null -X POST --unix-socket "$DEMO_DIR/blades/blade-3/state/simulator.sock" 'http://blade/button?hold=3.5s'
until_ok "kubeblade.io/maintenance=true on blade-3 (the long press)" 10 'test "$(jp node/blade-3 '\''{.metadata.annotations.kubeblade\.io/maintenance}'\'')" = true'
until_ok "ButtonLongPressed Event" 10 'event_seen blade-3 ButtonLongPressed'
until_ok "blade-3 drained (kubeblade.io/maintenance-state)" 90 'test "$(jp node/blade-3 '\''{.metadata.annotations.kubeblade\.io/maintenance-state}'\'')" = drained'
test "$(jp node/blade-3 '{.spec.unschedulable}')" = true || fail "blade-3 is not cordoned"
echo "  ok: blade-3 cordoned"
until_ok "no web pod left on blade-3" 30 '! kubectl -n demo get pods -l app=web --field-selector spec.nodeName=blade-3 -o name | grep -q .'
for r in MaintenanceRequested Draining Drained; do until_ok "$r Event" 10 "event_seen blade-3 $r"; done
until_ok "blade-3's edge LED steady safe-to-pull blue (#000040)" 10 'simstate blade-3 | grep -q "\"edgeLED\": \"#000040\"" && test "$(jp blade/blade-3 '\''{.status.leds.edge.pattern}'\'')" = steady'
run kubectl get nodes -o custom-columns='NAME:.metadata.name,MAINTENANCE:.metadata.annotations.kubeblade\.io/maintenance-state,UNSCHEDULABLE:.spec.unschedulable'
run kubectl get events --field-selector involvedObject.name=blade-3 --sort-by=.eventTime
bold "   Hold it again: maintenance ends, kubeblade's cordon is lifted"
run curl -s -o /dev/null -X POST --unix-socket "$DEMO_DIR/blades/blade-3/state/simulator.sock" 'http://blade/button?hold=3.5s'
until_ok "MaintenanceEnded Event" 20 'event_seen blade-3 MaintenanceEnded'
until_ok "blade-3 uncordoned" 10 'test "$(jp node/blade-3 '\''{.spec.unschedulable}'\'')" != true'
until_ok "blade-3's edge LED back to idle green (#001000)" 10 'simstate blade-3 | grep -q "\"edgeLED\": \"#001000\""'

bold "10. Kill blade-2's agent (kill -9): the operator marks its Blade stale, blade-1 loses its fan peer"
agent2=$(pgrep -f "kubeblade-agent.*--node-name=blade-2" | head -n1)
[ -n "$agent2" ] || fail "no agent process for blade-2"
agent2_args=$(tr '\0' ' ' < "/proc/$agent2/cmdline")
run kill -9 "$agent2"
echo "  (heartbeat 10 s here: stale after three, 30 s)"
until_ok "blade-2 STATE Unknown (AgentReady=Unknown, HeartbeatStale)" 60 'test "$(jp blade/blade-2 '\''{.status.state}'\'')" = Unknown'
test "$(jp blade/blade-2 '{.status.conditions[?(@.type=="AgentReady")].reason}')" = HeartbeatStale || fail "AgentReady reason is not HeartbeatStale"
until_ok "AgentStale Warning Event on blade-2" 10 'event_seen blade-2 AgentStale'
until_ok "FanPeerLost Warning Event on blade-1" 30 'event_seen blade-1 FanPeerLost'
until_ok "blade-1's fan at least at fanPeerLostPercent (60 %)" 10 'simstate blade-1 | grep -Eq "\"fanPercent\": ([6-9][0-9]|100),"'
run kubectl get blades
bold "   Start blade-2's agent again (a kubelet would): heartbeats resume, the marks clear"
# shellcheck disable=SC2086
(cd "$DEMO_DIR/blades/blade-2" && exec $agent2_args >>"$DEMO_DIR/logs/agent-blade-2.restarted.log" 2>&1) &
restarted=$!
until_ok "blade-2 no longer Unknown" 60 'test "$(jp blade/blade-2 '\''{.status.state}'\'')" != Unknown'
until_ok "FanPeerRestored Event on blade-1" 30 'event_seen blade-1 FanPeerRestored'
run kubectl get blades
kill -TERM "$restarted" 2>/dev/null || true
wait "$restarted" 2>/dev/null || true

bold "Demo walk-through passed"

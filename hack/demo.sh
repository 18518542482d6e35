#!/usr/bin/env bash
# make demo: runs kubeblade-agent on a simulated blade, with its state
# directory, sockets and metrics in a temporary directory, walks through what
# it does (button, identify, overheating, stall, live config), then keeps it
# running for you to play with until Ctrl-C.
#
# DEMO_SCRIPTED=1 runs the walk-through without pauses and exits after it.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
agent="$root/bin/kubeblade-agent"
scripted="${DEMO_SCRIPTED:-0}"
dir=$(mktemp -d "${TMPDIR:-/tmp}/kubeblade-demo.XXXXXX")
pid=""
cleanup() {
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    kill -TERM "$pid"; wait "$pid" 2>/dev/null || true
    echo; echo "Agent stopped. Its last words:"; tail -n 1 "$dir/agent.log" | sed 's/^/  /'
  fi
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 130' INT TERM

bold() { printf '\n\033[1m== %s\033[0m\n' "$*"; }
pause() { if [ "$scripted" = 1 ]; then sleep "${1:-1}"; else sleep "${2:-3}"; fi; }
sim() { curl -fsS --unix-socket "$dir/state/simulator.sock" -X POST "http://blade$1" >/dev/null; }
metric() { curl -fsS "http://$metrics/metrics" | grep -E "^($1)[ {]" | sed 's/^/    /'; }
events() { grep -o 'msg="[^"]*" reason=[A-Za-z]*' "$dir/agent.log" | tail -n "${1:-3}" | sed 's/^/    /'; }

cat >"$dir/agent.yaml" <<YAML
# The standalone agent's config: the same schema as BladeConfig.spec.agent.
hardware:
  backend: simulated
fanCurve:
  - {temperatureCelsius: 45, percent: 40}
  - {temperatureCelsius: 55, percent: 80}
criticalCelsius: 60
hysteresisCelsius: 5
grpc:
  socketPath: $dir/agent.sock
metrics:
  bindAddress: 127.0.0.1:0
YAML

bold "Starting kubeblade-agent on a simulated blade"
"$agent" --config "$dir/agent.yaml" --state-dir "$dir/state" >"$dir/agent.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
  metrics=$(grep -o 'metrics=[0-9.:]*' "$dir/agent.log" | head -n1 | cut -d= -f2 || true)
  [ -n "$metrics" ] && break
  kill -0 "$pid" 2>/dev/null || { cat "$dir/agent.log"; exit 1; }
  sleep 0.1
done
echo "  config      $dir/agent.yaml"
echo "  state dir   $dir/state"
echo "  metrics     http://$metrics/metrics   (also /healthz, /readyz)"
echo "  simulator   $dir/state/simulator.sock  (press the button, heat the blade)"
echo "  log         $dir/agent.log"
pause 1
metric 'kubeblade_(soc_temperature_celsius|fan_duty_ratio|fan_rpm)'

bold "Press the blade's button: identify starts (edge LED blinks)"
sim /button; pause 1
events 2
metric 'kubeblade_identify_active'
bold "Press it again: identify is confirmed"
sim /button; pause 1
events 1

bold "Overheat the blade to 68 °C: critical mode within a second (fan 100 %, top LED blinks)"
sim "/temperature?celsius=68"; pause 2
events 1
metric 'kubeblade_(thermal_critical|fan_duty_ratio)'
bold "Cool it to 40 °C: below critical − hysteresis, back to the fan curve"
sim "/temperature?celsius=40"; pause 2
events 1
metric 'kubeblade_(thermal_critical|fan_duty_ratio)'

bold "Stall the fan: duty ≥ 20 % at 0 RPM for 10 s is a stalled fan"
sim "/fan-stall?stalled=true"; sleep 12
events 1
metric kubeblade_fan_stalled
sim "/fan-stall?stalled=false"; pause 2

bold "Change the config and send SIGHUP: applied live, no restart"
sed -i 's/criticalCelsius: 60/criticalCelsius: 55/' "$dir/agent.yaml"
kill -HUP "$pid"; pause 1
grep -o 'msg="config reloaded"' "$dir/agent.log" | tail -n1 | sed 's/^/    /'
metric 'kubeblade_critical_threshold_celsius'

if [ "$scripted" = 1 ]; then
  bold "Stopping: the agent leaves the fan at 100 % and the LEDs dark"
  exit 0
fi

bold "The agent keeps running. Try:"
cat <<TRY
    curl -s --unix-socket $dir/state/simulator.sock -XPOST http://blade/button
    curl -s --unix-socket $dir/state/simulator.sock -XPOST 'http://blade/load?value=3'
    curl -s --unix-socket $dir/state/simulator.sock http://blade/state
    curl -s http://$metrics/metrics | grep ^kubeblade_
    tail -f $dir/agent.log
  Ctrl-C stops it; the fan goes to 100 % and the LEDs go dark.
TRY
wait "$pid"

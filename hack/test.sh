#!/usr/bin/env bash
# make test: everything CI checks, as timed steps, each one a make target.
# Every step's time is printed when it ends; at the end hack/testreport prints
# one table of steps and of the tests each suite ran, passed, failed and
# skipped, and fails the run if a step failed, a test failed, a suite ran
# nothing or a test skipped for a missing prerequisite.
#
# KUBEBLADE_TEST_REQUIRED=1 makes every suite required: a test that cannot
# find its control plane, guest kernel, kubelet or browser fails instead of
# skipping (internal/testreq).
#
#   hack/test.sh            all steps
#   TEST_STEPS="vet unit" hack/test.sh   only these (for debugging the runner)
set -uo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
export TEST_REPORT_DIR="${TEST_REPORT_DIR:-$root/bin/test-report}"
export KUBEBLADE_TEST_REQUIRED=1
rm -rf "$TEST_REPORT_DIR"
mkdir -p "$TEST_REPORT_DIR"
start_all=$(date +%s)

report() {
  echo
  go run ./hack/testreport "$TEST_REPORT_DIR"
  local rc=$?
  echo "make test: $(( $(date +%s) - start_all )) s in all"
  return $rc
}

# run <name> <fatal>: runs `make <name>`, records its time and status.
run() {
  local name=$1 fatal=$2
  if [ -n "${TEST_STEPS:-}" ] && [[ " $TEST_STEPS " != *" $name "* ]]; then
    return 0
  fi
  echo "=== step $name"
  local t0 rc ms secs
  t0=$(date +%s%N)
  make --no-print-directory "$name"
  rc=$?
  ms=$(( ($(date +%s%N) - t0) / 1000000 ))
  secs=$(printf '%d.%d' $((ms / 1000)) $((ms % 1000 / 100)))
  printf '%s\t%s\t%d\n' "$name" "$secs" "$rc" >>"$TEST_REPORT_DIR/steps.tsv"
  printf -- '--- step %s: %s s, %s\n' "$name" "$secs" "$([ $rc = 0 ] && echo ok || echo "FAILED (exit $rc)")"
  if [ $rc != 0 ] && [ "$fatal" = fatal ]; then
    echo "make test: step $name failed; later steps need it, so the run stops here"
    report
    exit 1
  fi
}

# lane <step>...: runs the steps one after the other (none fatal).
lane() {
  for step in "$@"; do
    run "$step" continue
  done
}

# Steps later ones depend on stop the run when they fail; test suites do not,
# so one run shows every failing suite.
run envtest-assets fatal
run verify-generated fatal
run vet fatal
# The binaries the e2e suites and the demo run, built once here so that no
# two steps below write bin/ at once.
run build fatal

# Two lanes side by side. The unit step keeps both cores busy only part of
# the time, and most of the other lane's time is spent waiting on kubelets,
# containerd, QEMU and API servers (a sequential warm run used 16 min of CPU
# in 15.5 min). Lane B holds every step that installs Debian packages, so
# no two apt-get runs meet; the lanes share no fixed port (the real-kubelet
# suite's fixed ports are below the ephemeral range the other suites' API
# servers draw from). Lane A streams its output; lane B's is printed when
# it ends (and kept in $TEST_REPORT_DIR/lane-b.log).
lane_b_steps=(deploy-test hwtest kmod-arm64 dkms e2e-kubelet)
lane_b_log="$TEST_REPORT_DIR/lane-b.log"
lane "${lane_b_steps[@]}" >"$lane_b_log" 2>&1 &
lane_b=$!
lane unit fuzz e2e demo-check
echo "=== waiting for lane b (${lane_b_steps[*]})"
wait "$lane_b"
echo "=== lane b output"
cat "$lane_b_log"

report

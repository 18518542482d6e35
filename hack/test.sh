#!/usr/bin/env bash
# make test: everything CI checks, as timed steps, each one a make target.
# Every step's time is printed when it ends; at the end hack/testreport prints
# one table of steps and of the tests each suite ran, passed, failed and
# skipped, and fails the run if a step failed, a test failed, a suite ran
# nothing, a package or a test with subtests skipped everything, or a test
# skipped for a missing prerequisite.
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

# run <name>: runs `make <name>`, records its time and status, and returns
# the status.
run() {
  local name=$1
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
  return $rc
}

# lane <step>...: runs the steps one after the other (none fatal).
lane() {
  for step in "$@"; do
    run "$step"
  done
}

# Two lanes side by side from the start; on 2 cores a cold run is bound by
# CPU, so what counts is that neither core idles and no work is done twice.
#
# Lane B first builds what shares nothing with the Go tree (the x86_64 and
# arm64 guest kernels, the arm64 module, promtool, the Distribution
# registry, containerd, the CNI plugins, actionlint for lint-workflows) and
# then runs the suites that need those, after building the image once: the
# hardware suites take the agent out of it (HWTEST_IMAGE), and deploy-test
# and e2e-kubelet use it too (deploy-test also makes releases of it and
# publishes them to the registry). It holds every step that installs
# Debian packages, so no two apt-get runs meet. Its Go suites wait for lane
# A's verify-generated, which rewrites generated sources, and the control
# plane's binaries are built under hack/k8s-tools.sh's lock, so whichever
# lane needs one first builds it and the other waits for it. The lanes share
# no fixed port (the real-kubelet suite's fixed ports are below the
# ephemeral range the other suites' API servers draw from). Lane A streams
# its output; lane B's is printed when it ends (and kept in
# $TEST_REPORT_DIR/lane-b.log).
#
# In lane A, steps later ones depend on stop the run when they fail; test
# suites do not, so one run shows every failing suite.
lane_b_tools=(guest-kernel guest-kernel-arm64 kmod-arm64 dkms test-tools lint-workflows)
lane_b_suites=(image hwtest hwtest-arm64 deploy-test e2e-kubelet e2e-flux)
export HWTEST_IMAGE="$root/dist/image"
lane_b_log="$TEST_REPORT_DIR/lane-b.log"
generated_lock="$TEST_REPORT_DIR/.generated.lock"
exec 8>"$generated_lock"
flock -x 8
set -m # lane B in a process group of its own, so a fatal step can stop it
(
  exec 8>&-
  lane "${lane_b_tools[@]}"
  flock -s "$generated_lock" true
  lane "${lane_b_suites[@]}"
) </dev/null >"$lane_b_log" 2>&1 &
lane_b=$!
set +m
# Its own process group does not get the terminal's ^C: pass it on.
trap 'kill -- "-$lane_b" 2>/dev/null; exit 130' INT TERM

# fatal <step>: runs a step lane A's later steps depend on; when it fails,
# stops lane B and ends the run with the report.
fatal() {
  if ! run "$1"; then
    echo "make test: step $1 failed; later steps need it, so the run stops here"
    kill -- "-$lane_b" 2>/dev/null
    wait "$lane_b"
    echo "=== lane b output, up to the stop"
    cat "$lane_b_log"
    report
    exit 1
  fi
}

fatal verify-generated
flock -u 8
exec 8>&-
fatal envtest-assets
fatal vet
# The binaries the e2e suites and the demo run, built once here so that no
# two steps below write bin/ at once.
fatal build
lane unit fuzz test-talos e2e demo-check
echo "=== waiting for lane b (${lane_b_tools[*]} ${lane_b_suites[*]})"
wait "$lane_b"
echo "=== lane b output"
cat "$lane_b_log"

report

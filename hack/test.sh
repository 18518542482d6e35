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

# Steps later ones depend on stop the run when they fail; test suites do not,
# so one run shows every failing suite.
run envtest-assets fatal
run verify-generated fatal
run vet fatal
run unit continue
run fuzz continue
run deploy-test continue
run e2e continue
run demo-check continue
run hwtest continue
run e2e-kubelet continue
run kmod-arm64 continue
run dkms continue

report

#!/usr/bin/env bash
# Runs `go test` for one suite of make test through the pinned gotestsum, so
# the suite's test2json stream is recorded in $TEST_REPORT_DIR/<suite>.json
# for hack/testreport's end-of-run table, while the console shows a line per
# package and the output of failed tests only.
#
#   hack/gotest.sh <suite> [go test flags and packages]
#
# Without TEST_REPORT_DIR it is plain `go test`.
set -euo pipefail
suite=$1
shift
if [ -z "${TEST_REPORT_DIR:-}" ]; then
  exec go test "$@"
fi
root=$(cd "$(dirname "$0")/.." && pwd)
gotestsum=$("$root/hack/tool.sh" gotestsum)
mkdir -p "$TEST_REPORT_DIR"
exec "$gotestsum" --format pkgname-and-test-fails --format-icons text \
  --jsonfile "$TEST_REPORT_DIR/$suite.json" -- "$@"

#!/usr/bin/env bash
# Prints the path of a promtool for `promtool test rules` (the chart's
# PrometheusRule tests): $PROMTOOL if set, else one built from its Go module
# (github.com/prometheus/prometheus/cmd/promtool at the version pinned here)
# and cached under ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/promtool/<version>-<tags>/,
# shared by every clone and worktree. The build is guarded by flock, so two
# concurrent runs do not both build, and renamed into place when complete.
set -euo pipefail
# Prometheus v3.x is the Go module version v0.3xx.y.
# renovate: datasource=go depName=github.com/prometheus/prometheus
version=v0.316.0
# remove_all_sd leaves out Prometheus' service-discovery plugins (the AWS,
# Azure, GCE, Oracle, Outscale... SDKs; the build tags are Prometheus' own,
# plugins/plugin_*.go): rule tests and checks never discover targets, and the
# cold build takes 3 min instead of 10.
tags=remove_all_sd
if [ -n "${PROMTOOL:-}" ]; then
  echo "$PROMTOOL"
  exit 0
fi
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/promtool/$version-$tags"
bin="$cache/promtool"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -x "$bin" ]; then
  echo "promtool.sh: building promtool $version (-tags $tags) from its Go module (once; a few minutes)" >&2
  start=$(date +%s)
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # Outside any module, so the project's go.mod does not decide versions.
  (cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -tags "$tags" -ldflags "-s -w" \
    "github.com/prometheus/prometheus/cmd/promtool@$version")
  mv "$tmp/promtool" "$bin"
  echo "promtool.sh: built in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"

#!/usr/bin/env bash
# Prints the path of the CNCF Distribution registry (the OCI registry behind
# Docker Hub's and GitLab's, github.com/distribution/distribution/v3
# cmd/registry at the version pinned here), built from its Go module and
# cached under ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/registry/<version>/,
# shared by every clone and worktree. Tests run it on loopback as the real
# registry that releases are published to and the real kubelet pulls from.
# The build is guarded by flock and renamed into place when complete.
set -euo pipefail
# renovate: datasource=go depName=github.com/distribution/distribution/v3
version=v3.0.0
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/registry/$version"
bin="$cache/registry"
if [ -x "$bin" ]; then
  echo "$bin"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -x "$bin" ]; then
  echo "registry.sh: building the Distribution registry $version from its Go module (once; about 2 minutes)" >&2
  start=$(date +%s)
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  # Outside any module, so the project's go.mod does not decide versions.
  (cd "$tmp" && GOFLAGS=-mod=mod GOBIN="$tmp" CGO_ENABLED=0 go install -trimpath -ldflags "-s -w" \
    "github.com/distribution/distribution/v3/cmd/registry@$version")
  mv "$tmp/registry" "$bin"
  echo "registry.sh: built in $(( $(date +%s) - start ))s" >&2
fi
echo "$bin"

#!/usr/bin/env bash
# Prints the directory holding Flux's source-controller, kustomize-controller
# and helm-controller of one Flux release, built from their Go modules, and
# that release's CRDs (crds/*.yaml, from each controller module's
# config/crd/bases). Cached under
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/flux/<release>/, shared by every
# clone and worktree; `make e2e-flux` runs the controllers as processes
# against the real-kubelet rig's API server.
#
# The versions are the controller set Flux v2.9.2 pins
# (github.com/fluxcd/flux2/v2 v2.9.2, go.mod: the controllers' api
# modules), the newest set the Go module proxy serves every dependency of:
# Flux v2.9.5's source-controller v1.9.5 needs github.com/fluxcd/pkg/artifact
# v0.18.3 and v2.9.3's helm-controller v1.6.3 github.com/fluxcd/helm/v4
# v4.2.4-flux.1, which the proxy refuses (403). Each controller's go.mod replaces
# its api module with ./api, a nested module its module zip leaves out, so
# `go install module@version` refuses it; the build copies the module,
# drops that replace (the go.mod already requires the published api module
# at the same version) and runs `go build .` (main.go is at the module root).
# The build is guarded by flock and renamed into place when complete.
set -euo pipefail
# Renovate (renovate.json) proposes the release and the controllers
# together, in one "Flux" pull request, with hack/deploy's Flux API modules.
# renovate: datasource=go depName=github.com/fluxcd/flux2/v2
release=v2.9.2
controllers=(
  "source-controller v1.9.3"
  "kustomize-controller v1.9.3"
  "helm-controller v1.6.2"
)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/flux/$release"
done_mark="$cache/.complete"
if [ -e "$done_mark" ]; then
  echo "$cache"
  exit 0
fi
mkdir -p "$cache"
exec 9>"$cache/.lock"
flock 9
if [ ! -e "$done_mark" ]; then
  start=$(date +%s)
  tmp=$(mktemp -d "$cache/build.XXXXXX")
  trap 'chmod -R u+w "$tmp" 2>/dev/null; rm -rf "$tmp"' EXIT
  mkdir -p "$tmp/crds"
  for c in "${controllers[@]}"; do
    read -r name version <<<"$c"
    mod="github.com/fluxcd/$name"
    # Outside any module, so the project's go.mod does not decide versions.
    dir=$(cd "$tmp" && GOFLAGS=-mod=mod go mod download -json "$mod@$version" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p')
    [ -d "$dir" ] || { echo "flux.sh: go mod download $mod@$version gave no directory" >&2; exit 1; }
    cp "$dir"/config/crd/bases/*.yaml "$tmp/crds/"
    [ -x "$cache/$name" ] && continue
    echo "flux.sh: building $name $version (Flux $release) from its Go module (once; several minutes)" >&2
    t0=$(date +%s)
    cp -r "$dir" "$tmp/$name"
    chmod -R u+w "$tmp/$name"
    (cd "$tmp/$name" &&
      go mod edit -dropreplace="$mod/api" &&
      GOFLAGS=-mod=mod CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/$name.bin" .)
    mv "$tmp/$name.bin" "$cache/$name"
    echo "flux.sh: built $name in $(( $(date +%s) - t0 ))s" >&2
  done
  chmod -R u+w "$tmp/crds"
  rm -rf "$cache/crds"
  mv "$tmp/crds" "$cache/crds"
  echo "$release" >"$done_mark"
  echo "flux.sh: Flux $release controllers built in $(( $(date +%s) - start ))s" >&2
fi
echo "$cache"

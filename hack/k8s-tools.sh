#!/usr/bin/env bash
# Builds the Kubernetes control-plane binaries kubeblade's tests and demo run
# (kube-apiserver, etcd, and on request kube-controller-manager,
# kube-scheduler, kubectl, and the kubelet of the real-node suite) from the Go
# module proxy, using the pinned tools
# modules under hack/tools. Binaries are cached outside the clone, under
# ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/k8s/, in a directory named after the
# pinned versions: every clone and worktree shares them, and they are rebuilt
# only when a version changes.
#
#   hack/k8s-tools.sh [binary...]   builds what is missing, prints the directory
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
kube_ver=$(awk '$1=="k8s.io/kubernetes"{print $2}' "$root/hack/tools/kube/go.mod")
etcd_ver=$(awk '$1=="go.etcd.io/etcd/server/v3"{print $2}' "$root/hack/tools/etcd/go.mod")
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade"
# The tool modules' go.sum is part of the key: hack/tools/kube raises the
# dependencies it shares with kubeblade's own modules to their versions (so
# the Go build cache compiles those packages once; test/build checks it),
# and such a raise must rebuild the binaries.
sum=$(cat "$root/hack/tools/kube/go.sum" "$root/hack/tools/etcd/go.sum" | sha256sum | cut -c1-12)
dir="$cache/k8s/kubernetes-$kube_ver-etcd-$etcd_ver-$sum"
mkdir -p "$dir"
[ $# -gt 0 ] || set -- kube-apiserver etcd
# One build at a time per cache directory: a second run (another worktree,
# a concurrent make target) waits and then finds the binary built.
exec 9>"$dir/.lock"
flock 9

for bin in "$@"; do
  [ -x "$dir/$bin" ] && continue
  case "$bin" in
    etcd) mod=etcd pkg=go.etcd.io/etcd/server/v3 ;;
    kube-apiserver|kube-controller-manager|kube-scheduler|kubectl|kubelet) mod=kube pkg=k8s.io/kubernetes/cmd/$bin ;;
    *) echo "k8s-tools: unknown binary $bin" >&2; exit 2 ;;
  esac
  echo "k8s-tools: building $bin ($kube_ver / etcd $etcd_ver); the first build takes several minutes" >&2
  start=$(date +%s)
  ldflags="-s -w"
  if [ "$mod" = kube ]; then
    # Stamp the version the way Kubernetes' own build does, so clients that
    # read /version see v1.x.y rather than a placeholder.
    minor=$(echo "$kube_ver" | cut -d. -f2)
    for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
      ldflags="$ldflags -X $p.gitVersion=$kube_ver -X $p.gitMajor=1 -X $p.gitMinor=$minor -X $p.gitTreeState=clean"
    done
  fi
  (cd "$root/hack/tools/$mod" && CGO_ENABLED=0 go build -trimpath -ldflags "$ldflags" -o "$dir/$bin.tmp" "$pkg")
  mv "$dir/$bin.tmp" "$dir/$bin"
  echo "k8s-tools: built $bin in $(( $(date +%s) - start ))s" >&2
done
echo "$dir"

#!/usr/bin/env bash
# Builds what a real Kubernetes node needs besides the control plane, for the
# real-kubelet suite (test/kubelet, `make e2e-kubelet`): the kubelet (from
# the same pinned Kubernetes module as the control plane, through
# hack/k8s-tools.sh, so the Go build cache is shared), containerd with ctr and
# the runc shim (hack/tools/containerd), the CNI plugins bridge, host-local,
# loopback and portmap (hack/tools/cni) and a pause image (test/kubelet/pause).
# Everything comes from the Go module proxy; runc, iptables and iproute2 are
# Debian's and installed with apt-get when missing.
#
# Each artefact is cached under ${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade/
# in a directory named after its version (the pause image: a hash of its
# source), built into a temporary directory, renamed into place and guarded
# by flock. The script prints a directory of links to all of them:
#
#   <dir>/kubelet, containerd, containerd-shim-runc-v2, ctr
#   <dir>/cni/          the CNI plugins
#   <dir>/pause.tar     the pause image (docker-archive, for ctr import)
#   <dir>/pause.ref     its image reference
#
#   hack/node-tools.sh        builds what is missing, prints the directory
#   hack/node-tools.sh --no-kubelet
#                             builds all but the kubelet, prints nothing (make
#                             test-tools: the part that shares no build with
#                             the control plane, so it can run beside it)
set -euo pipefail
no_kubelet=
case "${1:-}" in
  --no-kubelet) no_kubelet=1 ;;
  "") ;;
  *) echo "node-tools: unknown argument $1" >&2; exit 2 ;;
esac
root=$(cd "$(dirname "$0")/.." && pwd)
cache="${XDG_CACHE_HOME:-$HOME/.cache}/kubeblade"
modver() { awk -v m="$2" '$1==m{print $2}' "$root/hack/tools/$1/go.mod"; }
ctrd_ver=$(modver containerd github.com/containerd/containerd/v2)
cni_ver=$(modver cni github.com/containernetworking/plugins)
pause_key=$(cat "$root/test/kubelet/pause/main.go" "$root/test/kubelet/pause/image/main.go" | sha256sum | cut -c1-16)

log() { echo "node-tools: $*" >&2; }

# build DIR NAME CMD...: runs CMD with $tmp set to a fresh directory beside
# DIR, then renames it to DIR, under DIR's lock; nothing when DIR exists.
build() {
  local dir=$1 name=$2; shift 2
  mkdir -p "$(dirname "$dir")"
  exec 9>"$dir.lock"
  flock 9
  if [ ! -d "$dir" ]; then
    log "building $name"
    local start; start=$(date +%s)
    tmp=$(mktemp -d "$dir.tmp.XXXXXX")
    if ! "$@"; then rm -rf "$tmp"; log "building $name failed"; exit 1; fi
    mv "$tmp" "$dir"
    log "built $name in $(( $(date +%s) - start ))s"
  fi
  exec 9>&-
}

# Debian's runc (the OCI runtime containerd's shim runs), iptables (the
# kubelet's and the CNI plugins' rules) and iproute2 (`ip`, with which the
# suite sets up the node's bridge and service route): what
# test/kubelet/internal/nodeenv.Preflight requires.
missing=()
command -v runc >/dev/null || missing+=(runc)
command -v iptables >/dev/null || missing+=(iptables)
command -v ip >/dev/null || missing+=(iproute2)
if [ ${#missing[@]} -gt 0 ]; then
  log "installing ${missing[*]} with apt-get"
  if [ "$(id -u)" != 0 ]; then log "not root: install ${missing[*]} yourself"; exit 1; fi
  (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}") >&2
fi

ctrd="$cache/containerd/$ctrd_ver"
build_containerd() {
  # No cgo: the btrfs, devicemapper and zfs snapshotters need C libraries
  # and the suite uses overlayfs.
  (cd "$root/hack/tools/containerd" && CGO_ENABLED=0 go build -trimpath -tags no_btrfs,no_devmapper,no_zfs \
    -ldflags "-s -w -X github.com/containerd/containerd/v2/version.Version=$ctrd_ver" -o "$tmp/" \
    github.com/containerd/containerd/v2/cmd/containerd \
    github.com/containerd/containerd/v2/cmd/containerd-shim-runc-v2 \
    github.com/containerd/containerd/v2/cmd/ctr)
}
build "$ctrd" "containerd $ctrd_ver" build_containerd

cni="$cache/cni/$cni_ver"
build_cni() {
  (cd "$root/hack/tools/cni" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/" \
    github.com/containernetworking/plugins/plugins/main/bridge \
    github.com/containernetworking/plugins/plugins/ipam/host-local \
    github.com/containernetworking/plugins/plugins/main/loopback \
    github.com/containernetworking/plugins/plugins/meta/portmap)
}
build "$cni" "CNI plugins $cni_ver" build_cni

pause="$cache/pause/$pause_key"
build_pause() {
  (cd "$root/test/kubelet" && CGO_ENABLED=0 go build -trimpath -ldflags "-s -w" -o "$tmp/pause" ./pause &&
    CGO_ENABLED=0 go run -trimpath ./pause/image -bin "$tmp/pause" -out "$tmp/pause.tar" -ref-file "$tmp/pause.ref" && rm "$tmp/pause")
}
build "$pause" "pause image" build_pause

[ -z "$no_kubelet" ] || exit 0
k8s=$("$root/hack/k8s-tools.sh" kubelet)

out="$cache/node/kubernetes-$(basename "$k8s")-containerd-$ctrd_ver-cni-$cni_ver-pause-$pause_key"
link() {
  mkdir -p "$tmp/cni"
  for b in containerd containerd-shim-runc-v2 ctr; do ln -s "$ctrd/$b" "$tmp/$b"; done
  ln -s "$k8s/kubelet" "$tmp/kubelet"
  for b in bridge host-local loopback portmap; do ln -s "$cni/$b" "$tmp/cni/$b"; done
  ln -s "$pause/pause.tar" "$tmp/pause.tar"
  ln -s "$pause/pause.ref" "$tmp/pause.ref"
}
build "$out" "node asset links" link
echo "$out"

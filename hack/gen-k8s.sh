#!/usr/bin/env bash
# Generates the Kubernetes side of the API with the pinned controller-gen:
# deepcopy functions for api/v1alpha1 and api/agentconfig/v1alpha1, and the CRD manifests in config/crd/bases.
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
ver=$(awk '$1=="sigs.k8s.io/controller-tools"{print $2}' "$root/hack/tools/controller-gen/go.mod")
cg="$root/bin/tools/controller-gen-$ver"
if [ ! -x "$cg" ]; then
  echo "gen-k8s: building controller-gen $ver" >&2
  mkdir -p "$root/bin/tools"
  # The control plane's flags and dependency versions (test/build checks
  # them), so a cold make test compiles the Kubernetes API packages once.
  (cd "$root/hack/tools/controller-gen" && CGO_ENABLED=0 go build -trimpath -o "$cg.tmp" sigs.k8s.io/controller-tools/cmd/controller-gen)
  mv "$cg.tmp" "$cg"
fi
cd "$root"
"$cg" object paths=./api/v1alpha1/... paths=./api/agentconfig/v1alpha1/...
rm -rf config/crd/bases
"$cg" crd:maxDescLen=400 paths=./api/v1alpha1/... output:crd:artifacts:config=config/crd/bases
# The operator's ClusterRole and namespaced Roles from the +kubebuilder:rbac
# markers of its controllers.
"$cg" rbac:roleName=kubeblade-operator paths=./internal/operator/... output:rbac:artifacts:config=config/rbac/operator
